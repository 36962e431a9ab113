package service_test

import (
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// A free sale (price_cents 0) has no gateway: POST /pay on a free hold confirms it, through
// the same ConfirmPayment and payment record as a paid one, with the payment id
// FreePaymentID(reservation) at gateway "free". Its guards are the hold's: owner only, held
// only, before expiry; a repeat answers the same. On both engines, with no gateway configured.
func TestFreeHoldConfirmed(t *testing.T) {
	for name, rig := range map[string]func(*testing.T) *outageRig{"memory": memoryRig, "redis": redisRig} {
		t.Run(name, func(t *testing.T) {
			r := rig(t)
			ctx := t.Context()
			price, stock, hold := int64(0), 2, 10
			if _, err := r.svc.CreateSale(ctx, seckill.SaleInput{ID: "s", PriceCents: &price, Stock: &stock, HoldSeconds: &hold}); err != nil {
				t.Fatal(err)
			}
			buy := func(user string) seckill.Reservation {
				t.Helper()
				b, err := r.svc.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: user, Quantity: 1})
				if err != nil || b.Reservation.Status != seckill.StatusHeld || b.Reservation.AmountCents != 0 {
					t.Fatalf("%s's buy: %+v %v; want a free hold", user, b.Reservation, err)
				}
				return b.Reservation
			}
			alice, carol := buy("alice"), buy("carol")
			if _, err := r.svc.Pay(ctx, alice.ID, "bob"); seckill.ErrorCode(err) != seckill.CodeNotFound {
				t.Fatalf("bob confirming alice's hold: %v; want not_found", err)
			}
			want := seckill.FreePaymentID(alice.ID)
			for i := range 3 {
				in, err := r.svc.Pay(ctx, alice.ID, "alice")
				if err != nil || in.PaymentID != want || in.RedirectURL != "" || in.Reservation == nil ||
					in.Reservation.ID != alice.ID || in.Reservation.Status != seckill.StatusPaid {
					t.Fatalf("confirm #%d: %+v, %v; want %s, no page, the reservation paid", i+1, in, err, want)
				}
			}
			if got, err := r.inv.Reservation(ctx, alice.ID); err != nil || got.Status != seckill.StatusPaid {
				t.Fatalf("alice's reservation in the engine: %+v %v; want paid", got, err)
			}
			orders, err := r.svc.Orders(ctx, "alice")
			if err != nil || len(orders) != 1 || orders[0].PaymentID != want || orders[0].AmountCents != 0 ||
				orders[0].Status != seckill.StatusPaid {
				t.Fatalf("alice's orders: %+v %v; want one paid order %s of 0", orders, err, want)
			}
			r.waitStored(t, "alice's paid event", func() bool { return r.stored(t, alice.ID) == seckill.StatusPaid })

			r.clock.Advance(11 * time.Second) // carol's hold expires unconfirmed
			if _, err := r.svc.Pay(ctx, carol.ID, "carol"); seckill.ErrorCode(err) != seckill.CodeHoldExpired {
				t.Fatalf("confirming an expired hold: %v; want hold_expired", err)
			}
			if res, err := r.store.PaymentResult(ctx, seckill.FreePaymentID(carol.ID)); seckill.ErrorCode(err) != seckill.CodeNotFound {
				t.Fatalf("the expired hold's payment record: %q %v; want not_found", res, err)
			}
			r.waitStored(t, "carol expired", func() bool { return r.stored(t, carol.ID) == seckill.StatusExpired })
			a, err := r.svc.Audit(ctx, "s")
			if err != nil || !a.OK || a.Database.Sold != 1 || a.Database.PaidOrders != 1 || a.Database.Refunds != 0 {
				t.Fatalf("audit: %+v %v; want ok, 1 sold, 1 paid order, no refund", a, err)
			}
		})
	}
}
