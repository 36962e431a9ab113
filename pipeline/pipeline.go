// Package pipeline carries reservation events from the inventory engine to the order store,
// off the hot path: the buyer's request never waits for SQL. Events are batched (up to a size
// or a short delay), applied with idempotent upserts whose status only moves forward, and
// retried until they are stored, so a slow or briefly unavailable database delays the order
// table but never loses an event. Closing the input channel drains the pipeline.
package pipeline

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
)

// Store is what the pipeline writes to; seckill.OrderStore satisfies it.
type Store interface {
	ApplyEvents(ctx context.Context, events []seckill.Event) error
}

// Config tunes the pipeline.
type Config struct {
	BatchSize  int           // most events per transaction; default 256
	FlushEvery time.Duration // longest an event waits for its batch to fill; default 20 ms
	RetryDelay time.Duration // first delay after a failed batch, doubling to 2 s; default 50 ms
	Logger     *slog.Logger
}

// Pipeline moves events from a channel to a Store.
type Pipeline struct {
	store   Store
	in      <-chan seckill.Event
	cfg     Config
	applied atomic.Uint64
	failed  atomic.Uint64
	dropped atomic.Uint64
}

// permanent reports whether a store error will fail the same way on every retry.
func permanent(err error) bool {
	switch seckill.ErrorCode(err) {
	case seckill.CodeInvalidArgument, seckill.CodeNotFound:
		return true
	}
	return false
}

// Dropped is the number of events the store refused as invalid.
func (p *Pipeline) Dropped() uint64 { return p.dropped.Load() }

// New returns a pipeline reading from in.
func New(store Store, in <-chan seckill.Event, cfg Config) *Pipeline {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 20 * time.Millisecond
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{store: store, in: in, cfg: cfg}
}

// Applied is the number of events stored so far.
func (p *Pipeline) Applied() uint64 { return p.applied.Load() }

// Failures is the number of batch attempts that failed (and were retried).
func (p *Pipeline) Failures() uint64 { return p.failed.Load() }

// Backlog is the number of events waiting in the channel.
func (p *Pipeline) Backlog() int { return len(p.in) }

// Run applies events until the input channel is closed and every event read has been stored,
// then returns nil. If ctx is cancelled first it stops retrying and returns ctx's error; the
// caller owns the goroutine and should close the channel, not cancel ctx, for a clean drain.
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
			return ctx.Err()
		}
		timer.Reset(p.cfg.FlushEvery)
		closed := false
	fill:
		for len(batch) < p.cfg.BatchSize {
			select {
			case ev, ok := <-p.in:
				if !ok {
					closed = true
					break fill
				}
				batch = append(batch, ev)
			case <-timer.C:
				break fill
			}
		}
		if err := p.flush(ctx, batch); err != nil {
			return err
		}
		batch = batch[:0]
		if closed {
			return nil
		}
	}
}

// flush stores one batch, retrying with backoff until it succeeds or ctx is done. A batch that
// the store refuses as invalid (not a transient failure) is split and applied one event at a
// time, so a single poison event is dropped with a log line instead of blocking every later one.
func (p *Pipeline) flush(ctx context.Context, batch []seckill.Event) error {
	delay := p.cfg.RetryDelay
	for {
		err := p.store.ApplyEvents(ctx, batch)
		if err == nil {
			p.applied.Add(uint64(len(batch)))
			return nil
		}
		if permanent(err) {
			if len(batch) == 1 {
				p.dropped.Add(1)
				p.cfg.Logger.Error("pipeline: dropping an event the store refuses", "reservation", batch[0].Reservation.ID, "err", err)
				return nil
			}
			for i := range batch {
				if err := p.flush(ctx, batch[i:i+1]); err != nil {
					return err
				}
			}
			return nil
		}
		p.failed.Add(1)
		p.cfg.Logger.Warn("pipeline: storing events failed; retrying", "events", len(batch), "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}
