package amqpsink_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/amqpsink"
	"github.com/seckill-go/seckill/events/sinks"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/internal/testkit/toxic"
	"github.com/seckill-go/seckill/seckilltest"
)

// TestSink runs the sink conformance suite against the test RabbitMQ: per test a fresh
// exchange, an exclusive queue bound with "#" consumed into a slice, and the sink connected
// through a proxy whose path the outage story cuts.
func TestSink(t *testing.T) {
	base := testenv.AMQP(t)
	seckilltest.TestSink(t, seckilltest.SinkHarness{
		Open: func(t *testing.T) seckilltest.SinkUnderTest {
			exchange := "seckill.test." + seckill.NewID()[:12]
			proxy := toxic.New(t, testenv.HostPort(t, base))
			sinkURL := via(t, base, proxy.Addr) + "?exchange=" + exchange
			s := open(t, sinkURL)
			received := consume(t, base, exchange)
			return seckilltest.SinkUnderTest{
				Sink:        s,
				Received:    received,
				Cut:         proxy.Outage,
				Destination: sinkURL,
			}
		},
		Reopen: func(t *testing.T, first seckilltest.SinkUnderTest) events.Sink {
			return open(t, first.Destination)
		},
	})
}

func open(t *testing.T, raw string) *amqpsink.Sink {
	return seckilltest.OpenSink(t, amqpsink.Open, raw)
}

// via is raw with its host replaced by addr and no query.
func via(t *testing.T, raw, addr string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host, u.RawQuery = addr, ""
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String()
}

// consume declares the exchange (as the sink will), binds an exclusive auto-delete queue to it
// with "#" and collects what arrives; the exchange is deleted when the test ends.
func consume(t *testing.T, base, exchange string) func(t *testing.T) []events.Event {
	t.Helper()
	conn, err := amqp.Dial(base)
	if err != nil {
		t.Fatalf("dial the test RabbitMQ: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "#", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		got  []events.Event
		bad  []string
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for d := range deliveries {
			var e events.Event
			err := json.Unmarshal(d.Body, &e)
			mu.Lock()
			switch {
			case err != nil:
				bad = append(bad, "body: "+err.Error())
			case d.MessageId != e.ID || d.Type != e.Type || d.RoutingKey != amqpsink.RoutingKey(e.Type) ||
				d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent:
				bad = append(bad, "properties of "+e.ID+": id "+d.MessageId+", type "+d.Type+", key "+d.RoutingKey+", content type "+d.ContentType)
			default:
				got = append(got, e)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ch.ExchangeDelete(exchange, false, false)
		_ = conn.Close()
		<-done
	})
	return func(t *testing.T) []events.Event {
		mu.Lock()
		defer mu.Unlock()
		if len(bad) > 0 {
			t.Errorf("malformed messages: %s", strings.Join(bad, "; "))
		}
		return append([]events.Event(nil), got...)
	}
}

// TestUnroutable: with no queue bound, RabbitMQ would drop the messages; the sink says so
// rather than report them delivered.
func TestUnroutable(t *testing.T) {
	base := testenv.AMQP(t)
	exchange := "seckill.test." + seckill.NewID()[:12]
	s := open(t, strings.TrimSuffix(via(t, base, testenv.HostPort(t, base)), "/")+"/?exchange="+exchange)
	t.Cleanup(func() {
		if conn, err := amqp.Dial(base); err == nil {
			if ch, err := conn.Channel(); err == nil {
				_ = ch.ExchangeDelete(exchange, false, false)
			}
			_ = conn.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.Publish(ctx, []events.Event{{ID: "e1", Type: events.TypeExpired, SchemaVersion: 1, At: time.Now().UTC()}})
	if err == nil || !strings.Contains(err.Error(), "no queue is bound") {
		t.Fatalf("Publish with no queue bound: %v, want an error saying no queue is bound", err)
	}
}

// TestPublishHonoursContext: with the broker unreachable, Publish fails, by the end of its
// context at the latest.
func TestPublishHonoursContext(t *testing.T) {
	base := testenv.AMQP(t)
	proxy := toxic.New(t, testenv.HostPort(t, base))
	proxy.Cut()
	s := open(t, via(t, base, proxy.Addr))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.Publish(ctx, []events.Event{{ID: "e1", Type: events.TypeHeld, SchemaVersion: 1}})
	if err == nil {
		t.Fatal("Publish answered nil with the broker unreachable")
	}
}

func TestOpenRefusesBadURLs(t *testing.T) {
	for _, raw := range []string{
		"amqp://h:5672/?exchnage=x",               // typo
		"amqp://h:5672/?exchange=",                // empty
		"amqp://h:5672/?exchange=amq.topic",       // reserved
		"amqp://h:5672/?exchange=a%20b",           // space
		"amqp://h:5672/?exchange=a&exchange=b",    // twice
		"amqp://h:5672/?heartbeat=soon",           // RabbitMQ's own parameter, malformed
		"http://h:5672/",                          // not amqp
		"amqp:///vhost",                           // no host
		"amqp://u:secret@h:5672/?exchnage=x#frag", // typo, and the password stays out of the error
	} {
		_, err := amqpsink.Open(context.Background(), raw, events.Options{})
		if !errors.Is(err, events.ErrBadURL) {
			t.Errorf("Open(%q) = %v, want ErrBadURL", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): the error shows the password: %v", raw, err)
		}
	}
	for _, raw := range []string{
		"amqp://guest:guest@127.0.0.1:5672/",
		"amqps://u:p@h/vh?exchange=shop.events&heartbeat=30&server_name_indication=h",
	} {
		if _, err := amqpsink.Open(context.Background(), raw, events.Options{}); err != nil {
			t.Errorf("Open(%q): %v", raw, err)
		}
	}
}

func TestNameHidesThePassword(t *testing.T) {
	s, err := amqpsink.Open(context.Background(), "amqp://shop:hunter2@mq.example:5672/prod?exchange=x", events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.Name(), "hunter2") || !strings.Contains(s.Name(), "mq.example") {
		t.Fatalf("Name() = %q: want the host without the password", s.Name())
	}
	if s.Exchange() != "x" {
		t.Fatalf("Exchange() = %q, want x", s.Exchange())
	}
	d, _ := amqpsink.Open(context.Background(), "amqp://h/", events.Options{})
	if d.Exchange() != amqpsink.DefaultExchange {
		t.Fatalf("default exchange %q, want %q", d.Exchange(), amqpsink.DefaultExchange)
	}
}

// TestOpenedBySinks: export/sinks opens amqp and amqps URLs as this package's sinks, and a bad
// one as an error with no sink (not a nil *Sink in the interface).
func TestOpenedBySinks(t *testing.T) {
	for _, raw := range []string{"amqp://u:p@h:5672/?exchange=x", "AMQPS://u:p@h/"} {
		s, err := sinks.Open(context.Background(), raw, events.Options{})
		if err != nil {
			t.Fatalf("sinks.Open(%q): %v", raw, err)
		}
		if _, ok := s.(*amqpsink.Sink); !ok {
			t.Fatalf("sinks.Open(%q) = %T, want *amqpsink.Sink", raw, s)
		}
	}
	s, err := sinks.Open(context.Background(), "amqp://h/?exchnage=x", events.Options{})
	if !errors.Is(err, events.ErrBadURL) || s != nil {
		t.Fatalf("sinks.Open of a bad amqp URL = %v, %v; want nil, ErrBadURL", s, err)
	}
}

// TestNackIsAnError: a queue that refuses what overflows it (x-overflow reject-publish) makes
// the broker nack; Publish reports it rather than count the batch delivered.
func TestNackIsAnError(t *testing.T) {
	base := testenv.AMQP(t)
	exchange := "seckill.test." + seckill.NewID()[:12]
	conn, err := amqp.Dial(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.ExchangeDelete(exchange, false, false) })
	q, err := ch.QueueDeclare("", false, true, true, false, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "#", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	s := open(t, via(t, base, testenv.HostPort(t, base))+"?exchange="+exchange)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := []events.Event{
		{ID: "n1", Type: events.TypeHeld, SchemaVersion: 1, At: time.Now().UTC()},
		{ID: "n2", Type: events.TypePaid, SchemaVersion: 1, At: time.Now().UTC()},
	}
	err = s.Publish(ctx, events)
	if err == nil || !strings.Contains(err.Error(), "nacked") {
		t.Fatalf("Publish into a full reject-publish queue: %v, want a nack error", err)
	}
}

// BenchmarkPublish: events per second through one sink, in batches of 100, each batch waiting
// for its confirms.
func BenchmarkPublish(b *testing.B) {
	base := testenv.AMQP(b)
	exchange := "seckill.bench." + seckill.NewID()[:12]
	conn, err := amqp.Dial(base)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ch.ExchangeDelete(exchange, false, false) }()
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "#", exchange, false, nil); err != nil {
		b.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for range deliveries { // drain, so the queue does not grow
		}
	}()
	u, _ := url.Parse(base)
	u.RawQuery = "exchange=" + exchange
	s, err := amqpsink.Open(context.Background(), u.String(), events.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := make([]events.Event, 100)
	for i := range batch {
		batch[i] = events.Event{ID: "b" + string(rune('0'+i%10)), Type: events.TypeHeld, SchemaVersion: 1,
			SaleID: "bench", ReservationID: "bench-r", UserID: "u", Quantity: 1, AmountCents: 999, Status: "held", At: time.Now().UTC()}
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if err := s.Publish(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "events/s")
}
