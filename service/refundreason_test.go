package service_test

import (
	"strings"
	"testing"

	"github.com/seckill-go/seckill"
)

// TestRefundSaysWhy: a payment that cannot be honoured is recorded refund_required with the
// reason the operator reads in GET /api/v1/refunds: paid in another currency (issue 26: "owed
// back, with the reason"), another amount, for no known reservation. Without reasons every
// refund reads the same and an operator cannot tell a currency attack from a late payer.
func TestRefundSaysWhy(t *testing.T) {
	r := newOpenPayRig(t)
	alice, bob := r.hold(t, "alice"), r.hold(t, "bob")
	for _, c := range []struct {
		pay  seckill.PaymentConfirmation
		want string
	}{
		{seckill.PaymentConfirmation{PaymentID: "p-vnd", ReservationID: alice.ID, AmountCents: 100, Currency: "VND"}, "paid in vnd; the sale is in usd"},
		{seckill.PaymentConfirmation{PaymentID: "p-99", ReservationID: bob.ID, AmountCents: 99}, "paid 99 cents; the reservation's amount is 100"},
		{seckill.PaymentConfirmation{PaymentID: "p-none", ReservationID: "s-0000000000000009ffffffffffffffff", AmountCents: 100}, "no reservation"},
	} {
		c.pay.Gateway = "webhook"
		res, err := r.svc.ApplyPayment(t.Context(), c.pay, true)
		if err != nil || res != seckill.PaymentRefundRequired {
			t.Fatalf("payment %s: %v, %v; want refund_required", c.pay.PaymentID, res, err)
		}
	}
	refunds, err := r.store.Refunds(t.Context(), seckill.RefundRequired, 100)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, f := range refunds {
		reasons[f.PaymentID] = f.Reason
	}
	for id, want := range map[string]string{"p-vnd": "paid in vnd; the sale is in usd", "p-99": "paid 99 cents; the reservation's amount is 100", "p-none": "no reservation"} {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("refund of %s says %q; want %q", id, reasons[id], want)
		}
	}
	// The holds are unchanged: money in the wrong currency or amount pays nothing.
	for _, h := range []seckill.Reservation{alice, bob} {
		if got, err := r.svc.Reservation(t.Context(), h.ID, h.UserID); err != nil || got.Status != seckill.StatusHeld {
			t.Errorf("%s's reservation after a refused payment: %+v, %v; want held", h.UserID, got, err)
		}
	}
}

// TestFreeRefundSettled: a free hold's confirmation that the engine cannot honour (its hold
// ended a moment before) owes nothing back: its refund is recorded refunded at once, not left
// refund_required for a "free" gateway that no refunder serves (it stayed listed for good).
func TestFreeRefundSettled(t *testing.T) {
	r := newOpenPayRig(t)
	late := seckill.PaymentConfirmation{PaymentID: seckill.FreePaymentID("s-0000000000000009ffffffffffffffff"),
		ReservationID: "s-0000000000000009ffffffffffffffff", Gateway: seckill.FreeGateway}
	if res, err := r.svc.ApplyPayment(t.Context(), late, true); err != nil || res != seckill.PaymentRefundRequired {
		t.Fatalf("a free confirmation for no hold: %v, %v; want refund_required", res, err)
	}
	for status, want := range map[seckill.RefundStatus]int{seckill.RefundRequired: 0, seckill.Refunded: 1} {
		if got, err := r.store.Refunds(t.Context(), status, 100); err != nil || len(got) != want {
			t.Errorf("refunds %s: %d (%v); want %d", status, len(got), err, want)
		}
	}
}
