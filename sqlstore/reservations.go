package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/seckill-go/seckill"
)

// finalRank is the rank of paid and refund_required: statuses that only the payment
// transaction writes, and that events never change.
var finalRank = seckill.StatusPaid.Rank()

// resRow is a reservations row as stored.
type resRow struct {
	id, saleID, userID string
	quantity           int
	status             seckill.ReservationStatus
	expiresAt          sql.NullInt64 // only while held
	amountCents        int64
	paymentID          sql.NullString
	idempotencyKey     string
	seq                int64
	createdAt          int64
	updatedAt          int64
}

const resColumns = `id, sale_id, user_id, quantity, status, expires_at, amount_cents, payment_id,
	idempotency_key, seq, created_at, updated_at`

func (r *resRow) scan(row scanner) error {
	var status string
	err := row.Scan(&r.id, &r.saleID, &r.userID, &r.quantity, &status, &r.expiresAt, &r.amountCents,
		&r.paymentID, &r.idempotencyKey, &r.seq, &r.createdAt, &r.updatedAt)
	r.status = seckill.ReservationStatus(status)
	return err
}

// reservation converts the row to the domain type. Position is the engine's live queue place
// and is not stored; the FIFO order is Seq.
func (r resRow) reservation() seckill.Reservation {
	res := seckill.Reservation{
		ID:             r.id,
		SaleID:         r.saleID,
		UserID:         r.userID,
		Quantity:       r.quantity,
		Status:         r.status,
		AmountCents:    r.amountCents,
		PaymentID:      r.paymentID.String,
		CreatedAt:      fromMillis(r.createdAt),
		Seq:            uint64(r.seq),
		IdempotencyKey: r.idempotencyKey,
	}
	if r.status == seckill.StatusHeld && r.expiresAt.Valid {
		t := fromMillis(r.expiresAt.Int64)
		res.ExpiresAt = &t
	}
	return res
}

// newResRow validates a reservation from an event or a payment and converts it to a row as of
// at. expires_at is kept only while held, matching what the engine shows.
func newResRow(r seckill.Reservation, at time.Time) (resRow, error) {
	switch {
	case r.ID == "" || r.SaleID == "":
		return resRow{}, seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q has no id or sale id", r.ID)
	case !r.Status.Valid():
		return resRow{}, seckill.Errorf(seckill.CodeInvalidArgument, "reservation %s: unknown status %q", r.ID, r.Status)
	case r.Quantity < 1 || r.Quantity > seckill.MaxQuantity:
		return resRow{}, seckill.Errorf(seckill.CodeInvalidArgument, "reservation %s: quantity %d out of range", r.ID, r.Quantity)
	case r.Seq > math.MaxInt64:
		return resRow{}, seckill.Errorf(seckill.CodeInvalidArgument, "reservation %s: seq %d out of range", r.ID, r.Seq)
	}
	if err := checkWidths("reservation",
		field{"id", r.ID, maxReservationIDBytes},
		field{"sale id", r.SaleID, maxSaleIDBytes},
		field{"user id", r.UserID, maxUserIDBytes},
		field{"payment id", r.PaymentID, maxPaymentIDBytes},
		field{"idempotency key", r.IdempotencyKey, maxIdempotencyKeyBytes},
	); err != nil {
		return resRow{}, err
	}
	row := resRow{
		id:             r.ID,
		saleID:         r.SaleID,
		userID:         r.UserID,
		quantity:       r.Quantity,
		status:         r.Status,
		amountCents:    r.AmountCents,
		paymentID:      sql.NullString{String: r.PaymentID, Valid: r.PaymentID != ""},
		idempotencyKey: r.IdempotencyKey,
		seq:            int64(r.Seq),
		createdAt:      toMillis(at),
		updatedAt:      toMillis(at),
	}
	if !r.CreatedAt.IsZero() {
		row.createdAt = toMillis(r.CreatedAt)
	}
	if r.Status == seckill.StatusHeld && r.ExpiresAt != nil {
		row.expiresAt = sql.NullInt64{Int64: toMillis(*r.ExpiresAt), Valid: true}
	}
	return row, nil
}

// merge returns what an event row in does to the stored row cur, and whether it changes it.
// Status only moves forward by rank; a final row (paid, refund_required) never changes. An
// event of the same status updates the mutable fields (a re-granted hold's expiry) only if it
// is not older than the last change, so a late duplicate of an earlier event cannot undo a
// later one. Identity fields (sale, user, key, seq, created_at) are fixed by the first write.
func merge(cur, in resRow) (resRow, bool) {
	cr, ir := cur.status.Rank(), in.status.Rank()
	switch {
	case cr >= finalRank:
		return cur, false
	case ir > cr:
	case ir == cr && in.status == cur.status && in.updatedAt >= cur.updatedAt:
	default:
		return cur, false
	}
	next := cur
	next.status, next.quantity, next.amountCents, next.expiresAt = in.status, in.quantity, in.amountCents, in.expiresAt
	if in.paymentID.Valid {
		next.paymentID = in.paymentID
	}
	next.updatedAt = max(cur.updatedAt, in.updatedAt)
	return next, next != cur
}

// insertReservation inserts row unless its id exists, reporting whether it did (one row
// affected: on MySQL the no-op update of an existing row reports zero). A missing sale is
// not_found (the foreign key).
func (s *Store) insertReservation(ctx context.Context, tx *sql.Tx, row resRow) (bool, error) {
	res, err := tx.ExecContext(ctx, s.insertRowsSQL(1), insertReservationArgs(s.d, row)...)
	if s.d.classify(err) == foreignKeyViolation {
		return false, fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeNotFound,
			"reservation %s: sale %q not found", row.id, row.saleID), err)
	}
	if err != nil {
		return false, fmt.Errorf("sqlstore: insert reservation %s: %w", row.id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlstore: insert reservation %s: %w", row.id, err)
	}
	return n == 1, nil
}

// insertReservationArgs are the values of row for the columns resColumns, in order, as the
// driver values they convert to (what database/sql would otherwise convert, by reflection,
// for every argument of every row).
func insertReservationArgs(d dialect, row resRow) []any {
	return appendReservationArgs(make([]any, 0, 12), d, row)
}

// appendReservationArgs appends insertReservationArgs(d, row) to args, for a multi-row INSERT.
func appendReservationArgs(args []any, d dialect, row resRow) []any {
	var expiresAt, paymentID any
	if row.expiresAt.Valid {
		expiresAt = row.expiresAt.Int64
	}
	if row.paymentID.Valid {
		paymentID = row.paymentID.String
	}
	return append(args, row.id, row.saleID, row.userID, int64(row.quantity), string(row.status), expiresAt,
		row.amountCents, paymentID, d.keyArg(row.idempotencyKey), row.seq, row.createdAt, row.updatedAt)
}

// lockReservation reads a reservation row and, on server databases, locks it until the
// transaction ends, so that an event and a payment for one reservation take turns.
func (s *Store) lockReservation(ctx context.Context, tx *sql.Tx, id string) (resRow, error) {
	var cur resRow
	err := cur.scan(tx.QueryRowContext(ctx, s.q(`SELECT `+resColumns+` FROM reservations WHERE id = ?`+s.d.forUpdate), id))
	if err != nil {
		return resRow{}, fmt.Errorf("sqlstore: read reservation %s: %w", id, err)
	}
	return cur, nil
}

// updateReservationSQL writes the mutable fields of one row; updateReservationArgs are its
// arguments.
const updateReservationSQL = `UPDATE reservations SET status = ?, quantity = ?, amount_cents = ?,
		expires_at = ?, payment_id = ?, updated_at = ? WHERE id = ?`

func updateReservationArgs(row resRow) []any {
	return []any{string(row.status), row.quantity, row.amountCents, row.expiresAt, row.paymentID, row.updatedAt, row.id}
}

// updateReservation writes the mutable fields of row.
func (s *Store) updateReservation(ctx context.Context, tx *sql.Tx, row resRow) error {
	_, err := tx.ExecContext(ctx, s.q(updateReservationSQL), updateReservationArgs(row)...)
	if err != nil {
		return fmt.Errorf("sqlstore: update reservation %s: %w", row.id, err)
	}
	return nil
}

// upsertForward inserts row, or merges it into the stored row by the forward-only rule.
func (s *Store) upsertForward(ctx context.Context, tx *sql.Tx, row resRow) error {
	inserted, err := s.insertReservation(ctx, tx, row)
	if err != nil || inserted {
		return err
	}
	cur, err := s.lockReservation(ctx, tx, row.id)
	if err != nil {
		return err
	}
	if next, changed := merge(cur, row); changed {
		return s.updateReservation(ctx, tx, next)
	}
	return nil
}

// ApplyEvents upserts the reservations carried by events, all in one transaction. Status only
// moves forward (ReservationStatus.Rank), so batches may arrive out of order or twice and still
// leave the same rows.
//
// Paid and refund_required belong to the payment transaction: events never write them, never
// change a row that has one, and never touch sales.sold. An event that reports a reservation
// paid or refund_required is skipped (after validation), because RecordPayment writes that
// status in the same transaction as the money. Were an event allowed to mark a row paid first,
// a crash before the payment committed would leave a paid row that sales.sold does not count,
// and a restarted engine (which takes paid rows as already sold) would sell the unit again
// while answering the gateway's retry as a duplicate that is never recorded. Skipping keeps
// "sum of paid reservations == sales.sold" exact at every commit.
//
// Events are applied in reservation-id order (the events of one reservation in batch order),
// which keeps row locks in one order across concurrent batches. The batch is atomic: an invalid
// event (invalid_argument) or one for a sale the store does not know (not_found) fails it whole,
// and those codes tell the caller that retrying the same batch cannot help.
//
// The rows are written set-wise (applyBatch, events.go): one locking read of the rows the
// batch touches (on server databases, not of those its events create), the new reservations
// in multi-row INSERTs, one UPDATE per existing row that changes. The result is the one of
// applying the events one at a time, in that order (applyOneByOne). When a created row turns
// out to exist, the set-wise attempt runs again reading every row; the one-by-one path is the
// fallback for what the set-wise path does not handle itself: a reservation inserted
// concurrently, a missing sale.
//
// With EnableOutbox, every event of the batch (paid included) is also written to the outbox,
// last, in whichever of these transactions commits (outbox.go).
func (s *Store) ApplyEvents(ctx context.Context, events []seckill.Event) error {
	rows, err := s.eventRows(events)
	if err != nil {
		return err
	}
	out, err := s.outboxOfEvents(events)
	vs := eventVersions(events) // version.go
	if err != nil || len(rows)+len(out)+len(vs) == 0 {
		return err
	}
	sales := batchSales(rows, vs)
	// inTx runs apply and then writes the outbox, in one transaction: an attempt that fails
	// (errBatchFallback, a deadlock) is rolled back with its outbox rows.
	inTx := func(apply func(tx *sql.Tx) error) error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			if err := s.lockSales(ctx, tx, sales); err != nil {
				return err
			}
			if err := apply(tx); err != nil {
				return err
			}
			if testHookEventsApplied != nil {
				testHookEventsApplied()
			}
			if err := s.raiseVersions(ctx, tx, vs); err != nil {
				return err
			}
			return s.writeOutbox(ctx, tx, out)
		})
	}
	err = inTx(func(tx *sql.Tx) error { return s.applyBatch(ctx, tx, rows, true) })
	if errors.Is(err, errBatchFallback) && s.d.name != sqliteDialect.name {
		err = inTx(func(tx *sql.Tx) error { return s.applyBatch(ctx, tx, rows, false) })
	}
	if !errors.Is(err, errBatchFallback) {
		return err
	}
	return inTx(func(tx *sql.Tx) error { return s.applyOneByOne(ctx, tx, rows) })
}

// batchSales returns the sales of rows and vs, sorted, each once: the rows ApplyEvents locks.
func batchSales(rows []resRow, vs []saleVersion) []string {
	sales := make([]string, 0, len(vs)+1)
	for _, v := range vs {
		sales = append(sales, v.sale)
	}
	for _, r := range rows {
		sales = append(sales, r.saleID)
	}
	slices.Sort(sales)
	return slices.Compact(sales)
}

// lockSales locks the rows of sales shared (dialect.forShare), in id order, before
// ApplyEvents takes any other lock: the first step of the one lock order of the transactions
// that touch a sale (docs/DECISIONS.md, "One lock order for the sale's row"). RecordPayment
// takes its sale's row first too, exclusively, so a payment and a consumer of one sale never
// each hold a row the other waits for. Taken later, by the foreign key check of the first
// reservation inserted, the lock came after the rows of the reservations the batch updates,
// which a payment, holding the sale's row, may be waiting to lock: on MySQL, where the shared
// lock excludes the payment's, that was a deadlock. Sales that do not exist are not locked (a
// batch naming one fails later, on the foreign key).
func (s *Store) lockSales(ctx context.Context, tx *sql.Tx, sales []string) error {
	if s.d.forShare == "" || len(sales) == 0 {
		return nil
	}
	for len(sales) > 0 {
		chunk := sales[:min(len(sales), batchLockIDs)]
		sales = sales[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT id FROM sales WHERE id IN (`+placeholders(len(chunk))+
			`) ORDER BY id`+s.d.forShare), args...)
		if err != nil {
			return fmt.Errorf("sqlstore: lock %d sales: %w", len(chunk), err)
		}
		for rows.Next() { // each row is locked as it is read
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("sqlstore: lock %d sales: %w", len(chunk), err)
		}
	}
	return nil
}

// testHookEventsApplied, when set by a test, runs in ApplyEvents' transaction once the
// reservations are written, before the sale versions: the moment a consumer holds its
// reservations' rows. Always nil outside tests.
var testHookEventsApplied func()

// eventRows validates events and returns the rows they write, without the final statuses,
// sorted by reservation id and, within one reservation, in event order.
func (s *Store) eventRows(events []seckill.Event) ([]resRow, error) {
	rows := make([]resRow, 0, len(events))
	for _, e := range events {
		row, err := newResRow(e.Reservation, s.stamp(e.At))
		if err != nil {
			return nil, err
		}
		if row.status.Rank() >= finalRank {
			continue
		}
		rows = append(rows, row)
	}
	// Stable, so the events of one reservation keep the order the engine sent them in.
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].id < rows[j].id })
	return rows, nil
}

// applyOneByOne applies rows (sorted by id, stable) one statement at a time: for each, an
// insert unless present, else a locking read and, if merge changes it, an update. On server
// databases the stored rows are locked first, all at once, as applyBatch's locking read does,
// so that every ApplyEvents transaction locks the stored rows in id order before it inserts
// any. Without that, this path could hold a row it had inserted while waiting for a stored
// row held by a set-wise transaction that was itself waiting to insert the same new row: a
// deadlock (seen in TestRushDoesNotDeadlock).
func (s *Store) applyOneByOne(ctx context.Context, tx *sql.Tx, rows []resRow) error {
	if s.d.name != sqliteDialect.name {
		ids := make([]string, 0, len(rows))
		for _, r := range rows {
			if len(ids) == 0 || ids[len(ids)-1] != r.id {
				ids = append(ids, r.id)
			}
		}
		if _, err := s.lockReservations(ctx, tx, ids); err != nil {
			return err
		}
	}
	for _, row := range rows {
		if err := s.upsertForward(ctx, tx, row); err != nil {
			return err
		}
	}
	return nil
}

// Reservation returns one reservation as stored, or not_found. The memory engine answers from
// here for the reservations of a sale it has released, so the row reads as the engine showed it
// (reservation(): expires_at only while held).
func (s *Store) Reservation(ctx context.Context, id string) (seckill.Reservation, error) {
	var r resRow
	err := r.scan(s.rdb.QueryRowContext(ctx, s.q(`SELECT `+resColumns+` FROM reservations WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
	}
	if err != nil {
		return seckill.Reservation{}, fmt.Errorf("sqlstore: reservation %s: %w", id, err)
	}
	return r.reservation(), nil
}

// Reservations lists the reservations of a sale whose status is one of statuses (all of them
// when none is given), in arrival order (Seq, then id), so a restarted engine can rebuild its
// FIFO queue. An unknown sale is not_found.
func (s *Store) Reservations(ctx context.Context, saleID string, statuses ...seckill.ReservationStatus) ([]seckill.Reservation, error) {
	args := []any{saleID}
	for _, st := range statuses {
		if !st.Valid() {
			return nil, seckill.Errorf(seckill.CodeInvalidArgument, "unknown reservation status %q", st)
		}
		args = append(args, string(st))
	}
	var one int
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT 1 FROM sales WHERE id = ?`), saleID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reservations of %s: %w", saleID, err)
	}
	query := `SELECT ` + resColumns + ` FROM reservations WHERE sale_id = ?`
	if len(statuses) > 0 {
		query += ` AND status IN (` + placeholders(len(statuses)) + `)`
	}
	rows, err := s.rdb.QueryContext(ctx, s.q(query+` ORDER BY seq, id`), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reservations of %s: %w", saleID, err)
	}
	defer rows.Close()
	out := []seckill.Reservation{}
	for rows.Next() {
		var r resRow
		if err := r.scan(rows); err != nil {
			return nil, fmt.Errorf("sqlstore: reservations of %s: %w", saleID, err)
		}
		out = append(out, r.reservation())
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: reservations of %s: %w", saleID, err)
	}
	return out, nil
}
