package kafkasink_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/kafkasink"
	"github.com/seckill-go/seckill/events/sinks"
	"github.com/seckill-go/seckill/seckilltest"
)

// Every producer, consumer and fake cluster a test starts is gone when it ends: in particular
// Publish leaves no goroutine behind once its sink is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const partitions = 4

// cluster is an in-process Kafka cluster (three brokers) with one topic of four partitions,
// so that records of different keys really go to different partitions and leaders.
func cluster(t *testing.T, topics ...string) *kfake.Cluster {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(3)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func sinkURL(c *kfake.Cluster, topic string) string {
	return "kafka://" + strings.Join(c.ListenAddrs(), ",") + "?topic=" + topic
}

func open(t *testing.T, raw string) events.Sink {
	t.Helper()
	s, err := kafkasink.Open(raw)
	if err != nil {
		t.Fatalf("Open(%q): %v", raw, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// received is what a consumer of the topic has read: every record from the start of every
// partition, in the order it read them (per partition, the order Kafka stored them).
type received struct {
	mu      sync.Mutex
	records []*kgo.Record
	errs    []string
}

// consume reads topic from the start, in the background, until the test ends.
func consume(t *testing.T, c *kfake.Cluster, topic string) *received {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	r := &received{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			r.mu.Lock()
			fetches.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
					r.errs = append(r.errs, fmt.Sprintf("fetch %s/%d: %v", topic, p, err))
				}
			})
			fetches.EachRecord(func(rec *kgo.Record) { r.records = append(r.records, rec) })
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return r
}

// events decodes every record read so far, checking that its key and headers say what its
// value says.
func (r *received) events(t *testing.T) []events.Event {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		t.Error(e)
	}
	r.errs = nil
	out := make([]events.Event, 0, len(r.records))
	for _, rec := range r.records {
		var e events.Event
		if err := json.Unmarshal(rec.Value, &e); err != nil {
			t.Errorf("record %s/%d@%d: value is not an event: %v", rec.Topic, rec.Partition, rec.Offset, err)
			continue
		}
		if string(rec.Key) != e.ReservationID {
			t.Errorf("event %s: key %q, want its reservation id %q", e.ID, rec.Key, e.ReservationID)
		}
		want := map[string]string{"event-id": e.ID, "event-type": e.Type, "schema-version": strconv.Itoa(e.SchemaVersion)}
		got := map[string]string{}
		for _, h := range rec.Headers {
			got[h.Key] = string(h.Value)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("event %s: headers %v, want %v", e.ID, got, want)
		}
		out = append(out, e)
	}
	return out
}

// cut makes every broker refuse produce requests, closing the producer's connection as a
// broker that died mid-request would, until restore. Metadata and fetches still work, so the
// producer finds the brokers and keeps trying, which is the hard case: requests are sent and
// never answered, so the idempotent producer cannot fail them and Publish must end by its
// context. (Stopping the cluster would lose its data, and a proxy in front of it would not
// do: brokers advertise their own addresses, which clients then dial directly.)
func cut(c *kfake.Cluster) (restore func()) {
	var down atomic.Bool
	down.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !down.Load() {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		return nil, errors.New("cut"), true
	})
	return func() { down.Store(false) }
}

func TestSinkConformance(t *testing.T) {
	seckilltest.TestSink(t, seckilltest.SinkHarness{
		Open: func(t *testing.T) seckilltest.SinkUnderTest {
			topic := "seckill.events"
			c := cluster(t, topic)
			raw := sinkURL(c, topic)
			r := consume(t, c, topic)
			return seckilltest.SinkUnderTest{
				Sink:        open(t, raw),
				Received:    r.events,
				Cut:         func(*testing.T) func() { return cut(c) },
				Destination: raw,
			}
		},
		Reopen: func(t *testing.T, first seckilltest.SinkUnderTest) events.Sink {
			s, err := kafkasink.Open(first.Destination)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			return s
		},
	})
}

// TestKeyIsTheReservation: records are keyed by reservation id, so each reservation's events
// share one partition (where Kafka keeps their order) while reservations spread over all.
func TestKeyIsTheReservation(t *testing.T) {
	const topic = "orders"
	c := cluster(t, topic)
	r := consume(t, c, topic)
	s := open(t, sinkURL(c, topic))
	var sent []events.Event
	for i := range 90 {
		res := fmt.Sprintf("phone-r%02d", i%30)
		sent = append(sent, events.Event{ID: fmt.Sprintf("%s.%d", res, i/30), Type: events.TypeHeld,
			SchemaVersion: events.SchemaVersion, SaleID: "phone", ReservationID: res, UserID: "u",
			Quantity: 1, AmountCents: 100, Status: "held", At: time.Unix(int64(i), 0).UTC()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Publish(ctx, sent); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(r.events(t)) < len(sent) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	r.events(t) // checks keys and headers
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.records) != len(sent) {
		t.Fatalf("read %d records, want %d", len(r.records), len(sent))
	}
	partitionOf := map[string]int32{}
	used := map[int32]bool{}
	next := map[string]int{} // reservation -> the sequence number its next record must carry
	for _, rec := range r.records {
		key := string(rec.Key)
		if p, ok := partitionOf[key]; ok && p != rec.Partition {
			t.Errorf("reservation %s is in partitions %d and %d", key, p, rec.Partition)
		}
		partitionOf[key] = rec.Partition
		used[rec.Partition] = true
		var e events.Event
		_ = json.Unmarshal(rec.Value, &e)
		if want := fmt.Sprintf("%s.%d", key, next[key]); e.ID != want {
			t.Errorf("reservation %s: read %s, want %s next", key, e.ID, want)
		}
		next[key]++
	}
	if len(used) != partitions {
		t.Errorf("30 reservations used partitions %v, want all %d", used, partitions)
	}
}

// TestMissingTopicFails: the producer does not create topics; publishing to one that does not
// exist fails (here within the URL's timeout) instead of creating it with broker defaults.
func TestMissingTopicFails(t *testing.T) {
	c := cluster(t, "other")
	s := open(t, sinkURL(c, "nope")+"&timeout=2s")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.Publish(ctx, []events.Event{{ID: "e1", Type: events.TypeHeld, ReservationID: "r1"}})
	if err == nil {
		t.Fatal("Publish to a missing topic answered nil")
	}
	if ctx.Err() != nil {
		t.Fatalf("Publish ended by the test's minute, not the sink's 2s timeout: %v", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("error does not name the topic: %v", err)
	}
}

// TestBrokerErrorFails: a broker that answers every produce with an error makes Publish fail
// (by the URL's timeout at the latest), and publishing the same events again goes through, in
// order, once it recovers.
func TestBrokerErrorFails(t *testing.T) {
	const topic = "t"
	c := cluster(t, topic)
	r := consume(t, c, topic)
	s := open(t, sinkURL(c, topic)+"&timeout=2s")
	var refuse atomic.Bool
	refuse.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !refuse.Load() {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = 19 // NOT_ENOUGH_REPLICAS: retriable, so only the timeout ends it
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	sent := []events.Event{{ID: "e1", Type: events.TypeHeld, ReservationID: "r1", SchemaVersion: 1},
		{ID: "e2", Type: events.TypePaid, ReservationID: "r1", SchemaVersion: 1}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Publish(ctx, sent); err == nil {
		t.Fatal("Publish answered nil while every produce failed")
	} else if ctx.Err() != nil {
		t.Fatalf("Publish ended by the test's minute, not the sink's 2s timeout: %v", err)
	}
	refuse.Store(false)
	// The exporter publishes what failed again until it succeeds (the producer may still be
	// backing off from the errors at first).
	for {
		err := s.Publish(ctx, sent)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Publish still fails a minute after the broker recovered: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(r.events(t)) < len(sent) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	var order []string
	seen := map[string]bool{}
	for _, e := range r.events(t) {
		if !seen[e.ID] {
			seen[e.ID] = true
			order = append(order, e.ID)
		}
	}
	if fmt.Sprint(order) != "[e1 e2]" {
		t.Fatalf("read events %v (first copies), want [e1 e2]", order)
	}
}

func TestParseURL(t *testing.T) {
	cfg, err := kafkasink.ParseURL("kafka://k1:9092,k2:9093")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.Brokers) != "[k1:9092 k2:9093]" || cfg.Topic != kafkasink.DefaultTopic ||
		cfg.Timeout != kafkasink.DefaultTimeout || cfg.ClientID != "seckill" {
		t.Errorf("defaults: %+v", cfg)
	}
	cfg, err = kafkasink.ParseURL("KAFKA://[::1]:9092/?topic=shop.orders_v1-x&timeout=1500ms&client_id=shop-seckill")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.Brokers) != "[[::1]:9092]" || cfg.Topic != "shop.orders_v1-x" || cfg.Timeout != 1500*time.Millisecond || cfg.ClientID != "shop-seckill" {
		t.Errorf("options: %+v", cfg)
	}
	for _, raw := range []string{
		"kafka://",
		"kafka://k1",
		"kafka://k1:",
		"kafka://:9092",
		"kafka://k1:0",
		"kafka://k1:65536",
		"kafka://k1:09092",
		"kafka://k1:9092,",
		"kafka://k1:9092,k2",
		"kafka://user:pw@k1:9092",
		"kafka://k1:9092/topic",
		"kafka://k1:9092#x",
		"amqp://k1:9092",
		"kafka://k1:9092?topic=",
		"kafka://k1:9092?topic=a/b",
		"kafka://k1:9092?topic=..",
		"kafka://k1:9092?topic=" + strings.Repeat("t", 250),
		"kafka://k1:9092?topic=a&topic=b",
		"kafka://k1:9092?timeout=10",
		"kafka://k1:9092?timeout=-1s",
		"kafka://k1:9092?timeout=1ms",
		"kafka://k1:9092?timeout=1h",
		"kafka://k1:9092?client_id=",
		"kafka://k1:9092?acks=all",
		"kafka://k1:9092?acks=1",
		"kafka://k1:9092?Topic=x",
		"kafka://k1:9092?partitioner=random",
		"kafka://k1:9092?topic=a;b",
		"kafka://k1:9092?%zz",
	} {
		if _, err := kafkasink.ParseURL(raw); !errors.Is(err, events.ErrBadURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrBadURL", raw, err)
		}
	}
}

// FuzzParseURL: any input is refused with ErrBadURL or gives a usable configuration.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"kafka://k1:9092", "kafka://a:1,b:2?topic=x.y&timeout=3s&client_id=c",
		"kafka://[::1]:9092/?topic=t", "kafka://k1:9092?acks=all", "kafka://u:p@k:1", "kafka://k:1?topic=%2F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		cfg, err := kafkasink.ParseURL(raw)
		if err != nil {
			if !errors.Is(err, events.ErrBadURL) {
				t.Fatalf("ParseURL(%q): %v does not wrap ErrBadURL", raw, err)
			}
			return
		}
		if len(cfg.Brokers) == 0 || cfg.Topic == "" || len(cfg.Topic) > 249 || cfg.Timeout <= 0 || cfg.ClientID == "" {
			t.Fatalf("ParseURL(%q) accepted an unusable configuration %+v", raw, cfg)
		}
		for _, b := range cfg.Brokers {
			i := strings.LastIndex(b, ":")
			if n, err := strconv.Atoi(b[i+1:]); i <= 0 || err != nil || n < 1 || n > 65535 {
				t.Fatalf("ParseURL(%q): broker %q", raw, b)
			}
		}
		for _, r := range cfg.Topic {
			if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", r) {
				t.Fatalf("ParseURL(%q): topic %q", raw, cfg.Topic)
			}
		}
	})
}

// TestOpenedBySinks: export/sinks opens kafka:// URLs with this package and refuses its bad
// options.
func TestOpenedBySinks(t *testing.T) {
	s, err := sinks.Open(context.Background(), "kafka://127.0.0.1:1?topic=x", events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*kafkasink.Sink); !ok {
		t.Fatalf("sinks.Open gave a %T", s)
	}
	if s.Name() != "kafka://127.0.0.1:1?topic=x" {
		t.Errorf("Name = %q", s.Name())
	}
	if _, err := sinks.Open(context.Background(), "kafka://127.0.0.1:1?acks=1", events.Options{}); !errors.Is(err, events.ErrBadURL) {
		t.Errorf("acks=1: %v, want ErrBadURL", err)
	}
}
