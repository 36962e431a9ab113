package service_test

import (
	"context"
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
