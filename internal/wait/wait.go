// Package wait holds the two ways seckill's code waits on the clock: Sleep, a pause that a
// cancelled context cuts short, and Every, the loop of periodic background work. Each had been
// written again in half the packages (a timer and a select, a ticker and a select).
//
// It imports only the standard library, unlike internal/background (whose Runner counts errors
// in Prometheus), so that packages that must stay light — payment, sqlstore, loadgen — wait
// without pulling Prometheus into every program that imports them.
package wait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx is done; it reports whether the full d passed (false: ctx is
// done, and the caller stops). A d of zero or less does not wait, and reports whether ctx is
// still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Every calls fn every interval until ctx is done, the first call one interval after the
// start, and returns when ctx is done (never during a call to fn). It runs on a time.Ticker:
// a call that takes longer than the interval is followed by the next at once, and the ticks
// missed meanwhile are dropped, so that a slow pass never queues up a burst of others. Work
// that is due at the start too calls fn once before Every.
func Every(ctx context.Context, interval time.Duration, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		fn(ctx)
	}
}
