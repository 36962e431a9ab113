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

// reclaimCounter counts holds expired through Reclaim, i.e. by the sweeper, not by a read.
type reclaimCounter struct {
	seckill.Inventory
	reclaimed atomic.Int64
}

func (r *reclaimCounter) Reclaim(ctx context.Context, id string) (int, error) {
	n, err := r.Inventory.Reclaim(ctx, id)
	r.reclaimed.Add(int64(n))
	return n, err
}

// TestSweeperReclaimsWithoutTraffic: with no call touching the sale, the sweeper alone expires a
// hold within a few sweep intervals of its expiry (invariant 8 of docs/MODEL.md).
func TestSweeperReclaimsWithoutTraffic(t *testing.T) {
	ctx := t.Context()
	clock := seckilltest.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := sqlstore.Open(ctx, "sqlite://:memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	inv := &reclaimCounter{Inventory: seckilltest.NewModel(clock)}
	svc := service.New(service.Config{Inventory: inv, Store: store, Clock: clock, AuthSecret: []byte("k")})
	price, stock, hold := int64(1), 1, 2
	if _, err := svc.CreateSale(ctx, seckill.SaleInput{ID: "s", PriceCents: &price, Stock: &stock, HoldSeconds: &hold}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: "u", Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	sweepCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Sweeper(10 * time.Millisecond).Run(sweepCtx) }()
	defer func() { stop(); <-done }()
	time.Sleep(50 * time.Millisecond)
	if inv.reclaimed.Load() != 0 {
		t.Fatal("the sweeper expired a hold before its time")
	}
	clock.Advance(2 * time.Second)
	deadline := time.Now().Add(time.Second)
	for inv.reclaimed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no hold reclaimed by the sweeper within 1 s of its expiry")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLiveSaleIDs: the sweeper and the stream consumers work on the sales that can still
// change by themselves: until ends_at + hold_seconds + a minute.
func TestLiveSaleIDs(t *testing.T) {
	ctx := t.Context()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := seckilltest.NewManualClock(t0)
	store, err := sqlstore.Open(ctx, "sqlite://:memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc := service.New(service.Config{Inventory: seckilltest.NewModel(clock), Store: store, Clock: clock, AuthSecret: []byte("k")})
	price, stock, hold := int64(1), 1, 30
	for _, id := range []string{"short", "long"} {
		end := t0.Add(time.Minute)
		if id == "long" {
			end = t0.Add(time.Hour)
		}
		if _, err := svc.CreateSale(ctx, seckill.SaleInput{ID: id, PriceCents: &price, Stock: &stock, HoldSeconds: &hold, EndsAt: &end}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		at   time.Duration
		want []string
	}{
		{0, []string{"long", "short"}},                              // oldest first, then by id
		{2*time.Minute + 29*time.Second, []string{"long", "short"}}, // ended 1 m 29 s ago: a hold may still expire
		{2*time.Minute + 30*time.Second, []string{"long"}},
	} {
		clock.Set(t0.Add(c.at))
		got, err := svc.LiveSaleIDs(ctx)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("LiveSaleIDs at +%v = %v, %v; want %v", c.at, got, err, c.want)
		}
	}
	if all, _ := svc.SaleIDs(ctx); len(all) != 2 {
		t.Errorf("SaleIDs = %v, want both", all)
	}
}
