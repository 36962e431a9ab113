package redisinv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// segRig is a segmented sale on its own engine, with a manual clock.
type segRig struct {
	t     *testing.T
	e     *Engine
	clock *seckilltest.ManualClock
	sale  seckill.Sale
	n     int
}

var segEpoch = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func newSegRig(t *testing.T, url string, n, stock, perUser, queueLimit int, opts ...Option) *segRig {
	t.Helper()
	c := dialT(t, url)
	clock := seckilltest.NewManualClock(segEpoch)
	e := newTestEngine(t, c.Inventory, clock, opts...)
	def, err := seckill.NewSale(seckill.SaleInput{ID: "seg", PriceCents: ptr(int64(100)), Stock: ptr(stock),
		HoldSeconds: ptr(60), PerUserLimit: ptr(perUser), QueueLimit: ptr(queueLimit), StartsAt: ptr(segEpoch),
		EndsAt: ptr(segEpoch.Add(time.Hour))}, segEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSaleSegments(t.Context(), def, 0, n); err != nil {
		t.Fatal(err)
	}
	return &segRig{t: t, e: e, clock: clock, sale: def, n: n}
}

// usersOf returns count user ids whose segment is seg, named after prefix.
func (r *segRig) usersOf(seg, count int, prefix string) []string {
	var out []string
	for i := 0; len(out) < count; i++ {
		u := prefix + itoa(i)
		if userSegment(u, r.n) == seg {
			out = append(out, u)
		}
	}
	return out
}

// counts is segment i's {mode, available, held, sold, seq, lent, got, pend}.
func (r *segRig) counts(i int) []int64 {
	r.t.Helper()
	c, err := r.e.segs.segOp(r.t.Context(), r.sale.ID, i, "counts")
	if err != nil {
		r.t.Fatal(err)
	}
	out := make([]int64, 8)
	for j := range out {
		out[j] = c.int(j + 1)
	}
	return out
}

func (r *segRig) buy(user string) (seckill.BuyResult, error) {
	return r.e.Buy(r.t.Context(), seckill.BuyRequest{SaleID: r.sale.ID, UserID: user, Quantity: 1})
}

func (r *segRig) state() seckill.StockState {
	r.t.Helper()
	_, st, err := r.e.Sale(r.t.Context(), r.sale.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

// TestSegmentsLend drains one segment and shows that its users are still served, from the
// other segments' units (a split by user hash without lending would answer sold_out here), and
// that the sale stays split (no collapse) while units are plentiful.
func TestSegmentsLend(t *testing.T) {
	for name, url := range segURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := newSegRig(t, url, 4, 40, 1, 10) // 10 units per segment
			users := r.usersOf(2, 25, "lend")
			for i, u := range users {
				res, err := r.buy(u)
				if err != nil || res.Reservation.Status != seckill.StatusHeld {
					t.Fatalf("buyer %d of segment 2: %+v, %v; want held (the others have free units)", i, res, err)
				}
			}
			c := r.counts(2)
			if c[0] != modeSplit || c[6] < 15 {
				t.Fatalf("segment 2 counts %v: want still split, having got at least 15 units", c)
			}
			if got, want := r.state(), (seckill.StockState{Sellable: 40, Available: 15, Held: 25}); got != want {
				t.Fatalf("Sale = %+v, want %+v", got, want)
			}
		})
	}
}

// TestSegmentsLendNegative is the negative control of TestSegmentsLend: with lending switched
// off (every 'empty' collapses at once) the sale collapses at segment 2's 11th buyer, which the
// test's check of the mode detects.
func TestSegmentsLendNegative(t *testing.T) {
	r := newSegRig(t, testenv.Redis(t), 4, 40, 1, 10)
	for _, u := range r.usersOf(2, 11, "lend") {
		if _, err := r.buy(u); err != nil {
			t.Fatal(err)
		}
	}
	if c := r.counts(2); c[0] != modeSplit {
		t.Fatalf("lending on: segment 2 mode %d, want split", c[0])
	}
	r.e.segs.noLend = true
	for _, u := range r.usersOf(2, 20, "lend")[11:] { // its lent units run out on the way
		if _, err := r.buy(u); err != nil {
			t.Fatal(err)
		}
	}
	if c := r.counts(2); c[0] == modeSplit {
		t.Fatalf("lending off: segment 2 still split after it lacked units; the check cannot fail")
	}
}

// TestSegmentsTailCollapse sells a 4-segment sale out and on into its queue, and the same
// calls on the reference model: every answer (status, position, code) and count must be the
// same, and the segments must have collapsed into segment 0.
func TestSegmentsTailCollapse(t *testing.T) {
	for name, url := range segURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := newSegRig(t, url, 4, 6, 1, 3)
			m := seckilltest.NewModel(r.clock)
			if err := m.LoadSale(t.Context(), r.sale, 0); err != nil {
				t.Fatal(err)
			}
			var eHeld, mHeld []string
			for i := range 12 {
				u := "tail" + itoa(i)
				er, eErr := r.buy(u)
				mr, mErr := m.Buy(t.Context(), seckill.BuyRequest{SaleID: r.sale.ID, UserID: u, Quantity: 1})
				if seckill.ErrorCode(eErr) != seckill.ErrorCode(mErr) || er.Reservation.Status != mr.Reservation.Status ||
					er.Reservation.Position != mr.Reservation.Position {
					t.Fatalf("buyer %d: engine %s pos %d (%v), model %s pos %d (%v)", i, er.Reservation.Status,
						er.Reservation.Position, eErr, mr.Reservation.Status, mr.Reservation.Position, mErr)
				}
				if er.Reservation.Status == seckill.StatusHeld {
					eHeld, mHeld = append(eHeld, er.Reservation.ID), append(mHeld, mr.Reservation.ID)
				}
			}
			if c := r.counts(0); c[0] != modeSingle {
				t.Fatalf("segment 0 mode %d after the sale sold out, want single (collapsed)", c[0])
			}
			// Two holds end (one cancelled, one expired): the queue's head and then its second
			// buyer get them, in arrival order.
			if _, err := r.e.Cancel(t.Context(), eHeld[4], "tail4"); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Cancel(t.Context(), mHeld[4], "tail4"); err != nil {
				t.Fatal(err)
			}
			r.clock.Advance(61 * time.Second)
			est, mst := r.state(), func() seckill.StockState { _, st, _ := m.Sale(t.Context(), r.sale.ID); return st }()
			if est != mst {
				t.Fatalf("after the holds ended: engine %+v, model %+v", est, mst)
			}
			for i := 0; i < 14; i++ {
				u := "tail" + itoa(i)
				er, eErr := r.e.Buy(t.Context(), seckill.BuyRequest{SaleID: r.sale.ID, UserID: u, Quantity: 1})
				mr, mErr := m.Buy(t.Context(), seckill.BuyRequest{SaleID: r.sale.ID, UserID: u, Quantity: 1})
				if seckill.ErrorCode(eErr) != seckill.ErrorCode(mErr) || er.Reservation.Status != mr.Reservation.Status ||
					er.Reservation.Position != mr.Reservation.Position {
					t.Fatalf("buyer %d after: engine %+v %v, model %+v %v", i, er.Reservation, eErr, mr.Reservation, mErr)
				}
			}
		})
	}
}

// TestSegmentsCrashInTransit takes units at a donor as a lend does and stops there, as an
// instance that died between the two steps: the units are counted in transit (Sale still adds
// up), the sweeper's Reclaim applies them, and then every unit sells. The negative control
// acknowledges the entry without applying it (a transfer lost): the sell-out check catches it.
func TestSegmentsCrashInTransit(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run(map[bool]string{false: "Recovered", true: "LostControl"}[lose], func(t *testing.T) {
			r := newSegRig(t, testenv.Redis(t), 4, 20, 1, 0)
			ctx := t.Context()
			tk, err := r.e.segs.segOp(ctx, r.sale.ID, 1, "take", "3", "4")
			if err != nil || tk.int(1) != 4 {
				t.Fatalf("take: %v %v", tk, err)
			}
			if lose {
				if _, err := r.e.segs.segOp(ctx, r.sale.ID, 1, "ack", "3", i64toa(tk.int(2))); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := r.state(), (seckill.StockState{Sellable: 20, Available: 20}); got != want {
				t.Fatalf("Sale with a transfer in transit = %+v, want %+v", got, want)
			}
			if _, err := r.e.Reclaim(ctx, r.sale.ID); err != nil {
				t.Fatal(err)
			}
			if c := r.counts(1); c[7] != 0 {
				t.Fatalf("donor's outbox after the sweep: %d entries, want 0", c[7])
			}
			sold := 0
			for i := 0; ; i++ {
				res, err := r.buy("crash" + itoa(i))
				if err != nil {
					break
				}
				if res.Reservation.Status == seckill.StatusHeld {
					sold++
				}
			}
			if lost := sold != 20; lost != lose {
				t.Fatalf("held %d of 20 units (lost transfer simulated: %v)", sold, lose)
			}
		})
	}
}

// segURLs are the Redis servers the segment tests run on: standalone, and the cluster when set.
func segURLs(t *testing.T) map[string]string {
	urls := map[string]string{"standalone": testenv.Redis(t)}
	if os.Getenv("SECKILL_TEST_REDIS_CLUSTER") != "" || os.Getenv("CI") != "" {
		urls["cluster"] = testenv.RedisCluster(t)
	}
	return urls
}

// BenchmarkBuySegments measures the buy rate of one hot sale (64 goroutines, every buy a new
// user and so a new hold) with 1 and 4 segments, on the standalone Redis and, when
// SECKILL_TEST_REDIS_CLUSTER is set, on the cluster (where 4 segments spread over its nodes):
//
//	SECKILL_TEST_REDIS=... SECKILL_TEST_REDIS_CLUSTER=... go test -run '^$' -bench BuySegments -benchtime 5s ./redisinv
func BenchmarkBuySegments(b *testing.B) {
	servers := []struct{ name, url string }{{"standalone", testenv.Redis(b)}}
	if url := os.Getenv("SECKILL_TEST_REDIS_CLUSTER"); url != "" {
		servers = append(servers, struct{ name, url string }{"cluster", url})
	}
	for _, srv := range servers {
		c, err := Dial(b.Context(), srv.url)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 4} {
			b.Run(srv.name+"/segments="+itoa(n), func(b *testing.B) {
				prefix := testPrefix()
				e := New(c.Inventory, WithPrefix(prefix))
				defer func() {
					_ = e.Close()
					dropPrefix(b, c.Inventory, prefix)
				}()
				now := time.Now().UTC()
				def, err := seckill.NewSale(seckill.SaleInput{ID: "bench", PriceCents: ptr(int64(100)), Stock: ptr(10_000_000),
					HoldSeconds: ptr(3600), PerUserLimit: ptr(1), StartsAt: &now}, now)
				if err != nil {
					b.Fatal(err)
				}
				if err := e.LoadSaleSegments(b.Context(), def, 0, n); err != nil {
					b.Fatal(err)
				}
				var user atomic.Int64
				b.SetParallelism(32)
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						u := "u" + i64toa(user.Add(1))
						if _, err := e.Buy(context.Background(), seckill.BuyRequest{SaleID: "bench", UserID: u, Quantity: 1}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "buys/s")
			})
		}
		c.Close()
	}
}

// TestSegmentsCollapseCopiedTwice: two instances collapsing a sale at once may both copy a
// frozen segment's users and holds into segment 0, and segment 0 acts on the first copy before
// the second arrives: here a buy at segment 0 (which still sells while COLLAPSING) expires the
// copied hold and returns its unit. The second copy must leave what segment 0 changed: brought
// back, the hold would expire a second time and return its unit again (the sale counting one
// unit twice: available one too many, held one too few). Found by a rush of three instances on
// a 4-segment sale with 1 s holds (held -1 at the end, buyers told sold_out while a unit was
// free).
func TestSegmentsCollapseCopiedTwice(t *testing.T) {
	for name, url := range segURLs(t) {
		t.Run(name, func(t *testing.T) {
			if wrong := collapseCopiedTwice(t, url); wrong != "" {
				t.Fatal(wrong)
			}
		})
	}
}

// TestSegmentsCollapseCopiedTwiceNegative is the negative control of
// TestSegmentsCollapseCopiedTwice: with the old copy put back (absorb overwrites what segment 0
// has, and a user's count falling to 0 is removed while COLLAPSING), the same steps must be
// caught counting the expired hold's unit twice.
func TestSegmentsCollapseCopiedTwiceNegative(t *testing.T) {
	mutations := []struct{ file, from, to string }{
		{"common.lua", "if redis.call('HINCRBY', KEYS[5], user, num(d)) <= 0 and S.mode ~= COLLAPSING then",
			"if redis.call('HINCRBY', KEYS[5], user, num(d)) <= 0 then"},
		{"segment.lua", "redis.call('HSETNX', key, ARGV[i], ARGV[i + 1])", "redis.call('HSET', key, ARGV[i], ARGV[i + 1])"},
		{"segment.lua", "if redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then",
			"if redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) >= 0 then"},
	}
	applied := make([]int, len(mutations))
	old := newScriptSet(func(name string) string {
		src := scriptSource(name)
		for i, m := range mutations {
			if strings.Contains(src, m.from) {
				src = strings.Replace(src, m.from, m.to, 1)
				applied[i]++
			}
		}
		return src
	})
	for i, m := range mutations {
		if applied[i] == 0 {
			t.Fatalf("%s no longer contains the text the mutation replaces: %q", m.file, m.from)
		}
	}
	for name, url := range segURLs(t) {
		t.Run(name, func(t *testing.T) {
			wrong := collapseCopiedTwice(t, url, func(e *Engine) { e.scripts = old })
			if wrong == "" {
				t.Fatal("negative control: with the old copy, the collapse copied twice counted right; the check cannot fail")
			}
			t.Logf("caught: %s", wrong)
		})
	}
}

// collapseCopiedTwice runs the steps of TestSegmentsCollapseCopiedTwice on an engine made with
// opts and says what came out wrong ("" for nothing).
func collapseCopiedTwice(t *testing.T, url string, opts ...Option) string {
	ctx := t.Context()
	r := newSegRig(t, url, 2, 4, 2, 3, opts...)
	u := r.usersOf(1, 1, "twice")[0]
	if res, err := r.buy(u); err != nil || res.Reservation.Status != seckill.StatusHeld {
		t.Fatalf("buy: %+v, %v", res.Reservation, err)
	}
	for i := range 2 {
		if _, err := r.e.segs.segOp(ctx, r.sale.ID, i, "freeze"); err != nil {
			t.Fatal(err)
		}
	}
	// What any instance copies from the frozen segment 1 (it no longer changes).
	keys := r.e.keys(segTag(r.sale.ID, 1, r.n))
	users, err := r.e.rdb.Do(ctx, r.e.rdb.B().Hgetall().Key(keys[4]).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	userArgs := []string{"1", "users"}
	for k, v := range users {
		userArgs = append(userArgs, k, v)
	}
	holds, err := r.e.rdb.Do(ctx, r.e.rdb.B().Zrange().Key(keys[2]).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || len(holds) != 1 {
		t.Fatalf("segment 1's holds: %v, %v; want the one hold", holds, err)
	}
	raw, err := r.e.rdb.Do(ctx, r.e.rdb.B().Hget().Key(keys[1]).Field(holds[0].Member).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	holdArgs := []string{"1", "holds", holds[0].Member, raw, strconv.FormatFloat(holds[0].Score, 'f', 0, 64)}
	copyOnce := func() {
		t.Helper()
		for _, args := range [][]string{userArgs, holdArgs} {
			if _, err := r.e.segs.segOp(ctx, r.sale.ID, 0, "absorb", args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyOnce()
	// The copied hold expires at segment 0: a buy there reclaims it first.
	r.clock.Advance(61 * time.Second)
	if res, err := r.buy(r.usersOf(0, 1, "zero")[0]); err != nil || res.Reservation.Status != seckill.StatusHeld {
		t.Fatalf("buy at segment 0 while collapsing: %+v, %v", res.Reservation, err)
	}
	copyOnce() // the second instance's copy
	if err := r.e.segs.collapse(ctx, r.sale.ID, r.e.segs.of(r.sale.ID)); err != nil {
		t.Fatal(err)
	}
	if st := r.state(); st.Available != 3 || st.Held != 1 || st.Sold != 0 {
		return fmt.Sprintf("after the collapse: %+v; want 3 available, 1 held (the expired hold's unit returned once)", st)
	}
	// The expired hold's user is back to 0 units: the limit of 2 allows 2 again.
	two, err := r.e.Buy(ctx, seckill.BuyRequest{SaleID: r.sale.ID, UserID: u, Quantity: 2})
	if err != nil || two.Reservation.Status != seckill.StatusHeld {
		return fmt.Sprintf("the user buys 2 after the expiry: %+v, %v; want held", two.Reservation, err)
	}
	return ""
}
