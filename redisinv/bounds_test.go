package redisinv

import (
	"fmt"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
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

// TestSaleSegmentsFromDefinition: a sale whose definition asks for segments is split by
// LoadSale (seckill.Sale.Segments, the API's option) and reads back with them; one without
// reads back with 1, up to the API's bound (seckill.MaxSegments, the engine's too).
func TestSaleSegmentsFromDefinition(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	e := newTestEngine(t, c.Inventory, clock)
	now := clock.Now()
	for _, n := range []int{1, 3, seckill.MaxSegments} {
		def, err := seckill.NewSale(seckill.SaleInput{ID: fmt.Sprintf("segs-%d", n), PriceCents: ptr(int64(1)), Stock: ptr(100),
			StartsAt: &now, Segments: ptr(n)}, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.LoadSale(t.Context(), def, 0); err != nil {
			t.Fatalf("LoadSale with %d segments: %v", n, err)
		}
		got, st, err := e.Sale(t.Context(), def.ID)
		if err != nil || got.Segments != n || st.Available != 100 {
			t.Fatalf("Sale of a sale with %d segments: segments %d, %+v, %v", n, got.Segments, st, err)
		}
		if in := e.segs.of(def.ID); (in != nil) != (n > 1) || in != nil && in.n != n {
			t.Fatalf("the engine split a sale asked for %d segments into %+v", n, in)
		}
	}
}
