//go:build buywalk

package redisinv

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// TestBuyWalk makes one Buy of a plain sale and one of a 4-segment sale, each between two marks
// (buyWalkStart, buyWalkEnd), on an engine wired as `seckill serve` wires it (rebuild, local
// answers). It checks nothing: it is what `redisinv/testdata/buywalk` traces with Delve to count
// the files and types one Buy walks through (docs/DECISIONS.md "The house: the Redis engine's
// rooms").
func TestBuyWalk(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	w, err := c.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	prefix := testPrefix()
	e := New(c.Inventory, WithPrefix(prefix), WithTimeout(time.Minute), WithRebuild(sqliteStoreT(t), nil), WithLocalAnswers(w))
	defer func() { _ = e.Close(); dropPrefix(t, c.Inventory, prefix) }()
	ctx := context.Background()
	now := time.Now().UTC()
	for _, n := range []int{1, 4} {
		id := "walk" + itoa(n)
		def, err := seckill.NewSale(seckill.SaleInput{ID: id, PriceCents: ptr(int64(100)), Stock: ptr(1000),
			HoldSeconds: ptr(3600), PerUserLimit: ptr(1), StartsAt: &now}, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.LoadSaleSegments(ctx, def, 0, n); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"warm", "walker"} {
			if u == "walker" {
				buyWalkStart(n)
			}
			if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: id, UserID: u, Quantity: 1}); err != nil {
				t.Fatal(err)
			}
			if u == "walker" {
				buyWalkEnd(n)
			}
		}
	}
}

//go:noinline
func buyWalkStart(segments int) { _ = segments }

//go:noinline
func buyWalkEnd(segments int) { _ = segments }
