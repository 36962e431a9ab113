package events

import (
	"context"
	"errors"
	"time"
)

// OutboxEntry is one event of the order store's outbox: the event and its place in the outbox.
type OutboxEntry struct {
	// Seq orders the entries: taken in the order their transactions commit, so a reader that
	// remembers the last Seq it read never misses an entry. Seqs may have gaps.
	Seq   int64
	Event Event
}

// DeadLetter is an event a sink gave up on (after the exporter's give-up time), kept for an
// operator to see and replay.
type DeadLetter struct {
	ID         int64      `json:"id"`
	Sink       string     `json:"sink"`
	Event      Event      `json:"event"`
	Reason     string     `json:"reason"`
	FailedAt   time.Time  `json:"failed_at"`
	ReplayedAt *time.Time `json:"replayed_at,omitempty"`
}

// ErrLeaseLost is returned (wrapped) by SaveExportCursor to an owner whose lease on the cursor
// another owner has taken over: the caller must stop exporting to that sink.
var ErrLeaseLost = errors.New("export: cursor lease lost")

// Outbox is the order store's side of the export (sqlstore.Store implements it): the events
// written in the transactions that made them, a read position per sink leased to one exporter
// instance at a time, and the events a sink gave up on (docs/EVENTS.md, "The order store's
// outbox").
type Outbox interface {
	// ReadOutbox returns up to limit entries with Seq > after, in Seq order. Seqs are taken so
	// that entries become visible in Seq order: once an entry is visible, no entry with a
	// smaller Seq appears later (a reader with a cursor never misses one). Seqs may have gaps.
	ReadOutbox(ctx context.Context, after int64, limit int) ([]OutboxEntry, error)
	// OutboxLag returns how many entries have Seq > after, and the At of the oldest of them
	// (zero time if none).
	OutboxLag(ctx context.Context, after int64) (n int64, oldest time.Time, err error)
	// ClaimExportCursor takes (or renews, for the same owner) the lease on sink's cursor until
	// now+lease and returns its position: 0 for a new sink, which therefore starts at the
	// oldest entry kept. ok is false, and nothing changes, while another owner's lease is live
	// (its lease_until is after now).
	ClaimExportCursor(ctx context.Context, sink, owner string, now time.Time, lease time.Duration) (pos int64, ok bool, err error)
	// SaveExportCursor moves sink's cursor to pos (never backwards: a smaller pos keeps the
	// stored one) and renews the lease until now+lease. It returns ErrLeaseLost (wrapped) if
	// owner no longer holds the lease; a lease that expired but nobody took is still owner's.
	SaveExportCursor(ctx context.Context, sink, owner string, pos int64, now time.Time, lease time.Duration) error
	// ReleaseExportCursor ends owner's lease, if it holds it (a clean stop lets another
	// instance go on at once). The position is kept.
	ReleaseExportCursor(ctx context.Context, sink, owner string) error
	// AddDeadLetters records events a sink gave up on, with the reason (truncated by the
	// store; the caller makes sure it holds no secret).
	AddDeadLetters(ctx context.Context, sink string, events []Event, reason string, at time.Time) error
	// DeadLetters lists a sink's dead letters (every sink's when sink == ""), ID > afterID, in
	// ID order, at most limit; includeReplayed false leaves out those already replayed.
	DeadLetters(ctx context.Context, sink string, afterID int64, limit int, includeReplayed bool) ([]DeadLetter, error)
	// MarkDeadLettersReplayed stamps ids as replayed at at (unknown ids are ignored).
	MarkDeadLettersReplayed(ctx context.Context, ids []int64, at time.Time) error
	// OutboxSince returns the entries with At in [since, until) and Seq > afterSeq, in Seq
	// order, at most limit (for `seckill events replay`).
	OutboxSince(ctx context.Context, since, until time.Time, afterSeq int64, limit int) ([]OutboxEntry, error)
	// TrimOutbox deletes the entries with At before before and returns how many it deleted.
	TrimOutbox(ctx context.Context, before time.Time) (int64, error)
}
