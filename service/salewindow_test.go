package service_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
)

// windowed is an inventory with SaleWindow (the definition from Sale, its counts dropped) that
// counts which of the two reads it was asked.
type windowed struct {
	seckill.Inventory
	windows, sales atomic.Int64
}

func (w *windowed) SaleWindow(ctx context.Context, id string) (seckill.Sale, error) {
	w.windows.Add(1)
	s, _, err := w.Inventory.Sale(ctx, id)
	return s, err
}

func (w *windowed) Sale(ctx context.Context, id string) (seckill.Sale, seckill.StockState, error) {
	w.sales.Add(1)
	return w.Inventory.Sale(ctx, id)
}

// TestPurchasePathUsesSaleWindow: Service.PurchasePath reads the sale through SaleWindow when
// the service is given one (Config.Windows), and never through Sale; without it (the model
// alone) it answers the same: the same path, not_started before the start, ended after the end, not_found.
func TestPurchasePathUsesSaleWindow(t *testing.T) {
	ctx := t.Context()
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := seckilltest.NewManualClock(start.Add(-time.Minute))
	price, stock := int64(1), 5
	sale, err := seckill.NewSale(seckill.SaleInput{ID: "s1", PriceCents: &price, Stock: &stock, StartsAt: &start}, start)
	if err != nil {
		t.Fatal(err)
	}
	m := seckilltest.NewModel(clock)
	if err := m.LoadSale(ctx, sale, 0); err != nil {
		t.Fatal(err)
	}
	w := &windowed{Inventory: m}
	with := service.New(service.Config{Inventory: w, Windows: w, Clock: clock, AuthSecret: []byte("k")})
	without := service.New(service.Config{Inventory: m, Clock: clock, AuthSecret: []byte("k")})
	for _, c := range []struct {
		at   time.Time
		sale string
		want seckill.Code
	}{{start.Add(-time.Minute), "s1", seckill.CodeNotStarted}, {start, "s1", ""},
		{sale.EndsAt, "s1", seckill.CodeEnded}, {start, "nosuch", seckill.CodeNotFound}} {
		clock.Set(c.at)
		p, err := with.PurchasePath(ctx, c.sale, "alice")
		q, qerr := without.PurchasePath(ctx, c.sale, "alice")
		if seckill.ErrorCode(err) != c.want || seckill.ErrorCode(qerr) != c.want || p != q {
			t.Fatalf("%s at %v: %+v, %v through SaleWindow; %+v, %v through Sale; want code %q from both",
				c.sale, c.at, p, err, q, qerr, c.want)
		}
	}
	if w.windows.Load() != 4 || w.sales.Load() != 0 {
		t.Fatalf("PurchasePath read SaleWindow %d times and Sale %d times; want 4 and 0", w.windows.Load(), w.sales.Load())
	}
}
