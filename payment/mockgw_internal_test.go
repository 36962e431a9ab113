package payment

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestMockCloseBeforeWebhook: a payment closed before it settles never succeeds (settle refuses
// to send its webhook; State stays closed); one whose webhook was sent is ErrAlreadyPaid to
// Close, and State says succeeded. The held-back payment's settle is called by hand, so the
// order of Close and settle is fixed, not raced.
func TestMockCloseBeforeWebhook(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var delivered []string
	g := NewMockGateway(MockConfig{
		Secret: []byte("mock-internal-test-secret-0123456789ab"),
		Delay: func(r seckill.Reservation) time.Duration {
			if r.ID == "held-back" {
				return time.Hour // never reached: Close cancels it
			}
			return 0
		},
		Deliver: func(_ context.Context, body []byte, _ string) (int, error) {
			ev, err := ParseEvent(body)
			if err != nil {
				return 0, err
			}
			mu.Lock()
			delivered = append(delivered, ev.ReservationID)
			mu.Unlock()
			return http.StatusOK, nil
		},
	})
	t.Cleanup(func() { _ = g.Close() })

	paid, err := g.Start(ctx, StartRequest{ReservationID: "paid", AmountCents: 100, IdempotencyKey: "paid"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.ClosePayment(ctx, paid.PaymentID); !errors.Is(err, ErrAlreadyPaid) {
		t.Fatalf("Close after the webhook: %v, want ErrAlreadyPaid", err)
	}
	if st, _ := g.State(ctx, paid.PaymentID); st != StateSucceeded {
		t.Fatalf("State after the webhook: %q, want succeeded", st)
	}

	held, err := g.Start(ctx, StartRequest{ReservationID: "held-back", AmountCents: 100, IdempotencyKey: "held-back"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.ClosePayment(ctx, held.PaymentID); err != nil {
		t.Fatalf("Close of an open payment: %v", err)
	}
	if g.settle(held.PaymentID, true) {
		t.Fatal("a closed payment settled: its webhook would report it paid")
	}
	if st, _ := g.State(ctx, held.PaymentID); st != StateClosed {
		t.Fatalf("State of the closed payment: %q, want closed", st)
	}
	if err := g.Settle(held.PaymentID); seckill.ErrorCode(err) != seckill.CodeConflict {
		t.Fatalf("Settle of a closed payment: %v, want conflict", err)
	}
	if rr, err := g.Refund(ctx, RefundRequest{PaymentID: held.PaymentID}); err != nil || rr.Status != RefundFailed {
		t.Fatalf("Refund of a payment never paid: %+v %v, want failed", rr, err)
	}
	if err := g.ClosePayment(ctx, "pay_unknown"); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("Close of an unknown payment: %v, want not_found", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delivered) != 1 || delivered[0] != "paid" {
		t.Fatalf("webhooks delivered for %v, want only the paid one", delivered)
	}
}
