package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seckill-go/seckill"
)

var _ seckill.RefundStore = (*Store)(nil)

// Widths of the refunds columns (migrations/mysql/0003_refunds.sql).
const (
	maxLeaseOwnerBytes = 64
	maxGatewayBytes    = 32
	maxRefundIDBytes   = 255
	// maxRefundErrorBytes is how much of a failure's reason is kept: enough for an operator
	// to see what the gateway said, bounded so that a verbose error cannot grow the row.
	maxRefundErrorBytes = 500
	// maxRefundReasonBytes is how much of why a refund is owed is kept (refunds.reason).
	maxRefundReasonBytes = 500
)

// insertRefund creates the refund owed for a payment recorded refund_required, in the payment's
// transaction, so that no such payment exists without its refund.
//
// A payment of nothing (a free sale's confirmation that came too late) owes nothing back: its
// refund is recorded refunded at once, since no gateway could pay it (the "free" one is none).
func (s *Store) insertRefund(ctx context.Context, tx *sql.Tx, paymentID, gateway, reason string, amountCents int64, at time.Time) error {
	ms := toMillis(at)
	status := seckill.RefundRequired
	if amountCents == 0 {
		status = seckill.Refunded
	}
	_, err := tx.ExecContext(ctx, s.q(`INSERT INTO refunds (payment_id, status, attempts, next_attempt_at,
		lease_owner, lease_until, refund_id, last_error, created_at, updated_at, gateway, reason)
		VALUES (?, ?, 0, ?, '', 0, '', '', ?, ?, ?, ?)`), paymentID, string(status), ms, ms, ms, gateway,
		truncateUTF8(reason, maxRefundReasonBytes))
	if err != nil {
		return fmt.Errorf("sqlstore: payment %s: insert refund: %w", paymentID, err)
	}
	return nil
}

// claimable is the condition of a due refund: owed or pending, no live lease, next attempt due,
// of the claiming refunder's gateway (or of none recorded). Its placeholders are the two
// statuses, now (twice: lease and next attempt) and the gateway.
const claimable = `status IN (?, ?) AND lease_until <= ? AND next_attempt_at <= ? AND (gateway = ? OR gateway = '')`

// ClaimRefunds implements seckill.RefundStore (see claimDue for why two claims at once take
// each refund once).
func (s *Store) ClaimRefunds(ctx context.Context, gateway, owner string, now time.Time, lease time.Duration, limit int) ([]seckill.Refund, error) {
	if owner == "" || lease <= 0 || limit < 1 {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "claim refunds: empty owner, lease %v or limit %d", lease, limit)
	}
	if err := checkWidths("claim refunds", field{"owner", owner, maxLeaseOwnerBytes}); err != nil {
		return nil, err
	}
	nowMs := toMillis(s.stamp(now))
	ids, err := s.claimDue(ctx, "refunds", claimable,
		[]any{string(seckill.RefundRequired), string(seckill.RefundPending), nowMs, nowMs, gateway},
		`status = ?, lease_owner = ?, lease_until = ?, updated_at = ?`,
		[]any{string(seckill.RefundPending), owner, nowMs + lease.Milliseconds(), nowMs},
		min(limit, seckill.MaxRefundList))
	var claimed []seckill.Refund
	for _, id := range ids {
		r, rerr := s.refund(ctx, s.db, id)
		if rerr != nil {
			return claimed, rerr
		}
		claimed = append(claimed, r)
	}
	return claimed, err
}

// refundColumns are read by scanRefund, from refunds r joined with payments p.
const refundColumns = `r.payment_id, p.reservation_id, p.sale_id, p.user_id, p.amount_cents, r.gateway, r.status,
	r.attempts, r.next_attempt_at, r.refund_id, r.last_error, r.created_at, r.updated_at, r.reason
	FROM refunds r JOIN payments p ON p.payment_id = r.payment_id`

func scanRefund(row scanner) (seckill.Refund, error) {
	var (
		r                   seckill.Refund
		status              string
		next, created, upd  int64
		refundID, lastError []byte
	)
	var gateway, reason []byte
	if err := row.Scan(&r.PaymentID, &r.ReservationID, &r.SaleID, &r.UserID, &r.AmountCents, &gateway, &status,
		&r.Attempts, &next, &refundID, &lastError, &created, &upd, &reason); err != nil {
		return seckill.Refund{}, err
	}
	r.Status = seckill.RefundStatus(status)
	r.RefundID, r.LastError, r.Gateway, r.Reason = string(refundID), string(lastError), string(gateway), string(reason)
	r.NextAttemptAt, r.CreatedAt, r.UpdatedAt = fromMillis(next), fromMillis(created), fromMillis(upd)
	return r, nil
}

// refund reads one refund, or not_found.
func (s *Store) refund(ctx context.Context, q querier, paymentID string) (seckill.Refund, error) {
	r, err := scanRefund(q.QueryRowContext(ctx, s.q(`SELECT `+refundColumns+` WHERE r.payment_id = ?`), paymentID))
	if errors.Is(err, sql.ErrNoRows) {
		return seckill.Refund{}, seckill.Errorf(seckill.CodeNotFound, "refund of payment %q not found", paymentID)
	}
	if err != nil {
		return seckill.Refund{}, fmt.Errorf("sqlstore: refund %s: %w", paymentID, err)
	}
	return r, nil
}

// RecordRefund implements seckill.RefundStore. The UPDATE is conditional on the refund being
// refund_pending and leased to o.Owner, so a refunder whose lease expired and was taken over
// cannot overwrite the new owner's work; a lease that expired but nobody took is still its
// owner's to record. The lease is released in the same statement. A refund that ends
// (refunded, refund_failed) writes its event to the outbox in the same transaction.
func (s *Store) RecordRefund(ctx context.Context, o seckill.RefundOutcome) error {
	switch o.Status {
	case seckill.Refunded, seckill.RefundFailed, seckill.RefundPending:
	default:
		return seckill.Errorf(seckill.CodeInvalidArgument, "refund %s: cannot record status %q", o.PaymentID, o.Status)
	}
	if o.PaymentID == "" || o.Owner == "" {
		return seckill.Errorf(seckill.CodeInvalidArgument, "refund: empty payment id or owner")
	}
	if err := checkWidths("refund "+o.PaymentID, field{"refund id", o.RefundID, maxRefundIDBytes},
		field{"owner", o.Owner, maxLeaseOwnerBytes}); err != nil {
		return err
	}
	at := toMillis(s.stamp(o.At))
	next := at
	if o.Status == seckill.RefundPending {
		next = toMillis(o.NextAttemptAt)
	}
	set := `status = ?, last_error = ?, next_attempt_at = ?, lease_owner = '', lease_until = 0, updated_at = ?`
	args := []any{string(o.Status), truncateUTF8(o.Error, maxRefundErrorBytes), next, at}
	if o.RefundID != "" { // a pending answer's id is kept for the attempts after it
		set += `, refund_id = ?`
		args = append(args, o.RefundID)
	}
	args = append(args, o.PaymentID, string(seckill.RefundPending), o.Owner)
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE refunds SET `+set+`
			WHERE payment_id = ? AND status = ? AND lease_owner = ?`), args...)
		if err != nil {
			return fmt.Errorf("sqlstore: record refund %s: %w", o.PaymentID, err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlstore: record refund %s: %w", o.PaymentID, err)
		}
		if n == 1 && o.Status != seckill.RefundPending {
			// The refund ended: its event goes to the outbox in this transaction (outbox.go).
			return s.writeRefundEnded(ctx, tx, o.PaymentID, o.Status, s.stamp(o.At))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	cur, err := s.refund(ctx, s.db, o.PaymentID)
	if err != nil {
		return err
	}
	return seckill.Errorf(seckill.CodeConflict, "refund %s is %s and not leased to this refunder", o.PaymentID, cur.Status)
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "")
}

// Refunds implements seckill.RefundStore: oldest payment first.
func (s *Store) Refunds(ctx context.Context, status seckill.RefundStatus, limit int) ([]seckill.Refund, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT `+refundColumns+` WHERE r.status = ?
		ORDER BY r.created_at, r.payment_id LIMIT ?`), string(status), max(limit, 0))
	if err != nil {
		return nil, fmt.Errorf("sqlstore: refunds %s: %w", status, err)
	}
	defer rows.Close()
	list := []seckill.Refund{}
	for rows.Next() {
		r, err := scanRefund(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: refunds %s: %w", status, err)
		}
		list = append(list, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: refunds %s: %w", status, err)
	}
	return list, nil
}

// RefundCounts implements seckill.RefundStore, in one statement over the refunds_due index.
func (s *Store) RefundCounts(ctx context.Context) (seckill.RefundCounts, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT status, COUNT(*), MIN(created_at) FROM refunds GROUP BY status`)
	if err != nil {
		return seckill.RefundCounts{}, fmt.Errorf("sqlstore: refund counts: %w", err)
	}
	defer rows.Close()
	var c seckill.RefundCounts
	var oldest int64
	for rows.Next() {
		var (
			status string
			n      int
			first  int64
		)
		if err := rows.Scan(&status, &n, &first); err != nil {
			return seckill.RefundCounts{}, fmt.Errorf("sqlstore: refund counts: %w", err)
		}
		switch seckill.RefundStatus(status) {
		case seckill.RefundRequired:
			c.Required = n
		case seckill.RefundPending:
			c.Pending = n
		case seckill.Refunded:
			c.Refunded = n
		case seckill.RefundFailed:
			c.Failed = n
		}
		open := seckill.RefundStatus(status) == seckill.RefundRequired || seckill.RefundStatus(status) == seckill.RefundPending
		if open && (oldest == 0 || first < oldest) {
			oldest = first
		}
	}
	if err := rows.Err(); err != nil {
		return seckill.RefundCounts{}, fmt.Errorf("sqlstore: refund counts: %w", err)
	}
	if oldest != 0 {
		c.OldestOpen = fromMillis(oldest)
	}
	return c, nil
}
