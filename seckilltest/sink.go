// This file is the export sink half of package seckilltest: the contract of events.Sink
// (docs/EVENTS.md) as stories, which every sink (HTTP callbacks, RabbitMQ, NATS JetStream,
// Kafka) passes against a real destination.

package seckilltest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
)

// SinkHarness is what TestSink needs: fresh sinks on fresh destinations, and the shop's side.
type SinkHarness struct {
	// Open returns a sink publishing to a fresh destination of its own (an endpoint, an
	// exchange and queue, a stream, a topic) and the consumer's side of that destination. Both
	// are released when the test ends.
	Open func(t *testing.T) SinkUnderTest
	// Reopen, if set, returns a second sink on the destination of an earlier Open: the
	// exporter restarted. Nil skips the restart story.
	Reopen func(t *testing.T, first SinkUnderTest) events.Sink
	// Skip names the stories the sink cannot play, each with the reason.
	Skip map[string]string
}

// SinkUnderTest is one sink and its destination.
type SinkUnderTest struct {
	Sink events.Sink
	// Received returns every event that has reached the destination so far, in the order a
	// consumer reads them, duplicates included. It may wait briefly for deliveries in flight;
	// it must not call t.Fatal from another goroutine.
	Received func(t *testing.T) []events.Event
	// Cut, if set, makes the destination unreachable (the endpoint or broker down, or the path
	// to it cut) until the returned function restores it. Nil skips the outage story.
	Cut func(t *testing.T) (restore func())
	// Destination identifies the destination for Reopen (a URL, a topic name): opaque here.
	Destination string
}

// OpenSink opens a sink with its package's Open (amqpsink.Open, natssink.Open) and no
// options, for a harness and a sink's own tests, and closes it when t ends.
func OpenSink[S events.Sink](t *testing.T, open func(context.Context, string, events.Options) (S, error), raw string) S {
	t.Helper()
	s, err := open(context.Background(), raw, events.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSink runs the events.Sink conformance suite.
func TestSink(t *testing.T, h SinkHarness) {
	t.Helper()
	stories := []story[SinkHarness]{
		{"RoundTrip", sinkRoundTrip},
		{"OrderPerReservation", sinkOrderPerReservation},
		{"DuplicatesCarryTheSameID", sinkDuplicates},
		{"EmptyBatch", sinkEmptyBatch},
		{"OutageThenCatchUp", sinkOutage},
		{"RestartedExporter", sinkRestart},
		{"ExporterRush", exporterRush},
		{"ExporterKilledMidStream", exporterKilled},
		{"ExporterOutage10s", exporterOutage},
	}
	runStories(t, stories, h.Skip, func(*testing.T) SinkHarness { return h })
}

// sinkEvents makes n events over reservations reservations of one sale, each reservation's in
// its lifecycle order (held, then paid or expired), interleaved as a rush interleaves them.
// The ids are unique per call.
func sinkEvents(n, reservations int) []events.Event {
	run := seckill.NewID()[:12]
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	seq := make([]int, reservations)
	out := make([]events.Event, 0, n)
	for i := range n {
		r := i % reservations
		typ, status := events.TypeHeld, "held"
		switch seq[r] % 3 {
		case 1:
			typ, status = events.TypePaid, "paid"
		case 2:
			typ, status = events.TypeRefundRequired, "refund_required"
		}
		var expires *time.Time
		if typ == events.TypeHeld {
			e := at.Add(2 * time.Minute)
			expires = &e
		}
		out = append(out, events.Event{
			ID: fmt.Sprintf("evt-%s-%d", run, i), Type: typ, SchemaVersion: events.SchemaVersion,
			SaleID: "sink-sale", ReservationID: fmt.Sprintf("sink-sale-%s-r%03d", run, r), UserID: fmt.Sprintf("u%d", r),
			Quantity: 1, AmountCents: 999, Status: status, ExpiresAt: expires,
			PaymentID: map[bool]string{true: fmt.Sprintf("p-%s-%d", run, r)}[typ != events.TypeHeld],
			At:        at.Add(time.Duration(i) * time.Millisecond),
		})
		seq[r]++
	}
	return out
}

func publish(t *testing.T, s events.Sink, evs []events.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Publish(ctx, evs); err != nil {
		t.Fatalf("Publish of %d events: %v", len(evs), err)
	}
}

// waitReceived polls the destination until it has at least want distinct events (by id), or
// fails after a generous deadline, and returns everything received.
func waitReceived(t *testing.T, u SinkUnderTest, want int) []events.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := u.Received(t)
		if distinct(got) >= want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the destination has %d distinct events (%d in all), want %d", distinct(got), len(got), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func distinct(events []events.Event) int {
	seen := map[string]bool{}
	for _, e := range events {
		seen[e.ID] = true
	}
	return len(seen)
}

// checkDelivery checks that got holds every event of sent, each copy equal to what was sent
// (a duplicate carries the same id and the same content), nothing else, and each reservation's
// events in the order sent (duplicates may repeat an event, never go back before a later one
// once the later one was first seen).
func checkDelivery(t *testing.T, sent, got []events.Event) {
	t.Helper()
	byID := map[string]events.Event{}
	order := map[string]int{} // event id -> position among its reservation's events
	count := map[string]int{}
	for _, e := range sent {
		byID[e.ID] = e
		order[e.ID] = count[e.ReservationID]
		count[e.ReservationID]++
	}
	seen := map[string]bool{}
	high := map[string]int{} // reservation -> highest position seen so far
	for i, e := range got {
		want, ok := byID[e.ID]
		if !ok {
			t.Fatalf("event %d at the destination was never sent: %+v", i, e)
		}
		if !sameEvent(want, e) {
			t.Fatalf("event %s arrived changed:\n sent %+v\n got  %+v", e.ID, want, e)
		}
		pos := order[e.ID]
		if h, ok := high[e.ReservationID]; ok && !seen[e.ID] && pos < h {
			t.Fatalf("reservation %s: event %s (#%d of its events) arrived after #%d", e.ReservationID, e.ID, pos, h)
		}
		if h, ok := high[e.ReservationID]; !ok || pos > h {
			high[e.ReservationID] = pos
		}
		seen[e.ID] = true
	}
	for _, e := range sent {
		if !seen[e.ID] {
			t.Fatalf("event %s (%s of %s) never arrived", e.ID, e.Type, e.ReservationID)
		}
	}
}

// sameEvent compares two events as their JSON says (times to the nanosecond, in any zone).
func sameEvent(a, b events.Event) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var ma, mb map[string]any
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	if !a.At.Equal(b.At) || (a.ExpiresAt == nil) != (b.ExpiresAt == nil) || (a.ExpiresAt != nil && !a.ExpiresAt.Equal(*b.ExpiresAt)) {
		return false
	}
	delete(ma, "at")
	delete(mb, "at")
	delete(ma, "expires_at")
	delete(mb, "expires_at")
	return reflect.DeepEqual(ma, mb)
}

func sinkRoundTrip(t *testing.T, h SinkHarness) {
	u := h.Open(t)
	sent := sinkEvents(60, 12)
	for i := 0; i < len(sent); i += 20 {
		publish(t, u.Sink, sent[i:i+20])
	}
	checkDelivery(t, sent, waitReceived(t, u, len(sent)))
}

// sinkOrderPerReservation: a rush's worth of events over few reservations, in many small
// batches: each reservation's events arrive in the order published.
func sinkOrderPerReservation(t *testing.T, h SinkHarness) {
	u := h.Open(t)
	sent := sinkEvents(300, 7)
	for i := 0; i < len(sent); i += 3 {
		publish(t, u.Sink, sent[i:min(i+3, len(sent))])
	}
	checkDelivery(t, sent, waitReceived(t, u, len(sent)))
}

// sinkDuplicates: a batch published again (the exporter retried after an error it could not
// tell from a loss) arrives again, or is dropped by the destination, but each copy carries the
// same id and content, so a consumer that dedupes by id sees each event once.
func sinkDuplicates(t *testing.T, h SinkHarness) {
	u := h.Open(t)
	sent := sinkEvents(30, 5)
	publish(t, u.Sink, sent)
	publish(t, u.Sink, sent)
	got := waitReceived(t, u, len(sent))
	checkDelivery(t, sent, got)
}

func sinkEmptyBatch(t *testing.T, h SinkHarness) {
	u := h.Open(t)
	publish(t, u.Sink, nil)
	sent := sinkEvents(3, 1)
	publish(t, u.Sink, sent)
	checkDelivery(t, sent, waitReceived(t, u, len(sent)))
}

// sinkOutage: with the destination down, Publish fails (when its context ends at the latest,
// never hanging past it) rather than claim a delivery; once it is back, publishing the events
// again delivers every one, in order.
func sinkOutage(t *testing.T, h SinkHarness) {
	u := h.Open(t)
	if u.Cut == nil {
		t.Skip("the harness cannot cut the destination")
	}
	before := sinkEvents(20, 4)
	publish(t, u.Sink, before[:10])
	restore := u.Cut(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err := u.Sink.Publish(ctx, before[10:])
	cancel()
	if err == nil {
		restore()
		t.Fatal("Publish answered nil while the destination was down")
	}
	restore()
	// The exporter publishes what failed again until it succeeds.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := u.Sink.Publish(ctx, before[10:])
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Publish still fails a minute after the destination came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	checkDelivery(t, before, waitReceived(t, u, len(before)))
}

// sinkRestart: the exporter stops (Close) and a new sink takes over the destination: nothing
// sent before or after is missing.
func sinkRestart(t *testing.T, h SinkHarness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen a destination")
	}
	u := h.Open(t)
	sent := sinkEvents(40, 8)
	publish(t, u.Sink, sent[:20])
	if err := u.Sink.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	second := h.Reopen(t, u)
	t.Cleanup(func() { _ = second.Close() })
	publish(t, second, sent[20:])
	checkDelivery(t, sent, waitReceived(t, u, len(sent)))
}
