package redisinv

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/seckilltest"
)

// TestSaleMadeAgain deletes a sale and creates another under its id (docs/MODEL.md "The state's
// version", the incarnation), with two instances: A loads, edits and deletes it and loads the
// new one; B only reads, so that its book holds the deleted sale's versions, above the new
// one's. The new sale must serve on both at once (no 503), with its segments as configured, no
// ERROR logged, and its streams must hold its own events only. The negative control gives both
// sales one incarnation (as before incarnations existed): B must then take the new sale for a
// Redis that went back in time (503 and an ERROR), or the detector cannot fail.
func TestSaleMadeAgain(t *testing.T) {
	deployments := []struct{ name, url string }{{"standalone", testenv.Redis(t)}, {"cluster", testenv.RedisCluster(t)}}
	for _, d := range deployments {
		for _, segs := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/%d segments", d.name, segs), func(t *testing.T) {
				if problems := madeAgain(t, d.url, segs, "one", "two"); len(problems) > 0 {
					t.Error(strings.Join(problems, "\n"))
				}
			})
		}
	}
	t.Run("negative control: one incarnation for both", func(t *testing.T) {
		problems := madeAgain(t, testenv.Redis(t), 4, "", "")
		if len(problems) == 0 {
			t.Fatal("the new sale under the old one's incarnation served without a 503 or an ERROR; the detector cannot fail")
		}
		t.Logf("negative control, detector: %v", problems)
	})
}

// madeAgain runs the scenario and returns what the detector found wrong.
func madeAgain(t *testing.T, url string, segs int, inc1, inc2 string) (problems []string) {
	ctx := t.Context()
	c := dialT(t, url)
	store := sqliteStoreT(t)
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	now := clock.Now()
	locks := lock.New(c.Locks, &lock.Options{Lease: time.Second})
	t.Cleanup(func() { _ = locks.Close() })
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	var logs testenv.Buffer
	newEngine := func() *Engine {
		e := New(c.Inventory, WithTestClock(clock), WithPrefix(prefix), WithRebuild(store, locks),
			WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	a, b := newEngine(), newEngine()
	const id = "again"
	def := func(inc string) seckill.Sale {
		s, err := seckill.NewSale(seckill.SaleInput{ID: id, PriceCents: ptr(int64(100)), Stock: ptr(40),
			StartsAt: &now, QueueLimit: ptr(10), Listed: ptr(false), Segments: ptr(segs)}, now)
		if err != nil {
			t.Fatal(err)
		}
		s.Incarnation = inc
		return s
	}
	create := func(s seckill.Sale) {
		t.Helper()
		if err := store.CreateSale(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := a.LoadSale(ctx, s, 0); err != nil {
			t.Fatal(err)
		}
	}
	create(def(inc1))
	// The first sale's versions rise (each edit is one), and B sees every one of them.
	for range 5 {
		if _, _, err := a.AddStock(ctx, id, 1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Sale(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Deleted as service.Service.DeleteSale does it, then made again.
	if _, err := a.CloseUnreserved(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Sale(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteSale(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := a.DropSale(ctx, id); err != nil {
		t.Fatal(err)
	}
	create(def(inc2))

	var resIDs []string
	for i, e := range []*Engine{b, a, b} {
		s, st, err := e.Sale(ctx, id)
		if err != nil {
			problems = append(problems, fmt.Sprintf("read %d of the new sale: %v", i, err))
			continue
		}
		if s.SegmentCount() != segs || st.Sellable != 40 || st.Available != 40-i || st.Held != i {
			problems = append(problems, fmt.Sprintf("read %d of the new sale: %d segments, %+v; want %d, 40 sellable, %d held", i, s.SegmentCount(), st, segs, i))
		}
		r, err := e.Buy(ctx, seckill.BuyRequest{SaleID: id, UserID: fmt.Sprintf("u%d", i), Quantity: 1})
		if err != nil {
			problems = append(problems, fmt.Sprintf("buy %d in the new sale: %v", i, err))
			continue
		}
		resIDs = append(resIDs, r.Reservation.ID)
	}
	if l := logs.String(); strings.Contains(l, "level=ERROR") {
		problems = append(problems, "ERROR logged:\n"+l)
	}
	// The streams hold the new sale's events only: one per buy.
	var got []string
	for i, tag := range a.streamTags(id, segs) {
		entries, err := c.Inventory.Do(ctx, c.Inventory.B().Xrange().Key(a.streamKey(tag)).Start("-").End("+").Build()).AsXRangeSlices()
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range entries {
			for _, fv := range en.FieldValues {
				ev, err := segmentEvent(id, i, fv.Field, fv.Value)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.Reservation.ID)
			}
		}
	}
	if !sameSet(got, resIDs) {
		problems = append(problems, fmt.Sprintf("the streams hold events of %v; want the new sale's %v", got, resIDs))
	}
	return problems
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	n := map[string]int{}
	for _, s := range a {
		n[s]++
	}
	for _, s := range b {
		n[s]--
	}
	for _, v := range n {
		if v != 0 {
			return false
		}
	}
	return true
}

// TestSaleMadeAgainOverLeftKeys: the delete's last step (the engine's drop) failed, so the
// deleted sale's closed copy is still in Redis when a sale is created again under its id. The
// new sale must load over it and sell (open, its own stock), with 1 and 4 segments. The negative
// control gives both one incarnation: the load is then a conflict and the closed copy stays,
// which the detector must report.
func TestSaleMadeAgainOverLeftKeys(t *testing.T) {
	url := testenv.Redis(t)
	for _, tc := range []struct {
		name       string
		segs       int
		inc1, inc2 string
	}{{"1 segment", 1, "one", "two"}, {"4 segments", 4, "one", "two"}, {"negative control: one incarnation", 4, "", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			problems := overLeftKeys(t, url, tc.segs, tc.inc1, tc.inc2)
			if tc.inc1 == tc.inc2 {
				if len(problems) == 0 {
					t.Fatal("negative control: the new sale loaded over the deleted one's keys without incarnations; the detector cannot fail")
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

func overLeftKeys(t *testing.T, url string, segs int, inc1, inc2 string) (problems []string) {
	ctx := t.Context()
	c := dialT(t, url)
	store := sqliteStoreT(t)
	now := time.Now()
	locks := lock.New(c.Locks, &lock.Options{Lease: time.Second})
	t.Cleanup(func() { _ = locks.Close() })
	e := newTestEngine(t, c.Inventory, seckilltest.NewManualClock(now), WithRebuild(store, locks))
	const id = "left"
	def := func(inc string, stock int) seckill.Sale {
		s, err := seckill.NewSale(seckill.SaleInput{ID: id, PriceCents: ptr(int64(100)), Stock: ptr(stock),
			StartsAt: &now, Listed: ptr(false), Segments: ptr(segs)}, now)
		if err != nil {
			t.Fatal(err)
		}
		s.Incarnation = inc
		return s
	}
	first := def(inc1, 10)
	if err := store.CreateSale(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSale(ctx, first, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CloseUnreserved(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteSale(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The drop fails here: the closed copy stays.
	second := def(inc2, 30)
	if err := store.CreateSale(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSale(ctx, second, 0); err != nil {
		problems = append(problems, fmt.Sprintf("load of the new sale: %v", err))
	}
	if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: id, UserID: "u", Quantity: 1}); err != nil {
		problems = append(problems, fmt.Sprintf("buy in the new sale: %v", err))
	}
	if s, st, err := e.Sale(ctx, id); err != nil || st.Sellable != 30 || s.SegmentCount() != segs {
		problems = append(problems, fmt.Sprintf("the new sale reads %+v %+v %v; want 30 sellable in %d segments", s, st, err, segs))
	}
	return problems
}
