// Package exporter delivers every durable reservation event to the shop's sinks (package
// export; docs/EVENTS.md): at least once, in order per reservation, off the buyers' path.
//
// Events are read from logs (events.Log): each sale's Redis stream on the Redis engine, the
// order store's outbox on the memory engine and for refund events on both. An event is in a
// log only once it is durable, and it leaves a sink's view of the log only after that sink
// acknowledged it (or, after GiveUp, after it was written to the dead letters), so nothing
// durable is missed and nothing is exported before it is durable.
//
// Every (log, sink) pair has its own goroutine and its own read position, so a slow or dead
// sink delays nobody else. Across instances, one process leads a pair at a time (Log.Lead);
// a crashed leader's lease runs out and another instance goes on from the last acknowledged
// batch: the batch in flight is sent again, which consumers dedupe by event id.
package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/backoff"
	"github.com/seckill-go/seckill/internal/wait"
)

// DeadLetterer is where events a sink gave up on go (the order store).
type DeadLetterer interface {
	AddDeadLetters(ctx context.Context, sink string, events []events.Event, reason string, at time.Time) error
}

// Config configures an Exporter. Zero values take the defaults.
type Config struct {
	Sinks []events.Sink
	// Logs lists the logs to export now; it is called every second, and a log it no longer
	// lists is left (its goroutines stop).
	Logs func(ctx context.Context) ([]events.Log, error)
	// DeadLetters receives the events a sink failed to take for GiveUp. Nil: never give up.
	DeadLetters DeadLetterer
	// GiveUp is how long a batch is retried before it goes to the dead letters; default 10 min.
	GiveUp time.Duration
	// Batch is the most events published at once; default 256.
	Batch int
	// PublishTimeout bounds one Publish; default 10 s.
	PublishTimeout time.Duration
	// RetryBase and RetryMax bound the pause between attempts (exponential with jitter);
	// defaults 100 ms and 30 s.
	RetryBase, RetryMax time.Duration
	// FarBehind is the lag from which a sink is reported far behind (SinkStatus.FarBehind: /readyz, the dashboard);
	// default 1 min.
	FarBehind time.Duration
	// The outbox's retention is package retention's (docs/EVENTS.md, "Retention").
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultGiveUp    = 10 * time.Minute
	DefaultBatch     = 256
	DefaultFarBehind = time.Minute
	// listEvery is how often the logs are listed; lagEvery how often a pair measures its lag.
	listEvery = time.Second
	lagEvery  = time.Second
)

// Exporter runs the export; it is a background service (Name, Run).
type Exporter struct {
	cfg   Config
	sinks map[string]*sinkState // by sink name

	mu   sync.Mutex
	lags map[pairKey]lag // of the pairs this process leads
}

type pairKey struct{ log, sink string }

type lag struct {
	events   int64
	oldest   time.Time
	measured time.Time // when: the lag in seconds is measured - oldest, not now - oldest
}

// sinkState counts what happened to one sink's events in this process.
type sinkState struct {
	sink         events.Sink
	published    atomic.Uint64
	failures     atomic.Uint64
	deadLettered atomic.Uint64
}

// label is how the sink is named in logs: its label (events.LabelOf), never its URL, whose
// path may hold a token even redacted (a chat webhook's /hooks/T…/B…/xoxb…).
func (s *sinkState) label() string { return events.LabelOf(s.sink) }

// scrub is err with every mention of the sink's URL (sinks name themselves in their errors)
// replaced by its label, for the log.
func (s *sinkState) scrub(err error) error {
	return labeledError{err: err, url: s.sink.Name(), label: s.label()}
}

// labeledError is an error whose text names a sink by its label instead of its URL; it
// unwraps to the original, so that errors.Is (cancellation) still sees through it.
type labeledError struct {
	err        error
	url, label string
}

func (e labeledError) Error() string {
	if e.url == "" {
		return e.err.Error()
	}
	return strings.ReplaceAll(e.err.Error(), e.url, e.label)
}

func (e labeledError) Unwrap() error { return e.err }

// New returns an exporter; Run starts it.
func New(cfg Config) *Exporter {
	if cfg.GiveUp <= 0 {
		cfg.GiveUp = DefaultGiveUp
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 10 * time.Second
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 100 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Second
	}
	if cfg.FarBehind <= 0 {
		cfg.FarBehind = DefaultFarBehind
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	x := &Exporter{cfg: cfg, sinks: make(map[string]*sinkState, len(cfg.Sinks)), lags: map[pairKey]lag{}}
	for _, s := range cfg.Sinks {
		x.sinks[s.Name()] = &sinkState{sink: s}
	}
	return x
}

// Name is the exporter's name among the background services.
func (x *Exporter) Name() string { return "exporter" }

// Run exports until ctx is cancelled, then stops every pair and returns nil. A batch being
// published when it stops is not acknowledged: the next leader sends it again.
func (x *Exporter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[pairKey]context.CancelFunc{}
	defer func() {
		for _, stop := range running {
			stop()
		}
	}()
	if len(x.sinks) == 0 {
		<-ctx.Done()
		return nil
	}
	pass := func(ctx context.Context) { x.list(ctx, &wg, running) }
	pass(ctx)
	wait.Every(ctx, listEvery, pass)
	return nil
}

// list starts a goroutine for every (log, sink) pair not running yet and stops those whose
// log is no longer listed.
func (x *Exporter) list(ctx context.Context, wg *sync.WaitGroup, running map[pairKey]context.CancelFunc) {
	logs, err := x.cfg.Logs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			background.Report(ctx, fmt.Errorf("exporter: listing the logs failed (retrying): %w", err))
		}
		return
	}
	listed := make(map[pairKey]bool, len(logs)*len(x.sinks))
	for _, l := range logs {
		for name, s := range x.sinks {
			k := pairKey{l.Name(), name}
			listed[k] = true
			if running[k] == nil {
				pctx, stop := context.WithCancel(ctx)
				running[k] = stop
				wg.Go(func() { x.pair(pctx, l, s) })
			}
		}
	}
	for k, stop := range running {
		if !listed[k] {
			stop()
			delete(running, k)
		}
	}
}

// pair exports one log to one sink for as long as ctx lasts, leading it whenever it can. A
// Quiet log is led only while it has events for the sink: the pair waits in AwaitWork, takes
// the lead if no other process has it, and gives it back when a Read finds the log idle.
func (x *Exporter) pair(ctx context.Context, l events.Log, s *sinkState) {
	k := pairKey{l.Name(), s.sink.Name()}
	defer x.setLag(k, nil)
	quiet, _ := l.(events.Quiet)
	for ctx.Err() == nil {
		var lead context.Context
		var release func()
		if quiet != nil {
			if quiet.AwaitWork(ctx, k.sink) != nil {
				return // ctx ended
			}
			var ok bool
			if lead, release, ok = quiet.TryLead(ctx, k.sink); !ok {
				continue // another process leads it and reads what is new
			}
		} else {
			var err error
			if lead, release, err = l.Lead(ctx, k.sink); err != nil {
				return // ctx ended
			}
		}
		x.follow(lead, l, s, k)
		release()
		x.setLag(k, nil) // another process leads it now
	}
}

// follow exports while this process leads the pair, and until a Quiet log is idle.
func (x *Exporter) follow(lead context.Context, l events.Log, s *sinkState, k pairKey) {
	measured := make(chan struct{})
	mctx, stopMeasure := context.WithCancel(lead) // follow may end before the lead (an idle log)
	go func() { defer close(measured); x.measure(mctx, l, k) }()
	defer func() { stopMeasure(); <-measured }()
	attempt := 0
	for lead.Err() == nil {
		b, err := l.Read(lead, k.sink, x.cfg.Batch)
		if err != nil {
			if lead.Err() != nil {
				return
			}
			attempt++
			s.failures.Add(1)
			background.Report(lead, fmt.Errorf("exporter: reading %s for %s failed (retrying): %w", k.log, s.label(), s.scrub(err)))
			wait.Sleep(lead, backoff.Jittered(x.cfg.RetryBase, x.cfg.RetryMax, attempt))
			continue
		}
		attempt = 0
		if len(b.Events) > 0 && !x.deliver(lead, s, k, b.Events) {
			return // the lead ended: the next leader sends the batch again
		}
		if b.Ack != nil && !x.ack(lead, s, k, b) {
			return
		}
		if b.Idle {
			return
		}
	}
}

// measure reads the pair's lag every lagEvery while this process leads it, on its own so that
// a sink that hangs is still seen falling behind.
func (x *Exporter) measure(lead context.Context, l events.Log, k pairKey) {
	for {
		if n, oldest, err := l.Lag(lead, k.sink); err == nil {
			x.setLag(k, &lag{events: n, oldest: oldest, measured: time.Now()})
		}
		if !wait.Sleep(lead, lagEvery) {
			return
		}
	}
}

// deliver publishes events until the sink takes them or GiveUp passes (then they go to the
// dead letters). It returns false when the lead ended first.
func (x *Exporter) deliver(lead context.Context, s *sinkState, k pairKey, events []events.Event) bool {
	first := time.Now()
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(lead, x.cfg.PublishTimeout)
		err := s.sink.Publish(pctx, events)
		cancel()
		if err == nil {
			s.published.Add(uint64(len(events)))
			return true
		}
		if lead.Err() != nil {
			return false
		}
		s.failures.Add(1)
		if x.cfg.DeadLetters != nil && time.Since(first) >= x.cfg.GiveUp {
			return x.bury(lead, s, k, events, err)
		}
		pause := backoff.Jittered(x.cfg.RetryBase, x.cfg.RetryMax, attempt)
		background.Report(lead, fmt.Errorf("exporter: publishing %d events of %s to %s failed (attempt %d, retrying in %v): %w",
			len(events), k.log, s.label(), attempt, pause.Round(time.Millisecond), s.scrub(err)))
		if !wait.Sleep(lead, pause) {
			return false
		}
	}
}

// bury writes events a sink would not take to the dead letters, retrying until they are
// stored; false when the lead ended first.
func (x *Exporter) bury(lead context.Context, s *sinkState, k pairKey, events []events.Event, cause error) bool {
	reason := cause.Error()
	x.cfg.Logger.Error("exporter: giving up on events; they go to the dead letters for an operator to replay",
		"sink", s.label(), "log", k.log, "events", len(events), "after", x.cfg.GiveUp, "err", s.scrub(cause).Error())
	for attempt := 1; ; attempt++ {
		err := x.cfg.DeadLetters.AddDeadLetters(lead, k.sink, events, reason, time.Now())
		if err == nil {
			s.deadLettered.Add(uint64(len(events)))
			return true
		}
		if lead.Err() != nil {
			return false
		}
		s.failures.Add(1)
		background.Report(lead, fmt.Errorf("exporter: storing dead letters of %s failed (retrying): %w", s.label(), s.scrub(err)))
		if !wait.Sleep(lead, backoff.Jittered(x.cfg.RetryBase, x.cfg.RetryMax, attempt)) {
			return false
		}
	}
}

// ack acknowledges a delivered batch, retrying; false when the lead ended first (the next
// leader sends the batch again).
func (x *Exporter) ack(lead context.Context, s *sinkState, k pairKey, b events.Batch) bool {
	for attempt := 1; ; attempt++ {
		err := b.Ack(lead)
		if err == nil {
			return true
		}
		if lead.Err() != nil {
			return false
		}
		s.failures.Add(1)
		background.Report(lead, fmt.Errorf("exporter: acknowledging a batch of %s for %s failed (retrying): %w", k.log, s.label(), s.scrub(err)))
		if !wait.Sleep(lead, backoff.Jittered(x.cfg.RetryBase, x.cfg.RetryMax, attempt)) {
			return false
		}
	}
}

func (x *Exporter) setLag(k pairKey, l *lag) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if l == nil {
		delete(x.lags, k)
	} else {
		x.lags[k] = *l
	}
}

// SinkStatus is where one sink stands, as this process sees it: the counts are this
// process's; the lag is over the logs this process leads for the sink (on several instances,
// add the events and take the largest seconds).
type SinkStatus struct {
	// Name is the sink's label (events.LabelOf): what /metrics and /readyz show. Sink is its
	// URL, redacted, for the admin's dashboard only: its path may hold a token.
	Name         string  `json:"name"`
	Sink         string  `json:"sink"`
	Published    uint64  `json:"published"`
	Failures     uint64  `json:"failures"`
	DeadLettered uint64  `json:"dead_lettered"`
	LagEvents    int64   `json:"lag_events"`
	LagSeconds   float64 `json:"lag_seconds"`
	FarBehind    bool    `json:"far_behind"`
}

// Status reports every sink, in configuration order.
func (x *Exporter) Status() []SinkStatus {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]SinkStatus, 0, len(x.cfg.Sinks))
	for _, sk := range x.cfg.Sinks {
		s := x.sinks[sk.Name()]
		st := SinkStatus{Name: events.LabelOf(sk), Sink: sk.Name(), Published: s.published.Load(), Failures: s.failures.Load(), DeadLettered: s.deadLettered.Load()}
		for k, l := range x.lags {
			if k.sink != st.Sink {
				continue
			}
			st.LagEvents += l.events
			if l.events > 0 && !l.oldest.IsZero() {
				st.LagSeconds = max(st.LagSeconds, l.measured.Sub(l.oldest).Seconds())
			}
		}
		st.FarBehind = st.LagSeconds >= x.cfg.FarBehind.Seconds()
		out = append(out, st)
	}
	return out
}
