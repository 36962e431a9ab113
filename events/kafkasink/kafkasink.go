// Package kafkasink exports reservation events to a Kafka topic (docs/EVENTS.md, "Kafka"),
// with franz-go's idempotent producer.
//
// Each event is one record: key = the reservation id, so that the default (murmur2, the same
// as Java clients') partitioner puts all of a reservation's events in one partition, where
// Kafka keeps them in order; value = the event's JSON; headers event-id, event-type and
// schema-version, so a consumer can route or dedupe without parsing the value.
//
// The producer is idempotent (franz-go's default, kept on) with acks from all in-sync replicas
// (which idempotence requires): a record the client resends after a lost answer is written
// once, and a partition never takes a later record before an earlier one. Across a restart of
// the exporter a new producer id starts, so an event published again then is a duplicate that
// consumers drop by its id.
package kafkasink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seckill-go/seckill/events"
)

// DefaultTopic is the topic when the URL names none.
const DefaultTopic = "seckill.events"

// DefaultTimeout bounds one Publish when the URL sets no timeout.
const DefaultTimeout = 10 * time.Second

// Config is a parsed kafka:// URL.
type Config struct {
	Brokers  []string      // seed brokers, host:port
	Topic    string        // option topic
	Timeout  time.Duration // option timeout: the most one Publish waits for the cluster's acks
	ClientID string        // option client_id: how the brokers' logs and quotas name us
}

// ParseURL reads kafka://host:port[,host:port…][?topic=…&timeout=…&client_id=…]. An unknown
// or malformed option is an error wrapping events.ErrBadURL: a typo must fail the start rather
// than export somewhere else. There is no acks option: acks is always "all", which the
// idempotent producer needs.
func ParseURL(raw string) (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %q: %s", events.ErrBadURL, events.Redact(raw), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return bad("want kafka://host:port[,host:port…]?topic=…")
	}
	if !strings.EqualFold(u.Scheme, "kafka") {
		return bad("scheme %q is not kafka", u.Scheme)
	}
	if u.User != nil {
		return bad("credentials are not supported (no SASL yet)")
	}
	if (u.Path != "" && u.Path != "/") || u.Fragment != "" || u.Opaque != "" {
		return bad("want kafka://host:port[,host:port…]?topic=… (no path; the topic is an option)")
	}
	cfg := Config{Topic: DefaultTopic, Timeout: DefaultTimeout, ClientID: "seckill"}
	for _, b := range strings.Split(u.Host, ",") {
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" {
			return bad("broker %q: want host:port", b)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return bad("broker %q: port must be 1-65535", b)
		}
		cfg.Brokers = append(cfg.Brokers, b)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("options: %v", err)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return bad("option %q given %d times", k, len(vs))
		}
		v := vs[0]
		switch k {
		case "topic":
			if err := validTopic(v); err != nil {
				return bad("topic: %v", err)
			}
			cfg.Topic = v
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d < 100*time.Millisecond || d > 10*time.Minute {
				return bad("timeout %q: want a duration from 100ms to 10m, such as 10s", v)
			}
			cfg.Timeout = d
		case "client_id":
			if v == "" || len(v) > 255 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
				return bad("client_id %q: want 1-255 printable ASCII characters", v)
			}
			cfg.ClientID = v
		case "acks":
			return bad("acks cannot be set: it is always all, which the idempotent producer requires")
		default:
			return bad("unknown option %q (want topic, timeout or client_id)", k)
		}
	}
	return cfg, nil
}

// validTopic applies Kafka's rules for topic names: 1-249 of [a-zA-Z0-9._-], not "." or "..".
func validTopic(t string) error {
	if t == "" || len(t) > 249 {
		return errors.New("want 1-249 characters")
	}
	if t == "." || t == ".." {
		return errors.New(`"." and ".." are not topic names`)
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q: only letters, digits, '.', '_' and '-'", t)
		}
	}
	return nil
}

// Sink publishes events to one Kafka topic.
type Sink struct {
	name    string
	cfg     Config
	cl      *kgo.Client
	closeMu sync.Once
}

// Open parses a kafka:// URL and makes its producer. It does not contact the cluster: a
// cluster that is down when seckill starts delays the export (each Publish fails and is
// retried), not the start. The topic must exist: the producer never asks the brokers to
// create it, since an auto-created topic gets the broker's default partitions and retention
// instead of the ones the shop chose; a missing topic fails Publish with an error naming it.
//
// It returns an events.Sink, never a nil *Sink in one, so a failed Open is a nil sink.
func Open(raw string) (events.Sink, error) {
	cfg, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(cfg.Topic),
		// Idempotent writes are franz-go's default; this states that acks must stay "all".
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// A record waits at most this long in the client, so a dead cluster fails each Publish
		// instead of letting records pile up; the broker is given the same time to answer.
		kgo.RecordDeliveryTimeout(cfg.Timeout),
		kgo.ProduceRequestTimeout(cfg.Timeout),
		// Publish has a whole batch at hand: send it now rather than wait for more.
		kgo.ProducerLinger(0),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", events.ErrBadURL, events.Redact(raw), err)
	}
	return &Sink{name: events.Redact(raw), cfg: cfg, cl: cl}, nil
}

// Name is the URL (it holds no secret; events.Redact normalises it).
func (s *Sink) Name() string { return s.name }

// Config is what the URL configured.
func (s *Sink) Config() Config { return s.cfg }

// Publish produces the batch and returns nil once the cluster acknowledged every record (acks
// from all in-sync replicas). It returns an error when any record failed, when ctx ends, or
// after the URL's timeout, whichever comes first.
//
// A record that was already sent when ctx ended cannot be withdrawn (the idempotent producer
// must learn its fate to keep its sequence numbers), so it may still be written after Publish
// returned its error: a duplicate of the retry, which consumers drop by event id. Records of
// one partition are failed together, never one alone, so a later event is never written
// without an earlier one of its reservation.
func (s *Sink) Publish(ctx context.Context, events []events.Event) error {
	if len(events) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	records := make([]*kgo.Record, len(events))
	for i, e := range events {
		value, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("kafka sink %s: event %s: %w", s.name, e.ID, err)
		}
		records[i] = &kgo.Record{
			Key:   []byte(e.ReservationID),
			Value: value,
			Headers: []kgo.RecordHeader{
				{Key: "event-id", Value: []byte(e.ID)},
				{Key: "event-type", Value: []byte(e.Type)},
				{Key: "schema-version", Value: []byte(strconv.Itoa(e.SchemaVersion))},
			},
		}
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		failed   int
	)
	wg.Add(len(records))
	for _, r := range records {
		// Produce blocks only while the client's buffer is full; ctx bounds that wait, and
		// cancels the records still unsent when it ends.
		s.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				failed++
				mu.Unlock()
			}
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		// Records in flight keep waiting for their answer in the client; their promises end
		// the goroutine above when it comes, or when Close fails them.
		return fmt.Errorf("kafka sink %s: %d events not acknowledged: %w", s.name, len(events), ctx.Err())
	}
	if firstErr != nil {
		return fmt.Errorf("kafka sink %s: %d of %d events not acknowledged (topic %q): %w",
			s.name, failed, len(events), s.cfg.Topic, firstErr)
	}
	return nil
}

// Close stops the producer; records still unacknowledged fail (their Publish has returned or
// returns an error).
func (s *Sink) Close() error {
	s.closeMu.Do(s.cl.Close)
	return nil
}
