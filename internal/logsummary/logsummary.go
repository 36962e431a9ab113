// Package logsummary keeps a trouble that repeats from flooding the log. The first occurrence
// of a kind of trouble (a key: a route's 503s, a background service's errors) is logged in
// full; while it goes on, one line per period says how many more there were and shows the
// latest. An outage that makes every request fail thus costs a line at its start and one per
// period, not one per request (a failover once wrote ~470 WARN lines per instance in 7 s).
//
// Keys must come from a small fixed set (route patterns, service names), never from request
// data: each key is remembered for the life of the Summarizer.
package logsummary

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultPeriod is how often a repeating trouble is summarised.
const DefaultPeriod = 10 * time.Second

// Summarizer logs the first occurrence of each key and then a summary per period. It is safe
// for concurrent use.
type Summarizer struct {
	log    *slog.Logger
	period time.Duration
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]*trouble
}

type trouble struct {
	logged     time.Time // when the last line for this key was written
	suppressed int       // occurrences since then that were not written
}

// New returns a Summarizer writing to log, one summary per period (DefaultPeriod if ≤ 0).
func New(log *slog.Logger, period time.Duration) *Summarizer {
	if period <= 0 {
		period = DefaultPeriod
	}
	return &Summarizer{log: log, period: period, now: time.Now, seen: map[string]*trouble{}}
}

// Log records one occurrence of key. It writes msg with args at level if key was not written
// within the last period, adding "repeated" and "over" (how many occurrences were not written
// since the last line, and over how long) when there were any; otherwise it only counts it.
func (s *Summarizer) Log(ctx context.Context, level slog.Level, key, msg string, args ...any) {
	now := s.now()
	s.mu.Lock()
	t := s.seen[key]
	if t == nil {
		t = &trouble{}
		s.seen[key] = t
	} else if now.Sub(t.logged) < s.period {
		t.suppressed++
		s.mu.Unlock()
		return
	}
	repeated, since := t.suppressed, now.Sub(t.logged)
	t.logged, t.suppressed = now, 0
	s.mu.Unlock()
	if repeated > 0 {
		args = append(args, "repeated", repeated, "over", since.Round(time.Second).String())
	}
	s.log.Log(ctx, level, msg, args...)
}
