package httpapi

import (
	"context"
	"sync"
	"time"
)

// readyTimeout bounds one run of the readiness checks as a whole (each check has a shorter
// bound of its own: Service.Ready 1 s, Redis calls 2 s).
const readyTimeout = 5 * time.Second

// readyFlight lets concurrent /readyz probes share one run of the checks: /readyz is not
// counted by the in-flight bounds (it reports the dependencies, not the load), so a flood of
// probes must cost no more than one probe at a time. A probe that arrives during a run gets
// that run's answer. The run is not tied to the request that started it (another may be
// waiting for it); it is bounded by readyTimeout.
type readyFlight struct {
	mu  sync.Mutex
	cur *readyCall
}

type readyCall struct {
	done   chan struct{}
	answer map[string]any // read-only once done
	err    error
	joined int // probes that share it besides the first (under readyFlight.mu; tests)
}

func (f *readyFlight) do(ctx context.Context, run func(context.Context) (map[string]any, error)) (map[string]any, error) {
	f.mu.Lock()
	c := f.cur
	if c == nil {
		c = &readyCall{done: make(chan struct{})}
		f.cur = c
		go func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
			defer cancel()
			c.answer, c.err = run(rctx)
			f.mu.Lock()
			f.cur = nil
			f.mu.Unlock()
			close(c.done)
		}()
	} else {
		c.joined++
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.answer, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
