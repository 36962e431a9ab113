package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestPayRateLimit: /pay has the per-user budget buys have (10/s, burst 10), in a bucket of
// its own: beyond the burst a user's /pay is refused 429 rate_limited with Retry-After before
// the reservation is read, another user's is not, the bucket refills with the clock, and
// paying spends none of the user's buys.
func TestPayRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", nil)
	alice := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	bob := e.mustBuy(t, "bob", "s1", http.StatusCreated)
	for range 10 {
		e.pay(t, "alice", alice.ID)
	}
	r := e.do(t, "POST", "/api/v1/reservations/"+alice.ID+"/pay", e.user(t, "alice"), nil)
	wantProblem(t, r, http.StatusTooManyRequests, seckill.CodeRateLimited)
	if r.Header.Get("Retry-After") != "1" {
		t.Fatalf("429 with Retry-After %q, want 1", r.Header.Get("Retry-After"))
	}
	// Decided before the reservation is read: an unknown one is refused the same way.
	wantProblem(t, e.do(t, "POST", "/api/v1/reservations/nope/pay", e.user(t, "alice"), nil),
		http.StatusTooManyRequests, seckill.CodeRateLimited)
	e.pay(t, "bob", bob.ID)
	// Alice's buys have their own budget (per_user_limit 1: a second buy is limit_exceeded).
	wantProblem(t, e.buy(t, "alice", e.path(t, "alice", "s1"), nil, ""), http.StatusConflict, seckill.CodeLimitExceeded)

	e.clock.Advance(100 * time.Millisecond)
	e.pay(t, "alice", alice.ID)
	wantProblem(t, e.do(t, "POST", "/api/v1/reservations/"+alice.ID+"/pay", e.user(t, "alice"), nil),
		http.StatusTooManyRequests, seckill.CodeRateLimited)
}

// TestPayFreeHold: /pay on a free hold (price_cents 0) confirms it with no gateway at all:
// 200 with payment_id free_<reservation>, no page and the reservation paid, the same answer
// again, the order listed with amount 0; another user's is 404, and an expired one 409.
func TestPayFreeHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutPayments())
	e.createSale(t, "gift", map[string]any{"price_cents": 0, "per_user_limit": 1})
	alice := e.mustBuy(t, "alice", "gift", http.StatusCreated)
	bob := e.mustBuy(t, "bob", "gift", http.StatusCreated)
	wantProblem(t, e.do(t, "POST", "/api/v1/reservations/"+alice.ID+"/pay", e.user(t, "bob"), nil), http.StatusNotFound, seckill.CodeNotFound)
	for range 2 {
		r := e.do(t, "POST", "/api/v1/reservations/"+alice.ID+"/pay", e.user(t, "alice"), nil)
		wantStatus(t, r, http.StatusOK)
		var got seckill.PaymentIntent
		r.decode(t, &got)
		if got.PaymentID != seckill.FreePaymentID(alice.ID) || got.RedirectURL != "" || got.Reservation == nil ||
			got.Reservation.Status != seckill.StatusPaid || got.Reservation.AmountCents != 0 {
			t.Fatalf("/pay on a free hold: %s; want confirmed, paid", r)
		}
	}
	if orders := e.orders(t, "alice"); len(orders) != 1 || orders[0].PaymentID != seckill.FreePaymentID(alice.ID) || orders[0].AmountCents != 0 {
		t.Fatalf("alice's orders: %+v; want the free one", orders)
	}
	e.clock.Advance(61 * time.Second) // bob's hold (60 s) runs out
	wantProblem(t, e.do(t, "POST", "/api/v1/reservations/"+bob.ID+"/pay", e.user(t, "bob"), nil), http.StatusConflict, seckill.CodeHoldExpired)
}
