package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/service"
)

// TestBuyCheckOrder pins docs/API.md's order of buy checks, so that the cheapest refusal wins:
// auth 401 → rate limit 429 → sale 404 → token 403 → body 400/413 → window 425/410 →
// idempotent replay → per-user limit 409 → stock. Each case breaks two rules at once and
// expects the earlier one; none changes anything.
func TestBuyCheckOrder(t *testing.T) {
	t.Parallel()
	// The rate limit (second in the order) has its own test; here it would only get in the way.
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.BuyRate = -1 }))
	start := t0.Add(time.Hour)
	e.createSale(t, "later", map[string]any{"starts_at": start, "ends_at": start.Add(time.Hour)})
	e.createSale(t, "now", map[string]any{"stock": 1, "queue_limit": 0})
	e.mustBuy(t, "bob", "now", http.StatusCreated) // the only unit of "now" is held
	laterPath := e.pathAt(t, "alice", "later", start)
	nowPath := e.path(t, "alice", "now")
	badToken := "/api/v1/sales/now/buy/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	big := bytes.Repeat([]byte(" "), 1<<20)

	type tc struct {
		name   string
		status int
		code   seckill.Code
		send   func() response
	}
	cases := []tc{
		{"no auth + bad token", 401, seckill.CodeUnauthorized, func() response { return e.do(t, "POST", badToken, "", "{") }},
		{"bad jwt + unknown sale", 401, seckill.CodeUnauthorized, func() response {
			return e.do(t, "POST", "/api/v1/sales/nope/buy/x", "Bearer x.y.z", nil)
		}},
		{"unknown sale + bad token + bad body", 404, seckill.CodeNotFound, func() response {
			return e.buy(t, "alice", "/api/v1/sales/nope/buy/x", "{", "")
		}},
		{"bad token + bad body", 403, seckill.CodeInvalidToken, func() response { return e.buy(t, "alice", badToken, "{", "") }},
		{"bad token + quantity 0", 403, seckill.CodeInvalidToken, func() response {
			return e.buy(t, "alice", badToken, `{"quantity":0}`, "")
		}},
		{"bad token + huge body", 403, seckill.CodeInvalidToken, func() response {
			return e.serve("POST", badToken, e.user(t, "alice"), bytes.NewReader(big))
		}},
		{"1 MB body before the start", 413, seckill.CodeTooLarge, func() response {
			return e.serve("POST", laterPath, e.user(t, "alice"), bytes.NewReader(big))
		}},
		{"malformed body before the start", 400, seckill.CodeInvalidArgument, func() response { return e.buy(t, "alice", laterPath, "{", "") }},
		{"quantity 0 before the start", 400, seckill.CodeInvalidArgument, func() response {
			return e.buy(t, "alice", laterPath, `{"quantity":0}`, "")
		}},
		{"long key before the start", 400, seckill.CodeInvalidArgument, func() response {
			return e.buy(t, "alice", laterPath, nil, strings.Repeat("k", 129))
		}},
		{"over the limit before the start", 425, seckill.CodeNotStarted, func() response {
			return e.buy(t, "alice", laterPath, `{"quantity":5}`, "")
		}},
		{"over the limit and no stock", 409, seckill.CodeLimitExceeded, func() response {
			return e.buy(t, "alice", nowPath, `{"quantity":2}`, "")
		}},
		{"no free unit, queue_limit 0", 409, seckill.CodeQueueFull, func() response { return e.buy(t, "alice", nowPath, nil, "") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { e.refused(t, c.status, c.code, c.send) })
	}

	// After the end: body errors still come first, then ended, even for a replay.
	e.clock.Set(start)
	first := e.buy(t, "alice", laterPath, nil, "k1")
	wantStatus(t, first, http.StatusCreated)
	e.clock.Set(start.Add(time.Hour))
	e.refused(t, 400, seckill.CodeInvalidArgument, func() response { return e.buy(t, "alice", laterPath, `{"quantity":-1}`, "k1") })
	e.refused(t, 410, seckill.CodeEnded, func() response { return e.buy(t, "alice", laterPath, nil, "k1") })
	e.refused(t, 410, seckill.CodeEnded, func() response { return e.buy(t, "alice", laterPath, nil, "") })
}

// TestBuyBody covers the body rules of a buy: strict JSON, quantity ≥ 1 (default 1), the
// 64 KiB limit, the Idempotency-Key length. Every refusal is 400 (413 for size) and changes
// nothing; a body padded to exactly the limit is still accepted.
func TestBuyBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.BuyRate = -1 }))
	e.createSale(t, "s1", map[string]any{"stock": 100, "per_user_limit": 3})
	path := e.path(t, "alice", "s1")
	bad := []string{
		`{`, `}`, `[]`, `"quantity"`, `1`, `{"quantity":1}x`, `{"quantity":1}{"quantity":1}`,
		`{"qty":1}`, `{"quantity":1,"extra":true}`, `{"quantity":0}`, `{"quantity":-1}`,
		`{"quantity":"1"}`, `{"quantity":1.5}`, `{"quantity":true}`, `{"quantity":1e400}`,
		`{"quantity":99999999999999999999}`, " ", "\x00", `{"quantity":1,}`,
	}
	for _, b := range bad {
		t.Run(fmt.Sprintf("%q", b), func(t *testing.T) {
			e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response { return e.buy(t, "alice", path, b, "") })
		})
	}
	e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
		return e.buy(t, "alice", path, nil, strings.Repeat("k", 129))
	})
	e.refused(t, http.StatusRequestEntityTooLarge, seckill.CodeTooLarge, func() response {
		return e.serve("POST", path, e.user(t, "alice"), strings.NewReader(`{"quantity":1}`+strings.Repeat(" ", httpapi.MaxBody)))
	})
	// Quantities over the per-user limit are a 409, however large.
	for _, q := range []string{"4", "1000000000", "9223372036854775807"} {
		e.refused(t, http.StatusConflict, seckill.CodeLimitExceeded, func() response {
			return e.buy(t, "alice", path, `{"quantity":`+q+`}`, "")
		})
	}
	// Exactly MaxBody bytes is allowed; an empty body means one unit; a 128-byte key is fine.
	exact := `{"quantity":1}` + strings.Repeat(" ", httpapi.MaxBody-len(`{"quantity":1}`))
	wantStatus(t, e.serve("POST", path, e.user(t, "alice"), strings.NewReader(exact)), http.StatusCreated)
	r := e.buy(t, "alice", path, "", strings.Repeat("k", 128))
	wantStatus(t, r, http.StatusCreated)
	var res seckill.Reservation
	r.decode(t, &res)
	if res.Quantity != 1 {
		t.Fatalf("empty body bought %d units, want 1", res.Quantity)
	}
	e.wantStock(t, "s1", seckill.StockState{Sellable: 100, Available: 98, Held: 2})
}

// TestBuyHeldQueuedReplay: 201 held (with expires_at, no position), 202 queued (with position,
// no expires_at), 200 for a replay of the same Idempotency-Key with the same reservation, which
// changes nothing and ignores the replayed body. Keys are per user.
func TestBuyHeldQueuedReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 2, "per_user_limit": 2, "price_cents": 1500, "hold_seconds": 90})
	path := e.path(t, "alice", "s1")

	r := e.buy(t, "alice", path, `{"quantity":2}`, "k1")
	wantStatus(t, r, http.StatusCreated)
	var held seckill.Reservation
	r.decode(t, &held)
	f := r.fields(t)
	if held.Status != seckill.StatusHeld || held.Quantity != 2 || held.AmountCents != 3000 || held.SaleID != "s1" ||
		held.UserID != "alice" || !strings.HasPrefix(held.ID, "s1-") || held.ExpiresAt == nil ||
		!held.ExpiresAt.Equal(e.clock.Now().Add(90*time.Second)) {
		t.Fatalf("held reservation %s", r.Body)
	}
	if _, ok := f["position"]; ok {
		t.Fatalf("held reservation has a position: %s", r.Body)
	}
	e.track(held.ID, "alice")
	e.wantStock(t, "s1", seckill.StockState{Sellable: 2, Held: 2})

	e.unchanged(t, func() {
		replay := e.buy(t, "alice", path, `{"quantity":1}`, "k1")
		wantStatus(t, replay, http.StatusOK)
		var again seckill.Reservation
		replay.decode(t, &again)
		if again.ID != held.ID || again.Quantity != 2 || again.Status != seckill.StatusHeld {
			t.Fatalf("replay = %s, want reservation %s", replay.Body, held.ID)
		}
	})
	// Without the key it is a new buy, over alice's limit.
	e.refused(t, http.StatusConflict, seckill.CodeLimitExceeded, func() response { return e.buy(t, "alice", path, nil, "") })

	queued := func(user, key string, pos int) seckill.Reservation {
		t.Helper()
		r := e.buy(t, user, e.path(t, user, "s1"), nil, key)
		wantStatus(t, r, http.StatusAccepted)
		var res seckill.Reservation
		r.decode(t, &res)
		if res.Status != seckill.StatusQueued || res.Position != pos {
			t.Fatalf("queued reservation %s, want position %d", r.Body, pos)
		}
		if _, ok := r.fields(t)["expires_at"]; ok {
			t.Fatalf("queued reservation has expires_at: %s", r.Body)
		}
		e.track(res.ID, user)
		return res
	}
	bob := queued("bob", "k1", 1) // alice's key, bob's reservation
	queued("carol", "", 2)
	e.wantStock(t, "s1", seckill.StockState{Sellable: 2, Held: 2, Queued: 2})
	e.unchanged(t, func() {
		replay := e.buy(t, "bob", e.path(t, "bob", "s1"), nil, "k1")
		wantStatus(t, replay, http.StatusOK)
		var again seckill.Reservation
		replay.decode(t, &again)
		if again.ID != bob.ID || again.Status != seckill.StatusQueued || again.Position != 1 {
			t.Fatalf("replay of a queued buy = %s", replay.Body)
		}
	})
}

// TestBuyStockOutcomes: sold_out only when nothing is available or held (no false sell-out),
// queue_full when units are held but the queue has no room.
func TestBuyStockOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "noq", map[string]any{"stock": 1, "queue_limit": 0})
	e.createSale(t, "q1", map[string]any{"stock": 1, "queue_limit": 1})
	e.createSale(t, "two", map[string]any{"stock": 2, "per_user_limit": 3})

	alice := e.mustBuy(t, "alice", "noq", http.StatusCreated)
	bobPath := e.path(t, "bob", "noq")
	e.refused(t, http.StatusConflict, seckill.CodeQueueFull, func() response { return e.buy(t, "bob", bobPath, nil, "") })
	e.wantResult(t, succeeded(e.pay(t, "alice", alice.ID).PaymentID, alice), seckill.PaymentApplied)
	e.refused(t, http.StatusConflict, seckill.CodeSoldOut, func() response { return e.buy(t, "bob", bobPath, nil, "") })

	e.mustBuy(t, "alice", "q1", http.StatusCreated)
	e.mustBuy(t, "bob", "q1", http.StatusAccepted)
	carol := e.path(t, "carol", "q1")
	e.refused(t, http.StatusConflict, seckill.CodeQueueFull, func() response { return e.buy(t, "carol", carol, nil, "") })

	// Three units wanted, two exist: this buyer can never be served, so sold_out, not queued.
	e.refused(t, http.StatusConflict, seckill.CodeSoldOut, func() response {
		return e.buy(t, "dave", e.path(t, "dave", "two"), `{"quantity":3}`, "")
	})
}

// TestReservationsOfOthers: another user's reservation reads as not found for every
// reservation endpoint, like an unknown or malformed id, and is left alone.
func TestReservationsOfOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", nil)
	res := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	ids := []string{res.ID, "s1-00000000000000000000000000000000", "nope", "s1-" + strings.Repeat("z", 32)}
	for _, id := range ids {
		for _, m := range []struct{ method, suffix string }{{"GET", ""}, {"DELETE", ""}, {"POST", "/pay"}} {
			e.refused(t, http.StatusNotFound, seckill.CodeNotFound, func() response {
				return e.do(t, m.method, "/api/v1/reservations/"+id+m.suffix, e.user(t, "bob"), nil)
			})
		}
	}
	if got := e.status(t, "alice", res.ID); got != seckill.StatusHeld {
		t.Fatalf("alice's reservation is %s", got)
	}
}

// TestCancel: DELETE is idempotent (200 with the status, twice), works on queued and held
// reservations, answers 200 "expired" for a lapsed hold and 409 conflict for a paid one.
func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 2, "hold_seconds": 10})
	del := func(user, rid string) seckill.Reservation {
		t.Helper()
		r := e.do(t, "DELETE", "/api/v1/reservations/"+rid, e.user(t, user), nil)
		wantStatus(t, r, http.StatusOK)
		var res seckill.Reservation
		r.decode(t, &res)
		return res
	}
	a := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	b := e.mustBuy(t, "bob", "s1", http.StatusCreated)
	c := e.mustBuy(t, "carol", "s1", http.StatusAccepted)

	if got := del("carol", c.ID); got.Status != seckill.StatusCancelled || got.Position != 0 {
		t.Fatalf("cancel queued = %+v", got)
	}
	if got := del("alice", a.ID); got.Status != seckill.StatusCancelled || got.ExpiresAt != nil {
		t.Fatalf("cancel held = %+v", got)
	}
	e.wantStock(t, "s1", seckill.StockState{Sellable: 2, Available: 1, Held: 1})
	e.unchanged(t, func() {
		if got := del("alice", a.ID); got.Status != seckill.StatusCancelled {
			t.Fatalf("second cancel = %+v", got)
		}
		if got := del("carol", c.ID); got.Status != seckill.StatusCancelled {
			t.Fatalf("second cancel of queued = %+v", got)
		}
	})

	e.wantResult(t, succeeded(e.pay(t, "bob", b.ID).PaymentID, b), seckill.PaymentApplied)
	e.refused(t, http.StatusConflict, seckill.CodeConflict, func() response {
		return e.do(t, "DELETE", "/api/v1/reservations/"+b.ID, e.user(t, "bob"), nil)
	})

	d := e.mustBuy(t, "dave", "s1", http.StatusCreated)
	e.clock.Advance(10 * time.Second)
	if got := del("dave", d.ID); got.Status != seckill.StatusExpired {
		t.Fatalf("cancel after expiry = %+v", got)
	}
	e.wantStock(t, "s1", seckill.StockState{Sellable: 2, Available: 1, Sold: 1})
}

// TestPay: a payment can be started only for a held reservation; expired or cancelled holds
// are 409 hold_expired, queued and paid ones 409 conflict, and no gateway is 503 unavailable
// with Retry-After. None of them changes anything.
func TestPay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 2, "hold_seconds": 10})
	payOf := func(user, rid string) func() response {
		return func() response { return e.do(t, "POST", "/api/v1/reservations/"+rid+"/pay", e.user(t, user), nil) }
	}
	a := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	b := e.mustBuy(t, "bob", "s1", http.StatusCreated)
	c := e.mustBuy(t, "carol", "s1", http.StatusAccepted)
	e.refused(t, http.StatusConflict, seckill.CodeConflict, payOf("carol", c.ID))

	intent := e.pay(t, "alice", a.ID)
	if !strings.HasSuffix(intent.RedirectURL, intent.PaymentID) {
		t.Fatalf("intent %+v", intent)
	}
	e.wantResult(t, succeeded(intent.PaymentID, a), seckill.PaymentApplied)
	e.refused(t, http.StatusConflict, seckill.CodeConflict, payOf("alice", a.ID))

	e.clock.Advance(10 * time.Second) // bob's hold lapses; carol is granted a fresh one
	e.refused(t, http.StatusConflict, seckill.CodeHoldExpired, payOf("bob", b.ID))
	wantStatus(t, e.do(t, "DELETE", "/api/v1/reservations/"+c.ID, e.user(t, "carol"), nil), http.StatusOK)
	e.refused(t, http.StatusConflict, seckill.CodeHoldExpired, payOf("carol", c.ID))

	// Without a gateway.
	n := newEnv(t, withoutPayments())
	n.createSale(t, "s1", nil)
	res := n.mustBuy(t, "alice", "s1", http.StatusCreated)
	n.unchanged(t, func() {
		r := n.do(t, "POST", "/api/v1/reservations/"+res.ID+"/pay", n.user(t, "alice"), nil)
		wantProblem(t, r, http.StatusServiceUnavailable, seckill.CodeUnavailable)
		if r.Header.Get("Retry-After") == "" {
			t.Fatalf("503 without Retry-After")
		}
	})
}

// TestRateLimit: the default per-user budget (10/s, burst 10) lets a user make at least 5 buys
// a second, refuses the burst beyond it with 429 rate_limited and Retry-After before looking
// at the sale, and is per user. Every request here is refused (429 or 409), so nothing changes.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 0})
	path := e.path(t, "alice", "s1")
	e.path(t, "bob", "s1")
	e.unchanged(t, func() {
		for i := range 10 {
			if r := e.buy(t, "alice", path, nil, ""); r.Status != http.StatusConflict {
				t.Fatalf("buy %d within the burst: %s", i+1, r)
			}
		}
		r := e.buy(t, "alice", path, nil, "")
		wantProblem(t, r, http.StatusTooManyRequests, seckill.CodeRateLimited)
		if r.Header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After")
		}
		// The limit comes before the sale lookup and the token check, but after auth.
		wantProblem(t, e.buy(t, "alice", "/api/v1/sales/nope/buy/x", nil, ""), http.StatusTooManyRequests, seckill.CodeRateLimited)
		wantProblem(t, e.do(t, "POST", path, "", nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
		// Bob has a budget of his own.
		wantProblem(t, e.buy(t, "bob", e.path(t, "bob", "s1"), nil, ""), http.StatusConflict, seckill.CodeSoldOut)
	})

	// The bucket refills with the clock: 100 ms buys one more request.
	e.clock.Advance(100 * time.Millisecond)
	wantProblem(t, e.buy(t, "alice", path, nil, ""), http.StatusConflict, seckill.CodeSoldOut)
	wantProblem(t, e.buy(t, "alice", path, nil, ""), http.StatusTooManyRequests, seckill.CodeRateLimited)

	// Sustained: with the burst spent, 5 buys a second for 3 seconds all pass the limiter.
	for i := range 15 {
		e.clock.Advance(200 * time.Millisecond)
		if r := e.buy(t, "alice", path, nil, ""); r.Status == http.StatusTooManyRequests {
			t.Fatalf("buy %d at 5/s was rate limited", i+1)
		}
	}

	// A clock that steps back (NTP) must not drain the bucket: the next buy still passes.
	e.clock.Advance(2 * time.Second)
	e.clock.Advance(-time.Hour) // before the sale's start, so the buys pass the limiter and get 425
	for range 3 {
		wantProblem(t, e.buy(t, "alice", path, nil, ""), http.StatusTooEarly, seckill.CodeNotStarted)
		e.clock.Advance(time.Second)
	}
}

// TestRateLimitConfig: a negative rate disables the limit; BuyRate and BuyBurst default
// independently (Config's doc: default 10/s, burst 10), so setting only one of them never
// leaves a zero burst that refuses every buy.
func TestRateLimitConfig(t *testing.T) {
	t.Parallel()
	burstOf := func(rate float64, burst int) int {
		t.Helper()
		e := newEnv(t, withServer(func(c *httpapi.Config) { c.BuyRate, c.BuyBurst = rate, burst }))
		e.createSale(t, "s1", map[string]any{"stock": 0})
		path := e.path(t, "alice", "s1")
		for i := range 100 {
			if r := e.buy(t, "alice", path, nil, ""); r.Status == http.StatusTooManyRequests {
				return i
			}
		}
		return 100
	}
	for _, c := range []struct {
		rate  float64
		burst int
		want  int
	}{{-1, 0, 100}, {0, 0, 10}, {1, 0, 10}, {50, 0, 10}, {0, 3, 3}, {1, 2, 2}} {
		if got := burstOf(c.rate, c.burst); got != c.want {
			t.Errorf("BuyRate %v BuyBurst %d: %d buys before 429, want %d", c.rate, c.burst, got, c.want)
		}
	}
}

// TestConcurrentBuysAndPayments: a crowd of 40 buyers hits a 10-unit sale at once over HTTP.
// Exactly 10 are held and 30 queued (no oversell, no false sell-out); the 10 pay concurrently;
// then the sale is sold out, every queued buyer is rejected, and once the pipeline has
// drained the audit agrees with the engine.
func TestConcurrentBuysAndPayments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "hot", map[string]any{"stock": 10, "queue_limit": 100})
	const n = 40
	paths := make([]string, n)
	for i := range n {
		paths[i] = e.path(t, fmt.Sprintf("u%02d", i), "hot")
	}
	type out struct {
		user string
		r    response
		err  error
	}
	results := make(chan out, n)
	start := make(chan struct{})
	for i := range n {
		u := fmt.Sprintf("u%02d", i)
		auth := e.user(t, u)
		go func() {
			<-start
			r, err := e.tryDo("POST", paths[i], auth, nil, "Idempotency-Key", "k")
			results <- out{u, r, err}
		}()
	}
	close(start)
	var held, queued []out
	for range n {
		o := <-results
		if o.err != nil {
			t.Fatal(o.err)
		}
		switch o.r.Status {
		case http.StatusCreated:
			held = append(held, o)
		case http.StatusAccepted:
			queued = append(queued, o)
		default:
			t.Fatalf("buy by %s: %s", o.user, o.r)
		}
	}
	if len(held) != 10 || len(queued) != 30 {
		t.Fatalf("%d held and %d queued, want 10 and 30", len(held), len(queued))
	}
	e.wantStock(t, "hot", seckill.StockState{Sellable: 10, Held: 10, Queued: 30})

	done := make(chan out, len(held))
	for _, o := range held {
		var res seckill.Reservation
		o.r.decode(t, &res)
		body, _ := json.Marshal(succeeded(e.pay(t, o.user, res.ID).PaymentID, res))
		sig := payment.Sign([]byte(paySecret), e.clock.Now(), body)
		go func() {
			r, err := e.tryDo("POST", webhookURL, "", body, payment.SignatureHeader, sig)
			done <- out{o.user, r, err}
		}()
	}
	for range held {
		if o := <-done; o.err != nil || o.r.Status != http.StatusOK || !strings.Contains(string(o.r.Body), `"applied"`) {
			t.Fatalf("payment of %s: %s %v", o.user, o.r, o.err)
		}
	}
	e.wantStock(t, "hot", seckill.StockState{Sellable: 10, Sold: 10})
	for _, o := range queued {
		var res seckill.Reservation
		o.r.decode(t, &res)
		if got := e.status(t, o.user, res.ID); got != seckill.StatusRejected {
			t.Fatalf("queued buyer %s is %s after the sell-out", o.user, got)
		}
	}
	e.drain(t)
	var a service.Audit
	e.do(t, "GET", "/api/v1/sales/hot/audit", admin(), nil).decode(t, &a)
	if !a.OK || a.Database.Sold != 10 || a.Database.PaidOrders != 10 {
		t.Fatalf("audit: %+v", a)
	}
}
