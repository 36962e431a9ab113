package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/retention"
	"github.com/seckill-go/seckill/sqlstore"
)

// retentionConfig holds the bounds of what grows with events and is only delivery
// bookkeeping (docs/EVENTS.md, "Retention"): the outbox, the dead letters and, on the Redis
// engine, the sales' event streams.
type retentionConfig struct {
	OutboxKeep        time.Duration
	OutboxMaxRows     int64
	DeadLetterKeep    time.Duration
	DeadLetterMaxRows int64
	// StreamKeep is how long stream entries stay after every reader has them (negative: not at
	// all, as --stream-keep 0 sets it; 0: the default); StreamMaxEntries the most a sale's
	// stream keeps (0: the default) (redisinv.WithStreamLimits, whose zeros are the same).
	StreamKeep       time.Duration
	StreamMaxEntries int64
}

// bindRetentionConfig registers the retention flags: serve and worker both trim.
func bindRetentionConfig(fs *flag.FlagSet, getenv func(string) string, c *config) {
	r := &c.Retention
	*r = retentionConfig{
		OutboxKeep: retention.DefaultOutboxKeep, OutboxMaxRows: retention.DefaultOutboxMaxRows,
		DeadLetterKeep: retention.DefaultDeadLetterKeep, DeadLetterMaxRows: retention.DefaultDeadLetterMaxRows,
		StreamKeep: redisinv.DefaultStreamKeep, StreamMaxEntries: redisinv.DefaultStreamMost,
	}
	bind := func(name, env string, v flag.Value, usage string) {
		if s := getenv(env); s != "" {
			if err := v.Set(s); err != nil {
				c.envErr = errors.Join(c.envErr, fmt.Errorf("%s: %w", env, err))
			}
		}
		fs.Var(v, name, usage+" ("+env+")")
	}
	bind("outbox-keep", "SECKILL_OUTBOX_KEEP", durationValue{&r.OutboxKeep},
		"how long the outbox keeps an event once every sink has it: how far back `seckill events replay` reaches")
	bind("outbox-max-rows", "SECKILL_OUTBOX_MAX_ROWS", countValue{&r.OutboxMaxRows},
		"the most events the outbox keeps; past it the oldest go, even unsent (counted in seckill_retention_lost_total)")
	bind("dead-letter-keep", "SECKILL_DEAD_LETTER_KEEP", durationValue{&r.DeadLetterKeep},
		"how long a dead letter is kept, replayed or not")
	bind("dead-letter-max-rows", "SECKILL_DEAD_LETTER_MAX_ROWS", countValue{&r.DeadLetterMaxRows},
		"the most dead letters kept; past it the oldest go")
	bind("stream-keep", "SECKILL_STREAM_KEEP", streamKeepValue{&r.StreamKeep},
		"redis engine: how long a sale's stream keeps an entry after every reader has it; 0 for not at all")
	bind("stream-max-entries", "SECKILL_STREAM_MAX_ENTRIES", countValue{&r.StreamMaxEntries},
		"redis engine: the most entries a sale's stream keeps; past it the oldest go, even unread by a sink (never before the database has them)")
}

// streamLimits is the engine option of the stream bounds.
func (r retentionConfig) streamLimits() redisinv.Option {
	return redisinv.WithStreamLimits(r.StreamKeep, int(min(r.StreamMaxEntries, int64(^uint(0)>>1))))
}

// newRetention builds the retention service over store; streams, if set, reports the Redis
// engine's fullest stream for /metrics.
func newRetention(r retentionConfig, store *sqlstore.Store, streams func() (int64, int64), log *slog.Logger) *retention.Trimmer {
	return retention.New(store, retention.Config{
		OutboxKeep: r.OutboxKeep, OutboxMaxRows: r.OutboxMaxRows,
		DeadLetterKeep: r.DeadLetterKeep, DeadLetterMaxRows: r.DeadLetterMaxRows,
		Streams: streams, Logger: log,
	})
}

// countValue is a flag of a whole number of rows, at least 1: every bound is a bound.
type countValue struct{ p *int64 }

func (v countValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v countValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	if n < 1 {
		return fmt.Errorf("%q: must be at least 1", s)
	}
	*v.p = n
	return nil
}

// streamKeepValue is a duration of 0 or more; 0 is kept as -1, "not at all" (streamLimits).
type streamKeepValue struct{ p *time.Duration }

func (v streamKeepValue) String() string {
	if v.p != nil && *v.p < 0 {
		return "0s"
	}
	return durationValue(v).String()
}

func (v streamKeepValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (e.g. 30s)", s)
	}
	if d < 0 {
		return fmt.Errorf("%q: must not be negative", s)
	}
	if d == 0 {
		d = -1
	}
	*v.p = d
	return nil
}
