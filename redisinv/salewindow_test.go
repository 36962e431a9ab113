package redisinv

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
)

// sameWindow fails the test unless SaleWindow answers as Sale does on e: the same definition
// (or the same error code), and the same WindowError at the clock's now, whose code is want.
func sameWindow(t *testing.T, e *Engine, id string, now time.Time, want seckill.Code, when string) {
	t.Helper()
	got, gerr := e.SaleWindow(t.Context(), id) // first: on a fresh engine it learns the segments
	def, _, serr := e.Sale(t.Context(), id)
	if seckill.ErrorCode(gerr) != seckill.ErrorCode(serr) {
		t.Fatalf("%s: SaleWindow error %v, Sale error %v", when, gerr, serr)
	}
	if !reflect.DeepEqual(got, def) {
		t.Fatalf("%s: SaleWindow = %+v\nSale       = %+v", when, got, def)
	}
	if serr != nil {
		return
	}
	gw, sw := got.WindowError(now), def.WindowError(now)
	if seckill.ErrorCode(gw) != seckill.ErrorCode(sw) || seckill.ErrorCode(gw) != want {
		t.Fatalf("%s: WindowError %v from SaleWindow, %v from Sale; want code %q", when, gw, sw, want)
	}
}

// TestSegmentsSaleWindow: on a 4-segment sale SaleWindow (segment 0 only) answers the same
// definition and window as Sale (every segment) before the start, during the sale (units lent
// between segments), after a close and after ends_at; on this engine and on a fresh one that
// does not know the sale is segmented; and the same errors for unknown and invalid ids.
func TestSegmentsSaleWindow(t *testing.T) {
	for _, end := range []string{"close", "ends_at"} {
		t.Run(end, func(t *testing.T) {
			r := newSegRig(t, testenv.Redis(t), 4, 40, 1, 10)
			fresh := New(r.e.rdb, WithTestClock(r.clock), WithPrefix(r.e.prefix))
			t.Cleanup(func() { _ = fresh.Close() })
			check := func(want seckill.Code, when string) {
				t.Helper()
				for _, e := range []*Engine{fresh, r.e} {
					sameWindow(t, e, r.sale.ID, r.clock.Now(), want, when)
				}
			}
			r.clock.Set(segEpoch.Add(-time.Minute))
			check(seckill.CodeNotStarted, "before the start")
			if fresh.segs.of(r.sale.ID) == nil {
				t.Fatal("the fresh engine's SaleWindow did not learn the sale's segments")
			}
			r.clock.Set(segEpoch.Add(time.Minute))
			for _, u := range r.usersOf(1, 15, "w") { // more than segment 1's 10: it borrows
				if _, err := r.buy(u); err != nil {
					t.Fatal(err)
				}
			}
			check("", "during the sale")
			if end == "close" {
				if _, _, err := r.e.CloseSale(t.Context(), r.sale.ID); err != nil {
					t.Fatal(err)
				}
			} else {
				r.clock.Set(r.sale.EndsAt)
			}
			check(seckill.CodeEnded, "after the "+end)
			for _, id := range []string{"nosuch", "bad id"} {
				sameWindow(t, r.e, id, r.clock.Now(), "", id)
			}
		})
	}
}

// TestSegmentsSaleWindowRebuilt: a segmented sale whose segment 0 is lost answers SaleWindow
// with Sale's error while the database cannot be read to restore it (unavailable), and the
// same rebuilt (one-segment) sale once it can; a sale the database does not know either is
// not_found from both.
func TestSegmentsSaleWindowRebuilt(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	locks := lock.New(c.Locks, &lock.Options{Lease: time.Second})
	t.Cleanup(func() { _ = locks.Close() })
	clock := seckilltest.NewManualClock(segEpoch.Add(time.Minute))
	def, err := seckill.NewSale(seckill.SaleInput{ID: "segrb", PriceCents: ptr(int64(100)), Stock: ptr(40),
		HoldSeconds: ptr(60), StartsAt: ptr(segEpoch), EndsAt: ptr(segEpoch.Add(time.Hour))}, segEpoch)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{sale: def}
	e := newTestEngine(t, c.Inventory, clock, WithRebuild(src, locks))
	if err := e.LoadSaleSegments(t.Context(), def, 0, 4); err != nil {
		t.Fatal(err)
	}
	sameWindow(t, e, def.ID, clock.Now(), "", "split")
	sameWindow(t, e, "nosuch", clock.Now(), "", "a sale nobody knows")
	src.mu.Lock()
	src.err = errors.New("database down")
	src.mu.Unlock()
	if err := c.Inventory.Do(t.Context(), c.Inventory.B().Del().Key(e.keys(def.ID)...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	_, gerr := e.SaleWindow(t.Context(), def.ID)
	_, _, serr := e.Sale(t.Context(), def.ID)
	if seckill.ErrorCode(gerr) != seckill.CodeUnavailable || seckill.ErrorCode(serr) != seckill.CodeUnavailable {
		t.Fatalf("segment 0 lost, the database down: SaleWindow %v, Sale %v; want unavailable from both", gerr, serr)
	}
	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	waitReady(t, e, def.ID)
	sameWindow(t, e, def.ID, clock.Now(), "", "rebuilt")
}

// scriptCalls is the number of script calls (EVALSHA, EVAL and their _RO forms) the server
// has run, from INFO commandstats.
func scriptCalls(t *testing.T, rdb rueidis.Client) int64 {
	t.Helper()
	s := redistest.CommandStats(t, rdb)
	return s["evalsha"] + s["evalsha_ro"] + s["eval"] + s["eval_ro"]
}

// TestPurchasePathScriptCalls counts, on a private Redis that nothing else uses, the script
// calls of Service.PurchasePath on a 6-segment sale: 1 per path (segment 0's sale.lua), where
// the same path through Sale (the negative control) costs 12 (sale.lua and segment.lua
// 'counts' on each segment); and 1 on a one-segment sale either way.
func TestPurchasePathScriptCalls(t *testing.T) {
	p := redistest.StartMaster(t)
	c := dialT(t, "redis://"+p.Addr())
	clock := seckilltest.NewManualClock(segEpoch.Add(time.Minute))
	e := newTestEngine(t, c.Inventory, clock)
	for id, n := range map[string]int{"six": 6, "one": 1} {
		def, err := seckill.NewSale(seckill.SaleInput{ID: id, PriceCents: ptr(int64(100)), Stock: ptr(60),
			HoldSeconds: ptr(60), StartsAt: ptr(segEpoch), EndsAt: ptr(segEpoch.Add(time.Hour))}, segEpoch)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.LoadSaleSegments(t.Context(), def, 0, n); err != nil {
			t.Fatal(err)
		}
	}
	services := map[string]*service.Service{
		"SaleWindow": service.New(service.Config{Inventory: e, Windows: e, Clock: clock, AuthSecret: []byte("s")}),
		"Sale":       service.New(service.Config{Inventory: e, Clock: clock, AuthSecret: []byte("s")}),
	}
	paths := func(svc *service.Service, sale string, n int) {
		t.Helper()
		for i := range n {
			if _, err := svc.PurchasePath(t.Context(), sale, "u"+itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, svc := range services { // every script loaded (a first EVALSHA may be NOSCRIPT, then EVAL)
		paths(svc, "six", 1)
		paths(svc, "one", 1)
	}
	const n = 10
	for _, tc := range []struct {
		via, sale string
		want      int64
	}{{"SaleWindow", "six", 1}, {"Sale", "six", 12}, {"SaleWindow", "one", 1}, {"Sale", "one", 1}} {
		before := scriptCalls(t, c.Inventory)
		paths(services[tc.via], tc.sale, n)
		if got := scriptCalls(t, c.Inventory) - before; got != tc.want*n {
			t.Errorf("%d purchase paths of sale %q through %s cost %d script calls; want %d per path", n, tc.sale, tc.via, got, tc.want)
		}
	}
}

// TestSaleWindowLocal: with local answers, the purchase path is answered from the instance's
// copy of the sale's definition (segment 0's, for a segmented sale): n paths cost at most one
// script call per localWindowAge they took, plus the exact view's refreshes, where the engine without local answers
// (the negative control) costs one per path; the instance's own close is seen at once, another
// instance's within localWindowAge. For a one-segment sale while it sells (the exact view
// invalidated by every buy, as in a rush) and for a segmented one.
func TestSaleWindowLocal(t *testing.T) {
	for name, segments := range map[string]int{"one segment": 1, "six segments": 6} {
		t.Run(name, func(t *testing.T) { saleWindowLocal(t, segments) })
	}
}

func saleWindowLocal(t *testing.T, segments int) {
	p := redistest.StartMaster(t)
	c := dialT(t, "redis://"+p.Addr())
	w := watcherT(t, c)
	clock := seckilltest.NewManualClock(segEpoch.Add(time.Minute))
	a := newTestEngine(t, c.Inventory, clock, WithLocalAnswers(w))
	b := New(c.Inventory, WithTestClock(clock), WithPrefix(a.prefix), WithLocalAnswers(w))
	plain := New(c.Inventory, WithTestClock(clock), WithPrefix(a.prefix))
	t.Cleanup(func() { _ = b.Close(); _ = plain.Close() })
	def, err := seckill.NewSale(seckill.SaleInput{ID: "win", PriceCents: ptr(int64(100)), Stock: ptr(600),
		HoldSeconds: ptr(60), PerUserLimit: ptr(1000), StartsAt: ptr(segEpoch), EndsAt: ptr(segEpoch.Add(time.Hour))}, segEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.LoadSaleSegments(t.Context(), def, 0, segments); err != nil {
		t.Fatal(err)
	}
	window := func(e *Engine) seckill.Code {
		t.Helper()
		s, err := e.SaleWindow(t.Context(), def.ID)
		if err != nil {
			t.Fatal(err)
		}
		return seckill.ErrorCode(s.WindowError(clock.Now()))
	}
	buy := func() { // through the plain engine: the sale changes, and a's view with it
		if _, err := plain.Buy(t.Context(), seckill.BuyRequest{SaleID: def.ID, UserID: "buyer", Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 50
	for name, e := range map[string]*Engine{"local answers": a, "without (negative control)": plain} {
		window(e) // it learns the segments, and the scripts are loaded
		var took time.Duration
		var calls int64
		for range n {
			buy()
			start, before := time.Now(), scriptCalls(t, c.Inventory)
			if code := window(e); code != "" {
				t.Fatalf("%s: window %q during the sale", name, code)
			}
			took += time.Since(start)
			calls += scriptCalls(t, c.Inventory) - before
		}
		// The copy's reads, and the exact view's refreshes (started by the buys' changes, at
		// most one per localRefreshGap) when one lands while a path is measured.
		bound := int64(took/localWindowAge) + int64(took/localRefreshGap) + 2
		t.Logf("%s: %d paths, %d script calls", name, n, calls)
		if e == a && calls > bound {
			t.Fatalf("%d paths with local answers cost %d script calls; want at most %d", n, calls, bound)
		}
		if e == plain && calls < n { // the other engine's view refresh may run meanwhile
			t.Fatalf("negative control: %d paths without local answers cost %d script calls; want %d or more", n, calls, n)
		}
	}
	window(b)
	if _, _, err := a.CloseSale(t.Context(), def.ID); err != nil {
		t.Fatal(err)
	}
	if code := window(a); code != seckill.CodeEnded {
		t.Fatalf("the closing instance's window right after its close: %q, want ended", code)
	}
	t.Logf("the other instance right after the close: %q (its copy may be up to %s old)", window(b), localWindowAge)
	time.Sleep(localWindowAge + 10*time.Millisecond)
	if code := window(b); code != seckill.CodeEnded {
		t.Fatalf("the other instance's window %s after the close: %q, want ended", localWindowAge, code)
	}
}
