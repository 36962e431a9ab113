package natssink_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/natssink"
	"github.com/seckill-go/seckill/events/sinks"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/internal/testkit/toxic"
	"github.com/seckill-go/seckill/seckilltest"
)

// TestSink runs the sink conformance suite against the test NATS server: per test a fresh
// stream and subject prefix (the sink creates the stream), an ordered consumer reading
// everything, and the sink connected through a proxy whose path the outage story cuts.
func TestSink(t *testing.T) {
	base := testenv.NATS(t)
	seckilltest.TestSink(t, seckilltest.SinkHarness{
		Open: func(t *testing.T) seckilltest.SinkUnderTest {
			id := seckill.NewID()[:12]
			stream, prefix := "SECKILL_TEST_"+id, "seckill.test."+id
			proxy := toxic.New(t, testenv.HostPort(t, base))
			sinkURL := "nats://" + proxy.Addr + "?stream=" + stream + "&subject=" + prefix
			s := open(t, sinkURL)
			js := client(t, base)
			t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
			return seckilltest.SinkUnderTest{
				Sink:        s,
				Received:    reader(t, js, stream, prefix),
				Cut:         proxy.Outage,
				Destination: sinkURL,
			}
		},
		Reopen: func(t *testing.T, first seckilltest.SinkUnderTest) events.Sink {
			return open(t, first.Destination)
		},
	})
}

func open(t *testing.T, raw string) *natssink.Sink {
	return seckilltest.OpenSink(t, natssink.Open, raw)
}

// client is a JetStream client of the test server, straight (not through a proxy).
func client(t *testing.T, base string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(base)
	if err != nil {
		t.Fatalf("connect to the test NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// reader returns what the stream holds, read by an ordered consumer started on the first call
// (by then the sink has created the stream) and checked message by message: the subject is
// the prefix and the event's type, and Nats-Msg-Id is the event's id.
func reader(t *testing.T, js jetstream.JetStream, stream, prefix string) func(t *testing.T) []events.Event {
	var (
		mu      sync.Mutex
		got     []events.Event
		bad     []string
		started bool
	)
	return func(t *testing.T) []events.Event {
		mu.Lock()
		if !started {
			mu.Unlock()
			cons, err := js.OrderedConsumer(context.Background(), stream, jetstream.OrderedConsumerConfig{})
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil // the sink creates it with its first publish: nothing has arrived yet
			}
			if err != nil {
				t.Errorf("ordered consumer on %s: %v", stream, err)
				return nil
			}
			cc, err := cons.Consume(func(m jetstream.Msg) {
				var e events.Event
				err := json.Unmarshal(m.Data(), &e)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					bad = append(bad, "body: "+err.Error())
				case m.Subject() != prefix+"."+e.Type || m.Headers().Get(jetstream.MsgIDHeader) != e.ID ||
					m.Headers().Get("Content-Type") != "application/json":
					bad = append(bad, "message of "+e.ID+": subject "+m.Subject()+", id "+m.Headers().Get(jetstream.MsgIDHeader))
				default:
					got = append(got, e)
				}
			})
			if err != nil {
				t.Errorf("consume %s: %v", stream, err)
				return nil
			}
			t.Cleanup(cc.Stop)
			mu.Lock()
			started = true
		}
		defer mu.Unlock()
		if len(bad) > 0 {
			t.Errorf("malformed messages: %s", strings.Join(bad, "; "))
		}
		return append([]events.Event(nil), got...)
	}
}

func testEvents(n int) []events.Event {
	out := make([]events.Event, n)
	run := seckill.NewID()[:8]
	for i := range out {
		out[i] = events.Event{ID: "e-" + run + "-" + string(rune('a'+i)), Type: events.TypeExpired, SchemaVersion: 1,
			ReservationID: "r1", At: time.Now().UTC()}
	}
	return out
}

// TestStreamCreatedAndDuplicatesDropped: the sink creates the stream as documented, and a
// batch published twice within the duplicate window is stored once.
func TestStreamCreatedAndDuplicatesDropped(t *testing.T) {
	base := testenv.NATS(t)
	id := seckill.NewID()[:12]
	stream, prefix := "SECKILL_TEST_"+id, "seckill.test."+id
	js := client(t, base)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	s := open(t, base+"?stream="+stream+"&subject="+prefix+"&duplicate_window=90s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := testEvents(5)
	for range 2 {
		if err := s.Publish(ctx, events); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := info.Config
	if len(c.Subjects) != 1 || c.Subjects[0] != prefix+".>" || c.Duplicates != 90*time.Second ||
		c.MaxAge != natssink.DefaultMaxAge || c.Storage != jetstream.FileStorage {
		t.Fatalf("stream config: subjects %v, duplicates %v, max age %v, storage %v", c.Subjects, c.Duplicates, c.MaxAge, c.Storage)
	}
	if info.State.Msgs != uint64(len(events)) {
		t.Fatalf("the stream holds %d messages after the same %d events were published twice, want %d", info.State.Msgs, len(events), len(events))
	}
}

// TestExistingStreamLeftAlone: a stream that exists is used as it is; one that does not take
// the sink's subjects makes Publish fail rather than store events elsewhere or nowhere.
func TestExistingStreamLeftAlone(t *testing.T) {
	base := testenv.NATS(t)
	id := seckill.NewID()[:12]
	stream, prefix := "SECKILL_TEST_"+id, "seckill.test."+id
	js := client(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The operator's stream: more subjects, a longer window, memory storage.
	cfg := jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>", "other." + id + ".>"},
		Storage: jetstream.MemoryStorage, Duplicates: 10 * time.Minute}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	s := open(t, base+"?stream="+stream+"&subject="+prefix)
	if err := s.Publish(ctx, testEvents(2)); err != nil {
		t.Fatalf("Publish to an existing stream: %v", err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Duplicates != 10*time.Minute || info.Config.Storage != jetstream.MemoryStorage || len(info.Config.Subjects) != 2 {
		t.Fatalf("the sink changed the existing stream: %+v", info.Config)
	}
	// A sink whose subjects the stream does not capture.
	wrong := open(t, base+"?stream="+stream+"&subject=elsewhere."+id)
	short, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if err := wrong.Publish(short, testEvents(1)); err == nil {
		t.Fatal("Publish answered nil for subjects the stream does not capture")
	}
}

// TestPublishHonoursContext: with the server unreachable, Publish fails, by the end of its
// context at the latest, rather than buffer the events.
func TestPublishHonoursContext(t *testing.T) {
	base := testenv.NATS(t)
	proxy := toxic.New(t, testenv.HostPort(t, base))
	proxy.Cut()
	s := open(t, "nats://"+proxy.Addr+"?stream=SECKILL_TEST_UNREACHABLE")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Publish(ctx, testEvents(1)); err == nil {
		t.Fatal("Publish answered nil with the server unreachable")
	}
}

func TestOpenRefusesBadURLs(t *testing.T) {
	for _, raw := range []string{
		"nats://h:4222?steam=X",                        // typo
		"nats://h:4222?stream=a.b",                     // dot in a stream name
		"nats://h:4222?stream=",                        // empty
		"nats://h:4222?subject=a..b",                   // empty token
		"nats://h:4222?subject=a.*",                    // wildcard
		"nats://h:4222?duplicate_window=soon",          // not a duration
		"nats://h:4222?duplicate_window=0s",            // no window
		"nats://h:4222?duplicate_window=2h&max_age=1h", // window beyond the messages' life
		"nats://h:4222?stream=A&stream=B",              // twice
		"nats://h:4222/path",                           // a path
		"amqp://h:4222",                                // not nats
		"nats://u:secret@h:4222?steam=X",               // typo, and the password stays out of the error
		"nats://secret@h:4222?steam=X",                 // and a token too
	} {
		s, err := natssink.Open(context.Background(), raw, events.Options{})
		if err == nil {
			_ = s.Close()
		}
		if !errors.Is(err, events.ErrBadURL) {
			t.Errorf("Open(%q) = %v, want ErrBadURL", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): the error shows the password: %v", raw, err)
		}
	}
}

func TestNameAndDefaults(t *testing.T) {
	// Nothing listens on port 1: Open does not wait for a connection.
	s, err := natssink.Open(context.Background(), "nats://shop:hunter2@127.0.0.1:1", events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if strings.Contains(s.Name(), "hunter2") || !strings.Contains(s.Name(), "127.0.0.1:1") {
		t.Fatalf("Name() = %q: want the host without the password", s.Name())
	}
	tok, err := natssink.Open(context.Background(), "nats://s3cr3t-token@127.0.0.1:1", events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	if strings.Contains(tok.Name(), "s3cr3t") {
		t.Fatalf("Name() = %q shows the token", tok.Name())
	}
	if s.Stream() != natssink.DefaultStream || s.Subject(events.TypeExpired) != natssink.DefaultSubject+".expired" {
		t.Fatalf("defaults: stream %q, subject %q", s.Stream(), s.Subject(events.TypeExpired))
	}
}

// TestOpenedBySinks: export/sinks opens nats URLs as this package's sinks, and a bad one as an
// error with no sink (not a nil *Sink in the interface).
func TestOpenedBySinks(t *testing.T) {
	s, err := sinks.Open(context.Background(), "nats://127.0.0.1:1?stream=X", events.Options{})
	if err != nil {
		t.Fatalf("sinks.Open: %v", err)
	}
	defer s.Close()
	if _, ok := s.(*natssink.Sink); !ok {
		t.Fatalf("sinks.Open = %T, want *natssink.Sink", s)
	}
	bad, err := sinks.Open(context.Background(), "nats://h:4222?steam=X", events.Options{})
	if !errors.Is(err, events.ErrBadURL) || bad != nil {
		t.Fatalf("sinks.Open of a bad nats URL = %v, %v; want nil, ErrBadURL", bad, err)
	}
}

// TestRefusedIsAnError: a stream that refuses new messages (full, discard new) answers with an
// error instead of an ack; Publish reports it rather than count the batch delivered.
func TestRefusedIsAnError(t *testing.T) {
	base := testenv.NATS(t)
	id := seckill.NewID()[:12]
	stream, prefix := "SECKILL_TEST_"+id, "seckill.test."+id
	js := client(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"},
		Storage: jetstream.MemoryStorage, MaxMsgs: 1, Discard: jetstream.DiscardNew}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	s := open(t, base+"?stream="+stream+"&subject="+prefix)
	if err := s.Publish(ctx, testEvents(2)); err == nil {
		t.Fatal("Publish answered nil though the stream refused the second event")
	}
}

// BenchmarkPublish: events per second through one sink, in batches of 100, every
// acknowledgement awaited.
func BenchmarkPublish(b *testing.B) {
	base := testenv.NATS(b)
	id := seckill.NewID()[:12]
	stream, prefix := "SECKILL_BENCH_"+id, "seckill.bench."+id
	nc, err := nats.Connect(base)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), stream) }()
	s, err := natssink.Open(context.Background(), base+"?stream="+stream+"&subject="+prefix, events.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	run := seckill.NewID()[:8]
	ctx := context.Background()
	n := 0
	batch := make([]events.Event, 100)
	// A rush's events are of many reservations; SECKILL_BENCH_RESERVATIONS=1 measures the worst
	// case, one reservation (one acknowledgement awaited per event).
	reservations := 1000
	if v, err := strconv.Atoi(os.Getenv("SECKILL_BENCH_RESERVATIONS")); err == nil && v > 0 {
		reservations = v
	}
	b.ResetTimer()
	for range b.N {
		for i := range batch { // fresh ids: duplicates would be dropped, not stored
			batch[i] = events.Event{ID: run + "-" + strconv.Itoa(n), Type: events.TypeHeld, SchemaVersion: 1,
				SaleID: "bench", ReservationID: "bench-r" + strconv.Itoa(n%reservations), UserID: "u", Quantity: 1, AmountCents: 999, Status: "held", At: time.Now().UTC()}
			n++
		}
		if err := s.Publish(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "events/s")
}
