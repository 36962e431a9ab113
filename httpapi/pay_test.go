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
