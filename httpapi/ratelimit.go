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
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(rate float64, burst int) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(burst), buckets: make(map[string]*bucket)}
}

// allow takes one token from user's bucket at now.
func (l *rateLimiter) allow(user string, now time.Time) bool {
	if l.rate <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b := l.buckets[user]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[user] = b
	}
	// Refill only forward: a wall clock stepped back (NTP) must not take tokens away, which
	// would lock every active user out for as long as the step.
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(l.burst, b.tokens+elapsed.Seconds()*l.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
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
		if now.Sub(b.last) > full {
			delete(l.buckets, u)
		}
	}
}
