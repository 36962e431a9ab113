package pipeline

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/backoff"
	"github.com/seckill-go/seckill/internal/wait"
)

// Sink is where reservation events are stored: the order store (seckill.OrderStore satisfies
// it). Both engines write through it: the memory engine's Pipeline and the Redis engine's
// stream consumers. ApplyEvents must be idempotent and forward-only, because an event may be
// stored twice (a consumer that crashed after its commit and before its acknowledgement) and,
// on the Redis engine, the events of one reservation may be stored by different consumers in
// any order.
type Sink interface {
	ApplyEvents(ctx context.Context, events []seckill.Event) error
}

// maxRetryDelay caps the pause between two attempts to store a batch.
const maxRetryDelay = 2 * time.Second

// Applier stores batches of events in a Sink, the way every reader of events does: it retries
// a failed batch with backoff (RetryDelay, doubling to 2 s, jittered) until it is stored; a
// batch the sink refuses as invalid (not a transient failure) is split and stored one event at
// a time, so that a single poison event is dropped — reported as an error and counted in
// Dropped — instead of blocking every later one. Every failure is reported with
// background.Report. An Applier is safe for concurrent use.
type Applier struct {
	Sink       Sink
	RetryDelay time.Duration // first pause after a failure; default 50 ms

	applied, failed, dropped atomic.Uint64
}

// Applied is the number of events stored; Failures the attempts that failed and were retried;
// Dropped the events the sink refused as invalid.
func (a *Applier) Applied() uint64  { return a.applied.Load() }
func (a *Applier) Failures() uint64 { return a.failed.Load() }
func (a *Applier) Dropped() uint64  { return a.dropped.Load() }

// Apply stores events, in order, and returns nil once every one is stored or dropped as
// poison; it returns ctx's error if ctx ends first (then some may be stored, and storing them
// again is harmless).
func (a *Applier) Apply(ctx context.Context, events []seckill.Event) error {
	if len(events) == 0 {
		return nil
	}
	base := a.RetryDelay
	if base <= 0 {
		base = 50 * time.Millisecond
	}
	for attempt := 1; ; attempt++ {
		err := a.Sink.ApplyEvents(ctx, events)
		if err == nil {
			a.applied.Add(uint64(len(events)))
			return nil
		}
		if permanent(err) {
			if len(events) == 1 {
				a.dropped.Add(1)
				background.Report(ctx, fmt.Errorf("dropping an event the store refuses (reservation %s, %s): %w",
					events[0].Reservation.ID, events[0].Reservation.Status, err))
				return nil
			}
			for i := range events {
				if err := a.Apply(ctx, events[i:i+1]); err != nil {
					return err
				}
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.failed.Add(1)
		delay := backoff.Jittered(base, max(base, maxRetryDelay), attempt)
		background.Report(ctx, fmt.Errorf("storing %d events failed (attempt %d, retrying in %v): %w", len(events), attempt, delay, err))
		if !wait.Sleep(ctx, delay) {
			return ctx.Err()
		}
	}
}

// permanent reports whether a store error will fail the same way on every retry.
func permanent(err error) bool {
	switch seckill.ErrorCode(err) {
	case seckill.CodeInvalidArgument, seckill.CodeNotFound:
		return true
	}
	return false
}
