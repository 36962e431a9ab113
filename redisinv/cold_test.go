package redisinv

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// coldRig is one instance as cmd/seckill wires it with Redis: the engine with its rebuild, the
// service loading sales on demand, and the orders consumer over the hot (and noted) sales.
type coldRig struct {
	c     *Clients
	e     *Engine
	svc   *service.Service
	store *sqlstore.Store
	clock *seckilltest.ManualClock
	locks *lock.Client
	logs  *testenv.Buffer
}

var coldT0 = time.Date(2031, 3, 1, 10, 0, 0, 0, time.UTC)

func newColdRig(t *testing.T, url string) *coldRig {
	r := &coldRig{c: dialT(t, url), store: sqliteStoreT(t), clock: seckilltest.NewManualClock(coldT0), logs: &testenv.Buffer{}}
	r.locks = lock.New(r.c.Locks, &lock.Options{Lease: time.Second})
	t.Cleanup(func() { _ = r.locks.Close() })
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, r.c.Inventory, prefix) })
	r.e = New(r.c.Inventory, WithTestClock(r.clock), WithPrefix(prefix), WithRebuild(r.store, r.locks),
		WithLogger(slog.New(slog.NewTextHandler(r.logs, nil))))
	t.Cleanup(func() { _ = r.e.Close() })
	r.svc = service.New(service.Config{Inventory: r.e, Store: r.store, Windows: r.e, LoadOnDemand: true,
		Clock: r.clock, AuthSecret: []byte("cold")})
	cons := r.e.NewConsumer(r.store, ConsumerConfig{List: r.svc.LiveSaleIDs, CheckEvery: 100 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = cons.Run(ctx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	return r
}

// keysLeft counts the sale's eight keys that exist in Redis.
func (r *coldRig) keysLeft(t *testing.T, id string) int64 {
	t.Helper()
	n := int64(0)
	for _, k := range r.e.keys(id) { // one by one: a Cluster refuses a multi-key EXISTS across slots
		v, err := r.c.Inventory.Do(t.Context(), r.c.Inventory.B().Exists().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n
}

// coolNow cools the sale, trying until its stream is read: the consumer acknowledges entries
// once it has stored them, so a sale cooled has every event in the order store.
func (r *coldRig) coolNow(t *testing.T, id string) {
	t.Helper()
	var out coolOutcome
	redistest.WaitUntil(t, 10*time.Second, "sale "+id+" cooled", func() bool {
		var err error
		out, _, err = r.e.cool(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return out == coolDone
	})
	if n := r.keysLeft(t, id); n != 0 {
		t.Fatalf("sale %s cooled, and %d of its keys are still in Redis", id, n)
	}
}

// saleDay is one sale's day, the same for every sale it is run on: a buyer pays, one lets the
// hold expire, one cancels; the sale ends. It returns the three reservations' ids.
func (r *coldRig) saleDay(t *testing.T, id string, extraPaid bool) []string {
	t.Helper()
	ctx := t.Context()
	starts, ends := coldT0, coldT0.Add(10*time.Minute)
	if _, err := r.svc.CreateSale(ctx, seckill.SaleInput{ID: id, PriceCents: ptr(int64(500)), Stock: ptr(3),
		StartsAt: &starts, EndsAt: &ends, HoldSeconds: ptr(60), Listed: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range []string{"ann", "bob", "cat"} {
		res, err := r.svc.Buy(ctx, seckill.BuyRequest{SaleID: id, UserID: u, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Reservation.ID)
	}
	r.pay(t, id, ids[0], "pay-ann-"+id, seckill.PaymentApplied)
	if extraPaid {
		r.pay(t, id, ids[1], "pay-bob-"+id, seckill.PaymentApplied)
	}
	if _, err := r.svc.Cancel(ctx, ids[2], "cat"); err != nil {
		t.Fatal(err)
	}
	return ids
}

func (r *coldRig) pay(t *testing.T, saleID, resID, paymentID string, want seckill.PaymentResult) {
	t.Helper()
	got, err := r.svc.ApplyPayment(t.Context(), seckill.PaymentConfirmation{PaymentID: paymentID, ReservationID: resID, AmountCents: 500}, true)
	if err != nil || got != want {
		t.Fatalf("payment %s of %s: %v, %v; want %s", paymentID, resID, got, err, want)
	}
}

// observed is what a buyer and the shop can see of a sale: its view and its reservations.
type observed struct {
	view service.SaleView
	res  []seckill.Reservation
}

func (r *coldRig) observe(t *testing.T, id string, resIDs []string) observed {
	t.Helper()
	v, err := r.svc.Sale(t.Context(), id)
	if err != nil {
		t.Fatalf("Sale(%s): %v", id, err)
	}
	o := observed{view: v}
	for _, rid := range resIDs {
		res, err := r.e.Reservation(t.Context(), rid)
		if err != nil {
			t.Fatalf("Reservation(%s): %v", rid, err)
		}
		o.res = append(o.res, res)
	}
	return o
}

// coldDiff is the detector: what differs between two sales' observations, ids and the payment
// ids (which name the sale) aside.
func coldDiff(a, b observed) []string {
	var out []string
	av, bv := a.view, b.view
	if av.StockState != bv.StockState || av.Status != bv.Status {
		out = append(out, fmt.Sprintf("view: %s %+v vs %s %+v", av.Status, av.StockState, bv.Status, bv.StockState))
	}
	ad, bd := av.Sale, bv.Sale
	ad.ID, ad.Name, ad.Incarnation, bd.ID, bd.Name, bd.Incarnation = "", "", "", "", "", ""
	if ad != bd {
		out = append(out, fmt.Sprintf("definition: %+v vs %+v", ad, bd))
	}
	for i := range a.res {
		x, y := a.res[i], b.res[i]
		if x.Status != y.Status || x.UserID != y.UserID || x.Quantity != y.Quantity || x.AmountCents != y.AmountCents ||
			(x.PaymentID == "") != (y.PaymentID == "") {
			out = append(out, fmt.Sprintf("reservation %d: %s %s ×%d %d¢ paid by %q vs %s %s ×%d %d¢ paid by %q", i,
				x.Status, x.UserID, x.Quantity, x.AmountCents, x.PaymentID, y.Status, y.UserID, y.Quantity, y.AmountCents, y.PaymentID))
		}
	}
	return out
}

// TestSaleCoolsAndComesBack: a sale that has left its hot window and settled is cooled (its keys
// leave Redis), and everything anyone can see or do with it afterwards is what they would
// with a twin sale that stayed in Redis (docs/MODEL.md "Hot and cold sales"): its page and its
// reservations (answered from the database without loading it), a late payment (which loads it
// again, with nothing logged as a loss), a duplicate payment; once that change's events are
// stored, it cools again. The negative control runs the detector on a twin whose day differed
// by one payment: it must see the difference.
func TestSaleCoolsAndComesBack(t *testing.T) {
	deployments := []struct{ name, url string }{{"standalone", testenv.Redis(t)}, {"cluster", testenv.RedisCluster(t)}}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			r := newColdRig(t, d.url)
			cold, twin := r.saleDay(t, "cools", false), r.saleDay(t, "stays", false)
			other := r.saleDay(t, "differs", true)
			r.clock.Set(coldT0.Add(10*time.Minute + time.Second)) // ended; bob's hold expired long ago
			for _, id := range []string{"cools", "stays", "differs"} {
				if _, err := r.e.Reclaim(t.Context(), id); err != nil {
					t.Fatal(err)
				}
			}
			r.clock.Set(coldT0.Add(10*time.Minute + time.Minute + seckill.CoolMargin - time.Second))
			if out, _, err := r.e.cool(t.Context(), "cools"); err != nil || out != coolWait {
				t.Fatalf("cool a second before the end of the hot window: %v, %v; want wait", out, err)
			}
			r.clock.Set(coldT0.Add(10*time.Minute + time.Minute + seckill.CoolMargin + time.Second)) // past HotUntil
			r.coolNow(t, "cools")

			check := func(step string) {
				t.Helper()
				if diff := coldDiff(r.observe(t, "cools", cold), r.observe(t, "stays", twin)); len(diff) > 0 {
					t.Errorf("%s: the cooled sale and its twin differ:\n%s", step, strings.Join(diff, "\n"))
				}
			}
			check("cold")
			if n := r.keysLeft(t, "cools"); n != 0 {
				t.Fatalf("reading the cold sale loaded %d of its keys; reads are answered from the database", n)
			}
			if st := r.e.ColdStats(); st.Entries == 0 || st.Fills == 0 {
				t.Errorf("cold stats %+v: the reads went to no cold cache", st)
			}
			// A buy: ended on both, and the cold sale is not loaded for it.
			for _, id := range []string{"cools", "stays"} {
				if _, err := r.svc.Buy(t.Context(), seckill.BuyRequest{SaleID: id, UserID: "dan", Quantity: 1}); seckill.ErrorCode(err) != seckill.CodeEnded {
					t.Errorf("a buy in %s after its end: %v; want ended", id, err)
				}
			}
			if n := r.keysLeft(t, "cools"); n != 0 {
				t.Fatalf("a buy in the cold sale loaded %d of its keys; the window refuses it without them", n)
			}
			// A late payment of bob's expired hold: refused after the end on both.
			r.pay(t, "cools", cold[1], "late-cools", seckill.PaymentRefundRequired)
			r.pay(t, "stays", twin[1], "late-stays", seckill.PaymentRefundRequired)
			r.pay(t, "cools", cold[0], "pay-ann-cools", seckill.PaymentDuplicate)
			r.pay(t, "stays", twin[0], "pay-ann-stays", seckill.PaymentDuplicate)
			check("after a late and a duplicate payment")
			r.coolNow(t, "cools") // once its stream is read, through notedSales: it cools again
			check("cooled again")

			if n := strings.Count(r.logs.String(), "rebuilt from the database"); n != 0 {
				t.Errorf("%d loss(es) logged; a cold sale loaded again lost nothing:\n%s", n, r.logs.String())
			}
			if st := r.e.ColdStats(); st.Cooled < 2 || st.Loaded < 1 {
				t.Errorf("cold stats %+v: want at least 2 cooled and 1 loaded", st)
			}

			t.Run("negative control: a twin whose day differed", func(t *testing.T) {
				diff := coldDiff(r.observe(t, "cools", cold), r.observe(t, "differs", other))
				if len(diff) == 0 {
					t.Fatal("the detector saw no difference with a sale that sold one more unit; it cannot fail")
				}
				t.Logf("detector: %v", diff)
			})
		})
	}
}

// TestColdSalePreheated: a sale created an hour before its start has no keys in Redis; its page
// is answered from the database, and the background does not list it; once its preheat time
// comes, the sweeper's reconcile loads it (nothing logged as a loss), a segmented one in its
// segments. The negative control is
// the same sweeper before the preheat time: the sale must stay cold there.
func TestColdSalePreheated(t *testing.T) {
	for _, d := range []struct{ name, url string }{{"standalone", testenv.Redis(t)}, {"cluster", testenv.RedisCluster(t)}} {
		t.Run(d.name, func(t *testing.T) { coldSalePreheated(t, d.url) })
	}
}

func coldSalePreheated(t *testing.T, url string) {
	r := newColdRig(t, url)
	ctx := t.Context()
	starts := coldT0.Add(time.Hour)
	v, err := r.svc.CreateSale(ctx, seckill.SaleInput{ID: "later", PriceCents: ptr(int64(500)), Stock: ptr(5), StartsAt: &starts, Listed: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != seckill.SaleUpcoming || v.StockState.Available != 5 || v.PreheatSeconds != seckill.DefaultPreheatSeconds {
		t.Fatalf("created: %s %+v preheat %d; want upcoming, 5 available, preheat %d", v.Status, v.StockState, v.PreheatSeconds, seckill.DefaultPreheatSeconds)
	}
	if _, err := r.svc.CreateSale(ctx, seckill.SaleInput{ID: "later4", PriceCents: ptr(int64(500)), Stock: ptr(40), StartsAt: &starts,
		Listed: ptr(false), Segments: ptr(4)}); err != nil {
		t.Fatal(err)
	}
	if n := r.keysLeft(t, "later"); n != 0 {
		t.Fatalf("a sale an hour before its start has %d keys in Redis; want none until its preheat", n)
	}
	if ids, err := r.svc.LiveSaleIDs(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("LiveSaleIDs = %v, %v; want none", ids, err)
	}

	sw := r.e.Sweeper(10*time.Millisecond, r.svc.LiveSaleIDs, r.locks).(*sweeper)
	sw.reconcileEvery = 20 * time.Millisecond
	reconciled := make(chan struct{}, 1)
	sw.passed = func(rec bool) {
		if rec {
			select {
			case reconciled <- struct{}{}:
			default:
			}
		}
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = sw.Run(sctx) })
	defer func() { stop(); wg.Wait() }()
	// passes waits for n reconciling passes; the deadline is for a sweeper that stopped, not
	// a slow one (a busy machine has made a pass take seconds).
	passes := func(t *testing.T, n int) {
		t.Helper()
		for range n {
			select {
			case <-reconciled:
			case <-time.After(time.Minute):
				t.Fatal("the sweeper did not reconcile within a minute")
			}
		}
	}

	t.Run("negative control: before the preheat", func(t *testing.T) {
		r.clock.Set(starts.Add(-seckill.DefaultPreheatSeconds*time.Second - time.Second))
		passes(t, 3)
		if n := r.keysLeft(t, "later"); n != 0 {
			t.Fatalf("a second before its preheat the sale has %d keys; the detector below could not fail", n)
		}
	})
	r.clock.Set(starts.Add(-seckill.DefaultPreheatSeconds * time.Second))
	redistest.WaitUntil(t, 10*time.Second, "the sales preheated", func() bool {
		// Loaded counts a load once it has finished (its keys appear when it starts).
		return r.e.ColdStats().Loaded >= 2 && r.keysLeft(t, "later") > 0 && r.keysLeft(t, "later4") > 0
	})
	if st := r.e.ColdStats(); st.Loaded != 2 {
		t.Errorf("cold stats %+v: want 2 loaded", st)
	}
	if v, err := r.svc.Sale(ctx, "later4"); err != nil || v.Segments != 4 || v.StockState.Available != 40 {
		t.Errorf("the segmented sale preheated: %d segments %+v, %v; want 4 segments, 40 available", v.Segments, v.StockState, err)
	}
	if strings.Contains(r.logs.String(), "rebuilt from the database") {
		t.Errorf("a preheat was logged as a loss:\n%s", r.logs.String())
	}
	v, err = r.svc.Sale(ctx, "later")
	if err != nil || v.Status != seckill.SaleUpcoming || v.StockState.Available != 5 {
		t.Fatalf("preheated: %s %+v, %v; want upcoming, 5 available", v.Status, v.StockState, err)
	}
}

// TestLeftoverKeysCooled: a sale that left its hot window while no instance that knew it was
// alive (every instance restarted) keeps its keys; the next instance to reconcile looks for
// such leftovers once (one EXISTS per sale outside the window) and cools them. The negative
// control is the same sweeper without the list of every sale: the keys stay.
func TestLeftoverKeysCooled(t *testing.T) {
	for _, look := range []bool{true, false} {
		t.Run(fmt.Sprintf("look=%v", look), func(t *testing.T) {
			r := newColdRig(t, testenv.Redis(t))
			ctx := t.Context()
			r.saleDay(t, "left", false)
			r.clock.Set(coldT0.Add(10*time.Minute + time.Second))
			if _, err := r.e.Reclaim(ctx, "left"); err != nil {
				t.Fatal(err)
			}
			// Every entry read: a cool would succeed now, but no instance alive knows the sale.
			redistest.WaitUntil(t, 10*time.Second, "the stream read", func() bool {
				return streamRead(t, r, "left")
			})
			r.clock.Set(coldT0.Add(10*time.Minute + time.Minute + seckill.CoolMargin + time.Second))

			// A new instance: its own engine (no sale touched), its sweeper reconciling.
			fresh := New(r.c.Inventory, WithTestClock(r.clock), WithPrefix(r.e.prefix), WithRebuild(r.store, r.locks))
			t.Cleanup(func() { _ = fresh.Close() })
			sw := fresh.Sweeper(10*time.Millisecond, r.svc.LiveSaleIDs, nil).(*sweeper)
			sw.reconcileEvery = 20 * time.Millisecond
			if look {
				sw.all = r.svc.SaleIDs
			}
			passes := make(chan struct{}, 64)
			sw.passed = func(bool) {
				select {
				case passes <- struct{}{}:
				default:
				}
			}
			sctx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { _ = sw.Run(sctx) })
			defer func() { stop(); wg.Wait() }()
			if look {
				redistest.WaitUntil(t, 10*time.Second, "the leftover sale cooled", func() bool { return r.keysLeft(t, "left") == 0 })
				return
			}
			for range 20 {
				<-passes
			}
			if n := r.keysLeft(t, "left"); n == 0 {
				t.Fatal("the sale cooled without the look for leftovers; the detector above cannot fail")
			}
		})
	}
}

// streamRead reports whether every consumer group of the sale's stream has every entry
// delivered and acknowledged (what cool.lua checks).
func streamRead(t *testing.T, r *coldRig, id string) bool {
	t.Helper()
	ctx, rdb, key := t.Context(), r.c.Inventory, r.e.streamKey(id)
	info, err := rdb.Do(ctx, rdb.B().XinfoStream().Key(key).Build()).AsMap()
	if err != nil {
		t.Fatal(err)
	}
	lastMsg := info["last-generated-id"]
	last, _ := lastMsg.ToString()
	groups, err := rdb.Do(ctx, rdb.B().XinfoGroups().Key(key).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		f, err := g.AsMap()
		if err != nil {
			t.Fatal(err)
		}
		pendingMsg, deliveredMsg := f["pending"], f["last-delivered-id"]
		pending, _ := pendingMsg.AsInt64()
		delivered, _ := deliveredMsg.ToString()
		if pending > 0 || delivered != last {
			return false
		}
	}
	return len(groups) > 0
}
