package seckill

import (
	"context"
	"time"
)

// OpenPaymentStatus is where a payment started at a gateway stands, as far as closing it goes.
type OpenPaymentStatus string

// Open payment statuses. A payment moves from open to closed or paid, never back.
const (
	PaymentOpen   OpenPaymentStatus = "open"   // payable at the gateway; to be closed when its hold ends
	PaymentClosed OpenPaymentStatus = "closed" // the gateway confirmed it can no longer be paid
	PaymentPaid   OpenPaymentStatus = "paid"   // it succeeded (recorded, or the gateway said so at close)
)

// OpenPayment is a payment started at a gateway for a held reservation (POST /pay). When the
// hold ends unpaid — expired or cancelled — the payment is closed at the gateway, so that the
// buyer cannot pay for a unit that has gone to someone else (package closer).
type OpenPayment struct {
	PaymentID     string
	ReservationID string
	Gateway       string // the gateway that started it, and must close it
	// RedirectURL is the payment's page, answered again by POST /pay while the payment is open
	// so that the gateway is asked once per hold ("" when the store did not keep it).
	RedirectURL string
	Status      OpenPaymentStatus
	// CloseAt is when a close is due: the hold's expiry, the cancel when the buyer cancelled,
	// or the next attempt after a failed close.
	CloseAt  time.Time
	Attempts int // closes tried
}

// CloseOutcome is what a closer records after trying to close a payment it claimed.
type CloseOutcome struct {
	PaymentID string
	Owner     string            // the lease owner that claimed it; a record by anyone else is refused
	Status    OpenPaymentStatus // PaymentClosed, PaymentPaid, or PaymentOpen to retry at NextAttemptAt
	Error     string            // why the close did not succeed (truncated by the store)
	// NextAttemptAt is when a PaymentOpen outcome may be claimed again.
	NextAttemptAt time.Time
	At            time.Time
}

// OpenPaymentStore is the durable record of payments started at a gateway, part of every
// OrderStore. A payment page is handed out only after its payment is recorded here, so that no
// payable page outlives its hold unnoticed.
type OpenPaymentStore interface {
	// RecordOpenPayment records a payment started for a hold that ends at closeAt. Recording a
	// payment id again changes nothing (a retried POST /pay starts the same payment).
	RecordOpenPayment(ctx context.Context, p OpenPayment, at time.Time) error
	// OpenPaymentOf returns the latest open payment of a reservation that has a RedirectURL,
	// or not_found when it has none: POST /pay answers its page rather than ask the gateway.
	OpenPaymentOf(ctx context.Context, reservationID string) (OpenPayment, error)
	// CloseSoon makes the open payments of a reservation due for closing at once (the buyer
	// cancelled the hold).
	CloseSoon(ctx context.Context, reservationID string, at time.Time) error
	// ClaimOpenPayments atomically takes up to limit open payments of the named gateway whose
	// close is due, leases them to owner until now+lease, counts an attempt, and returns them.
	// While a lease lives, no other claim returns that payment.
	ClaimOpenPayments(ctx context.Context, gateway, owner string, now time.Time, lease time.Duration, limit int) ([]OpenPayment, error)
	// RecordClose records the outcome of a close. Only the lease's owner may record, and only
	// on an open payment: anything else is a conflict and changes nothing.
	RecordClose(ctx context.Context, o CloseOutcome) error
}
