package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-go/seckill"
)

// errPaymentRecorded aborts a payment transaction whose payment id another transaction
// recorded first; RecordPayment reports it as PaymentDuplicate.
var errPaymentRecorded = errors.New("sqlstore: payment id recorded concurrently")

// RecordPayment writes a payment in one transaction and returns the result it recorded:
//
//   - A payment id already recorded returns PaymentDuplicate and changes nothing. The payments
//     primary key decides, so two concurrent deliveries of one payment are applied once: the
//     loser's insert hits the unique key, and its whole transaction is rolled back.
//   - A payment for an unknown reservation (no reservation or sale id, or a sale the store does
//     not know) is recorded with the ids given, as refund_required.
//   - A paying result (applied, late_applied) increments sales.sold by the reservation's
//     quantity only if sold + qty <= stock - holdback still holds, in the UPDATE itself, and
//     only if no other payment already paid this reservation. Then the reservation is paid
//     with this payment id. Otherwise the payment is refund_required, and so is the
//     reservation unless another payment paid it (it stays paid).
//   - A refund_required result from the engine changes no units. The reservation row is
//     upserted as the engine reported it, by the forward-only rule of ApplyEvents (an
//     expired reservation the engine turned refund_required becomes so; a held one whose
//     payment had the wrong amount stays held, as in docs/MODEL.md), except that it is never
//     made paid here: only a paying payment, with its units, makes a row paid.
//
// The payment row is written last, with the final result, in the same transaction, so every
// succeeded payment ends as exactly one paid reservation or one refund_required record. A
// refund_required payment also writes its refund_required event to the outbox (outbox.go), in
// that transaction, whether or not EnableOutbox was called.
// Results other than applied, late_applied and refund_required are invalid_argument.
func (s *Store) RecordPayment(ctx context.Context, p seckill.PaymentRecord) (seckill.PaymentResult, error) {
	if p.PaymentID == "" {
		return "", seckill.Errorf(seckill.CodeInvalidArgument, "payment id is empty")
	}
	switch p.Result {
	case seckill.PaymentApplied, seckill.PaymentLateApplied, seckill.PaymentRefundRequired:
	default:
		return "", seckill.Errorf(seckill.CodeInvalidArgument,
			"payment %s: result %q cannot be recorded; want applied, late_applied or refund_required", p.PaymentID, p.Result)
	}
	at := s.stamp(p.At)
	r := p.Reservation
	if err := checkWidths("payment", field{"payment id", p.PaymentID, maxPaymentIDBytes},
		field{"gateway", p.Gateway, maxGatewayBytes}); err != nil {
		return "", err
	}
	known := r.ID != "" && r.SaleID != ""
	var row resRow
	if known {
		if !r.Status.Valid() {
			r.Status = seckill.StatusRefundRequired
		}
		var err error
		if row, err = newResRow(r, at); err != nil {
			return "", err
		}
	} else {
		// A reservation nobody knows (lost with Redis before its events were stored, say) is
		// still one of its sale's, if its id names one: the refund owed counts in that sale's
		// audit.
		if sale, ok := seckill.SaleOfReservation(r.ID); ok && r.SaleID == "" && seckill.ValidID(sale) {
			r.SaleID = sale
		}
		if err := checkWidths("payment "+p.PaymentID,
			field{"reservation id", r.ID, maxPaymentIDBytes},
			field{"sale id", r.SaleID, maxSaleIDBytes},
			field{"user id", r.UserID, maxUserIDBytes},
		); err != nil {
			return "", err
		}
	}

	var result seckill.PaymentResult
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// Assigned from this attempt alone: inTx may run the function again after a deadlock.
		var err error
		result, err = s.recordPayment(ctx, tx, p, r, row, known, at)
		return err
	})
	if errors.Is(err, errPaymentRecorded) {
		return seckill.PaymentDuplicate, nil
	}
	if err != nil {
		return "", err
	}
	return result, nil
}

// recordPayment is one attempt of RecordPayment's transaction; it returns the result recorded.
func (s *Store) recordPayment(ctx context.Context, tx *sql.Tx, p seckill.PaymentRecord, r seckill.Reservation,
	row resRow, known bool, at time.Time) (seckill.PaymentResult, error) {
	var prev string
	err := tx.QueryRowContext(ctx, s.q(`SELECT result FROM payments WHERE payment_id = ?`), p.PaymentID).Scan(&prev)
	if err == nil {
		return seckill.PaymentDuplicate, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("sqlstore: payment %s: %w", p.PaymentID, err)
	}

	result := seckill.PaymentRefundRequired
	if known {
		// The sale's row is locked first, before the reservation's: the payments of one sale
		// queue here, where they would queue anyway (the guarded UPDATE of sales.sold holds the
		// same row until commit). Taking it later would deadlock on MySQL: two payments that
		// each insert their reservation hold shared locks on the sale (InnoDB's foreign key
		// check), and neither could then upgrade to the exclusive lock of the UPDATE.
		var one int
		err := tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM sales WHERE id = ?`+s.d.forNoKeyUpdate), r.SaleID).Scan(&one)
		if err == nil && testHookSaleLocked != nil {
			testHookSaleLocked()
		}
		switch {
		case err == nil:
			if result, err = s.settleReservation(ctx, tx, p.PaymentID, p.Result, row, at); err != nil {
				return "", err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return "", fmt.Errorf("sqlstore: payment %s: read sale %s: %w", p.PaymentID, r.SaleID, err)
		}
	}

	_, err = tx.ExecContext(ctx, s.q(`INSERT INTO payments (payment_id, reservation_id, sale_id, user_id,
		quantity, amount_cents, result, created_at, gateway) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		p.PaymentID, r.ID, r.SaleID, r.UserID, r.Quantity, p.AmountCents, string(result), toMillis(at), p.Gateway)
	if s.d.classify(err) == uniqueViolation {
		return "", errPaymentRecorded
	}
	if err != nil {
		return "", fmt.Errorf("sqlstore: payment %s: insert: %w", p.PaymentID, err)
	}
	if result == seckill.PaymentRefundRequired {
		reason := p.Reason
		if p.Result.Paid() {
			// The engine paid the hold, but the database refused: its guard is the record of money.
			reason = "the database holds no unit for it: the reservation is paid by another payment, or the sale's paid units reached its stock"
		}
		if err := s.insertRefund(ctx, tx, p.PaymentID, p.Gateway, reason, p.AmountCents, at); err != nil {
			return "", err
		}
	}
	// The money arrived, so there is nothing left to close at the gateway, whatever the result.
	if err := s.markOpenPaymentPaid(ctx, tx, p.PaymentID, at); err != nil {
		return "", err
	}
	// Last: the outbox's seq lock is held from here to the commit (outbox.go).
	if result == seckill.PaymentRefundRequired {
		if err := s.writeRefundRequired(ctx, tx, p, r, at); err != nil {
			return "", err
		}
	}
	return result, nil
}

// testHookSaleLocked, when set by a test, runs in RecordPayment's transaction once it holds
// the sale's row. Always nil outside tests.
var testHookSaleLocked func()

// settleReservation applies a new payment's result to its reservation row (which it creates
// if events have not yet) and returns the result to record. See RecordPayment.
func (s *Store) settleReservation(ctx context.Context, tx *sql.Tx, paymentID string, engine seckill.PaymentResult, row resRow, at time.Time) (seckill.PaymentResult, error) {
	if !engine.Paid() {
		// No unit moves, so the row may only follow the engine's view forward. A "paid" view
		// (paid by another payment) is that payment's to write, with its units.
		if row.status == seckill.StatusPaid {
			return seckill.PaymentRefundRequired, nil
		}
		return seckill.PaymentRefundRequired, s.upsertForward(ctx, tx, row)
	}
	// The row may not exist yet if the event pipeline lags; whatever status it is inserted
	// with is overwritten below, in this transaction.
	inserted, err := s.insertReservation(ctx, tx, row)
	if err != nil {
		return "", err
	}
	// Locking the row serializes two different payments for one reservation, so the checks
	// for an earlier paying payment below cannot race: the second payment reads only after the
	// first has committed or rolled back. The locking read always returns the latest committed
	// row, and a row is paid only together with its paying payment, so a stored paid row is
	// enough to refuse. The read of payments then sees what was committed before it started:
	// always on SQLite (one writer at a time), and at READ COMMITTED on MySQL and PostgreSQL,
	// the level dialect.isolation sets. (Under InnoDB's default REPEATABLE READ it would read
	// the snapshot of this transaction's first SELECT, taken before the lock wait.)
	cur, err := s.lockReservation(ctx, tx, row.id)
	if err != nil {
		return "", err
	}
	if !inserted && cur.status == seckill.StatusPaid {
		return seckill.PaymentRefundRequired, nil // paid by another payment; it stays so
	}

	var other string
	err = tx.QueryRowContext(ctx, s.q(`SELECT payment_id FROM payments
		WHERE reservation_id = ? AND result IN (?, ?) LIMIT 1`),
		row.id, string(seckill.PaymentApplied), string(seckill.PaymentLateApplied)).Scan(&other)
	if err == nil {
		// Another payment already paid for these units: this one cannot be honoured, and the
		// reservation stays paid by the first.
		return seckill.PaymentRefundRequired, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("sqlstore: payment %s: read payments of %s: %w", paymentID, row.id, err)
	}

	// The oversell guard. It is in the UPDATE itself, not in a read before it, so that it holds
	// under any isolation level and any number of concurrent payments.
	res, err := tx.ExecContext(ctx, s.q(`UPDATE sales SET sold = sold + ?
		WHERE id = ? AND sold + ? <= stock - holdback`), row.quantity, row.saleID, row.quantity)
	if err != nil {
		return "", fmt.Errorf("sqlstore: payment %s: take units of %s: %w", paymentID, row.saleID, err)
	}
	n, err := res.RowsAffected() // sold always changes (quantity ≥ 1), so MySQL counts it too
	if err != nil {
		return "", fmt.Errorf("sqlstore: payment %s: take units of %s: %w", paymentID, row.saleID, err)
	}
	next := cur
	next.expiresAt = sql.NullInt64{}
	next.updatedAt = max(cur.updatedAt, toMillis(at))
	result := engine
	if n == 1 {
		next.status = seckill.StatusPaid
		next.paymentID = sql.NullString{String: paymentID, Valid: true}
	} else {
		// No unit left in the database's view: whatever the engine said, these units were not
		// sold, so the reservation is not paid.
		result = seckill.PaymentRefundRequired
		next.status = seckill.StatusRefundRequired
	}
	if next != cur {
		if err := s.updateReservation(ctx, tx, next); err != nil {
			return "", err
		}
	}
	return result, nil
}

// PaymentResult returns the result recorded for a payment id, or not_found.
func (s *Store) PaymentResult(ctx context.Context, paymentID string) (seckill.PaymentResult, error) {
	var result string
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT result FROM payments WHERE payment_id = ?`), paymentID).Scan(&result)
	if errors.Is(err, sql.ErrNoRows) {
		return "", seckill.Errorf(seckill.CodeNotFound, "payment %q not found", paymentID)
	}
	if err != nil {
		return "", fmt.Errorf("sqlstore: payment %s: %w", paymentID, err)
	}
	return seckill.PaymentResult(result), nil
}

// Orders lists one user's orders, newest first: one per recorded payment, paid for applied
// and late_applied, refund_required otherwise. They come from the payments ledger, so every
// succeeded payment appears exactly once, whatever its reservation's row says.
func (s *Store) Orders(ctx context.Context, userID string) ([]seckill.Order, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT p.payment_id, p.reservation_id, p.sale_id, p.user_id,
		p.quantity, p.amount_cents, p.result, p.created_at, COALESCE(r.status, '')
		FROM payments p LEFT JOIN refunds r ON r.payment_id = p.payment_id WHERE p.user_id = ?
		ORDER BY p.created_at DESC, p.payment_id DESC`), userID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: orders of %s: %w", userID, err)
	}
	defer rows.Close()
	orders := []seckill.Order{}
	for rows.Next() {
		var (
			o         seckill.Order
			result    string
			createdAt int64
			refund    string
		)
		if err := rows.Scan(&o.PaymentID, &o.ReservationID, &o.SaleID, &o.UserID, &o.Quantity,
			&o.AmountCents, &result, &createdAt, &refund); err != nil {
			return nil, fmt.Errorf("sqlstore: orders of %s: %w", userID, err)
		}
		o.Status = seckill.StatusRefundRequired
		if seckill.PaymentResult(result).Paid() {
			o.Status = seckill.StatusPaid
		}
		o.CreatedAt = fromMillis(createdAt)
		o.RefundStatus = seckill.RefundStatus(refund)
		orders = append(orders, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: orders of %s: %w", userID, err)
	}
	return orders, nil
}

// Counts returns the database's view of one sale for the audit, in one statement so that the
// numbers belong to one snapshot. An unknown sale is not_found.
func (s *Store) Counts(ctx context.Context, saleID string) (seckill.DBCounts, error) {
	var c seckill.DBCounts
	const byRefund = `(SELECT COUNT(*) FROM payments p JOIN refunds f ON f.payment_id = p.payment_id
		WHERE p.sale_id = s.id AND p.result = 'refund_required' AND f.status = ?)`
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT s.sold,
		(SELECT COALESCE(SUM(r.quantity), 0) FROM reservations r WHERE r.sale_id = s.id AND r.status = ?),
		(SELECT COUNT(*) FROM payments p WHERE p.sale_id = s.id AND p.result = ?),
		(SELECT COUNT(*) FROM payments p WHERE p.sale_id = s.id AND p.result IN (?, ?)),
		`+byRefund+`, `+byRefund+`, `+byRefund+`, `+byRefund+`
		FROM sales s WHERE s.id = ?`),
		string(seckill.StatusPaid), string(seckill.PaymentRefundRequired),
		string(seckill.PaymentApplied), string(seckill.PaymentLateApplied),
		string(seckill.RefundRequired), string(seckill.RefundPending), string(seckill.Refunded), string(seckill.RefundFailed),
		saleID,
	).Scan(&c.Sold, &c.PaidUnits, &c.Refunds, &c.PaidOrders,
		&c.RefundsRequired, &c.RefundsPending, &c.Refunded, &c.RefundsFailed)
	if errors.Is(err, sql.ErrNoRows) {
		return seckill.DBCounts{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	if err != nil {
		return seckill.DBCounts{}, fmt.Errorf("sqlstore: counts of %s: %w", saleID, err)
	}
	return c, nil
}
