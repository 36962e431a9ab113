package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// limitedStripe is stripe-mock behind a proxy that plays Stripe's account-wide rate limit: at
// most perSecond requests in each wall-clock second reach stripe-mock, the rest are answered
// 429 (Stripe's rate_limit error) with Retry-After retryAfter. It counts the Checkout Sessions
// asked for, by idempotency key (one key per hold), and the requests refused.
type limitedStripe struct {
	url        string
	perSecond  int
	retryAfter string

	mu       sync.Mutex
	second   int64
	inSecond int
	starts   map[string]int // Checkout Session creations by Idempotency-Key
	refused  int
}

func newLimitedStripe(t *testing.T, perSecond int, retryAfter string) *limitedStripe {
	t.Helper()
	target, err := url.Parse(testenv.StripeMock(t))
	if err != nil {
		t.Fatal(err)
	}
	l := &limitedStripe{perSecond: perSecond, retryAfter: retryAfter, starts: map[string]int{}}
	forward := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.admit(r) {
			w.Header().Set("Retry-After", l.retryAfter)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"rate_limit","message":"Request rate limit exceeded."}}`))
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	l.url = srv.URL
	return l
}

// admit counts r and reports whether this second's budget has room for it.
func (l *limitedStripe) admit(r *http.Request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Method == http.MethodPost && r.URL.Path == "/v1/checkout/sessions" {
		l.starts[r.Header.Get("Idempotency-Key")]++
	}
	if now := time.Now().Unix(); now != l.second {
		l.second, l.inSecond = now, 0
	}
	if l.inSecond >= l.perSecond {
		l.refused++
		return false
	}
	l.inSecond++
	return true
}

// counts returns the Checkout Session creations asked for hold key and in all, and the
// requests refused.
func (l *limitedStripe) counts(key string) (ofKey, all, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range l.starts {
		all += n
		if k == key {
			ofKey = n
		}
	}
	return ofKey, all, l.refused
}

// startLimitedStripeApp serves with the stripe gateway behind l, the default per-user limits,
// and a sale "r" of 20 units.
func startLimitedStripeApp(t *testing.T, l *limitedStripe) (*app, config) {
	t.Helper()
	cfg := config{Dev: true, Gateway: "stripe", StripeSecretKey: "sk_test_123", StripeWebhookSecret: "whsec_test_secret", StripeAPIURL: l.url}
	a := startGatewayAppWith(t, &cfg, appOptions{})
	price, stock := int64(700), 20
	if _, err := a.svc.CreateSale(context.Background(), seckill.SaleInput{ID: "r", Name: "r", PriceCents: &price, Stock: &stock}); err != nil {
		t.Fatal(err)
	}
	return a, cfg
}

// payAs holds a unit of sale r for user and returns a function that asks /pay for it, answering
// the status, the problem's code and Retry-After.
func payAs(t *testing.T, a *app, cfg config, user string) (seckill.Reservation, func() (int, string, string)) {
	t.Helper()
	res, err := a.svc.Buy(context.Background(), seckill.BuyRequest{SaleID: "r", UserID: user, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := httpapi.MintToken([]byte(cfg.AuthSecret), user, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	buyer := client.New(a.url, client.WithToken(tok))
	return res.Reservation, func() (int, string, string) {
		_, err := buyer.Pay(context.Background(), res.Reservation.ID)
		e, answered := errors.AsType[*client.Error](err)
		switch {
		case err == nil:
			return http.StatusOK, "", ""
		case !answered:
			return 0, err.Error(), ""
		}
		return e.Status, string(e.Code), strconv.Itoa(int(e.RetryAfter / time.Second))
	}
}

// TestStripeOneBuyerCannotSpendTheRateLimit: while one buyer calls /pay for his hold in a
// loop, other buyers' /pay still start their payments, with Stripe's account-wide limit played
// by a proxy (10 requests a second, then 429; the others need 8). The hammering buyer's hold
// reaches Stripe once (concurrent first calls are joined); after that its page is answered
// from the record, and beyond 10 a second he is refused 429 before anything is asked.
func TestStripeOneBuyerCannotSpendTheRateLimit(t *testing.T) {
	const hammers, others = 4, 8
	l := newLimitedStripe(t, 10, "1")
	a, cfg := startLimitedStripeApp(t, l)
	mallory, pay := payAs(t, a, cfg, "mallory")

	var (
		done     = make(chan struct{})
		wg       sync.WaitGroup
		statuses sync.Map // status → *atomic.Int64
		calls    atomic.Int64
	)
	for range hammers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				status, _, _ := pay()
				n, _ := statuses.LoadOrStore(status, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				calls.Add(1)
			}
		})
	}
	for calls.Load() < 20 { // the hammering is under way before the others pay
		time.Sleep(time.Millisecond)
	}
	var failed []string
	for i := range others {
		user := "buyer" + strconv.Itoa(i)
		_, payOther := payAs(t, a, cfg, user)
		if status, code, _ := payOther(); status != http.StatusOK {
			failed = append(failed, user+": "+strconv.Itoa(status)+" "+code)
		}
	}
	close(done)
	wg.Wait()
	ofMallory, all, refused := l.counts(mallory.ID)
	var seen []string
	statuses.Range(func(k, v any) bool {
		seen = append(seen, strconv.Itoa(k.(int))+"×"+strconv.FormatInt(v.(*atomic.Int64).Load(), 10))
		return true
	})
	t.Logf("mallory's %d /pay calls answered %v; Stripe was asked for %d sessions (%d of them mallory's), refused %d requests",
		calls.Load(), seen, all, ofMallory, refused)
	if len(failed) > 0 {
		t.Errorf("other buyers' /pay failed while mallory hammered: %v", failed)
	}
	if ofMallory < 1 || ofMallory > hammers {
		t.Errorf("mallory's hold asked Stripe for %d sessions; want 1 to %d (one per concurrent first call)", ofMallory, hammers)
	}
}

// TestStripeRateLimitBackedOffAsAWhole: once Stripe answers 429 with Retry-After: 30, /pay
// answers 503 unavailable with that Retry-After, and other buyers' /pay meanwhile are answered
// the same at once without a request to Stripe.
func TestStripeRateLimitBackedOffAsAWhole(t *testing.T) {
	l := newLimitedStripe(t, 0, "30") // every request is refused
	a, cfg := startLimitedStripeApp(t, l)
	_, bob := payAs(t, a, cfg, "bob")
	if status, code, after := bob(); status != http.StatusServiceUnavailable || code != "unavailable" || after != "30" {
		t.Fatalf("bob's /pay on Stripe's 429: %d %s Retry-After %q; want 503 unavailable, Retry-After 30", status, code, after)
	}
	if _, all, refused := l.counts(""); all != 1 || refused != 1 {
		t.Fatalf("Stripe was asked for %d sessions (%d refused); want 1", all, refused)
	}
	for _, user := range []string{"carol", "dave", "erin"} {
		_, pay := payAs(t, a, cfg, user)
		status, code, after := pay()
		if s, err := strconv.Atoi(after); status != http.StatusServiceUnavailable || code != "unavailable" || err != nil || s < 1 || s > 30 {
			t.Fatalf("%s's /pay while backed off: %d %s Retry-After %q; want 503 unavailable, Retry-After 1 to 30", user, status, code, after)
		}
	}
	if _, all, refused := l.counts(""); all != 1 || refused != 1 {
		t.Fatalf("while backed off Stripe was asked for %d sessions in all (%d refused); want still 1", all, refused)
	}
}
