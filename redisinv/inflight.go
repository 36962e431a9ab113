package redisinv

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// DefaultMaxInFlight is how many buys of one sale one instance lets wait for Redis at once by
// default (WithMaxInFlight): queued for a batch or in a script call. A healthy Redis answers a
// batch of 64 in well under a millisecond, so a few hundred waiting means Redis has fallen
// behind; more would only wait longer, each holding a request, its goroutine and its memory,
// until the engine's timeout answered them 503 anyway. Half the instance's bound on requests
// handled at once (1 024), so that one hot sale cannot take every request slot.
const DefaultMaxInFlight = 512

// MaxMaxInFlight bounds WithMaxInFlight.
const MaxMaxInFlight = 1 << 20

// WithMaxInFlight bounds the buys of one sale that this engine has sent, or queued to send, to
// Redis and not yet answered; a buy beyond it is answered unavailable at once (503,
// Retry-After). 0 means DefaultMaxInFlight; -1 (or below) means no bound. Local answers
// (WithLocalAnswers) never count: they wait for nothing.
func WithMaxInFlight(n int) Option {
	return func(e *Engine) { e.inflight.max = int64(min(n, MaxMaxInFlight)) }
}

// CheckMaxInFlight reports whether n is a value WithMaxInFlight takes as given (the command
// line's check): -1 for no bound, or 1 to MaxMaxInFlight (0 means the default).
func CheckMaxInFlight(n int) error {
	if n < -1 || n > MaxMaxInFlight {
		return fmt.Errorf("in-flight bound %d: want -1 (none), 0 (default %d) or 1 to %d", n, DefaultMaxInFlight, MaxMaxInFlight)
	}
	return nil
}

// inflightBound counts, per sale, the buys waiting for Redis.
type inflightBound struct {
	max   int64    // 0: DefaultMaxInFlight; < 0: none
	sales sync.Map // sale id → *atomic.Int64
	shed  atomic.Uint64
}

// acquire takes a place for a buy of saleID, or reports false when every place is taken.
// The caller calls release once the buy is answered. A sale's counter stays for the engine's
// life (a word; buys reach the engine only for sales the service found, as in buy.go).
func (b *inflightBound) acquire(saleID string) (*atomic.Int64, bool) {
	limit := b.max
	if limit == 0 {
		limit = DefaultMaxInFlight
	}
	if limit < 0 {
		return nil, true
	}
	c := b.counter(saleID)
	if c.Add(1) > limit {
		c.Add(-1)
		b.shed.Add(1)
		return nil, false
	}
	return c, true
}

func (b *inflightBound) counter(saleID string) *atomic.Int64 {
	if v, ok := b.sales.Load(saleID); ok {
		return v.(*atomic.Int64)
	}
	v, _ := b.sales.LoadOrStore(saleID, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// inFlight is how many buys of saleID wait for Redis now (tests).
func (b *inflightBound) inFlight(saleID string) int64 { return b.counter(saleID).Load() }
