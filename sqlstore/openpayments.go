package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-go/seckill"
)

var _ seckill.OpenPaymentStore = (*Store)(nil)

// RecordOpenPayment implements seckill.OpenPaymentStore. A payment id recorded before is left
// as it is: POST /pay retried starts the same payment, and its first record stands. A page
// address longer than maxRedirectURLBytes is not kept (recorded as ""): the payment is still
// recorded for closing, and POST /pay asks the gateway for its page again.
func (s *Store) RecordOpenPayment(ctx context.Context, p seckill.OpenPayment, at time.Time) error {
	if p.PaymentID == "" || p.ReservationID == "" || p.Gateway == "" {
		return seckill.Errorf(seckill.CodeInvalidArgument, "open payment: empty payment id, reservation id or gateway")
	}
	if err := checkWidths("open payment", field{"payment id", p.PaymentID, maxPaymentIDBytes},
		field{"reservation id", p.ReservationID, maxPaymentIDBytes},
		field{"gateway", p.Gateway, maxGatewayBytes}); err != nil {
		return err
	}
	if len(p.RedirectURL) > maxRedirectURLBytes {
		p.RedirectURL = ""
	}
	ms := toMillis(s.stamp(at))
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO gateway_payments (payment_id, reservation_id, gateway,
		status, attempts, next_attempt_at, lease_owner, lease_until, last_error, created_at, updated_at, redirect_url)
		VALUES (?, ?, ?, ?, 0, ?, '', 0, '', ?, ?, ?)`),
		p.PaymentID, p.ReservationID, p.Gateway, string(seckill.PaymentOpen), toMillis(p.CloseAt), ms, ms, p.RedirectURL)
	if s.d.classify(err) == uniqueViolation {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlstore: record open payment %s: %w", p.PaymentID, err)
	}
	return nil
}

// OpenPaymentOf implements seckill.OpenPaymentStore: the open payment of the reservation with
// a page, the latest recorded first (several exist only if the gateway was changed mid-hold).
func (s *Store) OpenPaymentOf(ctx context.Context, reservationID string) (seckill.OpenPayment, error) {
	p, err := scanOpenPayment(s.db.QueryRowContext(ctx, s.q(`SELECT `+openPaymentColumns+`
		FROM gateway_payments WHERE reservation_id = ? AND status = ? AND redirect_url <> ''
		ORDER BY created_at DESC, payment_id DESC LIMIT 1`), reservationID, string(seckill.PaymentOpen)))
	if errors.Is(err, sql.ErrNoRows) {
		return p, seckill.Errorf(seckill.CodeNotFound, "reservation %q has no open payment", reservationID)
	}
	if err != nil {
		return p, fmt.Errorf("sqlstore: open payment of %s: %w", reservationID, err)
	}
	return p, nil
}

// openPaymentColumns are what scanOpenPayment reads, in its order.
const openPaymentColumns = `payment_id, reservation_id, gateway, redirect_url, status, attempts, next_attempt_at`

func scanOpenPayment(row scanner) (seckill.OpenPayment, error) {
	var (
		p                                     seckill.OpenPayment
		id, reservation, gw, redirect, status []byte
		next                                  int64
	)
	if err := row.Scan(&id, &reservation, &gw, &redirect, &status, &p.Attempts, &next); err != nil {
		return seckill.OpenPayment{}, err
	}
	p.PaymentID, p.ReservationID, p.Gateway, p.RedirectURL = string(id), string(reservation), string(gw), string(redirect)
	p.Status, p.CloseAt = seckill.OpenPaymentStatus(status), fromMillis(next)
	return p, nil
}

// CloseSoon implements seckill.OpenPaymentStore: a close due later is brought forward to at.
func (s *Store) CloseSoon(ctx context.Context, reservationID string, at time.Time) error {
	ms := toMillis(s.stamp(at))
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE gateway_payments SET next_attempt_at = ?, updated_at = ?
		WHERE reservation_id = ? AND status = ? AND next_attempt_at > ?`),
		ms, ms, reservationID, string(seckill.PaymentOpen), ms)
	if err != nil {
		return fmt.Errorf("sqlstore: close payments of %s: %w", reservationID, err)
	}
	return nil
}

// markOpenPaymentPaid ends a started payment whose money arrived, in the payment's transaction:
// there is nothing left to close.
func (s *Store) markOpenPaymentPaid(ctx context.Context, tx *sql.Tx, paymentID string, at time.Time) error {
	_, err := tx.ExecContext(ctx, s.q(`UPDATE gateway_payments SET status = ?, lease_owner = '', lease_until = 0,
		updated_at = ? WHERE payment_id = ? AND status = ?`),
		string(seckill.PaymentPaid), toMillis(at), paymentID, string(seckill.PaymentOpen))
	if err != nil {
		return fmt.Errorf("sqlstore: payment %s: end its open payment: %w", paymentID, err)
	}
	return nil
}

// closable is the condition of a due close: open, no live lease, due, of the closer's gateway.
// Its placeholders are the status, now (twice) and the gateway.
const closable = `status = ? AND lease_until <= ? AND next_attempt_at <= ? AND gateway = ?`

// ClaimOpenPayments implements seckill.OpenPaymentStore (see claimDue).
func (s *Store) ClaimOpenPayments(ctx context.Context, gateway, owner string, now time.Time, lease time.Duration, limit int) ([]seckill.OpenPayment, error) {
	if gateway == "" || owner == "" || lease <= 0 || limit < 1 {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument,
			"claim open payments: empty gateway or owner, lease %v or limit %d", lease, limit)
	}
	if err := checkWidths("claim open payments", field{"owner", owner, maxLeaseOwnerBytes}); err != nil {
		return nil, err
	}
	nowMs := toMillis(s.stamp(now))
	ids, err := s.claimDue(ctx, "gateway_payments", closable,
		[]any{string(seckill.PaymentOpen), nowMs, nowMs, gateway},
		`lease_owner = ?, lease_until = ?, updated_at = ?`,
		[]any{owner, nowMs + lease.Milliseconds(), nowMs},
		min(limit, seckill.MaxRefundList))
	var claimed []seckill.OpenPayment
	for _, id := range ids {
		p, rerr := s.openPayment(ctx, id)
		if rerr != nil {
			return claimed, rerr
		}
		claimed = append(claimed, p)
	}
	return claimed, err
}

// openPayment reads one started payment, or not_found.
func (s *Store) openPayment(ctx context.Context, paymentID string) (seckill.OpenPayment, error) {
	p, err := scanOpenPayment(s.db.QueryRowContext(ctx, s.q(`SELECT `+openPaymentColumns+`
		FROM gateway_payments WHERE payment_id = ?`), paymentID))
	if errors.Is(err, sql.ErrNoRows) {
		return p, seckill.Errorf(seckill.CodeNotFound, "open payment %q not found", paymentID)
	}
	if err != nil {
		return p, fmt.Errorf("sqlstore: open payment %s: %w", paymentID, err)
	}
	return p, nil
}

// RecordClose implements seckill.OpenPaymentStore, conditional on the payment being open and
// leased to o.Owner, as RecordRefund is.
func (s *Store) RecordClose(ctx context.Context, o seckill.CloseOutcome) error {
	switch o.Status {
	case seckill.PaymentClosed, seckill.PaymentPaid, seckill.PaymentOpen:
	default:
		return seckill.Errorf(seckill.CodeInvalidArgument, "open payment %s: cannot record status %q", o.PaymentID, o.Status)
	}
	if o.PaymentID == "" || o.Owner == "" {
		return seckill.Errorf(seckill.CodeInvalidArgument, "open payment: empty payment id or owner")
	}
	at := toMillis(s.stamp(o.At))
	next := at
	if o.Status == seckill.PaymentOpen {
		next = toMillis(o.NextAttemptAt)
	}
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE gateway_payments SET status = ?, last_error = ?,
		next_attempt_at = ?, lease_owner = '', lease_until = 0, updated_at = ?
		WHERE payment_id = ? AND status = ? AND lease_owner = ?`),
		string(o.Status), truncateUTF8(o.Error, maxRefundErrorBytes), next, at,
		o.PaymentID, string(seckill.PaymentOpen), o.Owner)
	if err != nil {
		return fmt.Errorf("sqlstore: record close of %s: %w", o.PaymentID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlstore: record close of %s: %w", o.PaymentID, err)
	} else if n == 1 {
		return nil
	}
	cur, err := s.openPayment(ctx, o.PaymentID)
	if err != nil {
		return err
	}
	return seckill.Errorf(seckill.CodeConflict, "open payment %s is %s and not leased to this closer", o.PaymentID, cur.Status)
}
