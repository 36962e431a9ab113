// Package seckill is the vocabulary of the flash-sale backend: sales, reservations, the coded
// error type, and the interfaces (Inventory, OrderStore, Payments, Clock) that adapters implement.
// The rules that work across those interfaces are package service; the HTTP statuses of the error
// codes are httpapi's. It imports only the standard library (and golang.org/x/text's currency
// table for validation) so that every adapter can depend on it without depending on each other,
// and without a transport.
package seckill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"
)

// Clock tells the time. It is injected everywhere so tests can move time by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock, in UTC.
type SystemClock struct{}

// Now returns the current UTC time.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// ClockFunc adapts a function to the Clock interface.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// NewID returns a random 128-bit identifier as 32 hex characters. Ids come from crypto/rand so
// that reservation and payment ids cannot be guessed.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b[:])
}

// BuyRequest is one buyer's attempt to reserve units of a sale.
type BuyRequest struct {
	SaleID         string
	UserID         string
	Quantity       int
	IdempotencyKey string // optional; a retry with the same key returns the same reservation
}

// BuyResult is the outcome of a successful Buy: a held or queued reservation.
type BuyResult struct {
	Reservation Reservation
	// Replayed is true when the idempotency key was seen before and the stored reservation
	// was returned without any change.
	Replayed bool
}

// PaymentResult is what a webhook delivery did. The values are the wire values of docs/API.md (payment webhook).
type PaymentResult string

// Payment results.
const (
	PaymentApplied        PaymentResult = "applied"         // held → paid
	PaymentLateApplied    PaymentResult = "late_applied"    // expired/cancelled, a unit was free → paid
	PaymentDuplicate      PaymentResult = "duplicate"       // same payment_id again, nothing changed
	PaymentRefundRequired PaymentResult = "refund_required" // succeeded but cannot be honoured
	PaymentIgnored        PaymentResult = "ignored"         // status failed, nothing changed
)

// Paid reports whether r turns a reservation into a paid one.
func (r PaymentResult) Paid() bool { return r == PaymentApplied || r == PaymentLateApplied }

// PaymentConfirmation is a succeeded payment as the gateway reported it.
type PaymentConfirmation struct {
	PaymentID     string
	ReservationID string
	AmountCents   int64
	// Gateway names the gateway that took the money (payment.Gateway.Name), recorded with the
	// payment so that a refund owed goes back through that same gateway.
	Gateway string
	// Currency is the ISO 4217 code of AmountCents' currency as the gateway reported it (Stripe:
	// the session's currency). Empty: the gateway reports none (the built-in webhook scheme, the
	// mock), and the payment is taken to be in the sale's own currency.
	Currency string
}

// InCurrency reports whether the payment is in saleCurrency, a sale's currency ("" for
// DefaultCurrency). A payment that names no currency is taken to be in the sale's (see
// Currency); the comparison ignores case (ISO 4217 codes are upper case; Stripe and seckill
// write them in lower case). Every engine refuses a payment in another currency as it refuses a
// wrong amount: the money is owed back (refund_required), and the reservation is unchanged.
func (p PaymentConfirmation) InCurrency(saleCurrency string) bool {
	if p.Currency == "" {
		return true
	}
	if saleCurrency == "" {
		saleCurrency = DefaultCurrency
	}
	return strings.EqualFold(p.Currency, saleCurrency)
}

// Inventory is the hot-path stock engine. Every method is atomic per sale: implementations run
// each call as one critical section (memory) or one Lua script (Redis). Every state-changing call
// first reclaims holds that have expired (bounded work), so correctness never depends on the
// sweeper being alive.
type Inventory interface {
	// LoadSale makes a sale known to the engine with the given already-sold units (from the
	// order store). Loading a sale that is already loaded returns a conflict error.
	LoadSale(ctx context.Context, sale Sale, sold int) error
	// Sale returns the sale's definition and its live stock state.
	Sale(ctx context.Context, saleID string) (Sale, StockState, error)
	// Buy reserves units: a hold when units are free, a queue place when units are only held
	// by others. Errors: not_found, not_started, ended, limit_exceeded, sold_out, queue_full,
	// invalid_argument.
	Buy(ctx context.Context, req BuyRequest) (BuyResult, error)
	// Reservation returns a reservation as it is now (an expired hold reads as expired).
	Reservation(ctx context.Context, id string) (Reservation, error)
	// Cancel cancels a held or queued reservation of userID. Cancelling a cancelled, expired
	// or rejected one returns it unchanged; a paid one is a conflict; another user's is not_found.
	Cancel(ctx context.Context, id, userID string) (Reservation, error)
	// ConfirmPayment applies a succeeded payment: applied, late_applied, duplicate or
	// refund_required. The returned reservation is the one the payment refers to (zero if
	// unknown).
	ConfirmPayment(ctx context.Context, p PaymentConfirmation) (PaymentResult, Reservation, error)
	// AddStock adds units to a sale during the sale; queued buyers are served first.
	AddStock(ctx context.Context, saleID string, add int) (Sale, StockState, error)
	// CloseSale ends a sale now: the queue is rejected, holds may still be paid until they expire.
	CloseSale(ctx context.Context, saleID string) (Sale, StockState, error)
	// Reclaim expires every hold of the sale whose expiry has passed (the sweeper calls it).
	Reclaim(ctx context.Context, saleID string) (int, error)
	// RestoreReservation puts back a reservation that the order store knew (restart).
	RestoreReservation(ctx context.Context, r Reservation) error
	// SaleAdmin lists a sale on and off the storefront and deletes one nobody has reserved in:
	// every engine has it (the inventory suite's SaleAdmin cases).
	SaleAdmin
}

// SaleWindows reads a sale's definition without its live counts, for the callers that need only
// the window (the purchase path, asked once per buyer). Inventory.Sale must count every unit: on
// a segmented Redis sale that is two script calls per segment, where the definition alone is one
// (segment 0's). It is optional, for the engines where the difference counts (the Redis engine
// has it; the memory engine's Sale is as cheap): the service is given it (service.Config.Windows)
// and uses Inventory.Sale without it.
type SaleWindows interface {
	// SaleWindow returns the sale's definition exactly as Sale returns it (starts_at, ends_at
	// as a close left it, so WindowError answers the same), with Sale's errors; it has no
	// counts: a caller that needs stock calls Sale. An engine may answer it from a copy a
	// bounded, documented time old (the Redis engine with local answers, for a segmented
	// sale: 100 ms), never older than the caller's own changes.
	SaleWindow(ctx context.Context, saleID string) (Sale, error)
}

// SettledSales is an Inventory that can load a settled sale (ended, none of its stored
// reservations held or queued) as released, with its definition and sold units only, and
// answer for its reservations from the order store: the memory engine with an archive. It is
// optional: the service is given it (service.Config.Settled) and, without it, restores every
// sale whole on Recover.
type SettledSales interface {
	// LoadSettledSale makes the sale known as released with sold units sold. It loads nothing
	// and reports false when it cannot (no archive, or the sale has not ended): the caller then
	// loads the sale with LoadSale and RestoreReservation.
	LoadSettledSale(ctx context.Context, sale Sale, sold int) (bool, error)
}

// Event is a reservation change, sent from the engine to the order store asynchronously.
type Event struct {
	Reservation Reservation
	At          time.Time
	// Type names the change when the status alone does not tell it: EventGranted (a queued
	// buyer got a hold) or EventLatePaid (a payment after the hold ended was honoured). It is
	// empty for every other change, whose type is its status. The order store ignores it; the
	// event export (docs/EVENTS.md) reads it.
	Type string
	// Version is the sale's state version after the change (docs/MODEL.md "The state's
	// version"), 0 when unknown (the memory engine, entries written before versions existed).
	// The order store records the highest it has stored, per sale.
	Version uint64
}

// Event types beyond a reservation's status (Event.Type).
const (
	EventGranted  = "granted"
	EventLatePaid = "late_paid"
)

// Order is a paid reservation or a refund owed, as the database records it. Every succeeded
// payment is exactly one Order (invariant 4 of docs/MODEL.md).
type Order struct {
	PaymentID     string            `json:"payment_id"`
	ReservationID string            `json:"reservation_id"`
	SaleID        string            `json:"sale_id"`
	UserID        string            `json:"user_id"`
	Quantity      int               `json:"quantity"`
	AmountCents   int64             `json:"amount_cents"`
	Status        ReservationStatus `json:"status"` // paid or refund_required
	CreatedAt     time.Time         `json:"created_at"`
	// RefundStatus is where the refund of a refund_required order stands; empty on paid
	// orders, and on stores that keep no refund records.
	RefundStatus RefundStatus `json:"refund_status,omitempty"`
}

// PaymentRecord is what the payment transaction writes.
type PaymentRecord struct {
	PaymentID   string
	Reservation Reservation // as the engine returned it; SaleID/UserID may be empty when unknown
	AmountCents int64
	Result      PaymentResult // from the engine: applied, late_applied or refund_required
	At          time.Time
	Gateway     string // the gateway that took the money; "" when not known
	Reason      string // with Result refund_required: why the money is owed back (Refund.Reason)
}

// DBCounts are the database's view of a sale, for the audit.
type DBCounts struct {
	Sold       int `json:"sold"`        // sales.sold
	PaidUnits  int `json:"paid_units"`  // sum of quantity over paid reservations
	Refunds    int `json:"refunds"`     // payments recorded as refund_required
	PaidOrders int `json:"paid_orders"` // payments that made a reservation paid
	// The refunds of those refund_required payments by status (RefundStore); they add up to
	// Refunds on a store that keeps refund records, and are all zero on one that keeps none.
	RefundsRequired int `json:"refunds_required"`
	RefundsPending  int `json:"refunds_pending"`
	Refunded        int `json:"refunded"`
	RefundsFailed   int `json:"refunds_failed"`
}

// OrderStore is the durable store: sales, reservations (written asynchronously from events) and
// payments (written synchronously, in one transaction that guards sales.sold ≤ sellable).
type OrderStore interface {
	// CreateSale inserts a sale; an existing id is a conflict.
	CreateSale(ctx context.Context, s Sale) error
	// DeleteSale removes a sale that nothing refers to yet (no reservation, no payment, nothing
	// sold): it undoes a CreateSale whose engine load failed. A sale with anything recorded
	// is a conflict; an unknown one is not_found.
	DeleteSale(ctx context.Context, id string) error
	// UpdateSale stores a changed definition (stock, ends_at). The currency, preheat_seconds
	// and the waiting room stay as created (the definition may come from an engine that does
	// not keep them).
	UpdateSale(ctx context.Context, s Sale) error
	// Sale returns one sale and its sold units.
	Sale(ctx context.Context, id string) (Sale, int, error)
	// Sales lists every sale, oldest first, with sold units.
	Sales(ctx context.Context) ([]Sale, []int, error)
	// ApplyEvents upserts reservations idempotently; status only moves forward and paid /
	// refund_required rows are never changed by events (the payment transaction owns them).
	ApplyEvents(ctx context.Context, events []Event) error
	// RecordPayment writes a payment in one transaction. For a paying result it increments
	// sales.sold only if sold+qty ≤ sellable and marks the reservation paid; if the guard fails
	// the payment is recorded as refund_required. A payment_id seen before returns
	// PaymentDuplicate and changes nothing. It returns the result actually recorded.
	RecordPayment(ctx context.Context, p PaymentRecord) (PaymentResult, error)
	// PaymentResult returns the recorded result of a payment id, or not_found.
	PaymentResult(ctx context.Context, paymentID string) (PaymentResult, error)
	// Orders lists one user's orders (paid and refund_required), newest first.
	Orders(ctx context.Context, userID string) ([]Order, error)
	// Reservations lists the reservations of a sale with the given statuses (restart, audit).
	Reservations(ctx context.Context, saleID string, statuses ...ReservationStatus) ([]Reservation, error)
	// Reservation returns one reservation as stored (expires_at only while held, no position),
	// or not_found. The memory engine reads from here the reservations of a sale it released.
	Reservation(ctx context.Context, id string) (Reservation, error)
	// Counts returns the database's counts for one sale (audit).
	Counts(ctx context.Context, saleID string) (DBCounts, error)
	// Ping checks the connection (readiness).
	Ping(ctx context.Context) error
	// Close releases the connection.
	Close() error
	// RefundStore keeps the refunds owed for refund_required payments, and OpenPaymentStore the
	// payments started at a gateway, for closing when their holds end: every order store keeps
	// both (sqlstore does, in the payment transaction), and the service relies on them.
	RefundStore
	OpenPaymentStore
}

// PaymentIntent is what a gateway returns when a payment is started, and what POST /pay
// answers.
type PaymentIntent struct {
	PaymentID   string `json:"payment_id"`
	RedirectURL string `json:"redirect_url"` // "" for a free hold: there is no page to pay on
	// Reservation is set when /pay settled the hold at once (a free hold, confirmed): the
	// reservation, paid. A payment at a gateway is settled later, by its notification.
	Reservation *Reservation `json:"reservation,omitempty"`
	// Gateway names the gateway that started the payment; set by the adapter between the
	// service and the gateway (payment.ForService), so that the open payment is recorded with
	// the gateway that must close it.
	Gateway string `json:"-"`
}

// Payments starts payments with a third-party gateway. The gateway reports the outcome later,
// asynchronously, through the signed webhook. payment.ForService adapts every gateway to it.
type Payments interface {
	// CreatePaymentFor starts the payment of hold r of sale: it charges in the sale's currency,
	// names the sale on the payment page, sends the buyer back to the sale's page, and bounds
	// the payment by when the hold began (expires_at − hold_seconds).
	CreatePaymentFor(ctx context.Context, r Reservation, sale Sale) (PaymentIntent, error)
}
