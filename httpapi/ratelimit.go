package httpapi

import (
	"sync"
	"time"
)

// rateLimiter is a per-user token bucket for the buy endpoint. It refuses a user's burst
// before the request touches the sale, so one client cannot monopolize a hot sale's lock.
type rateLimiter struct {
	rate  float64 // tokens per second
	burst float64

	mu      sync.Mutex
	buckets map[string]bucket
	swept   time.Time
}

// bucket is held by value, with its time as Unix nanoseconds: in a rush every buyer is new,
// and a bucket per user allocated apart (with a time.Time's location pointer) was one more
// object per user for the garbage collector to trace.
type bucket struct {
	tokens float64
	last   int64
}

func newRateLimiter(rate float64, burst int) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(burst), buckets: make(map[string]bucket)}
}

// allow takes one token from user's bucket at now.
func (l *rateLimiter) allow(user string, now time.Time) bool {
	if l.rate <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	at := now.UnixNano()
	b, ok := l.buckets[user]
	if !ok {
		b = bucket{tokens: l.burst, last: at}
	}
	// Refill only forward: a wall clock stepped back (NTP) must not take tokens away, which
	// would lock every active user out for as long as the step.
	if elapsed := at - b.last; elapsed > 0 {
		b.tokens = min(l.burst, b.tokens+time.Duration(elapsed).Seconds()*l.rate)
	}
	b.last = at
	allowed := b.tokens >= 1
	if allowed {
		b.tokens--
	}
	l.buckets[user] = b
	return allowed
}

// sweep forgets buckets that have refilled, at most once a minute, so memory follows the
// number of recently active users rather than every user ever seen.
func (l *rateLimiter) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	l.swept = now
	full := time.Duration(l.burst / l.rate * float64(time.Second))
	for u, b := range l.buckets {
		if time.Duration(now.UnixNano()-b.last) > full {
			delete(l.buckets, u)
		}
	}
}
