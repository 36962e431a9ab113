package stripegw

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/payment"
)

// TestAgainstStripeMock makes every call against stripe-mock, which validates each request
// against Stripe's OpenAPI specification (a misspelt or missing parameter is a 400) and answers
// with fixtures. It remembers nothing, so this test checks that the calls are well-formed and
// that the answers map, not what happens across calls; the fake server's tests cover the
// branches stripe-mock's fixtures never show.
func TestAgainstStripeMock(t *testing.T) {
	base := testenv.StripeMock(t)
	g, err := New(Config{SecretKey: "sk_test_123", WebhookSecret: testWebhookSecret, APIURL: base, SuccessURL: "http://127.0.0.1:8080/"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	intent, err := g.Start(ctx, payment.StartRequest{ReservationID: "r-mock-1", UserID: "u-1", AmountCents: 1999,
		ExpiresAt: time.Now().Add(2 * time.Minute), IdempotencyKey: "r-mock-1"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if intent.PaymentID == "" || !strings.HasPrefix(intent.RedirectURL, "https://") {
		t.Fatalf("Start = %+v, want a session id and its hosted page", intent)
	}
	// A hold of several hours: expires_at is still within Stripe's 24 h.
	if _, err := g.Start(ctx, payment.StartRequest{ReservationID: "r-mock-2", AmountCents: 1, Currency: "eur",
		ExpiresAt: time.Now().Add(30 * time.Hour), IdempotencyKey: "r-mock-2"}); err != nil {
		t.Fatalf("Start with a long hold: %v", err)
	}

	st, err := g.State(ctx, intent.PaymentID)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if st != payment.StateOpen { // stripe-mock's session fixture is open and unpaid
		t.Fatalf("State = %q, want open", st)
	}

	// stripe-mock's Expire answers its open fixture, so Close reads the session back, finds it
	// open and asks to be retried: the call itself must be accepted (no 400 for its form).
	if err := g.ClosePayment(ctx, intent.PaymentID); err != nil && !strings.Contains(err.Error(), "still") {
		t.Fatalf("Close: %v", err)
	}

	res, err := g.Refund(ctx, payment.RefundRequest{PaymentID: intent.PaymentID, AmountCents: 1999})
	if err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if res.RefundID == "" || res.Status != payment.RefundSucceeded { // the refund fixture has succeeded
		t.Fatalf("Refund = %+v", res)
	}
}
