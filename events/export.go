// Package export delivers reservation events to the shop's other systems — its order,
// fulfilment, notification and accounting services — through the channels shops already run:
// signed HTTP callbacks, RabbitMQ, NATS JetStream and Kafka (docs/EVENTS.md).
//
// Delivery is at least once: a sink may deliver an event twice (a retry after a timeout whose
// first attempt did land), never zero times once Publish returned nil. Every event carries a
// stable id, the same on every delivery, on which consumers dedupe. Events of one reservation
// are published in order, and every sink keeps that order at its destination.
package events

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/seckill-go/seckill"
)

// SchemaVersion is the version of the Event JSON schema (docs/EVENTS.md). A change that a
// consumer could trip over (a field removed or redefined) makes a new version; new fields do not.
const SchemaVersion = 1

// Event types, the values of Event.Type.
const (
	TypeHeld           = "held"            // a buyer got a hold (directly)
	TypeQueued         = "queued"          // a buyer was queued for a unit
	TypeGranted        = "granted"         // a queued buyer got a hold
	TypePaid           = "paid"            // a hold was paid in time
	TypeLatePaid       = "late_paid"       // a payment after the hold ended was honoured
	TypeCancelled      = "cancelled"       // the buyer cancelled
	TypeExpired        = "expired"         // the hold timed out unpaid (the "timeout callback")
	TypeRejected       = "rejected"        // a queued buyer was turned away (sold out, sale ended)
	TypeRefundRequired = "refund_required" // money arrived that cannot be honoured; it is owed back
	TypeRefunded       = "refunded"        // the money owed was paid back
	TypeRefundFailed   = "refund_failed"   // paying it back failed for good; an operator acts
)

// Types lists every event type, in the order of docs/EVENTS.md.
var Types = []string{TypeHeld, TypeQueued, TypeGranted, TypePaid, TypeLatePaid, TypeCancelled, TypeExpired,
	TypeRejected, TypeRefundRequired, TypeRefunded, TypeRefundFailed}

// Event is one reservation event as exported (schema version 1, docs/EVENTS.md).
type Event struct {
	// ID is stable: the same event has the same id on every delivery, from every instance, so
	// consumers dedupe on it.
	ID            string     `json:"id"`
	Type          string     `json:"type"`
	SchemaVersion int        `json:"schema_version"`
	SaleID        string     `json:"sale_id"`
	ReservationID string     `json:"reservation_id"`
	UserID        string     `json:"user_id"`
	Quantity      int        `json:"quantity"`
	AmountCents   int64      `json:"amount_cents"`
	Status        string     `json:"status"`               // the reservation's status after the event
	ExpiresAt     *time.Time `json:"expires_at,omitempty"` // while held
	PaymentID     string     `json:"payment_id,omitempty"` // paid, late_paid, refund_*
	At            time.Time  `json:"at"`                   // when it happened, UTC
}

// Sink delivers events to one destination.
type Sink interface {
	// Name identifies the sink in logs and metrics: its URL without credentials or secrets.
	Name() string
	// Publish delivers events, in the order given, and returns nil only once every one of them
	// is durable at the destination (acknowledged by the endpoint, confirmed by the broker).
	// On an error some may have been delivered: the caller publishes them all again, and
	// consumers dedupe by id. Publish honours ctx: a destination that is down makes it return
	// an error when ctx ends (or sooner), never hang.
	Publish(ctx context.Context, events []Event) error
	// Close releases the sink's connections. Publish must not be called after it.
	Close() error
}

// Labeled is a sink with a name of its own (export/sinks: the name= option of its URL, else its
// scheme and its place in the list, "http-0"): what /metrics, /readyz and the dashboard show,
// never the URL, whose path or query may hold a token. Name stays the sink's identity (its
// read positions and dead letters are kept under it).
type Labeled interface {
	Label() string
}

// LabelOf is s's label (Labeled), else its Name.
func LabelOf(s Sink) string {
	if l, ok := s.(Labeled); ok {
		return l.Label()
	}
	return s.Name()
}

// WithLabel gives s the label name.
func WithLabel(s Sink, name string) Sink { return labeled{s, name} }

type labeled struct {
	Sink
	label string
}

func (l labeled) Label() string { return l.label }

// ErrBadURL is returned (wrapped) for a sink URL that cannot be used (package export/sinks
// opens sinks from their URLs, each kind in its own package: httpsink, amqpsink, natssink,
// kafkasink).
var ErrBadURL = errors.New("export: bad sink URL")

// Options are what every sink may need from the server.
type Options struct {
	// Secret signs HTTP callbacks (the Seckill-Signature scheme of incoming webhooks): the
	// export's own secret (SECKILL_EXPORT_SECRET).
	Secret []byte
	// Refused are the process's secrets of other purposes: a sink's own secret (secret_env)
	// equal to one is refused, since the receiver would hold it.
	Refused [][]byte
}

// Redact is a sink URL fit for logs and errors: its password (amqp://user:pass@…) and any
// query option whose name suggests a secret replaced.
func Redact(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "redacted")
		}
	}
	q := u.Query()
	for k := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "secret") || strings.Contains(lk, "token") || strings.Contains(lk, "password") || strings.Contains(lk, "key") {
			q.Set(k, "redacted")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// FromEngine is the exported form of an engine's event (seckill.Event): its type is the
// event's Type when set (granted, late_paid), else the reservation's status after the change.
// Its id is "<reservation id>:<type>": a reservation reaches each type at most once, so every
// delivery of the same change, from any instance, carries the same id. ok is false for a
// refund_required status: the order store exports that one, per payment (FromRefund), with the
// payment's id.
func FromEngine(ev seckill.Event) (e Event, ok bool) {
	r := ev.Reservation
	typ := ev.Type
	if typ == "" {
		typ = string(r.Status)
	}
	if r.Status == seckill.StatusRefundRequired {
		return Event{}, false
	}
	e = Event{
		ID: r.ID + ":" + typ, Type: typ, SchemaVersion: SchemaVersion, SaleID: r.SaleID, ReservationID: r.ID,
		UserID: r.UserID, Quantity: r.Quantity, AmountCents: r.AmountCents, Status: string(r.Status),
		PaymentID: r.PaymentID, At: ev.At.UTC(),
	}
	if r.Status == seckill.StatusHeld && r.ExpiresAt != nil {
		t := r.ExpiresAt.UTC()
		e.ExpiresAt = &t
	}
	return e, true
}

// FromRefund is the exported form of a refund's change, written by the order store in the
// transaction that makes it: typ is TypeRefundRequired (a payment that cannot be honoured was
// recorded), TypeRefunded or TypeRefundFailed. r is the reservation the payment was for, as
// stored (its sale and user may be empty when the payment named no known reservation); the
// status is the reservation's. The id is "<payment id>:<type>": one payment owes at most one
// refund, which ends once.
func FromRefund(typ, paymentID string, amountCents int64, r seckill.Reservation, at time.Time) Event {
	return Event{
		ID: paymentID + ":" + typ, Type: typ, SchemaVersion: SchemaVersion, SaleID: r.SaleID, ReservationID: r.ID,
		UserID: r.UserID, Quantity: r.Quantity, AmountCents: amountCents, Status: string(r.Status),
		PaymentID: paymentID, At: at.UTC(),
	}
}
