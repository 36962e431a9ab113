package stripegw

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
)

// Stripe's 429 (the account's rate limit) is a *payment.RateLimitedError carrying the answer's
// Retry-After, still coded unavailable, so that payment.WithBackoff backs the gateway off;
// stripe-go does not retry it. Another error is not.
func TestRateLimitedTyped(t *testing.T) {
	for _, c := range []struct {
		status     int
		retryAfter string
		want       time.Duration
		limited    bool
	}{{429, "7", 7 * time.Second, true}, {429, "", 0, true}, {500, "7", 0, false}, {400, "", 0, false}} {
		calls := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls++
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			w.Header().Set("Stripe-Should-Retry", "false")
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"rate_limit","message":"Request rate limit exceeded."}}`))
		}))
		g, err := New(Config{SecretKey: "sk_test_123", WebhookSecret: testWebhookSecret, APIURL: srv.URL,
			SuccessURL: "https://shop.example/", HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.Start(t.Context(), payment.StartRequest{ReservationID: "r", UserID: "u", AmountCents: 100,
			ExpiresAt: time.Now().Add(time.Minute), IdempotencyKey: "r"})
		srv.Close()
		var rl *payment.RateLimitedError
		if errors.As(err, &rl) != c.limited || seckill.ErrorCode(err) != seckill.CodeUnavailable {
			t.Fatalf("HTTP %d: %v; want unavailable, rate limited %v", c.status, err, c.limited)
		}
		if c.limited && (rl.RetryAfter != c.want || calls != 1) {
			t.Fatalf("HTTP %d Retry-After %q: RetryAfter %v after %d calls; want %v after 1", c.status, c.retryAfter, rl.RetryAfter, calls, c.want)
		}
	}
}
