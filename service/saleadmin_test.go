package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// failingDelete is an order store whose DeleteSale fails (a database that went away).
type failingDelete struct {
	seckill.OrderStore
	fail bool
}

func (s *failingDelete) DeleteSale(ctx context.Context, id string) error {
	if s.fail {
		return errors.New("connection refused")
	}
	return s.OrderStore.DeleteSale(ctx, id)
}

// TestDeleteSaleAllOrNothing: a delete whose database step fails leaves the sale as it was, in
// the engine (open: it still sells) and in the store (its ends_at back), answers unavailable,
// and the same delete sent again succeeds; the id is then free in both.
func TestDeleteSaleAllOrNothing(t *testing.T) {
	ctx := t.Context()
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := seckilltest.NewManualClock(t0)
	real, err := sqlstore.Open(ctx, "sqlite://:memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	store := &failingDelete{OrderStore: real, fail: true}
	svc := service.New(service.Config{Inventory: memory.New(clock), Store: store, Clock: clock, AuthSecret: []byte("k")})
	price, stock := int64(100), 2
	created, err := svc.CreateSale(ctx, seckill.SaleInput{ID: "s", PriceCents: &price, Stock: &stock})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)

	if err := svc.DeleteSale(ctx, "s"); seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("DeleteSale with the database down = %v, want unavailable", err)
	}
	v, err := svc.Sale(ctx, "s")
	if err != nil || v.Status != seckill.SaleActive || !v.EndsAt.Equal(created.EndsAt) {
		t.Fatalf("after the failed delete: %+v, %v; want the sale active until %s", v, err, created.EndsAt)
	}
	stored, _, err := real.Sale(ctx, "s")
	if err != nil || !stored.EndsAt.Equal(created.EndsAt) {
		t.Fatalf("the store after the failed delete: %+v, %v; want ends_at %s", stored, err, created.EndsAt)
	}

	store.fail = false
	if err := svc.DeleteSale(ctx, "s"); err != nil {
		t.Fatalf("DeleteSale: %v", err)
	}
	if _, err := svc.Sale(ctx, "s"); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("Sale after the delete = %v, want not_found", err)
	}
	if _, _, err := real.Sale(ctx, "s"); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("the store after the delete = %v, want not_found", err)
	}
	if _, err := svc.CreateSale(ctx, seckill.SaleInput{ID: "s", PriceCents: &price, Stock: &stock}); err != nil {
		t.Fatalf("CreateSale of the deleted id: %v", err)
	}
	if _, err := svc.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: "u", Quantity: 1}); err != nil {
		t.Fatalf("Buy of the new sale: %v", err)
	}
	if err := svc.DeleteSale(ctx, "s"); seckill.ErrorCode(err) != seckill.CodeConflict {
		t.Fatalf("DeleteSale with a hold = %v, want conflict", err)
	}
	if v, err := svc.Sale(ctx, "s"); err != nil || v.Status != seckill.SaleActive {
		t.Fatalf("after the refused delete: %+v, %v; want active", v, err)
	}
}

// TestSetListedAndListedSales: the storefront's list leaves unlisted sales out; SetListed
// changes the engine and the store together.
func TestSetListedAndListedSales(t *testing.T) {
	ctx := t.Context()
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	store, err := sqlstore.Open(ctx, "sqlite://:memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc := service.New(service.Config{Inventory: memory.New(clock), Store: store, Clock: clock, AuthSecret: []byte("k")})
	price, stock, no := int64(100), 2, false
	for _, in := range []seckill.SaleInput{{ID: "a", PriceCents: &price, Stock: &stock}, {ID: "b", PriceCents: &price, Stock: &stock, Listed: &no}} {
		if _, err := svc.CreateSale(ctx, in); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	ids := func(f func(context.Context) ([]service.SaleView, error)) []string {
		vs, err := f(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, v := range vs {
			out = append(out, v.ID)
		}
		return out
	}
	if got := ids(svc.ListedSales); len(got) != 1 || got[0] != "a" {
		t.Fatalf("ListedSales = %v, want [a]", got)
	}
	if got := ids(svc.Sales); len(got) != 2 {
		t.Fatalf("Sales = %v, want [a b]", got)
	}
	if v, err := svc.SetListed(ctx, "a", false); err != nil || v.Listed {
		t.Fatalf("SetListed(a, false) = %+v, %v", v, err)
	}
	if v, err := svc.SetListed(ctx, "b", true); err != nil || !v.Listed {
		t.Fatalf("SetListed(b, true) = %+v, %v", v, err)
	}
	if got := ids(svc.ListedSales); len(got) != 1 || got[0] != "b" {
		t.Fatalf("ListedSales after the changes = %v, want [b]", got)
	}
	if s, _, err := store.Sale(ctx, "a"); err != nil || s.Listed {
		t.Fatalf("the store's a: listed %v, %v; want false", s.Listed, err)
	}
}

// rebuildingOnCreate is an engine on which the sale just created is being loaded by another
// call (a read that found it in the database first): its LoadSale answers conflict (the sale is
// there) and its reads answer unavailable a few times, as a rebuild in progress does.
type rebuildingOnCreate struct {
	seckill.Inventory
	busy int
}

func (e *rebuildingOnCreate) LoadSale(ctx context.Context, def seckill.Sale, sold int) error {
	if err := e.Inventory.LoadSale(ctx, def, sold); err != nil {
		return err
	}
	return seckill.Errorf(seckill.CodeConflict, "sale %q already loaded", def.ID)
}

func (e *rebuildingOnCreate) Sale(ctx context.Context, id string) (seckill.Sale, seckill.StockState, error) {
	if e.busy > 0 {
		e.busy--
		return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeUnavailable, "sale %q is being restored from the database; retry shortly", id)
	}
	return e.Inventory.Sale(ctx, id)
}

// TestCreateSaleWhileARebuildLoadsIt: a sale read by another call between its insert and its
// load is loaded by that call (a rebuild); the creation still answers the sale, not 503.
func TestCreateSaleWhileARebuildLoadsIt(t *testing.T) {
	ctx := t.Context()
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	store, err := sqlstore.Open(ctx, "sqlite://:memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	inv := &rebuildingOnCreate{Inventory: memory.New(clock), busy: 3}
	svc := service.New(service.Config{Inventory: inv, Store: store, Clock: clock, AuthSecret: []byte("k")})
	price, stock := int64(100), 2
	v, err := svc.CreateSale(ctx, seckill.SaleInput{ID: "r", PriceCents: &price, Stock: &stock})
	if err != nil || v.ID != "r" || inv.busy != 0 {
		t.Fatalf("CreateSale during the sale's rebuild: %+v, %v (reads left busy %d); want the sale", v, err, inv.busy)
	}
	if _, _, err := store.Sale(ctx, "r"); err != nil {
		t.Fatalf("the created sale is not in the store: %v", err)
	}
}
