package memory_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/seckilltest"
)

// TestConformance runs the inventory conformance suite (rules, the rapid model comparison and
// the concurrency checker) against the memory engine.
func TestConformance(t *testing.T) {
	seckilltest.TestInventory(t, func(t *testing.T, c seckill.Clock) seckill.Inventory { return memory.New(c) })
}

// TestConformanceReleasing runs the suite against an engine that releases settled sales into
// an archive that its events reach asynchronously, as the order store does: every answer about
// a released sale's reservations comes from the archive, and must still be the model's.
func TestConformanceReleasing(t *testing.T) {
	var served atomic.Int64
	seckilltest.TestInventory(t, func(t *testing.T, c seckill.Clock) seckill.Inventory {
		ch := make(chan seckill.Event, 1<<16)
		a := &eventArchive{rows: map[string]seckill.Reservation{}, served: &served}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range ch {
				a.apply(ev.Reservation)
			}
		}()
		t.Cleanup(func() {
			close(ch)
			<-done
		})
		return memory.New(c, memory.WithEvents(ch), memory.WithArchive(a))
	})
	t.Logf("reservation reads answered from the archive: %d", served.Load())
	if served.Load() == 0 {
		t.Fatal("no sale was ever released: the suite did not exercise the archive")
	}
}

// eventArchive is an order store reduced to what the engine's archive needs: the reservations
// as the engine's events last showed them, status moving forward only (as sqlstore's merge).
// Paid and refund_required events are applied too, standing in for the payment transaction.
type eventArchive struct {
	mu     sync.Mutex
	rows   map[string]seckill.Reservation
	served *atomic.Int64
}

func (a *eventArchive) apply(r seckill.Reservation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur, ok := a.rows[r.ID]
	if ok && (cur.Status.Rank() >= seckill.StatusPaid.Rank() || r.Status.Rank() < cur.Status.Rank() ||
		r.Status.Rank() == cur.Status.Rank() && r.Status != cur.Status) {
		return
	}
	r.Position = 0
	a.rows[r.ID] = r
}

func (a *eventArchive) Reservation(_ context.Context, id string) (seckill.Reservation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.rows[id]
	if !ok {
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
	}
	a.served.Add(1)
	return r, nil
}

func (a *eventArchive) Reservations(_ context.Context, saleID string, _ ...seckill.ReservationStatus) ([]seckill.Reservation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []seckill.Reservation
	for _, r := range a.rows {
		if r.SaleID == saleID {
			out = append(out, r)
		}
	}
	return out, nil
}

// TestRestoreEndedHoldEmits: a held reservation restored when its units are not free (the
// order store held more than the stock left) is restored as expired, and the engine tells the
// order store with an expired event, so that the store does not keep it held for good; a hold
// that fits emits nothing (the store has it already). It fails on the engine before the fix,
// which restored the hold as expired without an event.
func TestRestoreEndedHoldEmits(t *testing.T) {
	ctx := t.Context()
	clock := seckilltest.NewManualClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	ch := make(chan seckill.Event, 8)
	e := memory.New(clock, memory.WithEvents(ch))
	now := clock.Now()
	def, err := seckill.NewSale(seckill.SaleInput{ID: "s1", PriceCents: ptr(int64(100)), Stock: ptr(1), HoldSeconds: ptr(60),
		StartsAt: ptr(now.Add(-time.Minute)), EndsAt: ptr(now.Add(time.Hour))}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSale(ctx, def, 0); err != nil {
		t.Fatal(err)
	}
	held := func(n byte, user string) seckill.Reservation {
		b := make([]byte, 16)
		b[15] = n
		return seckill.Reservation{ID: seckill.ReservationID("s1", b), SaleID: "s1", UserID: user, Quantity: 1,
			Status: seckill.StatusHeld, ExpiresAt: ptr(now.Add(time.Minute)), AmountCents: 100, CreatedAt: now, Seq: uint64(n)}
	}
	fits, over := held(1, "u1"), held(2, "u2")
	for _, r := range []seckill.Reservation{fits, over} {
		if err := e.RestoreReservation(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := e.Reservation(ctx, over.ID); err != nil || got.Status != seckill.StatusExpired {
		t.Fatalf("the hold beyond the stock: %+v, %v; want expired", got, err)
	}
	var evs []seckill.Event
	for len(ch) > 0 {
		evs = append(evs, <-ch)
	}
	if len(evs) != 1 || evs[0].Reservation.ID != over.ID || evs[0].Reservation.Status != seckill.StatusExpired {
		t.Fatalf("events %+v, want one: %s expired", evs, over.ID)
	}
}

func ptr[T any](v T) *T { return &v }
