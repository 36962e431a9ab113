package seckilltest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

var _ seckill.SaleAdmin = (*Model)(nil)

// SetListed sets the sale's listed flag.
func (m *Model) SetListed(_ context.Context, saleID string, listed bool) (seckill.Sale, seckill.StockState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.findSale(saleID)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	m.settle(s, m.clock.Now())
	s.def.Listed = listed
	return s.def, s.state(), nil
}

// CloseUnreserved closes the sale if no reservation was ever made in it and nothing is sold.
func (m *Model) CloseUnreserved(_ context.Context, saleID string) (seckill.Sale, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.findSale(saleID)
	if err != nil {
		return seckill.Sale{}, err
	}
	if s.seq != 0 || s.sold != 0 || len(s.users) != 0 {
		return seckill.Sale{}, seckill.Errorf(seckill.CodeConflict, "sale %q has reservations", saleID)
	}
	if now := m.clock.Now(); now.Before(s.def.EndsAt) {
		s.def.EndsAt = now
	}
	s.closed = true
	return s.def, nil
}

// DropSale forgets a closed sale that has no reservation.
func (m *Model) DropSale(_ context.Context, saleID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.findSale(saleID)
	if err != nil {
		return err
	}
	if !s.closed || s.seq != 0 || s.sold != 0 || len(s.users) != 0 {
		return seckill.Errorf(seckill.CodeConflict, "sale %q is open or has reservations", saleID)
	}
	m.sales = slices.DeleteFunc(m.sales, func(x *modelSale) bool { return x == s })
	return nil
}

// testSaleAdmin is the seckill.SaleAdmin half of the inventory suite: listing a sale on and
// off, and deleting one nobody has reserved in (close, then drop), also against racing buys.
func testSaleAdmin(t *testing.T, newEngine NewInventory) {
	// ListedCurrency: LoadSale keeps listed and currency, SetListed changes listed alone.
	t.Run("ListedCurrency", func(t *testing.T) {
		r := newRig(t, newEngine, 3, 0, func(in *seckill.SaleInput) {
			in.Listed, in.Currency = ptr(false), ptr("eur")
		})
		a := saleAdmin(t, r)
		got := r.stateOf("s1", ss(3, 3, 0, 0, 0))
		if got.Listed || got.Currency != "eur" {
			t.Fatalf("Sale after LoadSale: listed %v, currency %q; want false, eur", got.Listed, got.Currency)
		}
		r.buy("u1", 1, "")
		def, st, err := a.SetListed(r.ctx, "s1", true)
		if err != nil {
			t.Fatalf("SetListed(true): %v", err)
		}
		want := r.sale
		want.Listed = true
		// Segments is how the engine split the sale (a conformance run may split every sale it
		// loads): SetListed keeps what the engine's read showed before it.
		want.Segments = got.Segments
		if def != want || st != ss(3, 2, 1, 0, 0) {
			t.Fatalf("SetListed(true) = %+v, %+v\nwant %+v, %+v", def, st, want, ss(3, 2, 1, 0, 0))
		}
		if got := r.stateOf("s1", ss(3, 2, 1, 0, 0)); !got.Listed {
			t.Fatal("Sale after SetListed(true): listed false")
		}
		if def, _, err := a.SetListed(r.ctx, "s1", false); err != nil || def.Listed {
			t.Fatalf("SetListed(false) = listed %v, %v", def.Listed, err)
		}
		if _, _, err := a.SetListed(r.ctx, "nope", true); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("SetListed(unknown) = %v, want not_found", err)
		}
	})

	// DeleteUnreserved: close, then drop; the sale is gone and its id can be loaded again.
	t.Run("DeleteUnreserved", func(t *testing.T) {
		r := newRig(t, newEngine, 3, 0)
		a := saleAdmin(t, r)
		r.advance(5 * time.Second)
		if err := a.DropSale(r.ctx, "s1"); seckill.ErrorCode(err) != seckill.CodeConflict {
			t.Fatalf("DropSale of an open sale = %v, want conflict", err)
		}
		def, err := a.CloseUnreserved(r.ctx, "s1")
		if err != nil {
			t.Fatalf("CloseUnreserved: %v", err)
		}
		if !def.EndsAt.Equal(at(5 * time.Second)) {
			t.Fatalf("CloseUnreserved: ends_at %s, want %s", def.EndsAt, at(5*time.Second))
		}
		r.buyFails("u1", 1, "", seckill.CodeEnded)
		if err := a.DropSale(r.ctx, "s1"); err != nil {
			t.Fatalf("DropSale: %v", err)
		}
		if _, _, err := r.inv.Sale(r.ctx, "s1"); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("Sale after DropSale = %v, want not_found", err)
		}
		r.buyFails("u1", 1, "", seckill.CodeNotFound)
		for name, err := range map[string]error{
			"DropSale again":           a.DropSale(r.ctx, "s1"),
			"CloseUnreserved(unknown)": func() error { _, err := a.CloseUnreserved(r.ctx, "s1"); return err }(),
		} {
			if seckill.ErrorCode(err) != seckill.CodeNotFound {
				t.Fatalf("%s = %v, want not_found", name, err)
			}
		}
		r.sale = r.load(2, 0, endsIn(time.Hour))
		r.buy("u1", 1, "")
		r.state(ss(2, 1, 1, 0, 0))
	})

	// RefusedOnceReserved: a reservation in any status (here a cancelled one and an expired
	// one) keeps the sale: CloseUnreserved answers conflict and changes nothing.
	t.Run("RefusedOnceReserved", func(t *testing.T) {
		for _, end := range []string{"cancelled", "expired"} {
			t.Run(end, func(t *testing.T) {
				r := newRig(t, newEngine, 2, 0)
				a := saleAdmin(t, r)
				res := r.buy("u1", 1, "")
				if end == "cancelled" {
					if _, err := r.inv.Cancel(r.ctx, res.ID, "u1"); err != nil {
						t.Fatal(err)
					}
				} else {
					r.advance(11 * time.Second)
				}
				r.state(ss(2, 2, 0, 0, 0))
				if _, err := a.CloseUnreserved(r.ctx, "s1"); seckill.ErrorCode(err) != seckill.CodeConflict {
					t.Fatalf("CloseUnreserved after a %s reservation = %v, want conflict", end, err)
				}
				if err := a.DropSale(r.ctx, "s1"); seckill.ErrorCode(err) != seckill.CodeConflict {
					t.Fatalf("DropSale after a %s reservation = %v, want conflict", end, err)
				}
				r.buy("u2", 1, "") // still open
			})
		}
	})

	// RacingBuys: buyers and CloseUnreserved race; either the close wins and no buy succeeds,
	// or a buy wins and the close is refused. Never both, never neither.
	t.Run("RacingBuys", func(t *testing.T) { testSaleAdminRace(t, newEngine) })
}

// saleAdmin is the rig's engine as a seckill.SaleAdmin, which every engine implements.
func saleAdmin(t *testing.T, r *rig) seckill.SaleAdmin {
	t.Helper()
	a, ok := r.inv.(seckill.SaleAdmin)
	if !ok {
		t.Fatalf("%T does not implement seckill.SaleAdmin", r.inv)
	}
	return a
}

// testSaleAdminRace races 8 buyers against CloseUnreserved, 20 rounds: exactly one side wins.
func testSaleAdminRace(t *testing.T, newEngine NewInventory) {
	for round := range 20 {
		r := newRig(t, newEngine, 50, 0)
		a := saleAdmin(t, r)
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			bought int
			start  = make(chan struct{})
		)
		for i := range 8 {
			wg.Go(func() {
				<-start
				_, err := r.buyIn("s1", "u"+string(rune('a'+i)), 1, "")
				switch seckill.ErrorCode(err) {
				case "":
					mu.Lock()
					bought++
					mu.Unlock()
				case seckill.CodeEnded:
				default:
					t.Errorf("round %d: Buy = %v, want a hold or ended", round, err)
				}
			})
		}
		var closeErr error
		wg.Go(func() {
			<-start
			_, closeErr = a.CloseUnreserved(r.ctx, "s1")
		})
		close(start)
		wg.Wait()
		switch code := seckill.ErrorCode(closeErr); {
		case code == "" && bought != 0:
			t.Fatalf("round %d: CloseUnreserved succeeded and %d buys were held", round, bought)
		case code == seckill.CodeConflict && bought == 0:
			t.Fatalf("round %d: CloseUnreserved refused with no buy held", round)
		case code != "" && code != seckill.CodeConflict:
			t.Fatalf("round %d: CloseUnreserved = %v", round, closeErr)
		}
	}
}
