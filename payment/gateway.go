package payment

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/seckill-go/seckill"
)

// Gateway is the seam between seckill and a payment provider: every provider (the built-in
// signed-webhook scheme for shops with an in-house payment service, the mock, Stripe, …)
// implements it, and the HTTP API and the service call nothing else. A gateway holds no
// reservation state of its own: the engine and the database are the record; the gateway is
// where money moves.
//
// Every method may be called from many goroutines and many instances at once, so each call
// that changes something at the provider carries an idempotency key: a retry (after a timeout,
// a crash, another instance's attempt) never starts, closes or refunds twice.
type Gateway interface {
	// Name is the gateway's name in configuration (SECKILL_GATEWAY) and in its webhook route,
	// /api/v1/payments/webhook/{name}.
	Name() string
	// Start starts a payment for a held reservation, payable until req.ExpiresAt (the hold's
	// expiry). Starting twice with the same IdempotencyKey returns the same payment.
	Start(ctx context.Context, req StartRequest) (seckill.PaymentIntent, error)
	// Parse verifies a notification (signature, freshness) over the raw body and header, and
	// parses it. A forged, stale or malformed one is an error coded invalid_signature or
	// invalid_argument, and nothing else is done with it. A verified notification of no
	// interest (another event type) is a Notification with Outcome OutcomeIgnored.
	Parse(header http.Header, body []byte, now time.Time) (Notification, error)
	// ClosePayment makes an open payment unpayable (the hold it was for has ended). Closing a payment
	// that is closed already is not an error; closing one that has succeeded returns
	// ErrAlreadyPaid (the notification, on its way, settles it by the late rule).
	ClosePayment(ctx context.Context, paymentID string) error
	// Refund pays back a succeeded payment in full. The idempotency key is the payment id, so
	// that a refund retried after a crash is never sent twice.
	Refund(ctx context.Context, req RefundRequest) (RefundResult, error)
	// State reads a payment's state at the provider.
	State(ctx context.Context, paymentID string) (State, error)
}

// StartRequest is what a payment is started with. Every field is a function of the hold (the
// reservation and its sale), never of the time of the call, so that a retried Start sends the
// same request under the same idempotency key.
type StartRequest struct {
	ReservationID  string
	UserID         string
	AmountCents    int64
	Currency       string // ISO 4217, lower case ("usd"); DefaultCurrency when empty
	ExpiresAt      time.Time
	IdempotencyKey string // the reservation id: one payment per hold
	// SaleID is the reservation's sale: the payment page sends the buyer back to its page.
	SaleID string
	// SaleName names what is paid for on the payment page ("" when the sale has none).
	SaleName string
	// HeldAt is when the hold began (ExpiresAt − the sale's hold_seconds); zero when not known.
	// A provider that bounds a payment's life from its creation (Stripe: 24 h) bounds it from
	// here instead, which is earlier and does not move between retries.
	HeldAt time.Time
}

// DefaultCurrency is the currency of a StartRequest that names none.
const DefaultCurrency = "usd"

// Outcome is what a notification says happened to a payment.
type Outcome string

// Notification outcomes.
const (
	OutcomeSucceeded Outcome = "succeeded" // the buyer paid: apply it (or a refund is owed)
	OutcomeFailed    Outcome = "failed"    // the payment did not go through: nothing changes
	OutcomeCancelled Outcome = "cancelled" // closed or expired unpaid: nothing is owed
	OutcomeIgnored   Outcome = "ignored"   // an event of no interest, verified and acknowledged
)

// Notification is a verified notification from a gateway.
type Notification struct {
	Outcome       Outcome
	PaymentID     string
	ReservationID string
	AmountCents   int64
	// Currency is the ISO 4217 code of AmountCents' currency as the provider reports it ("" when
	// it reports none: the sale's own currency is assumed; seckill.PaymentConfirmation.Currency).
	Currency string
}

// Confirmation is the notification as the service applies it.
func (n Notification) Confirmation() seckill.PaymentConfirmation {
	return seckill.PaymentConfirmation{PaymentID: n.PaymentID, ReservationID: n.ReservationID, AmountCents: n.AmountCents, Currency: n.Currency}
}

// RefundRequest asks for a payment to be paid back.
type RefundRequest struct {
	PaymentID   string
	AmountCents int64
}

// RefundResult is the provider's answer to a refund.
type RefundResult struct {
	RefundID string
	Status   RefundStatus
}

// RefundStatus is where a refund stands at the provider.
type RefundStatus string

// Refund statuses.
const (
	RefundSucceeded RefundStatus = "succeeded"
	RefundPending   RefundStatus = "pending" // accepted; ask again later (State, or retry Refund)
	RefundFailed    RefundStatus = "failed"  // will not succeed: an operator must act
)

// State is a payment's state at the provider.
type State string

// Payment states.
const (
	StateOpen      State = "open"      // can still be paid
	StateSucceeded State = "succeeded" // paid
	StateClosed    State = "closed"    // expired or closed unpaid
	StateRefunded  State = "refunded"  // paid, then paid back
	StateUnknown   State = "unknown"   // the provider does not know it
)

// ErrAlreadyPaid is ClosePayment's answer for a payment that succeeded before it could be closed.
var ErrAlreadyPaid = errors.New("payment: the payment succeeded before it could be closed")
