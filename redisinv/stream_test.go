package redisinv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// fakeSink records stored events; failures makes the next calls fail, poison refuses one
// reservation's events as invalid.
type fakeSink struct {
	mu       sync.Mutex
	events   []seckill.Event
	failures int
	poison   string
	calls    int
}

func (s *fakeSink) ApplyEvents(_ context.Context, events []seckill.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.failures > 0 {
		s.failures--
		return errors.New("database down")
	}
	for _, e := range events {
		if e.Reservation.ID == s.poison {
			return seckill.Errorf(seckill.CodeInvalidArgument, "poison")
		}
	}
	s.events = append(s.events, events...)
	return nil
}

func (s *fakeSink) stored() []seckill.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seckill.Event(nil), s.events...)
}

// statusesByID lists each reservation's statuses in the order they were stored.
func statusesByID(events []seckill.Event) map[string][]seckill.ReservationStatus {
	m := map[string][]seckill.ReservationStatus{}
	for _, e := range events {
		m[e.Reservation.ID] = append(m[e.Reservation.ID], e.Reservation.Status)
	}
	return m
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type streamRig struct {
	t     *testing.T
	rdb   rueidis.Client
	clock *seckilltest.ManualClock
	e     *Engine
}

func newStreamRig(t *testing.T, stock int) *streamRig {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	r := &streamRig{t: t, rdb: c.Inventory, clock: clock, e: newTestEngine(t, c.Inventory, clock)}
	now := clock.Now()
	def, err := seckill.NewSale(seckill.SaleInput{ID: "st", PriceCents: ptr(int64(10)), Stock: &stock, HoldSeconds: ptr(5), StartsAt: &now}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.e.LoadSale(t.Context(), def, 0); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *streamRig) buy(user string) seckill.Reservation {
	r.t.Helper()
	res, err := r.e.Buy(r.t.Context(), seckill.BuyRequest{SaleID: "st", UserID: user, Quantity: 1})
	if err != nil {
		r.t.Fatalf("Buy(%s): %v", user, err)
	}
	return res.Reservation
}

func (r *streamRig) run(sink Sink, cfg ConsumerConfig) (*Consumer, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg.List = func(context.Context) ([]string, error) { return []string{"st"}, nil }
	c := r.e.NewConsumer(sink, cfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	stop := func() { cancel(); <-done }
	r.t.Cleanup(stop)
	return c, stop
}

func (r *streamRig) xlen() int64 {
	n, err := r.rdb.Do(context.Background(), r.rdb.B().Xlen().Key(r.e.streamKey("st")).Build()).AsInt64()
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

func (r *streamRig) pending() int64 {
	v, err := r.rdb.Do(context.Background(), r.rdb.B().Xpending().Key(r.e.streamKey("st")).Group(Group).Build()).ToArray()
	if err != nil {
		r.t.Fatal(err)
	}
	n, _ := v[0].AsInt64()
	return n
}

// TestConsumerStoresEveryChange: every change a script makes reaches the sink, in order per
// reservation and once each, including changes made while no consumer ran; stored entries are
// acknowledged and trimmed.
func TestConsumerStoresEveryChange(t *testing.T) {
	r := newStreamRig(t, 1)
	ctx := t.Context()
	a := r.buy("u1") // held, before any consumer exists
	b := r.buy("u2") // queued
	sink := &fakeSink{}
	c, _ := r.run(sink, ConsumerConfig{TrimEvery: 10 * time.Millisecond})
	if _, err := r.e.Cancel(ctx, a.ID, "u1"); err != nil { // a cancelled, b granted
		t.Fatal(err)
	}
	if res, _, err := r.e.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: "p", ReservationID: b.ID, AmountCents: 10}); err != nil || res != seckill.PaymentApplied {
		t.Fatalf("pay: %s %v", res, err)
	}
	want := map[string][]seckill.ReservationStatus{
		a.ID: {seckill.StatusHeld, seckill.StatusCancelled},
		b.ID: {seckill.StatusQueued, seckill.StatusHeld, seckill.StatusPaid},
	}
	eventually(t, "5 events stored", func() bool { return len(sink.stored()) == 5 })
	got := statusesByID(sink.stored())
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	for _, ev := range sink.stored() {
		res := ev.Reservation
		if res.SaleID != "st" || res.Quantity != 1 || res.AmountCents != 10 || res.Seq == 0 || !ev.At.Equal(r.clock.Now()) {
			t.Fatalf("event %+v: wrong fields", ev)
		}
		if (res.Status == seckill.StatusHeld) != (res.ExpiresAt != nil) || (res.Status == seckill.StatusPaid && res.PaymentID != "p") {
			t.Fatalf("event %+v: expires_at only while held, payment id once paid", ev)
		}
	}
	eventually(t, "nothing pending and the stream trimmed", func() bool { return r.pending() == 0 && r.xlen() <= 1 })
	if c.Stored() != 5 || c.Dropped() != 0 {
		t.Fatalf("stored %d, dropped %d", c.Stored(), c.Dropped())
	}
}

// TestConsumerAcksOnlyAfterCommit: while the store fails, entries stay pending (and in the
// stream); once it recovers they are stored and only then acknowledged.
func TestConsumerAcksOnlyAfterCommit(t *testing.T) {
	r := newStreamRig(t, 3)
	sink := &fakeSink{failures: 4}
	// Both entries are written before the consumer starts, so that its first batch holds both
	// (a consumer already waiting would read the first alone, and stay on it while it fails).
	r.buy("u1")
	r.buy("u2")
	c, _ := r.run(sink, ConsumerConfig{RetryDelay: 20 * time.Millisecond, TrimEvery: 10 * time.Millisecond})
	eventually(t, "a failed attempt", func() bool { return c.Failures() >= 1 })
	if p := r.pending(); p != 2 {
		t.Fatalf("pending %d while the store fails; want the 2 entries kept", p)
	}
	if n := r.xlen(); n != 2 {
		t.Fatalf("stream length %d while the store fails; want 2 (nothing trimmed)", n)
	}
	eventually(t, "stored after recovery", func() bool { return len(sink.stored()) == 2 })
	eventually(t, "acknowledged after the commit", func() bool { return r.pending() == 0 })
}

// TestConsumerTakesOverFromACrashedOne: entries another consumer read and never acknowledged
// (it died) are claimed with XAUTOCLAIM and stored.
func TestConsumerTakesOverFromACrashedOne(t *testing.T) {
	r := newStreamRig(t, 3)
	ctx := context.Background()
	key := r.e.streamKey("st")
	if err := r.rdb.Do(ctx, r.rdb.B().XgroupCreate().Key(key).Group(Group).Id("0").Mkstream().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	r.buy("u1")
	r.buy("u2")
	// The dead consumer reads both entries and dies before storing them.
	if _, err := r.rdb.Do(ctx, r.rdb.B().Xreadgroup().Group(Group, "dead").Count(10).Streams().Key(key).Id(">").Build()).AsXRead(); err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	r.run(sink, ConsumerConfig{ClaimIdle: 200 * time.Millisecond, CheckEvery: 50 * time.Millisecond})
	r.buy("u3")
	eventually(t, "all three stored", func() bool { return len(sink.stored()) == 3 })
	eventually(t, "nothing pending", func() bool { return r.pending() == 0 })
}

// TestConsumerDropsPoison: an event the store refuses as invalid is logged, counted and
// acknowledged; the others of its batch are stored.
func TestConsumerDropsPoison(t *testing.T) {
	r := newStreamRig(t, 3)
	a := r.buy("u1")
	r.buy("u2")
	sink := &fakeSink{poison: a.ID}
	c, _ := r.run(sink, ConsumerConfig{})
	eventually(t, "the good event stored", func() bool { return len(sink.stored()) == 1 })
	eventually(t, "nothing pending", func() bool { return r.pending() == 0 })
	if c.Dropped() != 1 {
		t.Fatalf("dropped %d, want 1", c.Dropped())
	}
}

// TestConsumerSurvivesAFlushedStream: when the stream and its group vanish (a flushed Redis),
// the consumer creates the group again and stores what comes next.
func TestConsumerSurvivesAFlushedStream(t *testing.T) {
	r := newStreamRig(t, 3)
	sink := &fakeSink{}
	r.run(sink, ConsumerConfig{RetryDelay: 10 * time.Millisecond})
	r.buy("u1")
	eventually(t, "first event", func() bool { return len(sink.stored()) == 1 })
	if err := r.rdb.Do(context.Background(), r.rdb.B().Del().Key(r.e.streamKey("st")).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	r.buy("u2")
	eventually(t, "the event after the flush", func() bool { return len(sink.stored()) == 2 })
}

// TestConsumerFinishesItsBatchOnShutdown: a batch being stored when the consumer is told to
// stop is still stored and acknowledged.
func TestConsumerFinishesItsBatchOnShutdown(t *testing.T) {
	r := newStreamRig(t, 3)
	sink := &fakeSink{failures: 3}
	c, stop := r.run(sink, ConsumerConfig{RetryDelay: 100 * time.Millisecond})
	r.buy("u1")
	eventually(t, "a failed attempt", func() bool { return c.Failures() >= 1 })
	stop()
	if got := len(sink.stored()); got != 1 {
		t.Fatalf("stored %d after shutdown, want the batch in hand (1)", got)
	}
	if p := r.pending(); p != 0 {
		t.Fatalf("pending %d after shutdown, want 0", p)
	}
}

// TestConsumerReadsEntriesOfManyEvents: the changes of one script call are one stream entry,
// one field e each, in order (three buyers in one buy.lua call: seq 1, 2, 3); the consumer
// stores every one of them, and of an entry with a malformed field it drops that field only.
func TestConsumerReadsEntriesOfManyEvents(t *testing.T) {
	r := newStreamRig(t, 5)
	ctx := t.Context()
	var args []string
	for _, u := range []string{"u1", "u2", "u3"} {
		args = append(args, u, "1", "", "00000000000000a1")
	}
	if rep, err := r.e.exec(ctx, r.e.scripts.buy, "st", args...); err != nil || rep.code() != "ok" || len(rep) != 4 {
		t.Fatalf("buy.lua for three buyers: %v, %v", rep, err)
	}
	key := r.e.streamKey("st")
	entries, err := r.rdb.Do(ctx, r.rdb.B().Xrange().Key(key).Start("-").End("+").Build()).AsXRangeSlices()
	if err != nil || len(entries) != 1 || len(entries[0].FieldValues) != 3 {
		t.Fatalf("stream after one call of three buyers: %+v, %v; want one entry of three fields", entries, err)
	}
	for i, fv := range entries[0].FieldValues {
		ev, err := decodeEvent("st", fv)
		if err != nil || ev.Reservation.Seq != uint64(i+1) || ev.Reservation.UserID != fmt.Sprintf("u%d", i+1) {
			t.Fatalf("field %d: %+v, %v; want u%d's hold, seq %d", i, ev, err, i+1, i+1)
		}
	}
	good := entries[0].FieldValues[0].Value
	if err := r.rdb.Do(ctx, r.rdb.B().Xadd().Key(key).Id("*").FieldValue().
		FieldValue("e", "not|an|event").FieldValue("x", good).FieldValue("e", strings.Replace(good, "|held|", "|paid|", 1)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	c, _ := r.run(sink, ConsumerConfig{})
	eventually(t, "four events stored", func() bool { return len(sink.stored()) == 4 })
	eventually(t, "nothing pending", func() bool { return r.pending() == 0 })
	got := statusesByID(sink.stored())
	first := sink.stored()[0].Reservation.ID
	if fmt.Sprint(got[first]) != "[held paid]" || len(got) != 3 || c.Dropped() != 2 {
		t.Fatalf("stored %v (dropped %d); want the three holds, the first then paid, and 2 dropped", got, c.Dropped())
	}
}

// TestEventsOfOneCallSplitIntoEntries: a call that changes more reservations than one entry
// takes (closing a sale rejects its whole queue) writes them in entries of at most 64 events,
// in order, and every one reaches the store.
func TestEventsOfOneCallSplitIntoEntries(t *testing.T) {
	r := newStreamRig(t, 7) // a queue of up to 70 buyers
	ctx := t.Context()
	for i := range 7 {
		r.buy(fmt.Sprintf("h%d", i))
	}
	var queued []string
	for i := range 69 {
		queued = append(queued, r.buy(fmt.Sprintf("q%d", i)).ID)
	}
	key := r.e.streamKey("st")
	before, err := r.rdb.Do(ctx, r.rdb.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.e.CloseSale(ctx, "st"); err != nil {
		t.Fatal(err)
	}
	entries, err := r.rdb.Do(ctx, r.rdb.B().Xrange().Key(key).Start("-").End("+").Build()).AsXRangeSlices()
	if err != nil {
		t.Fatal(err)
	}
	var rejected []string
	for _, en := range entries[before:] {
		if len(en.FieldValues) > 64 {
			t.Fatalf("an entry of %d events; want at most 64", len(en.FieldValues))
		}
		for _, fv := range en.FieldValues {
			ev, err := decodeEvent("st", fv)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Reservation.Status == seckill.StatusRejected {
				rejected = append(rejected, ev.Reservation.ID)
			}
		}
	}
	if len(entries)-int(before) < 2 || fmt.Sprint(rejected) != fmt.Sprint(queued) {
		t.Fatalf("closing wrote %d entries rejecting %v; want at least 2 entries rejecting the queue in order %v",
			len(entries)-int(before), rejected, queued)
	}
	sink := &fakeSink{}
	r.run(sink, ConsumerConfig{})
	eventually(t, "every event stored", func() bool { return len(sink.stored()) == 7+69+69 })
}
