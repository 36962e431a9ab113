package redisinv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/delivery"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/seckilltest"
)

// countingClient is a Redis client that counts the commands sent through it, by name, for
// the tests that show what a reader costs.
type countingClient struct {
	rueidis.Client
	mu     sync.Mutex
	counts map[string]int
}

func newCountingClient(c rueidis.Client) *countingClient {
	return &countingClient{Client: c, counts: map[string]int{}}
}

func (c *countingClient) count(cmds ...rueidis.Completed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		if words := cmd.Commands(); len(words) > 0 {
			c.counts[strings.ToUpper(words[0])]++
		}
	}
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.count(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c *countingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.count(cmds...)
	return c.Client.DoMulti(ctx, cmds...)
}

// take returns the counts since the last take and starts again from zero.
func (c *countingClient) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

func total(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// TestIdleSaleCostsNoCommand: a consumer whose sale has nothing new sends Redis no command at
// all over a window (no blocking read, no poll, no claim or trim timer per stream), and a buy
// wakes it at once: the buy's events are stored within the test's patience, long before any
// periodic check (an hour). The detector counts every command the consumer's engine sends. The
// negative control is a consumer that polls (checks its streams every 20 ms): the same
// detector sees its commands.
func TestIdleSaleCostsNoCommand(t *testing.T) {
	for _, polling := range []bool{false, true} {
		name := "notified"
		if polling {
			name = "negative control: polling every 20 ms"
		}
		t.Run(name, func(t *testing.T) {
			r := newStreamRig(t, 10)
			r.buy("u1")
			counter := newCountingClient(r.rdb)
			worker := New(counter, WithTestClock(r.clock), WithPrefix(r.e.prefix))
			t.Cleanup(func() { _ = worker.Close() })
			cfg := ConsumerConfig{CheckEvery: time.Hour, List: func(context.Context) ([]string, error) { return []string{"st"}, nil }}
			if polling {
				cfg.CheckEvery = 20 * time.Millisecond
			}
			sink := &fakeSink{}
			c := worker.NewConsumer(sink, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = c.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			eventually(t, "the first buy stored", func() bool { return len(sink.stored()) == 1 })
			// Settled: a quiet window after the reads that followed the first buy.
			for counter.take(); ; {
				time.Sleep(200 * time.Millisecond)
				if total(counter.take()) == 0 || polling {
					break
				}
			}
			time.Sleep(500 * time.Millisecond)
			idle := counter.take()
			t.Logf("commands over 500 ms of an idle sale: %v", idle)
			if polling {
				if total(idle) == 0 {
					t.Fatal("negative control: a polling consumer sent no command in the window: the detector cannot fail")
				}
				return
			}
			if total(idle) != 0 {
				t.Fatalf("an idle sale cost %v commands over 500 ms, want none", idle)
			}
			r.buy("u2")
			eventually(t, "the second buy stored without polling", func() bool { return len(sink.stored()) == 2 })
			if woke := counter.take(); woke["XREADGROUP"] == 0 {
				t.Fatalf("stored the second buy without a read (%v): the detector does not see reads", woke)
			}
		})
	}
}

// TestLostNotificationFoundByCheck: an entry added without a notification (one lost: a
// dropped subscription, a restored stream) is stored by the consumer's periodic check. The
// negative control checks only every hour: the same entry stays unstored over the same wait.
func TestLostNotificationFoundByCheck(t *testing.T) {
	for _, checking := range []bool{true, false} {
		name := "check every 100 ms"
		if !checking {
			name = "negative control: check every hour"
		}
		t.Run(name, func(t *testing.T) {
			r := newStreamRig(t, 10)
			ctx := t.Context()
			r.buy("u1")
			cfg := ConsumerConfig{CheckEvery: time.Hour}
			if checking {
				cfg.CheckEvery = 100 * time.Millisecond
			}
			sink := &fakeSink{}
			counter := newCountingClient(r.rdb)
			worker := New(counter, WithTestClock(r.clock), WithPrefix(r.e.prefix))
			t.Cleanup(func() { _ = worker.Close() })
			cfg.List = func(context.Context) ([]string, error) { return []string{"st"}, nil }
			c := worker.NewConsumer(sink, cfg)
			cctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = c.Run(cctx) }()
			t.Cleanup(func() { cancel(); <-done })
			eventually(t, "the first buy stored", func() bool { return len(sink.stored()) == 1 })
			// Settled (its check after subscribing included): only a notification or a check wakes it now.
			for counter.take(); ; {
				time.Sleep(200 * time.Millisecond)
				if n := counter.take(); n["XREADGROUP"] == 0 && (n["XINFO"] == 0 || checking) {
					break
				}
			}

			// The entry of a change, as a script writes it, added without the notification.
			key := r.e.streamKey("st")
			first, err := r.rdb.Do(ctx, r.rdb.B().Xrange().Key(key).Start("-").End("+").Count(1).Build()).AsXRangeSlices()
			if err != nil || len(first) != 1 {
				t.Fatalf("the stream's first entry: %v, %v", first, err)
			}
			paid := strings.Replace(first[0].FieldValues[0].Value, "|held|", "|paid|", 1)
			if err := r.rdb.Do(ctx, r.rdb.B().Xadd().Key(key).Id("*").FieldValue().FieldValue("e", paid).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(3 * time.Second)
			for len(sink.stored()) < 2 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			stored := len(sink.stored())
			if !checking {
				if stored != 1 {
					t.Fatalf("negative control: the entry without a notification was stored (%d events) without a check: the detector cannot fail", stored)
				}
				return
			}
			if stored != 2 {
				t.Fatalf("the entry whose notification was lost was not stored in 3 s (%d events stored, want 2)", stored)
			}
		})
	}
}

// TestScriptsNotifyAQuietStream: a change to a stream that was quiet publishes the stream's
// key on the engine's channel (flush_events in common.lua); the detector is a subscriber that
// must see it.
func TestScriptsNotifyAQuietStream(t *testing.T) {
	r := newStreamRig(t, 10)
	got := make(chan string, 16)
	unwatch := r.e.watchNotes(&noteWatcher{key: func(k string) { got <- k }, subscribed: func() {}})
	defer unwatch()
	// The subscription may not be up yet: buy until a notification comes.
	deadline := time.After(5 * time.Second)
	for i := 0; ; i++ {
		r.buy("u" + string(rune('a'+i)))
		select {
		case k := <-got:
			if k != r.e.streamKey("st") {
				t.Fatalf("notified %q, want the stream key %q", k, r.e.streamKey("st"))
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notification of a change to a quiet stream in 5 s")
		}
	}
}

// countSink is an export sink that counts the events published to it.
type countSink struct{ n atomic.Int64 }

func (s *countSink) Name() string { return "test://count" }
func (s *countSink) Publish(_ context.Context, evs []events.Event) error {
	s.n.Add(int64(len(evs)))
	return nil
}
func (s *countSink) Close() error { return nil }

// plainLog hides a log's Quiet methods: the exporter leads and reads it as any log.
type plainLog struct{ events.Log }

// TestIdleExportCostsNoCommand: an exported sale with nothing new costs no command over a
// window, the export lead's included (the lead is given back while the log is idle, so no
// lease is renewed and no other instance polls for it), and a buy wakes the export at once.
// The detector counts every command of the exporting engine and of its locks. The negative
// control exports the same log as a plain events.Log (read and led without notifications):
// the detector sees its commands.
func TestIdleExportCostsNoCommand(t *testing.T) {
	for _, quiet := range []bool{true, false} {
		name := "notified"
		if !quiet {
			name = "negative control: led and read without notifications"
		}
		t.Run(name, func(t *testing.T) {
			r := newExportRig(t)
			r.buy(2, "a")
			counter := newCountingClient(r.rdb)
			worker := New(counter, WithPrefix(r.e.prefix))
			t.Cleanup(func() { _ = worker.Close() })
			locks := lock.New(lock.Rueidis(counter), &lock.Options{Lease: 3 * time.Second})
			t.Cleanup(func() { _ = locks.Close() })
			var l events.Log = worker.ExportLog(r.sale, locks)
			if !quiet {
				l = plainLog{l}
			}
			sink := &countSink{}
			x := delivery.New(delivery.Config{Sinks: []events.Sink{sink}, Logs: func(context.Context) ([]events.Log, error) { return []events.Log{l}, nil }})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = x.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			eventually(t, "the first buys exported", func() bool { return sink.n.Load() == 2 })
			for counter.take(); ; {
				time.Sleep(200 * time.Millisecond)
				if total(counter.take()) == 0 || !quiet {
					break
				}
			}
			time.Sleep(500 * time.Millisecond)
			idle := counter.take()
			t.Logf("commands over 500 ms of an idle exported sale: %v", idle)
			if !quiet {
				if total(idle) == 0 {
					t.Fatal("negative control: an export read without notifications sent no command in the window: the detector cannot fail")
				}
				return
			}
			if total(idle) != 0 {
				t.Fatalf("an idle exported sale cost %v commands over 500 ms, want none", idle)
			}
			r.buy(1, "b")
			eventually(t, "the next buy exported without polling", func() bool { return sink.n.Load() == 3 })
		})
	}
}

// TestClusterSegmentsWokenByNotification: on the Redis Cluster, a sale of 4 segments (its
// streams on different nodes) is consumed on notifications alone: with the check an hour apart,
// the consumer still stores each buy, whichever node its segment's script ran on (PUBLISH is
// broadcast to every node, and the engine subscribes on one). The detector is the stored
// count; the negative control is TestLostNotificationFoundByCheck's: without a notification an
// entry waits for the check.
func TestClusterSegmentsWokenByNotification(t *testing.T) {
	c := dialT(t, testenv.RedisCluster(t))
	clock := seckilltest.NewManualClock(time.Now())
	e := newTestEngine(t, c.Inventory, clock)
	now := clock.Now()
	stock := 40
	def, err := seckill.NewSale(seckill.SaleInput{ID: "cn", PriceCents: ptr(int64(10)), Stock: &stock, HoldSeconds: ptr(60), StartsAt: &now}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSaleSegments(t.Context(), def, 0, 4); err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	c2 := e.NewConsumer(sink, ConsumerConfig{CheckEvery: time.Hour, List: func(context.Context) ([]string, error) { return []string{"cn"}, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c2.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(200 * time.Millisecond) // subscribed, its first reads done
	for i := range 12 {
		if _, err := e.Buy(t.Context(), seckill.BuyRequest{SaleID: "cn", UserID: fmt.Sprintf("u%d", i), Quantity: 1}); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("buy %d stored", i+1), func() bool { return len(sink.stored()) == i+1 })
		time.Sleep(3 * notifyQuiet) // the next buy's entry publishes again
	}
}

// TestWakeSetCoalesces: a stream woken many times is taken once; woken while a worker holds it,
// it is taken again only after that worker is done (never by two at once). The detector is
// what take returns; it fails on a set that queued every wake (the second take would not block).
func TestWakeSetCoalesces(t *testing.T) {
	w := newWakeSet()
	for range 5 {
		w.wake("a")
	}
	w.wake("b")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var got []string
	for {
		k, ok := w.take(ctx)
		if !ok {
			break
		}
		got = append(got, k)
		if k == "a" && len(got) == 1 {
			w.wake("a") // woken while busy: not taken until done
			continue
		}
		w.done(k)
		if k == "b" {
			w.done("a") // now a's second wake is queued
		}
	}
	if fmt.Sprint(got) != "[a b a]" {
		t.Fatalf("taken %v, want [a b a]: each wake once, a again only after done", got)
	}
}
