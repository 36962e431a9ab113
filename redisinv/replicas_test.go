package redisinv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/seckilltest"
)

// loadTestSale loads a sale of stock units, started, holds of an hour, on e.
func loadTestSale(t testing.TB, e *Engine, id string, stock int) {
	t.Helper()
	now := time.Now().UTC()
	def, err := seckill.NewSale(seckill.SaleInput{ID: id, PriceCents: ptr(int64(100)), Stock: ptr(stock), HoldSeconds: ptr(3600),
		PerUserLimit: ptr(stock), StartsAt: &now}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSale(context.Background(), def, 0); err != nil {
		t.Fatal(err)
	}
}

// onReplica reports whether the replica has reservation id (its raw hash field: a replica
// runs no script of ours).
func onReplica(t *testing.T, replica rueidis.Client, e *Engine, id string) bool {
	t.Helper()
	saleID, suffix, ok := splitID(id)
	if !ok {
		t.Fatalf("bad reservation id %q", id)
	}
	n, err := replica.Do(context.Background(), replica.B().Hexists().Key(e.keys(saleID)[1]).Field(suffix).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestReplicaAcknowledgedWrites: with WithReplicas(1, …), a buy is answered only once the
// replica has it; with the replica stopped (SIGSTOP) every state-changing call answers
// unavailable after the WAIT timeout, its change kept on the master, and a group of buys pays
// for one WAIT; read-only calls do not wait. An engine without the setting (the negative
// control) answers the same buys while the replica is stopped.
func TestReplicaAcknowledgedWrites(t *testing.T) {
	master := redistest.StartMaster(t)
	replica := redistest.StartReplica(t, master, "replica")
	mc, rc := master.Client(), replica.Client()
	e := New(mc, WithReplicas(1, 100*time.Millisecond))
	defer e.Close()
	off := New(mc) // same keys, no WAIT
	defer off.Close()
	ctx := t.Context()
	loadTestSale(t, e, "ack", 1000)

	// Acknowledged: the replica has the hold the moment the buy returns.
	for i := range 20 {
		b, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "ack", UserID: "u", Quantity: 1, IdempotencyKey: fmt.Sprint("k", i)})
		if err != nil {
			t.Fatal(err)
		}
		if !onReplica(t, rc, e, b.Reservation.ID) {
			t.Fatalf("buy %d answered before the replica had %s", i, b.Reservation.ID)
		}
	}
	if st := e.ReplicaStats(); st.Acknowledged < 20 || st.Short != 0 {
		t.Fatalf("after 20 acknowledged buys: %+v", st)
	}

	replica.Signal(syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			replica.Signal(syscall.SIGCONT)
		}
	}()

	// Read-only calls do not wait: they answer, and count nothing.
	first, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "ack", UserID: "u", Quantity: 1, IdempotencyKey: "k0"}) // a replay
	if !isCode(err, seckill.CodeUnavailable) {
		t.Fatalf("a replayed buy while the replica is stopped: %v, %v; want unavailable (buy.lua is a write script)", first, err)
	}
	before := e.ReplicaStats()
	if _, _, err := e.Sale(ctx, "ack"); err != nil {
		t.Fatalf("Sale while the replica is stopped: %v", err)
	}
	if st := e.ReplicaStats(); st != before {
		t.Fatalf("a read-only call waited for replicas: %+v → %+v", before, st)
	}

	// Unavailable, and kept: the buy's hold is on the master.
	_, err = e.Buy(ctx, seckill.BuyRequest{SaleID: "ack", UserID: "u", Quantity: 1, IdempotencyKey: "stopped"})
	if !isCode(err, seckill.CodeUnavailable) {
		t.Fatalf("buy with the replica stopped: %v; want unavailable", err)
	}
	if e.ReplicaStats().Short <= before.Short {
		t.Fatal("a short WAIT was not counted")
	}
	// Negative control: without the setting the same engine state answers at once.
	b, err := off.Buy(ctx, seckill.BuyRequest{SaleID: "ack", UserID: "u", Quantity: 1, IdempotencyKey: "stopped"})
	if err != nil || !b.Replayed {
		t.Fatalf("the buy answered 503 is not on the master: %+v, %v (want a replay of it)", b, err)
	}
	kept := b.Reservation.ID

	// The other state-changing calls wait too.
	if _, err := e.Cancel(ctx, kept, "u"); !isCode(err, seckill.CodeUnavailable) {
		t.Fatalf("cancel with the replica stopped: %v; want unavailable", err)
	}
	if _, _, err := e.AddStock(ctx, "ack", 1); !isCode(err, seckill.CodeUnavailable) {
		t.Fatalf("restock with the replica stopped: %v; want unavailable", err)
	}
	if _, err := e.Reclaim(ctx, "ack"); !isCode(err, seckill.CodeUnavailable) {
		t.Fatalf("reclaim with the replica stopped: %v; want unavailable", err)
	}

	// A group of buys shares its WAIT: fewer short calls than buys.
	before = e.ReplicaStats()
	const group = 32
	var wg sync.WaitGroup
	errs := make([]error, group)
	for i := range group {
		wg.Go(func() {
			_, errs[i] = e.Buy(ctx, seckill.BuyRequest{SaleID: "ack", UserID: "u", Quantity: 1, IdempotencyKey: fmt.Sprint("g", i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !isCode(err, seckill.CodeUnavailable) {
			t.Fatalf("grouped buy %d with the replica stopped: %v; want unavailable", i, err)
		}
	}
	calls := e.ReplicaStats().Short - before.Short
	t.Logf("%d concurrent buys with the replica stopped: %d script calls, each one WAIT", group, calls)
	if calls >= group {
		t.Fatalf("%d buys made %d WAITs: the group did not share them", group, calls)
	}

	// Replica back: the buys go through, and the one answered 503 is found by its key.
	replica.Signal(syscall.SIGCONT)
	stopped = false
	redistest.WaitUntil(t, 10*time.Second, "a buy acknowledged after SIGCONT", func() bool {
		_, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "ack", UserID: "u", Quantity: 1, IdempotencyKey: "after"})
		return err == nil
	})
	b, err = e.Buy(ctx, seckill.BuyRequest{SaleID: "ack", UserID: "u", Quantity: 1, IdempotencyKey: "stopped"})
	if err != nil || !b.Replayed || b.Reservation.ID != kept || !onReplica(t, rc, e, kept) {
		t.Fatalf("retry of the buy answered 503: %+v, %v; want the kept hold %s, on the replica", b, err, kept)
	}
	if _, err := e.Cancel(ctx, kept, "u"); err != nil {
		t.Fatalf("cancel after SIGCONT: %v", err)
	}
}

// TestInventoryReplicaAck runs the shared conformance suite against a private master with one
// replica and WithReplicas(1, 1 s): every write script goes the other way (DoMulti of
// EVALSHA and WAIT on a dedicated connection, EVAL on a fresh server's NOSCRIPT) and must
// answer exactly as through the pipeline.
func TestInventoryReplicaAck(t *testing.T) {
	master := redistest.StartMaster(t)
	redistest.StartReplica(t, master, "replica")
	mc := master.Client()
	var engines []*Engine
	var mu sync.Mutex
	seckilltest.TestInventory(t, func(t *testing.T, clock seckill.Clock) seckill.Inventory {
		e := newTestEngine(t, mc, clock, WithReplicas(1, MaxReplicaTimeout))
		mu.Lock()
		engines = append(engines, e)
		mu.Unlock()
		return e
	}, seckilltest.ModelRounds(1)) // the scripts of TestInventoryStandalone, then a WAIT
	var st ReplicaStats
	for _, e := range engines {
		s := e.ReplicaStats()
		st.Acknowledged += s.Acknowledged
		st.Short += s.Short
	}
	t.Logf("%d engines: %+v", len(engines), st)
	if st.Acknowledged == 0 {
		t.Fatal("no script call waited for the replica: the suite did not go through WAIT")
	}
}

// TestWithReplicasBounds: the setting's bounds.
func TestWithReplicasBounds(t *testing.T) {
	for _, c := range []struct {
		n  int
		d  time.Duration
		ok bool
	}{{0, DefaultReplicaTimeout, true}, {1, time.Millisecond, true}, {MaxReplicas, MaxReplicaTimeout, true},
		{-1, DefaultReplicaTimeout, false}, {MaxReplicas + 1, DefaultReplicaTimeout, false},
		{1, 0, false}, {1, MaxReplicaTimeout + 1, false}} {
		if err := CheckReplicas(c.n, c.d); (err == nil) != c.ok {
			t.Errorf("CheckReplicas(%d, %v) = %v; want ok %v", c.n, c.d, err, c.ok)
		}
	}
}

// BenchmarkBuyReplicaAck measures the buy rate of one hot sale (64 goroutines, every buy a new
// user and so a new hold) on a private master with one replica on the same machine, with
// replica acknowledgement off and with WithReplicas(1, 100 ms), side by side. Buys answered
// 503 (a WAIT that came back short) are counted, not failed. -count repeats each half in turn;
// to interleave rounds, run the test binary once per round:
//
//	go test -c -o /tmp/redisinv.test ./redisinv/
//	for i in 1 2 3; do /tmp/redisinv.test -test.run '^$' -test.bench BuyReplicaAck -test.benchtime 5s; done
func BenchmarkBuyReplicaAck(b *testing.B) {
	master := redistest.StartMaster(b)
	redistest.StartReplica(b, master, "replica")
	mc := master.Client()
	for _, c := range []struct {
		name string
		opts []Option
	}{{"off", nil}, {"replicas=1", []Option{WithReplicas(1, 100*time.Millisecond)}}} {
		b.Run(c.name, func(b *testing.B) {
			e := New(mc, c.opts...)
			defer e.Close()
			saleID := fmt.Sprintf("bench%d", time.Now().UnixNano())
			loadTestSale(b, e, saleID, 10_000_000)
			var user, unavailable atomic.Int64
			b.SetParallelism(32) // 64 goroutines on two CPUs
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					u := fmt.Sprint("u", user.Add(1))
					_, err := e.Buy(context.Background(), seckill.BuyRequest{SaleID: saleID, UserID: u, Quantity: 1})
					switch {
					case isCode(err, seckill.CodeUnavailable):
						unavailable.Add(1) // a WAIT came back short on a loaded machine: counted
					case err != nil:
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "buys/s")
			b.ReportMetric(float64(unavailable.Load()), "503s")
			st := e.ReplicaStats()
			if st.Acknowledged > 0 {
				b.ReportMetric(float64(b.N)/float64(st.Acknowledged), "buys/WAIT")
			}
		})
	}
}
