// Package background gives every piece of background work one lifecycle: it is a Service,
// started by a Runner in dependency order and stopped in reverse order, and every error it meets
// is logged and counted in one Prometheus counter, seckill_background_errors_total{service}.
//
// A service learns that it must stop when the context of its Run is cancelled; it then does
// what its documentation calls its exit (store the batch in hand, drain a channel, release its
// locks) and returns nil. Finish gives that exit a context that ends at the deadline of the
// Stop that cancelled it. A service reports the errors of its loop (a failed read, sweep or
// store, which it retries by itself) with Report; it returns an error only when it cannot go
// on, and the Runner then starts it again after a backoff (docs/DECISIONS.md, "One shape for
// background work").
package background

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Service is work that runs in the background until it is stopped.
type Service interface {
	// Name names the service in logs and metrics, e.g. "sweeper", "orders-consumer",
	// "refunder:stripe". It is a fixed word or a configured name, never an id of a sale.
	Name() string
	// Run works until ctx is cancelled, then finishes its documented exit and returns nil; it
	// returns an error only when it cannot go on.
	Run(ctx context.Context) error
}

// state is what a Runner puts in the context of each Run: whom to report to, and when the
// Stop that cancels the context must be done.
type state struct {
	name string
	r    *Runner

	mu       sync.Mutex
	deadline time.Time // of the Stop that cancelled the service; zero: none, or not stopping
}

func (s *state) setDeadline(d time.Time) {
	s.mu.Lock()
	s.deadline = d
	s.mu.Unlock()
}

func (s *state) stopDeadline() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline, !s.deadline.IsZero()
}

type stateKey struct{}

func stateOf(ctx context.Context) *state {
	s, _ := ctx.Value(stateKey{}).(*state)
	return s
}

// Report logs err and counts it in seckill_background_errors_total under the name of the
// service whose Run ctx belongs to (or any context derived from it). The log is summarised per
// service (logsummary): the first error, then one line per period with how many more there
// were and the latest, so that an exporter retrying a dead sink does not write a line per try. A service calls it for
// every error its loop meets and goes on: a failed sweep, read or store that it will retry.
// Cancellation is not an error: nil, and an error that is context.Canceled (or a deadline
// once ctx is done), are ignored. Outside a Runner (a test that calls Run itself) the error is
// logged by slog's default logger and not counted.
func Report(ctx context.Context, err error) {
	if err == nil || errors.Is(err, context.Canceled) ||
		(ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	s := stateOf(ctx)
	if s == nil {
		slog.Default().Error("background work failed", "err", err)
		return
	}
	s.r.errors.WithLabelValues(s.name).Inc()
	s.r.troubles.Log(ctx, slog.LevelError, s.name, "background work failed", "service", s.name, "err", err)
}

// Finish returns a context for the part of a service's exit that must not be cut short when
// ctx is cancelled (a batch in hand that must be stored): it keeps ctx's values, is not
// cancelled with ctx, and ends at most most after ctx ends — earlier if the Runner's Stop that
// cancelled ctx has an earlier deadline. Call the cancel function when done.
func Finish(ctx context.Context, most time.Duration) (context.Context, context.CancelFunc) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(ctx, func() {
		d := most
		if s := stateOf(ctx); s != nil {
			if dl, ok := s.stopDeadline(); ok {
				d = min(d, time.Until(dl))
			}
		}
		mu.Lock()
		timer = time.AfterFunc(max(d, 0), cancel)
		mu.Unlock()
	})
	return fctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
