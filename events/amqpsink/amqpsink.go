// Package amqpsink exports events to RabbitMQ (docs/EVENTS.md, "RabbitMQ"): a durable topic
// exchange, one persistent JSON message per event, routing key "reservation.<type>", and
// publisher confirms, so that Publish answers nil only once the broker has taken every message.
package amqpsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/backoff"
	"github.com/seckill-go/seckill/internal/wait"
)

// DefaultExchange is the exchange events go to when the URL names none.
const DefaultExchange = "seckill.events"

// RoutingKeyPrefix starts every routing key: an event of type t is published with the key
// "reservation.<t>" (reservation.held, reservation.expired, …), so a consumer binds "#" or
// "reservation.*" for everything and "reservation.expired" for the timeouts alone.
const RoutingKeyPrefix = "reservation."

// RoutingKey is the routing key of an event type.
func RoutingKey(eventType string) string { return RoutingKeyPrefix + eventType }

// Reconnection: when the connection or channel is gone, Publish reconnects first, at most
// reconnectAttempts times, pausing between attempts (exponential with jitter, so that instances
// cut off together do not all come back at the same instant), and always within its ctx. The
// exporter retries a failed Publish with its own backoff.
const (
	reconnectAttempts = 4
	reconnectBase     = 200 * time.Millisecond
	reconnectCeiling  = 2 * time.Second
	// dialTimeout bounds a connection attempt (TCP, TLS, AMQP handshake) when ctx allows longer.
	dialTimeout = 10 * time.Second
	// chunk is the most messages published before their confirms are awaited. Messages the
	// broker returns as unroutable are collected in a buffer of that size, drained after every
	// chunk, so the client's reader never blocks on it.
	chunk = 512
)

// uriOptions are the RabbitMQ URI query parameters (https://www.rabbitmq.com/docs/uri-query-parameters)
// passed through to the client as they are.
var uriOptions = map[string]bool{
	"heartbeat": true, "connection_timeout": true, "channel_max": true, "auth_mechanism": true,
	"certfile": true, "keyfile": true, "cacertfile": true, "server_name_indication": true,
}

// Sink publishes to one exchange of one broker. Publish calls are serialised: one channel,
// sequential publishes, so the order of the events is the order at the broker.
type Sink struct {
	name     string
	dialURL  string // the URL for the client: the sink's own options removed
	exchange string

	mu      sync.Mutex // serialises Publish and Close; guards the fields below
	conn    *amqp.Connection
	raw     net.Conn // conn's socket, to break a write a blocked broker never reads
	ch      *amqp.Channel
	chDone  chan *amqp.Error // the channel's NotifyClose: closed when the channel is gone
	returns chan amqp.Return // unroutable mandatory messages
	closed  bool
}

// Open checks the URL (amqp:// or amqps://user:pass@host:port/vhost?exchange=…) and returns a
// sink. It does not connect: the first Publish does, so that a broker that is down when the
// server starts delays nothing (the exporter's retries and lag show it).
func Open(ctx context.Context, raw string, _ events.Options) (*Sink, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %q: "+format, append([]any{events.ErrBadURL, events.Redact(raw)}, args...)...)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, bad("%v", err)
	}
	if s := strings.ToLower(u.Scheme); s != "amqp" && s != "amqps" {
		return nil, bad("scheme %q is not amqp or amqps", u.Scheme)
	}
	if u.Host == "" {
		return nil, bad("no host")
	}
	q := u.Query()
	exchange := DefaultExchange
	pass := url.Values{}
	for k, v := range q {
		switch {
		case k == "exchange":
			if len(v) != 1 {
				return nil, bad("exchange given %d times", len(v))
			}
			exchange = v[0]
		case uriOptions[k]:
			pass[k] = v
		default:
			return nil, bad("unknown option %q (want exchange, or a RabbitMQ URI parameter: heartbeat, connection_timeout, channel_max, auth_mechanism, certfile, keyfile, cacertfile, server_name_indication)", k)
		}
	}
	if err := checkExchange(exchange); err != nil {
		return nil, bad("exchange: %v", err)
	}
	d := *u
	d.RawQuery = pass.Encode()
	d.Fragment = ""
	if _, err := amqp.ParseURI(d.String()); err != nil {
		return nil, bad("%v", err)
	}
	return &Sink{name: events.Redact(raw), dialURL: d.String(), exchange: exchange}, nil
}

// checkExchange refuses names RabbitMQ would refuse (or reserves): empty (the default
// exchange routes by queue name, not by routing key), "amq.*", longer than 255 bytes, or with
// characters other than letters, digits, '-', '_', '.' and ':'.
func checkExchange(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case strings.HasPrefix(name, "amq."):
		return errors.New("names starting with amq. are reserved by RabbitMQ")
	case len(name) > 255:
		return errors.New("longer than 255 bytes")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r)) {
			return fmt.Errorf("character %q not allowed (letters, digits, - _ . :)", r)
		}
	}
	return nil
}

// Name is the URL without its password.
func (s *Sink) Name() string { return s.name }

// Exchange is the exchange the sink publishes to.
func (s *Sink) Exchange() string { return s.exchange }

// Publish publishes every event, in order, as a persistent message, and returns nil once the
// broker has confirmed (acked) each one. A nack, a message no queue is bound for (published
// mandatory and returned), a connection or channel lost before every confirm arrived, or ctx
// ending first is an error; the exporter publishes the batch again.
func (s *Sink) Publish(ctx context.Context, events []events.Event) error {
	if len(events) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("amqp sink %s: closed", s.name)
	}
	if err := s.connect(ctx); err != nil {
		return fmt.Errorf("amqp sink %s: %w", s.name, err)
	}
	// A broker that blocks publishers (a memory or disk alarm) stops reading, and a publish
	// would then wait in its socket write, which knows no ctx: when ctx ends the socket's
	// deadline is set to now, which fails that write and the connection with it.
	raw := s.raw
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Now()) })
	defer func() {
		if !stop() {
			s.drop() // ctx ended meanwhile: the socket may be past its deadline
		}
	}()
	for i := 0; i < len(events); i += chunk {
		if err := s.publishChunk(ctx, events[i:min(i+chunk, len(events))]); err != nil {
			// Confirms and returns still in flight would be mixed with the retry's: start
			// afresh on a new connection.
			s.drop()
			return fmt.Errorf("amqp sink %s: %w", s.name, err)
		}
	}
	return nil
}

func (s *Sink) publishChunk(ctx context.Context, events []events.Event) error {
	confirms := make([]*amqp.DeferredConfirmation, 0, len(events))
	for _, e := range events {
		body, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
		dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, s.exchange, RoutingKey(e.Type), true, false, amqp.Publishing{
			ContentType:  "application/json",
			DeliveryMode: amqp.Persistent,
			MessageId:    e.ID,
			Type:         e.Type,
			Timestamp:    e.At,
			Headers:      amqp.Table{"schema_version": int32(e.SchemaVersion)},
			Body:         body,
		})
		if err != nil {
			return fmt.Errorf("publish event %s: %w", e.ID, err)
		}
		confirms = append(confirms, dc)
	}
	for i, dc := range confirms {
		select {
		case <-dc.Done():
		case <-ctx.Done():
			return fmt.Errorf("waiting for the broker to confirm event %s: %w", events[i].ID, ctx.Err())
		}
		if !dc.Acked() {
			if s.broken() {
				return fmt.Errorf("the channel closed before the broker confirmed event %s", events[i].ID)
			}
			return fmt.Errorf("the broker refused (nacked) event %s", events[i].ID)
		}
	}
	// A mandatory message that no queue took is returned before its ack, so by now every
	// return of this chunk is in the buffer.
	var unroutable []string
	for {
		select {
		case r := <-s.returns:
			unroutable = append(unroutable, r.MessageId+" ("+r.RoutingKey+")")
			continue
		default:
		}
		break
	}
	if len(unroutable) > 0 {
		// The first few name the events: the error is logged on every retry.
		named := strings.Join(unroutable[:min(len(unroutable), 3)], ", ")
		if len(unroutable) > 3 {
			named += fmt.Sprintf(" and %d more", len(unroutable)-3)
		}
		return fmt.Errorf("no queue is bound to exchange %q for %d event(s), which RabbitMQ would have dropped: %s",
			s.exchange, len(unroutable), named)
	}
	return nil
}

// broken reports whether the channel (or its connection) is gone.
func (s *Sink) broken() bool {
	if s.ch == nil {
		return true
	}
	select {
	case <-s.chDone:
		return true
	default:
		return false
	}
}

// drop forgets the connection (closing what is left of it).
func (s *Sink) drop() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
	s.conn, s.raw, s.ch, s.chDone, s.returns = nil, nil, nil, nil, nil
}

// connect makes sure there is an open channel in confirm mode with the exchange declared,
// reconnecting with backoff (within ctx) if the last one closed.
func (s *Sink) connect(ctx context.Context) error {
	if !s.broken() {
		return nil
	}
	s.drop()
	var last error
	for attempt := 1; attempt <= reconnectAttempts; attempt++ {
		if attempt > 1 {
			if !wait.Sleep(ctx, backoff.Jittered(reconnectBase, reconnectCeiling, attempt-1)) {
				return fmt.Errorf("connecting: %w (last attempt: %v)", ctx.Err(), last)
			}
		}
		if last = s.dial(ctx); last == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("connecting: %w", last)
}

func (s *Sink) dial(ctx context.Context) error {
	deadline := time.Now().Add(dialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var raw net.Conn
	conn, err := amqp.DialConfig(s.dialURL, amqp.Config{
		Properties: amqp.Table{"connection_name": "seckill export"},
		// The whole handshake (TCP, TLS, AMQP) is bounded by the deadline, which the client
		// clears once the connection is open.
		Dial: func(network, addr string) (net.Conn, error) {
			dctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			c, err := (&net.Dialer{}).DialContext(dctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := c.SetDeadline(deadline); err != nil {
				_ = c.Close()
				return nil, err
			}
			raw = c
			return c, nil
		},
	})
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil {
		err = ch.ExchangeDeclare(s.exchange, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	if err != nil {
		_ = conn.Close()
		return err
	}
	s.conn, s.raw, s.ch = conn, raw, ch
	s.chDone = ch.NotifyClose(make(chan *amqp.Error, 1))
	s.returns = ch.NotifyReturn(make(chan amqp.Return, chunk))
	return nil
}

// Close closes the connection. Publish must not be called after it.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var err error
	if s.conn != nil && !s.conn.IsClosed() {
		err = s.conn.Close()
	}
	s.conn, s.raw, s.ch, s.chDone, s.returns = nil, nil, nil, nil, nil
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}
