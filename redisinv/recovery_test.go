package redisinv

import (
	"fmt"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
)

// TestTouchedSaleFirst: after a loss, the background's rebuilds queue at the recovery rate, and
// a buyer's call on one of the sales still queued moves its rebuild to the front and waits for
// it (docs/RELIABILITY.md "Recovery by demand"). The detector: when the buyer first gets a
// hold, most of the other sales must still be missing (the touched sale did not wait for them).
// The negative control queues every
// rebuild alike (withoutUrgency): the buyer is served only once the queue reached its sale,
// after most others, and the detector must say so. No timing is asserted: the rate only makes
// the queue long enough to tell the two apart.
func TestTouchedSaleFirst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		urgent bool
	}{{"touched sale first", true}, {"negative control: one queue for all", false}} {
		t.Run(tc.name, func(t *testing.T) {
			problems := touchedFirst(t, tc.urgent)
			if !tc.urgent {
				if len(problems) == 0 {
					t.Fatal("negative control: the touched sale came back first without priority; the detector cannot fail")
				}
				t.Logf("negative control, detector: %v", problems)
				return
			}
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}

func touchedFirst(t *testing.T, urgent bool) (problems []string) {
	const sales = 16
	ctx := t.Context()
	c := dialT(t, testenv.Redis(t))
	store := sqliteStoreT(t)
	locks := lock.New(c.Locks, &lock.Options{Lease: 2 * time.Second})
	t.Cleanup(func() { _ = locks.Close() })
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	opts := []Option{WithPrefix(prefix), WithRebuild(store, locks), WithRecoveryRate(4)}
	if !urgent {
		opts = append(opts, withoutUrgency())
	}
	e := New(c.Inventory, opts...)
	t.Cleanup(func() { _ = e.Close() })
	now := time.Now()
	ids := make([]string, sales)
	for i := range ids {
		ids[i] = fmt.Sprintf("tf%02d", i)
		def, err := seckill.NewSale(seckill.SaleInput{ID: ids[i], PriceCents: ptr(int64(100)), Stock: ptr(10),
			StartsAt: &now, HoldSeconds: ptr(3600), Listed: ptr(false)}, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.CreateSale(ctx, def); err != nil {
			t.Fatal(err)
		}
		if err := e.LoadSale(ctx, def, 0); err != nil {
			t.Fatal(err)
		}
	}
	touched := ids[sales-1]
	dropPrefix(t, c.Inventory, prefix) // the loss
	for _, id := range ids {           // the sweeper finds them missing, in order
		if _, err := e.Reclaim(ctx, id); seckill.ErrorCode(err) != seckill.CodeUnavailable {
			t.Fatalf("reclaim of a lost sale: %v; want unavailable", err)
		}
	}
	var res seckill.BuyResult
	for {
		var err error
		res, err = e.Buy(ctx, seckill.BuyRequest{SaleID: touched, UserID: "buyer", Quantity: 1})
		if err == nil {
			break
		}
		if seckill.ErrorCode(err) != seckill.CodeUnavailable {
			t.Fatalf("buy in the touched sale: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	missing := 0
	for _, id := range ids[:sales-1] {
		msgs, err := e.run(ctx, e.scripts.sale, e.keys(id), []string{e.clockArg()})
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := msgs[0].ToString(); code != "ok" {
			missing++
		}
	}
	if missing < (sales-1)/2 {
		problems = append(problems, fmt.Sprintf("when the touched sale served, only %d of the %d others were still missing: it waited behind them", missing, sales-1))
	}
	if res.Reservation.Status != seckill.StatusHeld {
		problems = append(problems, fmt.Sprintf("the buyer got %+v; want a hold", res.Reservation))
	}
	return problems
}
