package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/clientaddr"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// twoInstances is two HTTP servers, each over its own Redis engine and service, sharing one
// Redis (one key prefix) and one order store: two instances of a deployment. The clock stands
// still, so every request arrives "at once" and no budget refills during the test.
type twoInstances struct {
	clock *seckilltest.ManualClock
	urls  [2]string
}

func startTwoInstances(t *testing.T, shared bool, cfg func(*httpapi.Config)) *twoInstances {
	t.Helper()
	ctx := context.Background()
	ti := &twoInstances{clock: seckilltest.NewManualClock(t0)}
	store, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	clients, err := redisinv.Dial(ctx, testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("seckill-across-%d-%d:", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		dropRedisPrefix(t, clients, prefix)
		clients.Close()
	})
	for i := range 2 {
		c := httpapi.Config{AuthSecret: []byte(authSecret), AdminToken: adminToken, Clock: ti.clock}
		if cfg != nil {
			cfg(&c)
		}
		opts := []redisinv.Option{redisinv.WithTestClock(ti.clock), redisinv.WithPrefix(prefix)}
		if shared {
			user, addr := c.Budgets()
			opts = append(opts, redisinv.WithRateLimits(user, addr))
		}
		eng := redisinv.New(clients.Inventory, opts...)
		if shared {
			c.SharedLimiter = eng.NewLimiter()
		}
		c.Service = service.New(service.Config{Inventory: eng, Windows: eng, Store: store, Clock: ti.clock, AuthSecret: []byte(authSecret)})
		api := httpapi.New(c)
		srv := httptest.NewServer(api.Handler())
		t.Cleanup(func() {
			api.Close()
			srv.Close()
			_ = eng.Close()
		})
		ti.urls[i] = srv.URL
	}
	return ti
}

// call sends one request to instance i (xff: an X-Forwarded-For, "" for none) and returns
// its status, Retry-After and body; a transport error is status 0. Safe in any goroutine.
func (ti *twoInstances) call(i int, method, path, user, xff string, body any) (int, string, []byte) {
	auth := admin()
	if user != "" {
		tok, err := httpapi.MintToken([]byte(authSecret), user, ti.clock.Now(), time.Hour)
		if err != nil {
			return 0, "", []byte(err.Error())
		}
		auth = "Bearer " + tok
	}
	req, err := http.NewRequest(method, ti.urls[i]+path, bodyOf(body))
	if err != nil {
		return 0, "", []byte(err.Error())
	}
	req.Header.Set("Authorization", auth)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Retry-After"), b
}

// rush sends n requests at once, alternating between the two instances, and counts the
// answers 2xx (the accepted) and the 429s with a Retry-After; any other answer is listed.
func rush(n int, send func(i, k int) (int, string)) (accepted, limited int, other []int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() {
			st, ra := send(k%2, k)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case st == http.StatusTooManyRequests && ra != "" && ra != "0":
				limited++
			case st < 200 || st >= 300:
				other = append(other, st)
			default:
				accepted++
			}
		})
	}
	wg.Wait()
	return accepted, limited, other
}

// TestLimitsAcrossInstances: one user sends 40 buys at once spread over two instances (Redis
// engine): at most the documented burst (10) is accepted, the rest are 429 rate_limited with a
// Retry-After; the same for GET /path; and 40 users behind one address (X-Forwarded-For from
// a trusted proxy) with an address burst of 10 get at most 10 buys. Negative control: with
// each instance keeping its own budgets (the shared check off) more than the burst is
// accepted: each instance allows its own burst.
func TestLimitsAcrossInstances(t *testing.T) {
	trusted, err := clientaddr.ParseTrusted("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	const n, burst = 40, 10
	for _, shared := range []bool{true, false} {
		check := func(t *testing.T, what string, accepted, limited int, other []int) {
			t.Helper()
			t.Logf("%s, shared=%v: %d accepted, %d limited", what, shared, accepted, limited)
			if len(other) > 0 || accepted+limited != n {
				t.Fatalf("%s: %d accepted, %d limited, other answers %v", what, accepted, limited, other)
			}
			if shared && accepted > burst {
				t.Errorf("%s: %d of %d accepted over two instances; the burst is %d", what, accepted, n, burst)
			}
			if !shared && accepted <= burst {
				t.Errorf("negative control, %s: with per-instance budgets only %d accepted, want more than the burst %d", what, accepted, burst)
			}
		}
		t.Run(fmt.Sprint("shared=", shared), func(t *testing.T) {
			ti := startTwoInstances(t, shared, func(c *httpapi.Config) {
				c.TrustedProxies = trusted
				c.AddrRate, c.AddrBurst = 1, burst
			})
			now := ti.clock.Now()
			sale := map[string]any{"id": "hot", "price_cents": 100, "stock": 1000, "per_user_limit": 1000,
				"hold_seconds": 600, "starts_at": now, "ends_at": now.Add(time.Hour)}
			if st, _, b := ti.call(0, "POST", "/api/v1/sales", "", "", sale); st != http.StatusCreated {
				t.Fatalf("create sale: %d %s", st, b)
			}
			pathOf := func(user string) string {
				st, _, b := ti.call(0, "GET", "/api/v1/sales/hot/path", user, "", nil)
				if st != http.StatusOK {
					t.Fatalf("path of %s: %d %s", user, st, b)
				}
				var p struct{ Path string }
				if err := json.Unmarshal(b, &p); err != nil {
					t.Fatal(err)
				}
				return p.Path
			}

			alice := pathOf("alice")
			accepted, limited, other := rush(n, func(i, _ int) (int, string) {
				st, ra, _ := ti.call(i, "POST", alice, "alice", "", nil)
				return st, ra
			})
			check(t, "one user's buys", accepted, limited, other)

			accepted, limited, other = rush(n, func(i, _ int) (int, string) {
				st, ra, _ := ti.call(i, "GET", "/api/v1/sales/hot/path", "bob", "", nil)
				return st, ra
			})
			check(t, "one user's /path", accepted, limited, other)

			paths := make([]string, n) // taken from the proxy itself: loopback has no address budget
			for k := range paths {
				paths[k] = pathOf(fmt.Sprint("crowd", k))
			}
			accepted, limited, other = rush(n, func(i, k int) (int, string) {
				st, ra, _ := ti.call(i, "POST", paths[k], fmt.Sprint("crowd", k), "10.1.2.3", nil)
				return st, ra
			})
			check(t, "one address's buys", accepted, limited, other)
		})
	}
}

// TestRetryAfterOfBudgets: a request over its budget is answered 429 rate_limited with a
// Retry-After of the wait in whole seconds, rounded up, at least 1 (a rate of one per 5 s:
// 5, then 1 when half a second is left; 10 a second: 1), on the memory engine.
func TestRetryAfterOfBudgets(t *testing.T) {
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.BuyRate, c.BuyBurst = 0.2, 1 }))
	e.createSale(t, "s", nil)
	retryAfter := func() string {
		r := e.do(t, "GET", "/api/v1/sales/s/path", e.user(t, "ann"), nil)
		if r.Status == http.StatusOK {
			return "200"
		}
		wantProblem(t, r, http.StatusTooManyRequests, seckill.CodeRateLimited)
		return r.Header.Get("Retry-After")
	}
	for _, step := range []struct {
		advance time.Duration
		want    string
	}{{0, "200"}, {0, "5"}, {time.Second, "4"}, {3500 * time.Millisecond, "1"}, {499 * time.Millisecond, "1"}, {time.Millisecond, "200"}, {0, "5"}} {
		e.clock.Advance(step.advance)
		if got := retryAfter(); got != step.want {
			t.Fatalf("after %v more: %s, want %s", step.advance, got, step.want)
		}
	}
	f := newEnv(t)
	f.createSale(t, "s", nil)
	for range 10 {
		wantStatus(t, f.do(t, "GET", "/api/v1/sales/s/path", f.user(t, "ann"), nil), http.StatusOK)
	}
	wantRefusal(t, f.do(t, "GET", "/api/v1/sales/s/path", f.user(t, "ann"), nil), http.StatusTooManyRequests, seckill.CodeRateLimited, "1")
}
