package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
)

// The order store's side of the event export (docs/EVENTS.md, "The order store's outbox";
// migrations/sqlite/0007_export_outbox.sql). Events are written to export_outbox in the
// transaction that makes them, so an event is exported if and only if its change committed:
// there is no second write that could fail after the first. The refund events
// (refund_required, refunded, refund_failed) are always written, by the payment and refund
// transactions; the events of ApplyEvents only once EnableOutbox was called (the memory
// engine's deployment: the Redis engine exports from its own streams).
//
// Commit order is seq order. A transaction takes its seqs last, with an UPDATE of the one row
// of export_seq, and that row's lock (SQLite: the one writer) keeps every other outbox writer
// waiting until it commits. So when an entry becomes visible, every entry with a smaller seq
// already is, and a reader that goes on after the last seq it read never skips one. An
// auto-increment key would not do: two transactions take ids 7 and 8, 8 commits first, a
// reader reads 8 and moves its cursor past 7, which then commits and is never read. The cost
// is that outbox writers commit one at a time (docs/DECISIONS.md).

var _ events.Outbox = (*Store)(nil)

// Bounds of the outbox API. Every list is bounded, whatever limit the caller asks for, and
// every string column has a width checked here, as limits.go does for the order tables.
const (
	// maxOutboxList bounds one ReadOutbox, OutboxSince or DeadLetters answer.
	maxOutboxList = 10000
	// outboxInsertRows bounds the rows of one INSERT into export_outbox or export_dead_letters
	// on a server database: 7 parameters each, far below every database's limit.
	outboxInsertRows = 100
	// trimChunk bounds the rows one TrimOutbox statement deletes, so that trimming a large
	// backlog never holds one long transaction.
	trimChunk = 500
	// maxSinkBytes and maxExportOwnerBytes are the widths of export_cursors.sink and .owner:
	// a sink is named by its redacted URL, an owner by the exporter instance.
	maxSinkBytes        = 512
	maxExportOwnerBytes = 128
	// maxDeadLetterReasonBytes is how much of a sink's error a dead letter keeps, as a
	// refund keeps maxRefundErrorBytes of the gateway's.
	maxDeadLetterReasonBytes = 500
	// maxEventIDBytes is the width of export_outbox.event_id: "<payment id>:<type>".
	maxEventIDBytes = 320
	// maxMarkReplayed bounds the ids of one MarkDeadLettersReplayed statement.
	maxMarkReplayed = batchLockIDs
)

// EnableOutbox makes ApplyEvents write every event of its batch (events.FromEngine) to the
// outbox, in the same transaction as the reservations. Call it once, before the store is used,
// when the engine keeps no outbox of its own (the memory engine). The refund events are written
// whether or not it was called.
func (s *Store) EnableOutbox() { s.outbox.Store(true) }

// outboxEnabled reports whether EnableOutbox was called.
func (s *Store) outboxEnabled() bool { return s.outbox.Load() }

// outboxRow is one export_outbox row to write (its seq is taken in the transaction).
type outboxRow struct {
	id, saleID, reservationID, typ string
	at                             int64
	body                           string // a string: SQLite and PostgreSQL keep it as TEXT
}

func newOutboxRow(e events.Event) (outboxRow, error) {
	if err := checkWidths("export event", field{"id", e.ID, maxEventIDBytes},
		field{"sale id", e.SaleID, maxSaleIDBytes}, field{"reservation id", e.ReservationID, maxPaymentIDBytes}); err != nil {
		return outboxRow{}, err
	}
	body, err := json.Marshal(e)
	if err != nil {
		return outboxRow{}, fmt.Errorf("sqlstore: encode event %s: %w", e.ID, err)
	}
	return outboxRow{id: e.ID, saleID: e.SaleID, reservationID: e.ReservationID, typ: e.Type, at: toMillis(e.At), body: string(body)}, nil
}

// outboxOfEvents is what ApplyEvents writes to the outbox for events: nothing unless
// EnableOutbox was called; else each event's events.FromEngine (all of them, paid included:
// eventRows drops paid rows only because the payment transaction writes the reservation), in
// batch order, each id once. A zero time is stamped as ApplyEvents stamps it.
func (s *Store) outboxOfEvents(evs []seckill.Event) ([]outboxRow, error) {
	if !s.outboxEnabled() {
		return nil, nil
	}
	rows := make([]outboxRow, 0, len(evs))
	seen := make(map[string]bool, len(evs))
	for _, ev := range evs {
		ev.At = s.stamp(ev.At)
		e, ok := events.FromEngine(ev)
		if !ok || seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		row, err := newOutboxRow(e)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// testHookOutboxSeqs, when set by a test, runs after a transaction took its seqs and before it
// inserts its entries and commits. Always nil outside tests.
var testHookOutboxSeqs func(first, last int64)

// testOutboxSeqsWithoutLock, when set by a test on a server database, makes writeOutbox take
// its seqs as an auto-increment key would (in a transaction of their own, committed at once,
// so no lock is held until the entries commit): the negative control of the visibility test.
// Always false outside tests.
var testOutboxSeqsWithoutLock bool

// writeOutbox writes rows to the outbox in tx, with consecutive seqs in their order. It must
// be the transaction's last work before commit: from the UPDATE of export_seq to the commit
// every other outbox writer waits (see the top of this file), so that stretch is kept short,
// and a transaction holding the row then waits for no other lock, which a writer waiting for
// the row might hold (no deadlock). An event id already stored is skipped (its seq stays
// unused: a gap).
func (s *Store) writeOutbox(ctx context.Context, tx *sql.Tx, rows []outboxRow) error {
	if len(rows) == 0 {
		return nil
	}
	take := tx
	if testOutboxSeqsWithoutLock {
		// The negative control: seqs from a transaction of their own, committed at once.
		var err error
		if take, err = s.db.BeginTx(ctx, nil); err != nil {
			return err
		}
		defer func() { _ = take.Rollback() }() // a no-op once committed
	}
	if _, err := take.ExecContext(ctx, s.q(`UPDATE export_seq SET last_seq = last_seq + ? WHERE id = 1`), len(rows)); err != nil {
		return fmt.Errorf("sqlstore: outbox: take %d seqs: %w", len(rows), err)
	}
	var last int64
	if err := take.QueryRowContext(ctx, `SELECT last_seq FROM export_seq WHERE id = 1`).Scan(&last); err != nil {
		return fmt.Errorf("sqlstore: outbox: read seq: %w", err)
	}
	if take != tx {
		if err := take.Commit(); err != nil {
			return err
		}
	}
	first := last - int64(len(rows)) + 1
	if testHookOutboxSeqs != nil {
		testHookOutboxSeqs(first, last)
	}
	if s.d.name == sqliteDialect.name {
		// One prepared single-row INSERT per entry: a multi-row INSERT in a transaction has
		// SQLite copy the pages it changes to a statement journal, a temporary file beyond
		// 64 KiB, and the event_id index may put each entry on a page of its own.
		// (insertChunks keeps the reservations' multi-row INSERTs under that bound.)
		stmt, err := tx.PrepareContext(ctx, s.outboxInsertSQL(1))
		if err != nil {
			return fmt.Errorf("sqlstore: outbox: insert: %w", err)
		}
		defer stmt.Close()
		for i, r := range rows {
			if _, err := stmt.ExecContext(ctx, r.args(first+int64(i))...); err != nil {
				return fmt.Errorf("sqlstore: outbox: insert %s: %w", r.id, err)
			}
		}
		return nil
	}
	for done := 0; done < len(rows); {
		chunk := rows[done:min(len(rows), done+outboxInsertRows)]
		args := make([]any, 0, 7*len(chunk))
		for i, r := range chunk {
			args = append(args, r.args(first+int64(done+i))...)
		}
		if _, err := tx.ExecContext(ctx, s.outboxInsertSQL(len(chunk)), args...); err != nil {
			return fmt.Errorf("sqlstore: outbox: insert %d entries: %w", len(chunk), err)
		}
		done += len(chunk)
	}
	return nil
}

func (r outboxRow) args(seq int64) []any {
	return []any{seq, r.id, r.saleID, r.reservationID, r.typ, r.at, r.body}
}

// outboxInsertSQL is the INSERT of n export_outbox rows that skips event ids already stored.
func (s *Store) outboxInsertSQL(n int) string {
	key := insertKey{s.d.name + "/outbox", n}
	if q, ok := insertSQL.Load(key); ok {
		return q.(string)
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO export_outbox (seq, event_id, sale_id, reservation_id, type, at, body) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?)")
	}
	q := s.q(s.d.insertIgnore(b.String(), "event_id"))
	insertSQL.Store(key, q)
	return q
}

// storedOrGiven returns the reservation id as stored, read in tx, or given when no row has
// that id (a payment for a reservation nobody knows): the reservation a refund event names.
func (s *Store) storedOrGiven(ctx context.Context, tx *sql.Tx, given seckill.Reservation) (seckill.Reservation, error) {
	if given.ID == "" {
		return given, nil
	}
	var cur resRow
	err := cur.scan(tx.QueryRowContext(ctx, s.q(`SELECT `+resColumns+` FROM reservations WHERE id = ?`), given.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return given, nil
	}
	if err != nil {
		return seckill.Reservation{}, fmt.Errorf("sqlstore: read reservation %s: %w", given.ID, err)
	}
	return cur.reservation(), nil
}

// writeRefundRequired writes the refund_required event of a payment recorded so, in its
// transaction (RecordPayment), naming the reservation as stored after the payment.
func (s *Store) writeRefundRequired(ctx context.Context, tx *sql.Tx, p seckill.PaymentRecord, r seckill.Reservation, at time.Time) error {
	if !r.Status.Valid() {
		r.Status = seckill.StatusRefundRequired
	}
	stored, err := s.storedOrGiven(ctx, tx, r)
	if err != nil {
		return err
	}
	row, err := newOutboxRow(events.FromRefund(events.TypeRefundRequired, p.PaymentID, p.AmountCents, stored, at))
	if err != nil {
		return err
	}
	return s.writeOutbox(ctx, tx, []outboxRow{row})
}

// writeRefundEnded writes the refunded or refund_failed event of a refund that ended so, in
// the transaction that recorded it (RecordRefund).
func (s *Store) writeRefundEnded(ctx context.Context, tx *sql.Tx, paymentID string, status seckill.RefundStatus, at time.Time) error {
	typ := events.TypeRefunded
	if status == seckill.RefundFailed {
		typ = events.TypeRefundFailed
	}
	var (
		r      seckill.Reservation
		amount int64
	)
	err := tx.QueryRowContext(ctx, s.q(`SELECT reservation_id, sale_id, user_id, quantity, amount_cents
		FROM payments WHERE payment_id = ?`), paymentID).Scan(&r.ID, &r.SaleID, &r.UserID, &r.Quantity, &amount)
	if err != nil {
		return fmt.Errorf("sqlstore: refund %s: read payment: %w", paymentID, err)
	}
	r.Status = seckill.StatusRefundRequired
	stored, err := s.storedOrGiven(ctx, tx, r)
	if err != nil {
		return err
	}
	row, err := newOutboxRow(events.FromRefund(typ, paymentID, amount, stored, at))
	if err != nil {
		return err
	}
	return s.writeOutbox(ctx, tx, []outboxRow{row})
}

// outboxColumns are read by scanOutbox.
const outboxColumns = `seq, body FROM export_outbox`

func (s *Store) queryOutbox(ctx context.Context, what, where string, args ...any) ([]events.OutboxEntry, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT `+outboxColumns+` WHERE `+where+` ORDER BY seq LIMIT ?`), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	defer rows.Close()
	out := []events.OutboxEntry{}
	for rows.Next() {
		var (
			e    events.OutboxEntry
			body []byte
		)
		if err := rows.Scan(&e.Seq, &body); err != nil {
			return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
		}
		if err := json.Unmarshal(body, &e.Event); err != nil {
			return nil, fmt.Errorf("sqlstore: %s: entry %d: %w", what, e.Seq, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	return out, nil
}

// listLimit checks a caller's limit and bounds it.
func listLimit(what string, limit int) (int, error) {
	if limit < 1 {
		return 0, seckill.Errorf(seckill.CodeInvalidArgument, "%s: limit %d; want at least 1", what, limit)
	}
	return min(limit, maxOutboxList), nil
}

// ReadOutbox implements events.Outbox. limit is capped at 10000.
func (s *Store) ReadOutbox(ctx context.Context, after int64, limit int) ([]events.OutboxEntry, error) {
	limit, err := listLimit("read outbox", limit)
	if err != nil {
		return nil, err
	}
	return s.queryOutbox(ctx, "read outbox", `seq > ?`, after, limit)
}

// OutboxSince implements events.Outbox. limit is capped at 10000.
func (s *Store) OutboxSince(ctx context.Context, since, until time.Time, afterSeq int64, limit int) ([]events.OutboxEntry, error) {
	limit, err := listLimit("outbox since", limit)
	if err != nil {
		return nil, err
	}
	return s.queryOutbox(ctx, "outbox since", `at >= ? AND at < ? AND seq > ?`, toMillis(since), toMillis(until), afterSeq, limit)
}

// OutboxLag implements events.Outbox.
func (s *Store) OutboxLag(ctx context.Context, after int64) (int64, time.Time, error) {
	var (
		n      int64
		oldest sql.NullInt64
	)
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT COUNT(*), MIN(at) FROM export_outbox WHERE seq > ?`), after).Scan(&n, &oldest)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("sqlstore: outbox lag: %w", err)
	}
	if !oldest.Valid {
		return n, time.Time{}, nil
	}
	return n, fromMillis(oldest.Int64), nil
}

// TrimOutbox implements events.Outbox, deleting at most trimChunk entries per statement.
func (s *Store) TrimOutbox(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT seq FROM export_outbox WHERE at < ? ORDER BY at LIMIT ?`),
			toMillis(before), trimChunk)
		if err != nil {
			return total, fmt.Errorf("sqlstore: trim outbox: %w", err)
		}
		var seqs []any
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return total, fmt.Errorf("sqlstore: trim outbox: %w", err)
			}
			seqs = append(seqs, seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return total, fmt.Errorf("sqlstore: trim outbox: %w", err)
		}
		if len(seqs) == 0 {
			return total, nil
		}
		res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM export_outbox WHERE seq IN (`+placeholders(len(seqs))+`)`), seqs...)
		if err != nil {
			return total, fmt.Errorf("sqlstore: trim outbox: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("sqlstore: trim outbox: %w", err)
		}
		total += n
		if len(seqs) < trimChunk {
			return total, nil
		}
	}
}

// checkCursorArgs checks what every cursor call is given.
func checkCursorArgs(what, sink, owner string) error {
	if sink == "" || owner == "" {
		return seckill.Errorf(seckill.CodeInvalidArgument, "%s: empty sink or owner", what)
	}
	return checkWidths(what, field{"sink", sink, maxSinkBytes}, field{"owner", owner, maxExportOwnerBytes})
}

// lockCursor reads sink's cursor in tx, creating it at position 0 if it is new, and on server
// databases locks it until tx ends.
func (s *Store) lockCursor(ctx context.Context, tx *sql.Tx, sink string, create bool) (pos int64, owner string, leaseUntil int64, found bool, err error) {
	if create {
		if _, err := tx.ExecContext(ctx, s.q(s.d.insertIgnore(`INSERT INTO export_cursors (sink, position, owner, lease_until)
			VALUES (?, 0, '', 0)`, "sink")), sink); err != nil {
			return 0, "", 0, false, fmt.Errorf("sqlstore: export cursor %s: create: %w", sink, err)
		}
	}
	var ownerB []byte
	err = tx.QueryRowContext(ctx, s.q(`SELECT position, owner, lease_until FROM export_cursors WHERE sink = ?`+s.d.forUpdate),
		sink).Scan(&pos, &ownerB, &leaseUntil)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", 0, false, nil
	}
	if err != nil {
		return 0, "", 0, false, fmt.Errorf("sqlstore: export cursor %s: %w", sink, err)
	}
	return pos, string(ownerB), leaseUntil, true, nil
}

// ClaimExportCursor implements events.Outbox. A lease is live while lease_until > now.
func (s *Store) ClaimExportCursor(ctx context.Context, sink, owner string, now time.Time, lease time.Duration) (int64, bool, error) {
	if err := checkCursorArgs("claim export cursor", sink, owner); err != nil {
		return 0, false, err
	}
	if lease <= 0 {
		return 0, false, seckill.Errorf(seckill.CodeInvalidArgument, "claim export cursor %s: lease %v", sink, lease)
	}
	nowMs := toMillis(s.stamp(now))
	var (
		pos int64
		ok  bool
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		p, cur, until, _, err := s.lockCursor(ctx, tx, sink, true)
		if err != nil {
			return err
		}
		pos, ok = p, false
		if cur != owner && cur != "" && until > nowMs {
			return nil // another owner's live lease
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE export_cursors SET owner = ?, lease_until = ? WHERE sink = ?`),
			owner, nowMs+lease.Milliseconds(), sink); err != nil {
			return fmt.Errorf("sqlstore: claim export cursor %s: %w", sink, err)
		}
		ok = true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return pos, ok, nil
}

// SaveExportCursor implements events.Outbox.
func (s *Store) SaveExportCursor(ctx context.Context, sink, owner string, pos int64, now time.Time, lease time.Duration) error {
	if err := checkCursorArgs("save export cursor", sink, owner); err != nil {
		return err
	}
	if lease <= 0 || pos < 0 {
		return seckill.Errorf(seckill.CodeInvalidArgument, "save export cursor %s: lease %v, position %d", sink, lease, pos)
	}
	nowMs := toMillis(s.stamp(now))
	return s.inTx(ctx, func(tx *sql.Tx) error {
		stored, cur, _, found, err := s.lockCursor(ctx, tx, sink, false)
		if err != nil {
			return err
		}
		if !found || cur != owner {
			return fmt.Errorf("sqlstore: save export cursor %s by %s: %w", sink, owner, events.ErrLeaseLost)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE export_cursors SET position = ?, lease_until = ? WHERE sink = ?`),
			max(stored, pos), nowMs+lease.Milliseconds(), sink); err != nil {
			return fmt.Errorf("sqlstore: save export cursor %s: %w", sink, err)
		}
		return nil
	})
}

// ReleaseExportCursor implements events.Outbox. The cursor is free once its owner is empty,
// whatever its lease_until, which is kept: it dates the last lease, by which the retention
// pass tells a sink being exported from one no longer configured (TrimOutboxAcknowledged).
func (s *Store) ReleaseExportCursor(ctx context.Context, sink, owner string) error {
	if err := checkCursorArgs("release export cursor", sink, owner); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE export_cursors SET owner = '' WHERE sink = ? AND owner = ?`),
		sink, owner); err != nil {
		return fmt.Errorf("sqlstore: release export cursor %s: %w", sink, err)
	}
	return nil
}

// AddDeadLetters implements events.Outbox, in one transaction.
func (s *Store) AddDeadLetters(ctx context.Context, sink string, events []events.Event, reason string, at time.Time) error {
	if sink == "" {
		return seckill.Errorf(seckill.CodeInvalidArgument, "add dead letters: empty sink")
	}
	if err := checkWidths("add dead letters", field{"sink", sink, maxSinkBytes}); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	reason = truncateUTF8(reason, maxDeadLetterReasonBytes)
	failedAt := toMillis(s.stamp(at))
	args := make([]any, 0, 5*len(events))
	for _, e := range events {
		if err := checkWidths("dead letter", field{"event id", e.ID, maxEventIDBytes}); err != nil {
			return err
		}
		body, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("sqlstore: dead letter %s: encode: %w", e.ID, err)
		}
		args = append(args, sink, e.ID, string(body), reason, failedAt)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for rest := args; len(rest) > 0; {
			n := min(len(rest)/5, outboxInsertRows)
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO export_dead_letters (sink, event_id, body, reason, failed_at)
				VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", n), ", ")), rest[:5*n]...); err != nil {
				return fmt.Errorf("sqlstore: add %d dead letters of %s: %w", n, sink, err)
			}
			rest = rest[5*n:]
		}
		return nil
	})
}

// DeadLetters implements events.Outbox. limit is capped at 10000.
func (s *Store) DeadLetters(ctx context.Context, sink string, afterID int64, limit int, includeReplayed bool) ([]events.DeadLetter, error) {
	limit, err := listLimit("dead letters", limit)
	if err != nil {
		return nil, err
	}
	where, args := `id > ?`, []any{afterID}
	if sink != "" {
		where += ` AND sink = ?`
		args = append(args, sink)
	}
	if !includeReplayed {
		where += ` AND replayed_at IS NULL`
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT id, sink, body, reason, failed_at, replayed_at
		FROM export_dead_letters WHERE `+where+` ORDER BY id LIMIT ?`), append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: dead letters: %w", err)
	}
	defer rows.Close()
	list := []events.DeadLetter{}
	for rows.Next() {
		var (
			d                events.DeadLetter
			sinkB, body, rsn []byte
			failed           int64
			replayed         sql.NullInt64
		)
		if err := rows.Scan(&d.ID, &sinkB, &body, &rsn, &failed, &replayed); err != nil {
			return nil, fmt.Errorf("sqlstore: dead letters: %w", err)
		}
		if err := json.Unmarshal(body, &d.Event); err != nil {
			return nil, fmt.Errorf("sqlstore: dead letter %d: %w", d.ID, err)
		}
		d.Sink, d.Reason, d.FailedAt = string(sinkB), string(rsn), fromMillis(failed)
		if replayed.Valid {
			t := fromMillis(replayed.Int64)
			d.ReplayedAt = &t
		}
		list = append(list, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: dead letters: %w", err)
	}
	return list, nil
}

// MarkDeadLettersReplayed implements events.Outbox.
func (s *Store) MarkDeadLettersReplayed(ctx context.Context, ids []int64, at time.Time) error {
	ms := toMillis(s.stamp(at))
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), maxMarkReplayed)]
		ids = ids[len(chunk):]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, ms)
		for _, id := range chunk {
			args = append(args, id)
		}
		if _, err := s.db.ExecContext(ctx, s.q(`UPDATE export_dead_letters SET replayed_at = ? WHERE id IN (`+
			placeholders(len(chunk))+`)`), args...); err != nil {
			return fmt.Errorf("sqlstore: mark %d dead letters replayed: %w", len(chunk), err)
		}
	}
	return nil
}
