package payment

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/seckill-go/seckill"
)

// Payment outcomes as the webhook reports them (docs/API.md).
const (
	// StatusSucceeded means the buyer paid: the reservation should become paid, or a refund is owed.
	StatusSucceeded = "succeeded"
	// StatusFailed means the payment did not go through: nothing changes ("ignored").
	StatusFailed = "failed"
)

// MaxIDBytes bounds payment and reservation ids in a webhook. Our own ids are 32 to 36 bytes;
// gateways' ids are longer but nowhere near this. The bound keeps junk out of logs and indexes.
const MaxIDBytes = 128

// Event is the webhook body: the outcome of one payment for one reservation.
type Event struct {
	PaymentID     string `json:"payment_id"`
	ReservationID string `json:"reservation_id"`
	AmountCents   int64  `json:"amount_cents"`
	Status        string `json:"status"` // StatusSucceeded or StatusFailed
}

// Succeeded reports whether the payment went through.
func (e Event) Succeeded() bool { return e.Status == StatusSucceeded }

// Confirmation converts a succeeded event into the root package's PaymentConfirmation, which the
// inventory and the order store consume.
func (e Event) Confirmation() seckill.PaymentConfirmation {
	return seckill.PaymentConfirmation{PaymentID: e.PaymentID, ReservationID: e.ReservationID, AmountCents: e.AmountCents}
}

// ParseEvent decodes a webhook body. Unknown fields are allowed, because gateways add fields over
// time and a receiver that rejected them would turn every such change into an outage (with
// endless retries). Everything else is strict, because this body moves money:
//
//   - the body is exactly one JSON object: trailing data, or anything but an object, is rejected;
//   - field names match exactly (encoding/json alone would also take "Payment_ID"), and a field
//     given twice is rejected instead of letting the last one silently win, so that two parsers
//     can never read two different payments out of one signed body;
//   - payment_id and reservation_id are required non-empty strings of at most MaxIDBytes bytes
//     with no control characters; amount_cents is a required integer ≥ 0; status is required and
//     is "succeeded" or "failed"; null counts as missing; a wrong JSON type is rejected.
//
// Every failure is a *seckill.Error with CodeInvalidArgument. ParseEvent does not check the
// signature: call Verify first (or VerifyEvent), on the same raw bytes.
func ParseEvent(body []byte) (Event, error) {
	fields, err := topLevelFields(body)
	if err != nil {
		return Event{}, err
	}
	var e Event
	if err := stringField(fields, "payment_id", &e.PaymentID); err != nil {
		return Event{}, err
	}
	if err := stringField(fields, "reservation_id", &e.ReservationID); err != nil {
		return Event{}, err
	}
	if err := stringField(fields, "status", &e.Status); err != nil {
		return Event{}, err
	}
	raw, ok := fields["amount_cents"]
	if !ok || isNull(raw) {
		return Event{}, invalid("amount_cents is required")
	}
	if err := json.Unmarshal(raw, &e.AmountCents); err != nil {
		return Event{}, invalid("amount_cents must be an integer number of cents")
	}
	if e.AmountCents < 0 {
		return Event{}, invalid("amount_cents must not be negative")
	}
	for _, id := range []struct{ name, v string }{{"payment_id", e.PaymentID}, {"reservation_id", e.ReservationID}} {
		if err := checkID(id.name, id.v); err != nil {
			return Event{}, err
		}
	}
	if e.Status != StatusSucceeded && e.Status != StatusFailed {
		return Event{}, invalid("status must be %q or %q", StatusSucceeded, StatusFailed)
	}
	return e, nil
}

// VerifyEvent verifies the signature of a webhook and then parses its body: the order the
// handler must follow, so that nothing unauthenticated is parsed into a payment. The error is
// CodeInvalidSignature or CodeInvalidArgument.
func VerifyEvent(secret []byte, header string, body []byte, now time.Time) (Event, error) {
	if err := Verify(secret, header, body, now); err != nil {
		return Event{}, err
	}
	return ParseEvent(body)
}

// topLevelFields reads the body as one JSON object and returns its members undecoded, rejecting
// duplicate names and trailing data.
func topLevelFields(body []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return nil, invalid("empty body")
	}
	if err != nil {
		return nil, invalid("body is not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, invalid("body must be a JSON object")
	}
	fields := make(map[string]json.RawMessage, 4)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid("body is not valid JSON")
		}
		name, ok := tok.(string)
		if !ok {
			return nil, invalid("body is not valid JSON")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, invalid("body is not valid JSON")
		}
		if _, dup := fields[name]; dup {
			return nil, invalid("field %q appears more than once", truncate(name, 40))
		}
		fields[name] = v
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, invalid("body is not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("trailing data after the JSON object")
	}
	return fields, nil
}

func stringField(fields map[string]json.RawMessage, name string, dst *string) error {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return invalid("%s is required", name)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return invalid("%s must be a string", name)
	}
	return nil
}

func checkID(name, v string) error {
	switch {
	case v == "":
		return invalid("%s must not be empty", name)
	case len(v) > MaxIDBytes:
		return invalid("%s is longer than %d bytes", name, MaxIDBytes)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return invalid("%s contains a control character", name)
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// truncate keeps attacker-controlled text in messages short.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func invalid(format string, args ...any) error {
	e := seckill.Errorf(seckill.CodeInvalidArgument, format, args...)
	e.Message = "webhook body: " + e.Message
	return e
}
