package redisinv

import (
	"fmt"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// TestOverdueBeyondTheReclaimBound: a call expires at most 256 overdue holds before it acts;
// a hold it left for later must still never be treated as live. With 300 holds overdue at
// once, the 300th reads expired, cannot be paid as a live hold, and cancels as expired, as on
// the memory engine.
func TestOverdueBeyondTheReclaimBound(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	e := newTestEngine(t, c.Inventory, clock)
	ctx := t.Context()
	now := clock.Now()
	def, err := seckill.NewSale(seckill.SaleInput{ID: "bound", PriceCents: ptr(int64(1)), Stock: ptr(400),
		HoldSeconds: ptr(10), StartsAt: &now, EndsAt: ptr(now.Add(5 * time.Second))}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSale(ctx, def, 0); err != nil {
		t.Fatal(err)
	}
	var res []seckill.Reservation
	for i := range 300 {
		r, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "bound", UserID: fmt.Sprintf("u%d", i), Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r.Reservation)
	}
	clock.Advance(11 * time.Second) // ended, and every hold overdue
	last := res[len(res)-1]
	got, r, err := e.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: "p", ReservationID: last.ID, AmountCents: 1})
	if err != nil || got != seckill.PaymentRefundRequired || r.Status != seckill.StatusRefundRequired {
		t.Fatalf("payment for an overdue hold beyond the bound = %s, %s, %v; want refund_required", got, r.Status, err)
	}
	next := res[len(res)-2]
	if r, err := e.Reservation(ctx, next.ID); err != nil || r.Status != seckill.StatusExpired {
		t.Fatalf("read of an overdue hold beyond the bound = %s, %v; want expired", r.Status, err)
	}
	if r, err := e.Cancel(ctx, res[len(res)-3].ID, res[len(res)-3].UserID); err != nil || r.Status != seckill.StatusExpired {
		t.Fatalf("cancel of an overdue hold beyond the bound = %s, %v; want expired", r.Status, err)
	}
	if _, err := e.Reclaim(ctx, "bound"); err != nil {
		t.Fatal(err)
	}
	if _, st, err := e.Sale(ctx, "bound"); err != nil || st != (seckill.StockState{Sellable: 400, Available: 400}) {
		t.Fatalf("after the sweep: %+v, %v; want every unit back", st, err)
	}
}
