package service_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// salesCounter counts the order store's listings of the sales.
type salesCounter struct {
	seckill.OrderStore
	reads atomic.Int64
}

func (c *salesCounter) Sales(ctx context.Context) ([]seckill.Sale, []int, error) {
	c.reads.Add(1)
	return c.OrderStore.Sales(ctx)
}

// TestLiveSaleIDsShareOneListing: the background loops' many LiveSaleIDs calls share one read of
// the order store (the detector: fewer reads than calls, where each call read it before), and a
// sale created through the service is listed at once, not a listing later.
func TestLiveSaleIDsShareOneListing(t *testing.T) {
	ctx := t.Context()
	clock := seckilltest.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := sqlstore.Open(ctx, "sqlite://:memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := &salesCounter{OrderStore: db}
	svc := service.New(service.Config{Inventory: seckilltest.NewModel(clock), Store: store, Clock: clock, AuthSecret: []byte("k")})
	price, stock := int64(1), 1
	create := func(id string) {
		if _, err := svc.CreateSale(ctx, seckill.SaleInput{ID: id, PriceCents: &price, Stock: &stock}); err != nil {
			t.Fatal(err)
		}
	}
	create("a")
	const calls = 10
	for range calls {
		ids, err := svc.LiveSaleIDs(ctx)
		if err != nil || !slices.Equal(ids, []string{"a"}) {
			t.Fatalf("LiveSaleIDs = %v, %v; want [a]", ids, err)
		}
	}
	if n := store.reads.Load(); n >= calls {
		t.Fatalf("%d calls of LiveSaleIDs read the order store %d times; want them to share a listing", calls, n)
	}
	create("b")
	if ids, err := svc.LiveSaleIDs(ctx); err != nil || !slices.Contains(ids, "b") {
		t.Fatalf("LiveSaleIDs right after a create = %v, %v; want b listed", ids, err)
	}
}

// onDemandInventory is an engine that loads on demand, as the Redis engine does: a sale it has
// not loaded is read from the store (cold), and LoadSale calls are counted.
type onDemandInventory struct {
	seckill.Inventory
	store seckill.OrderStore
	loads atomic.Int64
}

func (o *onDemandInventory) LoadSale(ctx context.Context, s seckill.Sale, sold int) error {
	o.loads.Add(1)
	return o.Inventory.LoadSale(ctx, s, sold)
}

func (o *onDemandInventory) Sale(ctx context.Context, id string) (seckill.Sale, seckill.StockState, error) {
	s, st, err := o.Inventory.Sale(ctx, id)
	if seckill.ErrorCode(err) != seckill.CodeNotFound {
		return s, st, err
	}
	def, sold, err := o.store.Sale(ctx, id)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	return def, seckill.StockState{Sellable: def.Sellable(), Available: def.Sellable() - sold, Sold: sold}, nil
}

// TestHotWindow: LiveSaleIDs lists the sales in their hot window only (docs/MODEL.md "Hot and
// cold sales"): from preheat_seconds before the start until hold_seconds and a minute after the
// end; and with LoadOnDemand, CreateSale loads a sale only if it is hot already. The negative
// control is the same service without LoadOnDemand: it loads every sale it creates.
func TestHotWindow(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, onDemand := range []bool{true, false} {
		t.Run(fmt.Sprintf("LoadOnDemand=%v", onDemand), func(t *testing.T) {
			clock := seckilltest.NewManualClock(now)
			db, err := sqlstore.Open(ctx, "sqlite://:memory:")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			inv := &onDemandInventory{Inventory: seckilltest.NewModel(clock), store: db}
			svc := service.New(service.Config{Inventory: inv, Store: db, Clock: clock, LoadOnDemand: onDemand, AuthSecret: []byte("k")})
			create := func(id string, starts time.Time, length time.Duration) {
				t.Helper()
				price, stock, ends := int64(1), 1, starts.Add(length)
				if _, err := svc.CreateSale(ctx, seckill.SaleInput{ID: id, PriceCents: &price, Stock: &stock, StartsAt: &starts, EndsAt: &ends, HoldSeconds: ptr(60)}); err != nil {
					t.Fatal(err)
				}
			}
			create("now", now, time.Hour)
			create("soon", now.Add(4*time.Minute), time.Hour)  // within the default 300 s preheat
			create("later", now.Add(6*time.Minute), time.Hour) // beyond it
			wantLoads := int64(2)
			if !onDemand {
				wantLoads = 3
			}
			if n := inv.loads.Load(); n != wantLoads {
				t.Fatalf("CreateSale loaded %d sales; want %d", n, wantLoads)
			}
			live := func() []string {
				ids, err := svc.LiveSaleIDs(ctx)
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(ids)
				return ids
			}
			if got := live(); !slices.Equal(got, []string{"now", "soon"}) {
				t.Fatalf("LiveSaleIDs = %v; want [now soon]", got)
			}
			clock.Set(now.Add(time.Minute)) // "later" is in its preheat now
			if got := live(); !slices.Equal(got, []string{"later", "now", "soon"}) {
				t.Fatalf("a minute on, LiveSaleIDs = %v; want all three", got)
			}
			// "now" ends at 13:00; its last hold could expire at 13:01; hot until 13:02.
			clock.Set(now.Add(time.Hour + 2*time.Minute - time.Millisecond))
			if got := live(); !slices.Contains(got, "now") {
				t.Fatalf("just before the end of its window, LiveSaleIDs = %v; want now listed", got)
			}
			clock.Set(now.Add(time.Hour + 2*time.Minute))
			if got := live(); slices.Contains(got, "now") {
				t.Fatalf("at the end of its window, LiveSaleIDs = %v; want now gone", got)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
