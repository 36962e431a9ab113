package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Retention of the export's bookkeeping (package retention; docs/EVENTS.md, "Retention"): the
// outbox and the dead letters are trimmed oldest first, at most one batch per call, each found
// through an index (export_outbox: its primary key and export_outbox_at; export_dead_letters:
// its primary key and export_dead_letters_failed), so a call costs its batch, never a scan of
// the table. No other table is ever trimmed: reservations, payments, refunds and the gateway's
// payments are orders and money.
//
// Every delete is idempotent, so any number of instances may trim at once: a row is deleted,
// and counted, by exactly one of them.

// maxTrimBatch bounds the rows one trim call deletes, whatever limit the caller asks for.
const maxTrimBatch = 1000

// trimLimit checks a caller's batch size and bounds it.
func trimLimit(what string, limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("sqlstore: %s: batch of %d; want at least 1", what, limit)
	}
	return min(limit, maxTrimBatch), nil
}

// slowestReader is the lowest position of the export cursors whose lease was held at or after
// since: the sinks being exported. ok is false when there is none.
func (s *Store) slowestReader(ctx context.Context, since time.Time) (pos int64, ok bool, err error) {
	var p sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT MIN(position) FROM export_cursors WHERE lease_until >= ?`),
		toMillis(since)).Scan(&p); err != nil {
		return 0, false, fmt.Errorf("sqlstore: slowest export cursor: %w", err)
	}
	return p.Int64, p.Valid, nil
}

// pickKeys runs query (which selects one integer key) and returns the keys.
func (s *Store) pickKeys(ctx context.Context, what, query string, args ...any) ([]any, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	defer rows.Close()
	var keys []any
	for rows.Next() {
		var k int64
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	return keys, nil
}

// deleteKeys deletes the rows of table whose key is in keys: first those that also meet
// pending (with pendingArgs; "" for none), counted as lost, then the rest. Each statement
// counts only the rows it deleted, so rows another instance deleted first are not counted.
func (s *Store) deleteKeys(ctx context.Context, what, table, key string, keys []any, pending string, pendingArgs ...any) (deleted, lost int64, err error) {
	if len(keys) == 0 {
		return 0, 0, nil
	}
	del := func(extra string, extraArgs ...any) (int64, error) {
		res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM `+table+` WHERE `+key+` IN (`+placeholders(len(keys))+`)`+extra),
			append(append([]any{}, keys...), extraArgs...)...)
		if err != nil {
			return 0, fmt.Errorf("sqlstore: %s: %w", what, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("sqlstore: %s: %w", what, err)
		}
		return n, nil
	}
	if pending != "" {
		if lost, err = del(` AND `+pending, pendingArgs...); err != nil {
			return 0, 0, err
		}
	}
	rest, err := del("")
	return lost + rest, lost, err
}

// TrimOutboxOverCount deletes up to limit outbox entries (at most 1000), oldest seq first,
// among those beyond the newest most seqs (seq ≤ the largest seq − most), whether or not a
// reader has them: the outbox's hard bound. lost counts those a reader had not acknowledged:
// a seq after the position of an export cursor whose lease was held since readersSince. A
// gap in the seqs counts as an entry, so at most most entries are kept.
func (s *Store) TrimOutboxOverCount(ctx context.Context, most int64, readersSince time.Time, limit int) (deleted, lost int64, err error) {
	const what = "trim outbox over its count"
	if limit, err = trimLimit(what, limit); err != nil {
		return 0, 0, err
	}
	if most < 1 {
		return 0, 0, fmt.Errorf("sqlstore: %s: bound %d; want at least 1", what, most)
	}
	var last sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(seq) FROM export_outbox`).Scan(&last); err != nil {
		return 0, 0, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	if !last.Valid || last.Int64-most < 1 {
		return 0, 0, nil
	}
	seqs, err := s.pickKeys(ctx, what, `SELECT seq FROM export_outbox WHERE seq <= ? ORDER BY seq LIMIT ?`, last.Int64-most, limit)
	if err != nil || len(seqs) == 0 {
		return 0, 0, err
	}
	slowest, ok, err := s.slowestReader(ctx, readersSince)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return s.deleteKeys(ctx, what, "export_outbox", "seq", seqs, "")
	}
	return s.deleteKeys(ctx, what, "export_outbox", "seq", seqs, "seq > ?", slowest)
}

// TrimOutboxAcknowledged deletes up to limit outbox entries (at most 1000) whose at (the
// event's time) is before before and that every reader has acknowledged (at or before the
// position of every export cursor whose lease was held since readersSince; with none, every
// entry counts as acknowledged), oldest at first: the outbox's bound by age, which never loses
// an event a sink is still to send.
func (s *Store) TrimOutboxAcknowledged(ctx context.Context, before, readersSince time.Time, limit int) (int64, error) {
	const what = "trim outbox by age"
	limit, err := trimLimit(what, limit)
	if err != nil {
		return 0, err
	}
	slowest, ok, err := s.slowestReader(ctx, readersSince)
	if err != nil {
		return 0, err
	}
	where, args := `at < ?`, []any{toMillis(before)}
	if ok {
		// Entries are found through export_outbox_at, and those the slowest reader has not
		// acknowledged are passed over. Seqs follow the events' times closely, so what it has
		// acknowledged is the oldest: once the first seq is past its position nothing is left
		// to delete, and the query, which would walk every old entry the reader is still to
		// send, is not run.
		var first sql.NullInt64
		if err := s.db.QueryRowContext(ctx, `SELECT MIN(seq) FROM export_outbox`).Scan(&first); err != nil {
			return 0, fmt.Errorf("sqlstore: %s: %w", what, err)
		}
		if !first.Valid || first.Int64 > slowest {
			return 0, nil
		}
		where, args = where+` AND seq <= ?`, append(args, slowest)
	}
	// ORDER BY at alone, the index's order: with seq added PostgreSQL would sort every match.
	seqs, err := s.pickKeys(ctx, what, `SELECT seq FROM export_outbox WHERE `+where+` ORDER BY at LIMIT ?`, append(args, limit)...)
	if err != nil {
		return 0, err
	}
	n, _, err := s.deleteKeys(ctx, what, "export_outbox", "seq", seqs, "")
	return n, err
}

// TrimDeadLetters deletes up to limit dead letters (at most 1000), oldest first: those beyond
// the newest most ids (id ≤ the largest id − most), then those that failed before before.
// unreplayed counts those an operator never replayed.
func (s *Store) TrimDeadLetters(ctx context.Context, before time.Time, most int64, limit int) (deleted, unreplayed int64, err error) {
	const what = "trim dead letters"
	if limit, err = trimLimit(what, limit); err != nil {
		return 0, 0, err
	}
	if most < 1 {
		return 0, 0, fmt.Errorf("sqlstore: %s: bound %d; want at least 1", what, most)
	}
	var last sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(id) FROM export_dead_letters`).Scan(&last); err != nil {
		return 0, 0, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	var ids []any
	if last.Valid && last.Int64-most >= 1 {
		if ids, err = s.pickKeys(ctx, what, `SELECT id FROM export_dead_letters WHERE id <= ? ORDER BY id LIMIT ?`,
			last.Int64-most, limit); err != nil {
			return 0, 0, err
		}
	}
	if len(ids) < limit {
		old, err := s.pickKeys(ctx, what, `SELECT id FROM export_dead_letters WHERE failed_at < ? ORDER BY failed_at, id LIMIT ?`,
			toMillis(before), limit-len(ids))
		if err != nil {
			return 0, 0, err
		}
		// An old one may also be over the count: the same id twice would only be deleted once,
		// but kept out of the list it leaves the IN list short and exact.
		seen := make(map[int64]bool, len(ids))
		for _, id := range ids {
			seen[id.(int64)] = true
		}
		for _, id := range old {
			if !seen[id.(int64)] {
				ids = append(ids, id)
			}
		}
	}
	return s.deleteKeys(ctx, what, "export_dead_letters", "id", ids, "replayed_at IS NULL")
}

// OutboxRows is how many entries the outbox holds, counted as the span of their seqs (an
// upper bound: a gap counts as an entry), read from the primary key alone.
func (s *Store) OutboxRows(ctx context.Context) (int64, error) {
	return s.span(ctx, "outbox rows", `SELECT (SELECT MIN(seq) FROM export_outbox), (SELECT MAX(seq) FROM export_outbox)`)
}

// DeadLetterRows is how many dead letters are kept, counted as the span of their ids (an
// upper bound: a gap counts as a row), read from the primary key alone.
func (s *Store) DeadLetterRows(ctx context.Context) (int64, error) {
	return s.span(ctx, "dead letter rows", `SELECT (SELECT MIN(id) FROM export_dead_letters), (SELECT MAX(id) FROM export_dead_letters)`)
}

// span reads the smallest and the largest key. Two subqueries, not MIN and MAX in one: SQLite
// reads one of them from the index's end only when it is the query's one aggregate, and
// scanned the whole table for the pair.
func (s *Store) span(ctx context.Context, what, query string) (int64, error) {
	var lo, hi sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, query).Scan(&lo, &hi); err != nil {
		return 0, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	if !lo.Valid || !hi.Valid {
		return 0, nil
	}
	return hi.Int64 - lo.Int64 + 1, nil
}
