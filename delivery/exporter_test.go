package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill/delivery"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/seckilltest"
)

// recordSink records what it is given; fail, when set, decides whether a call fails.
type recordSink struct {
	name string
	mu   sync.Mutex
	got  []events.Event
	fail func() bool
	// block makes Publish wait for its context (a dead endpoint that never answers).
	block bool
}

func (s *recordSink) Name() string { return s.name }
func (s *recordSink) Close() error { return nil }
func (s *recordSink) Publish(ctx context.Context, events []events.Event) error {
	if s.block {
		<-ctx.Done()
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil && s.fail() {
		return errors.New("endpoint answered 503")
	}
	s.got = append(s.got, events...)
	return nil
}

func (s *recordSink) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.got {
		out = append(out, e.ID)
	}
	return out
}

type deadLetters struct {
	mu     sync.Mutex
	events []events.Event
	sinks  []string
}

func (d *deadLetters) AddDeadLetters(_ context.Context, sink string, events []events.Event, _ string, _ time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, events...)
	d.sinks = append(d.sinks, sink)
	return nil
}

func (d *deadLetters) ids() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, e := range d.events {
		out = append(out, e.ID)
	}
	return out
}

func someEvents(n int) []events.Event {
	out := make([]events.Event, n)
	at := time.Now().Add(-time.Hour)
	for i := range out {
		out[i] = events.Event{ID: fmt.Sprintf("r%d:held", i), Type: events.TypeHeld, ReservationID: fmt.Sprintf("r%d", i), At: at}
	}
	return out
}

func idsOf(events []events.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	return out
}

func run(t *testing.T, cfg delivery.Config) *delivery.Exporter {
	x := delivery.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return x
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func logs(l ...events.Log) func(context.Context) ([]events.Log, error) {
	return func(context.Context) ([]events.Log, error) { return l, nil }
}

// TestGiveUpGoesToDeadLetters: a sink that refuses everything has its events, in order,
// written to the dead letters after the give-up time, and the log moves on: the next events
// reach the sink once it is back.
func TestGiveUpGoesToDeadLetters(t *testing.T) {
	l := seckilltest.NewMemLog("sale s")
	sent := someEvents(30)
	l.Append(sent[:20]...)
	var down sync.Mutex
	refusing := true
	sink := &recordSink{name: "http://shop/hook", fail: func() bool { down.Lock(); defer down.Unlock(); return refusing }}
	dead := &deadLetters{}
	x := run(t, delivery.Config{Sinks: []events.Sink{sink}, Logs: logs(l), DeadLetters: dead, GiveUp: 300 * time.Millisecond,
		Batch: 8, RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	eventually(t, "20 dead letters", func() bool { return len(dead.ids()) == 20 })
	if got := dead.ids(); !slices.Equal(got, idsOf(sent[:20])) {
		t.Fatalf("dead letters %v; want the refused events in order %v", got, idsOf(sent[:20]))
	}
	if st := x.Status()[0]; st.DeadLettered != 20 || st.Failures == 0 {
		t.Fatalf("status %+v; want 20 dead-lettered after failures", st)
	}
	down.Lock()
	refusing = false
	down.Unlock()
	l.Append(sent[20:]...)
	eventually(t, "the later events at the sink", func() bool { return len(sink.ids()) == 10 })
	if got := sink.ids(); !slices.Equal(got, idsOf(sent[20:])) {
		t.Fatalf("sink got %v; want %v", got, idsOf(sent[20:]))
	}
}

// TestNoDeadLettersNoGiveUp: without a dead-letter store the exporter never gives up: events
// wait in the log, in order, until the sink takes them.
func TestNoDeadLettersNoGiveUp(t *testing.T) {
	l := seckilltest.NewMemLog("outbox")
	sent := someEvents(12)
	l.Append(sent...)
	calls := 0
	sink := &recordSink{name: "nats://n", fail: func() bool { calls++; return calls < 15 }}
	run(t, delivery.Config{Sinks: []events.Sink{sink}, Logs: logs(l), GiveUp: time.Millisecond, Batch: 5,
		RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond})
	eventually(t, "every event at the sink", func() bool { return len(sink.ids()) == 12 })
	if got := sink.ids(); !slices.Equal(got, idsOf(sent)) {
		t.Fatalf("sink got %v; want %v", got, idsOf(sent))
	}
}

// TestDeadSinkDelaysNoOther: one sink never answers; the other gets every event of every log
// all the same, and the dead one is reported far behind.
func TestDeadSinkDelaysNoOther(t *testing.T) {
	a, b := seckilltest.NewMemLog("sale a"), seckilltest.NewMemLog("sale b")
	sent := someEvents(40)
	dead := &recordSink{name: "http://dead", block: true}
	live := &recordSink{name: "amqp://live"}
	x := run(t, delivery.Config{Sinks: []events.Sink{dead, live}, Logs: logs(a, b), PublishTimeout: time.Hour,
		FarBehind: time.Millisecond})
	a.Append(sent[:20]...)
	b.Append(sent[20:]...)
	eventually(t, "every event at the live sink", func() bool { return len(live.ids()) == 40 })
	// Lag is measured log by log, so the dead sink can be far behind on one log before the
	// other's lag is read: wait for both, then check the figures.
	eventually(t, "the dead sink reported far behind on both logs", func() bool {
		st := x.Status()
		return st[0].FarBehind && !st[1].FarBehind && st[0].LagEvents == 40
	})
	st := x.Status()
	if st[0].LagEvents != 40 || st[1].LagEvents != 0 {
		t.Fatalf("lag %d and %d events; want 40 for the dead sink and 0 for the live one", st[0].LagEvents, st[1].LagEvents)
	}
}

// loseLead is a log whose first lead ends as soon as the sink has been given a batch and
// before it is acknowledged: another leader must send that batch again.
type loseLead struct {
	*seckilltest.MemLog
	mu     sync.Mutex
	leads  int
	cancel context.CancelFunc
}

func (l *loseLead) Lead(ctx context.Context, sink string) (context.Context, func(), error) {
	lead, release, err := l.MemLog.Lead(ctx, sink)
	if err != nil {
		return nil, nil, err
	}
	lead, cancel := context.WithCancel(lead)
	l.mu.Lock()
	l.leads++
	if l.leads == 1 {
		l.cancel = cancel
	}
	l.mu.Unlock()
	return lead, func() { cancel(); release() }, nil
}

func (l *loseLead) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		l.cancel()
		l.cancel = nil
	}
}

// TestLostLeadSendsTheBatchAgain: the batch in flight when the lead is lost is not
// acknowledged, and the next lead sends it again: every event arrives, the first batch
// twice (it had landed, but the answer was lost), none lost.
func TestLostLeadSendsTheBatchAgain(t *testing.T) {
	l := &loseLead{MemLog: seckilltest.NewMemLog("sale c")}
	sent := someEvents(10)
	l.Append(sent...)
	// The first batch lands, but its answer is lost with the lead (a timeout after delivery).
	var sink *recordSink
	sink = &recordSink{name: "kafka://k", fail: func() bool {
		if len(sink.got) == 0 {
			sink.got = append(sink.got, sent[:4]...)
			l.lose()
			return true
		}
		return false
	}}
	run(t, delivery.Config{Sinks: []events.Sink{sink}, Logs: logs(l), Batch: 4})
	eventually(t, "every event at the sink", func() bool {
		seen := map[string]bool{}
		for _, id := range sink.ids() {
			seen[id] = true
		}
		return len(seen) == 10
	})
	got := sink.ids()
	if !slices.Equal(got[:4], got[4:8]) {
		t.Fatalf("sink got %v; want the first batch twice (the lead was lost before its ack)", got)
	}
}
