package seckill

import (
	"fmt"
	"math"
	"time"
)

// RateLimit is a request budget in the shape of GCRA (the generic cell rate algorithm, a
// token bucket kept as one number): Rate requests a second on average, Burst at once. The
// in-process limiter of the HTTP API and the Redis scripts (redisinv) enforce the same
// arithmetic on it. The zero value (or a Rate <= 0) is no limit.
type RateLimit struct {
	Rate  float64 // requests a second
	Burst int     // requests at once; below 1 counts as 1
}

// Bounds of a RateLimit the engines accept: an emission interval of 1 µs to 1000 s, and a
// burst that keeps every theoretical arrival time exact in a double.
const (
	MaxRate  = 1_000_000
	MinRate  = 0.001
	MaxBurst = 1_000_000
)

// On reports whether the limit limits anything.
func (l RateLimit) On() bool { return l.Rate > 0 }

// Check says why l cannot be enforced: a rate outside MinRate..MaxRate or a burst above
// MaxBurst. A limit that is off (Rate <= 0) is fine.
func (l RateLimit) Check() error {
	if !l.On() {
		return nil
	}
	if l.Rate < MinRate || l.Rate > MaxRate || math.IsNaN(l.Rate) {
		return fmt.Errorf("a rate must be from %g to %d a second, got %g", MinRate, MaxRate, l.Rate)
	}
	if l.Burst > MaxBurst {
		return fmt.Errorf("a burst must be at most %d, got %d", MaxBurst, l.Burst)
	}
	return nil
}

// Interval is the emission interval in microseconds: the time one request's share of the
// budget takes to come back (at least 1). The scripts and the in-process limiter compute in
// whole microseconds so that all of them, and the tests' model, agree to the microsecond.
func (l RateLimit) Interval() int64 {
	return max(1, int64(math.Round(1e6/l.Rate)))
}

// BurstOrOne is Burst, at least 1.
func (l RateLimit) BurstOrOne() int64 { return int64(max(1, l.Burst)) }

// GCRA is one step of the algorithm, in microseconds: tat is the subject's theoretical
// arrival time (0 when it has none), now the clock. It answers whether the request is allowed,
// the new tat to store when it is, and otherwise how long until it would be. Every engine's
// implementation is this arithmetic (the Lua scripts spell it out again; their tests compare
// them with this function).
func (l RateLimit) GCRA(tat, now int64) (allowed bool, newTAT, wait int64) {
	t := l.Interval()
	tau := t * (l.BurstOrOne() - 1) // how far ahead of now the tat may be before a request
	base := max(tat, now)
	if base-now > tau {
		return false, tat, base - now - tau
	}
	return true, base + t, 0
}

// RateLimitedError is a request refused by a rate limit (code rate_limited) that says how long
// until the same request would be allowed: the HTTP API sends it as Retry-After, in whole
// seconds rounded up, at least 1.
type RateLimitedError struct {
	Wait time.Duration
	Err  *Error
}

func (e *RateLimitedError) Error() string { return e.Err.Error() }
func (e *RateLimitedError) Unwrap() error { return e.Err }

// RetryAfter is how long the caller should wait before trying again.
func (e *RateLimitedError) RetryAfter() time.Duration { return e.Wait }

// RateLimited returns a rate_limited error that asks the caller to wait wait.
func RateLimited(wait time.Duration, format string, args ...any) error {
	return &RateLimitedError{Wait: wait, Err: Errorf(CodeRateLimited, format, args...)}
}
