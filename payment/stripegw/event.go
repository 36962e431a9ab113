package stripegw

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v85"

	"github.com/seckill-go/seckill/payment"
)

// EventSession is the part of a Checkout Session that an event built by SignedEvent carries.
type EventSession struct {
	ID            string // the payment id, "cs_…"
	ReservationID string // metadata.reservation_id and client_reference_id
	AmountCents   int64  // amount_total
	Status        string // "open", "complete", "expired"
	PaymentStatus string // "paid", "unpaid"
	Group         string // metadata[MetadataKey], the group that created it; DefaultGroup when empty
	Currency      string // currency; "usd" when empty
}

// SignedEvent builds a Stripe webhook as Stripe sends it, for tests and the bench (stripe-mock
// sends no webhooks): an event of the given type carrying the session, and the
// Stripe-Signature header signed with secret at time at ("t=<unix>,v1=<hex HMAC-SHA256 of
// "<unix>.<body>">", by stripe-go's own GenerateTestSignedPayload).
func SignedEvent(secret, eventID, eventType string, s EventSession, at time.Time) (http.Header, []byte) {
	group, currency := s.Group, s.Currency
	if group == "" {
		group = DefaultGroup
	}
	if currency == "" {
		currency = payment.DefaultCurrency
	}
	object := map[string]any{
		"id":                  s.ID,
		"object":              "checkout.session",
		"mode":                "payment",
		"status":              s.Status,
		"payment_status":      s.PaymentStatus,
		"amount_total":        s.AmountCents,
		"currency":            currency,
		"client_reference_id": s.ReservationID,
		"metadata":            map[string]string{MetadataKey: group, "reservation_id": s.ReservationID},
	}
	body, err := json.Marshal(map[string]any{
		"id":          eventID,
		"object":      "event",
		"api_version": stripe.APIVersion,
		"created":     at.Unix(),
		"type":        eventType,
		"data":        map[string]any{"object": object},
	})
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return Sign(secret, body, at), body
}

// Sign signs body as Stripe signs a webhook at time at, returning the header to send with it.
func Sign(secret string, body []byte, at time.Time) http.Header {
	p := stripe.GenerateTestSignedPayload(&stripe.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	h := http.Header{}
	h.Set(SignatureHeader, p.Header)
	return h
}
