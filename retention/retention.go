// Package retention bounds what grows with events and is only delivery bookkeeping: the order
// store's export outbox and the export's dead letters (docs/EVENTS.md, "Retention"). Orders,
// payments and refunds are never trimmed: they are the shop's records and money.
//
// A Trimmer is one background service that, every Interval, deletes what is past each table's
// bounds, oldest first, a batch at a time (each batch found through an index, so a pass costs
// what it deletes), and measures how full each table is for /metrics. Every delete is
// idempotent, so every instance runs one without a lease: on one database they share the
// deleting, and each row is deleted, and counted, once.
//
// The outbox has two bounds. By age (OutboxKeep) it drops only what every sink has
// acknowledged, so the age bound never loses an event; by count (OutboxMaxRows) it drops the
// oldest entries whether a sink has sent them or not, since a sink stuck for long must not
// grow the database without end — and what that drops unsent is counted
// (seckill_retention_lost_total), logged with each pass and shown in /metrics. Dead letters are
// bounded by age and count alike; those never replayed are counted the same way.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/wait"
)

// Store is the order store's side of retention (sqlstore.Store implements it). Each trim call
// deletes at most one batch of limit rows and says how many it deleted.
type Store interface {
	// TrimOutboxOverCount deletes outbox entries beyond the newest most seqs, oldest first,
	// sent or not; lost is how many a sink leased since readersSince had not acknowledged.
	TrimOutboxOverCount(ctx context.Context, most int64, readersSince time.Time, limit int) (deleted, lost int64, err error)
	// TrimOutboxAcknowledged deletes outbox entries older than before that every sink leased
	// since readersSince has acknowledged, oldest first.
	TrimOutboxAcknowledged(ctx context.Context, before, readersSince time.Time, limit int) (int64, error)
	// TrimDeadLetters deletes dead letters beyond the newest most or older than before,
	// oldest first; unreplayed is how many an operator never replayed.
	TrimDeadLetters(ctx context.Context, before time.Time, most int64, limit int) (deleted, unreplayed int64, err error)
	// OutboxRows and DeadLetterRows are how many rows each table holds (an upper bound, read
	// from the primary key alone).
	OutboxRows(ctx context.Context) (int64, error)
	DeadLetterRows(ctx context.Context) (int64, error)
}

// Config configures a Trimmer. Zero values take the defaults.
type Config struct {
	// OutboxKeep is how long an outbox entry is kept once every sink has it: how far back
	// `seckill events replay` reaches. A sink not leased for that long no longer holds
	// entries back (a sink removed from the configuration).
	OutboxKeep time.Duration
	// OutboxMaxRows is the most outbox entries kept, sent or not.
	OutboxMaxRows int64
	// DeadLetterKeep is how long a dead letter is kept, replayed or not.
	DeadLetterKeep time.Duration
	// DeadLetterMaxRows is the most dead letters kept.
	DeadLetterMaxRows int64
	// Interval is the pause between two passes.
	Interval time.Duration
	// Batch is the most rows one statement deletes; MaxBatches the most batches per table in
	// one pass (what is left waits for the next pass).
	Batch, MaxBatches int
	// Streams, if set, reports the Redis engine's streams for /metrics: the entries of the
	// fullest sale's stream this process trimmed lately, and the most a stream keeps
	// (redisinv.Engine.StreamFill). Their trimming is the engine's (docs/EVENTS.md).
	Streams func() (entries, most int64)
	Logger  *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Defaults of Config.
const (
	// DefaultOutboxKeep is a week of replay (`seckill events replay`); it is far longer than
	// any give-up time, so a sink that fails has its entries dead-lettered long before.
	DefaultOutboxKeep = 7 * 24 * time.Hour
	// DefaultOutboxMaxRows is ten million entries: a week of a busy memory-engine shop (each
	// buy is two or three events), about 5 GB at the typical half kilobyte an entry.
	DefaultOutboxMaxRows = 10_000_000
	// DefaultDeadLetterKeep is a month: an operator's time to look and replay.
	DefaultDeadLetterKeep = 30 * 24 * time.Hour
	// DefaultDeadLetterMaxRows is a million dead letters: a sink that refused everything for
	// long fills them; past that the oldest make room.
	DefaultDeadLetterMaxRows = 1_000_000
	DefaultInterval          = time.Minute
	DefaultBatch             = 500
	DefaultMaxBatches        = 200
)

// Tables as /metrics names them (label table).
const (
	TableOutbox      = "outbox"
	TableDeadLetters = "dead_letters"
	TableRedisStream = "redis_stream"
)

// Pass is what one pass deleted.
type Pass struct {
	// OutboxDeleted counts the outbox entries deleted, of which OutboxLost a sink had not yet
	// acknowledged (the count bound's overflow).
	OutboxDeleted, OutboxLost int64
	// DeadLettersDeleted counts the dead letters deleted, of which DeadLettersUnreplayed had
	// never been replayed.
	DeadLettersDeleted, DeadLettersUnreplayed int64
}

// Trimmer is the retention service (background.Service). Build it with New.
type Trimmer struct {
	store Store
	cfg   Config

	mu       sync.Mutex
	measured bool
	rows     map[string]int64 // by table, after the last pass
	deleted  map[string]int64 // by table, this process's total
	lost     map[string]int64 // by table, this process's total
}

// New returns a trimmer of store's tables.
func New(store Store, cfg Config) *Trimmer {
	if cfg.OutboxKeep <= 0 {
		cfg.OutboxKeep = DefaultOutboxKeep
	}
	if cfg.OutboxMaxRows <= 0 {
		cfg.OutboxMaxRows = DefaultOutboxMaxRows
	}
	if cfg.DeadLetterKeep <= 0 {
		cfg.DeadLetterKeep = DefaultDeadLetterKeep
	}
	if cfg.DeadLetterMaxRows <= 0 {
		cfg.DeadLetterMaxRows = DefaultDeadLetterMaxRows
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.MaxBatches <= 0 {
		cfg.MaxBatches = DefaultMaxBatches
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Trimmer{store: store, cfg: cfg, rows: map[string]int64{}, deleted: map[string]int64{}, lost: map[string]int64{}}
}

// Config is the trimmer's configuration, its defaults filled in.
func (t *Trimmer) Config() Config { return t.cfg }

// Name is the trimmer's name among the background services.
func (t *Trimmer) Name() string { return "retention" }

// Run makes a pass at once and then every Interval until ctx is done, and returns nil; its
// exit is immediate (a batch cut short is deleted by the next pass). A failed pass is reported
// (background.Report) and the next one tries again.
func (t *Trimmer) Run(ctx context.Context) error {
	pass := func(ctx context.Context) {
		if _, err := t.RunOnce(ctx); err != nil && ctx.Err() == nil {
			background.Report(ctx, fmt.Errorf("retention pass: %w", err))
		}
	}
	pass(ctx)
	wait.Every(ctx, t.cfg.Interval, pass)
	return nil
}

// RunOnce makes one pass: the outbox over its count, the outbox by age, the dead letters, each
// in batches until a batch comes back short or MaxBatches were deleted; then it measures the
// tables. What it deleted before an error is returned with the error, and counted.
func (t *Trimmer) RunOnce(ctx context.Context) (Pass, error) {
	var p Pass
	now := t.cfg.Now()
	readersSince := now.Add(-t.cfg.OutboxKeep)
	err := t.batches(func() (int, error) {
		n, lost, err := t.store.TrimOutboxOverCount(ctx, t.cfg.OutboxMaxRows, readersSince, t.cfg.Batch)
		p.OutboxDeleted, p.OutboxLost = p.OutboxDeleted+n, p.OutboxLost+lost
		return int(n), err
	})
	if err == nil {
		err = t.batches(func() (int, error) {
			n, err := t.store.TrimOutboxAcknowledged(ctx, now.Add(-t.cfg.OutboxKeep), readersSince, t.cfg.Batch)
			p.OutboxDeleted += n
			return int(n), err
		})
	}
	if err == nil {
		err = t.batches(func() (int, error) {
			n, unreplayed, err := t.store.TrimDeadLetters(ctx, now.Add(-t.cfg.DeadLetterKeep), t.cfg.DeadLetterMaxRows, t.cfg.Batch)
			p.DeadLettersDeleted, p.DeadLettersUnreplayed = p.DeadLettersDeleted+n, p.DeadLettersUnreplayed+unreplayed
			return int(n), err
		})
	}
	t.count(p)
	t.logPass(p)
	if err != nil {
		return p, err
	}
	outbox, err := t.store.OutboxRows(ctx)
	if err != nil {
		return p, err
	}
	dead, err := t.store.DeadLetterRows(ctx)
	if err != nil {
		return p, err
	}
	t.mu.Lock()
	t.measured = true
	t.rows[TableOutbox], t.rows[TableDeadLetters] = outbox, dead
	t.mu.Unlock()
	return p, nil
}

// batches calls trim until it deletes less than a batch, fails, or ran MaxBatches times.
func (t *Trimmer) batches(trim func() (int, error)) error {
	for range t.cfg.MaxBatches {
		n, err := trim()
		if err != nil || n < t.cfg.Batch {
			return err
		}
	}
	return nil
}

func (t *Trimmer) count(p Pass) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deleted[TableOutbox] += p.OutboxDeleted
	t.lost[TableOutbox] += p.OutboxLost
	t.deleted[TableDeadLetters] += p.DeadLettersDeleted
	t.lost[TableDeadLetters] += p.DeadLettersUnreplayed
}

// logPass writes one line per pass that deleted anything: information when only delivered or
// replayed rows went, a warning, with the counts, when the bounds dropped rows nobody had.
func (t *Trimmer) logPass(p Pass) {
	if p.OutboxLost > 0 {
		t.cfg.Logger.Warn("retention: the outbox is over its bound: its oldest entries were deleted before a sink sent them; the sink lost them (see seckill_export_lag_seconds)",
			"deleted", p.OutboxDeleted, "unsent", p.OutboxLost, "max_rows", t.cfg.OutboxMaxRows)
	} else if p.OutboxDeleted > 0 {
		t.cfg.Logger.Info("retention: deleted old outbox entries", "deleted", p.OutboxDeleted, "older_than", t.cfg.OutboxKeep, "max_rows", t.cfg.OutboxMaxRows)
	}
	if p.DeadLettersUnreplayed > 0 {
		t.cfg.Logger.Warn("retention: deleted dead letters never replayed",
			"deleted", p.DeadLettersDeleted, "unreplayed", p.DeadLettersUnreplayed, "older_than", t.cfg.DeadLetterKeep, "max_rows", t.cfg.DeadLetterMaxRows)
	} else if p.DeadLettersDeleted > 0 {
		t.cfg.Logger.Info("retention: deleted old dead letters", "deleted", p.DeadLettersDeleted, "older_than", t.cfg.DeadLetterKeep, "max_rows", t.cfg.DeadLetterMaxRows)
	}
}
