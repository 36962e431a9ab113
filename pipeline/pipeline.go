// Package pipeline carries reservation events from the inventory engine to the order store,
// off the hot path: the buyer's request never waits for SQL. Events are batched (up to a size
// or a short delay), applied with idempotent upserts whose status only moves forward, and
// retried until they are stored, so a slow or briefly unavailable database delays the order
// table but never loses an event.
//
// Its storing is the Applier, which the Redis engine's stream consumers share: one Sink, one
// way to retry, split and drop.
//
// A Pipeline is a background.Service. Stopping it (cancelling Run's context) drains it: the
// events already in the channel are stored, then Run returns. The owner of the channel does
// not close it; it stops, before the pipeline, everything that sends to it (the runner's
// reverse order does exactly that), so the channel is empty and silent once the drain is done.
package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
)

// Store is the old name of Sink.
type Store = Sink

// Config tunes the pipeline.
type Config struct {
	BatchSize  int           // most events per transaction; default 256
	FlushEvery time.Duration // longest an event waits for its batch to fill; default 20 ms
	RetryDelay time.Duration // first delay after a failed batch, doubling to 2 s; default 50 ms
	// DrainTimeout bounds the drain when the pipeline is stopped (default 10 s), and so does the
	// deadline of the runner's Stop: events still unstored then are lost to the order table
	// (Run returns an error that counts them). The database being down for that long at
	// shutdown is the only way.
	DrainTimeout time.Duration
	Logger       *slog.Logger
}

// Pipeline moves events from a channel to a Sink.
type Pipeline struct {
	in    <-chan seckill.Event
	cfg   Config
	apply Applier
}

var _ background.Service = (*Pipeline)(nil)

// New returns a pipeline reading from in.
func New(store Sink, in <-chan seckill.Event, cfg Config) *Pipeline {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 20 * time.Millisecond
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 50 * time.Millisecond
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{in: in, cfg: cfg, apply: Applier{Sink: store, RetryDelay: cfg.RetryDelay}}
}

// Name is the pipeline's name in logs and metrics.
func (p *Pipeline) Name() string { return "orders-pipeline" }

// Applied is the number of events stored so far.
func (p *Pipeline) Applied() uint64 { return p.apply.Applied() }

// Failures is the number of batch attempts that failed (and were retried).
func (p *Pipeline) Failures() uint64 { return p.apply.Failures() }

// Dropped is the number of events the store refused as invalid.
func (p *Pipeline) Dropped() uint64 { return p.apply.Dropped() }

// Backlog is the number of events waiting in the channel.
func (p *Pipeline) Backlog() int { return len(p.in) }

// Run applies events until ctx is cancelled, then drains: it stores the batch in hand and every
// event left in the channel, within DrainTimeout and the runner's Stop deadline
// (background.Finish), and returns nil — or an error counting the events it could not store.
// It also returns nil, at once, when the channel is closed and every event read is stored.
func (p *Pipeline) Run(ctx context.Context) error {
	batch := make([]seckill.Event, 0, p.cfg.BatchSize)
	timer := time.NewTimer(p.cfg.FlushEvery)
	defer timer.Stop()
	for {
		// Block for the first event of a batch, then take what arrives within FlushEvery.
		select {
		case ev, ok := <-p.in:
			if !ok {
				return nil
			}
			batch = append(batch, ev)
		case <-ctx.Done():
			return p.drain(ctx, batch)
		}
		timer.Reset(p.cfg.FlushEvery)
		closed := false
	fill:
		for len(batch) < p.cfg.BatchSize {
			var ev seckill.Event
			var ok bool
			// What is in the channel already is taken without waiting: a select on the
			// channel, the timer and ctx cost more per event than receiving it does.
			select {
			case ev, ok = <-p.in:
			default:
				select {
				case ev, ok = <-p.in:
				case <-timer.C:
					break fill
				case <-ctx.Done():
					return p.drain(ctx, batch)
				}
			}
			if !ok {
				closed = true
				break fill
			}
			batch = append(batch, ev)
		}
		if err := p.apply.Apply(ctx, batch); err != nil {
			return p.drain(ctx, batch) // ctx ended while retrying: the batch is still in hand
		}
		batch = batch[:0]
		if closed {
			return nil
		}
	}
}

// drain is the exit: it stores batch and then the channel's events until the channel is empty
// (or closed), with a context that outlives ctx by up to DrainTimeout.
func (p *Pipeline) drain(ctx context.Context, batch []seckill.Event) error {
	fctx, cancel := background.Finish(ctx, p.cfg.DrainTimeout)
	defer cancel()
	stored := 0
	for {
	take:
		for len(batch) < p.cfg.BatchSize {
			select {
			case ev, ok := <-p.in:
				if !ok {
					break take
				}
				batch = append(batch, ev)
			default:
				break take
			}
		}
		if len(batch) == 0 {
			if stored > 0 {
				p.cfg.Logger.Info("pipeline: drained on stop", "events", stored)
			}
			return nil
		}
		if err := p.apply.Apply(fctx, batch); err != nil {
			lost := len(batch) + len(p.in)
			return fmt.Errorf("pipeline: stopped with %d events not stored in the order store: %w", lost, err)
		}
		stored += len(batch)
		batch = batch[:0]
	}
}
