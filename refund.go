package seckill

import (
	"context"
	"time"
)

// RefundStatus is where the refund owed for a refund_required payment stands. It only moves
// forward: refund_required → refund_pending → refunded | refund_failed (refund_pending may be
// claimed again after a transient failure or an expired lease).
type RefundStatus string

// Refund statuses, the wire values of docs/API.md.
const (
	RefundRequired RefundStatus = "refund_required" // owed; no attempt yet
	RefundPending  RefundStatus = "refund_pending"  // a refunder is on it, or will retry at NextAttemptAt
	Refunded       RefundStatus = "refunded"        // the gateway paid it back (final)
	RefundFailed   RefundStatus = "refund_failed"   // will not succeed by retrying: an operator must act (final)
)

// Valid reports whether r is one of the four refund statuses.
func (r RefundStatus) Valid() bool {
	switch r {
	case RefundRequired, RefundPending, Refunded, RefundFailed:
		return true
	}
	return false
}

// Refund is the refund owed for one refund_required payment, as the database records it.
type Refund struct {
	PaymentID     string `json:"payment_id"`
	ReservationID string `json:"reservation_id"`
	SaleID        string `json:"sale_id"`
	UserID        string `json:"user_id"`
	AmountCents   int64  `json:"amount_cents"`
	Gateway       string `json:"gateway"` // that took the money, and pays it back ("" recorded before gateways were)
	// Reason is why the money is owed back: paid after the hold ended with no unit free for it,
	// another amount, another currency, no such reservation ("" for refunds recorded before
	// reasons were).
	Reason        string       `json:"reason,omitempty"`
	Status        RefundStatus `json:"status"`
	Attempts      int          `json:"attempts"`
	NextAttemptAt time.Time    `json:"next_attempt_at"`
	RefundID      string       `json:"refund_id,omitempty"`  // the gateway's, once it gave one
	LastError     string       `json:"last_error,omitempty"` // why the last attempt did not succeed
	CreatedAt     time.Time    `json:"created_at"`           // when the payment was recorded
	UpdatedAt     time.Time    `json:"updated_at"`
}

// RefundOutcome is what a refunder records after an attempt on a refund it claimed.
type RefundOutcome struct {
	PaymentID string
	Owner     string       // the lease owner that claimed it; a record by anyone else is refused
	Status    RefundStatus // Refunded, RefundFailed, or RefundPending to retry at NextAttemptAt
	RefundID  string       // the gateway's refund id, if it gave one
	Error     string       // why it failed or will be retried (truncated by the store)
	// NextAttemptAt is when a RefundPending outcome may be claimed again.
	NextAttemptAt time.Time
	At            time.Time
}

// RefundCounts counts refunds by status over every sale, for /metrics.
type RefundCounts struct {
	Required, Pending, Refunded, Failed int
	// OldestOpen is when the oldest refund not yet settled (refund_required or refund_pending)
	// was recorded; zero when there is none.
	OldestOpen time.Time
}

// RefundStore is the durable record of refunds owed, part of every OrderStore. Every
// refund_required payment has one refund, created with it in the payment transaction.
type RefundStore interface {
	// ClaimRefunds atomically takes up to limit refunds that are due — refund_required, or
	// refund_pending whose lease has expired and whose next attempt is due — of payments the
	// named gateway took (or whose gateway was not recorded), makes them refund_pending leased
	// to owner until now+lease, counts an attempt, and returns them. While a lease lives, no
	// other claim returns that refund. A refund of another gateway's payment is left to a
	// refunder of that gateway: money goes back the way it came.
	ClaimRefunds(ctx context.Context, gateway, owner string, now time.Time, lease time.Duration, limit int) ([]Refund, error)
	// RecordRefund records the outcome of an attempt. Only the lease's owner may record, and
	// only on a refund_pending refund: anything else is a conflict and changes nothing.
	RecordRefund(ctx context.Context, o RefundOutcome) error
	// Refunds lists up to limit refunds with the given status, oldest payment first.
	Refunds(ctx context.Context, status RefundStatus, limit int) ([]Refund, error)
	// RefundCounts counts refunds by status.
	RefundCounts(ctx context.Context) (RefundCounts, error)
}

// MaxRefundList bounds one listing of refunds (GET /api/v1/refunds).
const MaxRefundList = 1000
