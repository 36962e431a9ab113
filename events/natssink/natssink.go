// Package natssink exports events to NATS JetStream (docs/EVENTS.md, "NATS JetStream"): each
// event published to the subject "<prefix>.<type>" of one stream with the header Nats-Msg-Id =
// event id, so that JetStream itself drops a retry's copy within the stream's duplicate window,
// and Publish answers nil only once JetStream acknowledged (stored) every event.
package natssink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill-go/seckill/events"
)

// Defaults of the URL options.
const (
	DefaultStream          = "SECKILL_EVENTS"
	DefaultSubject         = "seckill.events"
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultMaxAge          = 7 * 24 * time.Hour
)

const (
	// connectWait bounds how long Publish waits for a connection that is reconnecting when
	// ctx allows longer: the exporter learns of the outage and backs off on its own.
	connectWait = 5 * time.Second
	// reconnectWait (plus up to reconnectJitter) is the pause between reconnection attempts of
	// the client, which reconnects by itself, forever.
	reconnectWait   = 500 * time.Millisecond
	reconnectJitter = 500 * time.Millisecond
	// ackWait bounds the wait for a wave's acknowledgements when ctx has no deadline.
	ackWait = 5 * time.Second
	// maxWave is the most messages in flight at once (see Sink).
	maxWave = 256
)

// Sink publishes to one stream. Publish calls are serialised, and a batch is sent in waves:
// consecutive events of distinct reservations (at most maxWave), published without waiting,
// then every acknowledgement of the wave awaited before the next wave goes. So a reservation
// never has two events in flight, and a failure never leaves one of its events stored after an
// earlier one that was lost: Publish stops at the first wave with a failure, the retry stores
// the missing event first (those already stored are dropped as duplicates), and every
// reservation's order holds, while a rush's events, of many reservations, are pipelined.
type Sink struct {
	name      string
	stream    string
	prefix    string
	dupWindow time.Duration
	maxAge    time.Duration

	nc *nats.Conn
	js jetstream.JetStream

	mu     sync.Mutex // serialises Publish; guards ready and closed
	ready  bool       // the stream was found or created
	closed bool
}

// Open checks the URL (nats://[user:pass@]host:port?stream=…&subject=…&duplicate_window=…&max_age=…)
// and returns a sink. The client connects in the background and reconnects by itself: a server
// that is down when seckill starts delays nothing (the exporter's retries and lag show it). The
// stream is looked up (or created) by the first Publish.
func Open(ctx context.Context, raw string, _ events.Options) (*Sink, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %q: "+format, append([]any{events.ErrBadURL, redact(raw)}, args...)...)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, bad("%v", err)
	}
	if !strings.EqualFold(u.Scheme, "nats") {
		return nil, bad("scheme %q is not nats", u.Scheme)
	}
	if u.Host == "" {
		return nil, bad("no host")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, bad("a NATS URL has no path (name the stream with ?stream=)")
	}
	s := &Sink{name: redact(raw), stream: DefaultStream, prefix: DefaultSubject,
		dupWindow: DefaultDuplicateWindow, maxAge: DefaultMaxAge}
	for k, v := range u.Query() {
		if len(v) != 1 {
			return nil, bad("option %s given %d times", k, len(v))
		}
		switch k {
		case "stream":
			s.stream = v[0]
		case "subject":
			s.prefix = v[0]
		case "duplicate_window", "max_age":
			d, err := time.ParseDuration(v[0])
			if err != nil || d < 0 || (k == "duplicate_window" && d == 0) {
				return nil, bad("%s=%q: want a positive duration such as 2m or 168h", k, v[0])
			}
			if k == "duplicate_window" {
				s.dupWindow = d
			} else {
				s.maxAge = d
			}
		default:
			return nil, bad("unknown option %q (want stream, subject, duplicate_window or max_age)", k)
		}
	}
	if err := checkStream(s.stream); err != nil {
		return nil, bad("stream: %v", err)
	}
	if err := checkSubject(s.prefix); err != nil {
		return nil, bad("subject: %v", err)
	}
	if s.maxAge != 0 && s.dupWindow > s.maxAge {
		return nil, bad("duplicate_window %v is longer than max_age %v", s.dupWindow, s.maxAge)
	}
	server := *u
	server.RawQuery, server.Fragment, server.Path = "", "", ""
	nc, err := nats.Connect(server.String(),
		nats.Name("seckill export"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(reconnectJitter, reconnectJitter),
		// No reconnect buffer: while disconnected a publish fails at once instead of being
		// held in memory, unacknowledged, for a server that may not come back.
		nats.ReconnectBufSize(-1),
	)
	if err != nil {
		return nil, bad("%v", err)
	}
	// Acknowledgements that never come (a connection lost mid-wave) are given up after the
	// timeout, so they are not kept forever.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackWait))
	if err != nil {
		nc.Close()
		return nil, bad("%v", err)
	}
	s.nc, s.js = nc, js
	return s, nil
}

// redact is events.Redact, and a user without a password replaced too: NATS takes a token in
// that place (nats://token@host).
func redact(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err == nil && u.User != nil {
		if _, has := u.User.Password(); !has {
			u.User = url.User("redacted")
			raw = u.String()
		}
	}
	return events.Redact(raw)
}

// checkStream refuses what JetStream refuses in a stream name.
func checkStream(name string) error {
	if name == "" {
		return errors.New("empty")
	}
	if strings.ContainsAny(name, " \t\r\n.*>/\\") {
		return errors.New("must not contain whitespace, '.', '*', '>', '/' or '\\'")
	}
	return nil
}

// checkSubject refuses a prefix that is not a literal subject (tokens separated by dots).
func checkSubject(prefix string) error {
	for tok := range strings.SplitSeq(prefix, ".") {
		if tok == "" {
			return errors.New("empty token (leading, trailing or double dot, or empty)")
		}
		if strings.ContainsAny(tok, " \t\r\n*>") {
			return errors.New("must be a literal subject: no whitespace, '*' or '>'")
		}
	}
	return nil
}

// Name is the URL without its password.
func (s *Sink) Name() string { return s.name }

// Stream is the stream the sink publishes to.
func (s *Sink) Stream() string { return s.stream }

// Subject is the subject an event of type eventType is published to.
func (s *Sink) Subject(eventType string) string { return s.prefix + "." + eventType }

// Publish stores every event, in order, and returns nil once JetStream acknowledged each one
// (a copy dropped as a duplicate is acknowledged too). A connection that is down (waited for
// until ctx ends, or connectWait), a stream that does not take the subject, or a missing
// acknowledgement is an error; the exporter publishes the batch again.
func (s *Sink) Publish(ctx context.Context, events []events.Event) error {
	if len(events) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("nats sink %s: closed", s.name)
	}
	if err := s.waitConnected(ctx); err != nil {
		return fmt.Errorf("nats sink %s: %w", s.name, err)
	}
	if err := s.ensureStream(ctx); err != nil {
		return fmt.Errorf("nats sink %s: stream %s: %w", s.name, s.stream, err)
	}
	for len(events) > 0 {
		n := wave(events)
		if err := s.publishWave(ctx, events[:n]); err != nil {
			return fmt.Errorf("nats sink %s: %w", s.name, err)
		}
		events = events[n:]
	}
	return nil
}

// wave is how many events from the start of events form the next wave: consecutive events of
// distinct reservations, at most maxWave.
func wave(events []events.Event) int {
	seen := make(map[string]bool, min(len(events), maxWave))
	for i, e := range events {
		if i == maxWave || seen[e.ReservationID] {
			return i
		}
		seen[e.ReservationID] = true
	}
	return len(events)
}

// publishWave publishes events without waiting, then waits for every acknowledgement.
func (s *Sink) publishWave(ctx context.Context, events []events.Event) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ackWait)
		defer cancel()
	}
	futures := make([]jetstream.PubAckFuture, 0, len(events))
	var sendErr error
	for _, e := range events {
		body, err := json.Marshal(e)
		if err != nil {
			sendErr = fmt.Errorf("event %s: %w", e.ID, err)
			break
		}
		m := nats.NewMsg(s.Subject(e.Type))
		m.Data = body
		m.Header.Set("Content-Type", "application/json")
		m.Header.Set("Seckill-Event-Type", e.Type)
		m.Header.Set("Seckill-Schema-Version", fmt.Sprint(e.SchemaVersion))
		// WithExpectStream: the server refuses the message if the subject is captured by
		// another stream than ours, rather than store it where no consumer looks.
		f, err := s.js.PublishMsgAsync(m, jetstream.WithMsgID(e.ID), jetstream.WithExpectStream(s.stream))
		if err != nil {
			sendErr = fmt.Errorf("publish event %s to %s: %w", e.ID, m.Subject, err)
			break
		}
		futures = append(futures, f)
	}
	// Wait for those sent even after a failure, so that none is left behind in flight.
	var ackErr error
	for i, f := range futures {
		e := events[i]
		select {
		case ack := <-f.Ok():
			if ack.Stream != s.stream && ackErr == nil {
				ackErr = fmt.Errorf("event %s was stored in stream %s, not %s", e.ID, ack.Stream, s.stream)
			}
		case err := <-f.Err():
			if ackErr == nil {
				ackErr = fmt.Errorf("publish event %s to %s: %w", e.ID, s.Subject(e.Type), err)
			}
		case <-ctx.Done():
			if ackErr == nil {
				ackErr = fmt.Errorf("waiting for the acknowledgement of event %s: %w", e.ID, ctx.Err())
			}
			return ackErr
		}
	}
	if ackErr != nil {
		return ackErr
	}
	return sendErr
}

// waitConnected returns once the client is connected, or an error when ctx ends or after
// connectWait.
func (s *Sink) waitConnected(ctx context.Context) error {
	if s.nc.IsConnected() {
		return nil
	}
	limit := time.NewTimer(connectWait)
	defer limit.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("not connected (%s): %w", s.nc.Status(), ctx.Err())
		case <-limit.C:
			return fmt.Errorf("not connected (%s) after %v", s.nc.Status(), connectWait)
		case <-tick.C:
			if s.nc.IsConnected() {
				return nil
			}
			if s.nc.IsClosed() {
				return errors.New("the connection is closed")
			}
		}
	}
}

// ensureStream finds the stream or creates it. An existing stream is used as it is, its
// configuration never changed: it belongs to whoever made it (an operator may have set
// replicas, limits or more subjects). If it does not capture "<prefix>.>" every publish fails
// (WithExpectStream), saying so.
func (s *Sink) ensureStream(ctx context.Context) error {
	if s.ready {
		return nil
	}
	_, err := s.js.Stream(ctx, s.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        s.stream,
			Description: "seckill reservation events (docs/EVENTS.md)",
			Subjects:    []string{s.prefix + ".>"},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      s.maxAge,
			Duplicates:  s.dupWindow,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil // another instance created it meanwhile
		}
	}
	if err != nil {
		return err
	}
	s.ready = true
	return nil
}

// Close closes the connection. Publish must not be called after it.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.nc.Close()
	return nil
}
