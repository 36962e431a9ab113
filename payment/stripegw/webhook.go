package stripegw

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v85"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
)

// SignatureHeader is the header Stripe signs its webhooks in: "t=<unix>,v1=<hex HMAC-SHA256>".
const SignatureHeader = "Stripe-Signature"

// Parse verifies a Stripe webhook and maps its event to a Notification.
//
// The signature is checked by stripe-go (stripe.ConstructEvent); the freshness is checked here
// against now, in both directions, because stripe-go measures the age with its own time.Now
// and accepts a timestamp from any future. It is checked on the very timestamp the signature
// covers: stripe-go verifies with the last t= of the header, so a header with more than one is
// refused (a captured event with a fresh t= put in front would otherwise be judged fresh by
// one and verified by the other; Stripe sends exactly one).
//
// stripe-go's API-version check is turned off: a webhook endpoint's API version is set in
// Stripe's dashboard and moves independently of this library's pinned version, and refusing
// every event after such a change would have Stripe retry and then disable the endpoint,
// losing payments; the few fields read here (the event type and the session's id, status,
// payment_status, metadata, client_reference_id, amount_total and currency) are the same in
// every API version since Checkout Sessions exist.
func (g *Gateway) Parse(header http.Header, body []byte, now time.Time) (payment.Notification, error) {
	sig := header.Get(SignatureHeader)
	signedAt, err := signedTimestamp(sig)
	if err != nil {
		return payment.Notification{}, err
	}
	event, err := stripe.ConstructEvent(body, sig, g.webhookSecret,
		stripe.WithIgnoreTolerance(), stripe.WithIgnoreAPIVersionMismatch())
	if err != nil {
		if isSignatureError(err) {
			return payment.Notification{}, seckill.Errorf(seckill.CodeInvalidSignature, "the Stripe signature does not verify")
		}
		return payment.Notification{}, seckill.Errorf(seckill.CodeInvalidArgument, "the Stripe event is malformed")
	}
	if d := now.Sub(signedAt); d > g.tolerance || d < -g.tolerance {
		return payment.Notification{}, seckill.Errorf(seckill.CodeInvalidSignature,
			"the Stripe signature is stale (signed %s from now; at most %s either way)", d.Round(time.Second), g.tolerance)
	}
	return g.notification(event)
}

// isSignatureError reports whether ConstructEvent refused the signature rather than the body.
func isSignatureError(err error) bool {
	return errors.Is(err, stripe.ErrWebhookNotSigned) || errors.Is(err, stripe.ErrWebhookInvalidHeader) ||
		errors.Is(err, stripe.ErrWebhookNoValidSignature) || errors.Is(err, stripe.ErrWebhookTooOld)
}

// signedTimestamp reads the one t= part of a Stripe-Signature header: the timestamp stripe-go
// verifies the signature with. A header with none, more than one, or one that is not a number
// is invalid_signature.
func signedTimestamp(header string) (time.Time, error) {
	var stamps []string
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(part, "t="); ok {
			stamps = append(stamps, v)
		}
	}
	if len(stamps) != 1 {
		return time.Time{}, seckill.Errorf(seckill.CodeInvalidSignature, "the Stripe signature must carry exactly one timestamp, not %d", len(stamps))
	}
	sec, err := strconv.ParseInt(stamps[0], 10, 64)
	if err != nil {
		return time.Time{}, seckill.Errorf(seckill.CodeInvalidSignature, "the Stripe signature's timestamp is not a number")
	}
	return time.Unix(sec, 0), nil
}

// notification maps a verified event. A session seckill did not create (no metadata naming
// this gateway's group: the shop's own checkout, a Payment Link, another deployment) is
// ignored: its money is someone else's to honour. A paid session of ours is a success even
// when it names no reservation: the money was taken, so the service must see it (and refund
// it) rather than have Stripe give up on an endpoint that keeps refusing it.
func (g *Gateway) notification(event stripe.Event) (payment.Notification, error) {
	var outcome payment.Outcome
	switch event.Type {
	case stripe.EventTypeCheckoutSessionCompleted, stripe.EventTypeCheckoutSessionAsyncPaymentSucceeded:
		outcome = payment.OutcomeSucceeded
	case stripe.EventTypeCheckoutSessionAsyncPaymentFailed:
		outcome = payment.OutcomeFailed
	case stripe.EventTypeCheckoutSessionExpired:
		outcome = payment.OutcomeCancelled
	default:
		return payment.Notification{Outcome: payment.OutcomeIgnored}, nil
	}
	if event.Data == nil || len(event.Data.Raw) == 0 {
		return payment.Notification{}, seckill.Errorf(seckill.CodeInvalidArgument, "the Stripe event %s carries no object", event.Type)
	}
	var s stripe.CheckoutSession
	if err := json.Unmarshal(event.Data.Raw, &s); err != nil || s.ID == "" {
		return payment.Notification{}, seckill.Errorf(seckill.CodeInvalidArgument, "the Stripe event %s carries no checkout session", event.Type)
	}
	if s.Metadata[MetadataKey] != g.group {
		return payment.Notification{Outcome: payment.OutcomeIgnored}, nil
	}
	// checkout.session.completed with an unpaid session is an asynchronous payment (a bank
	// debit) still on its way: async_payment_succeeded or _failed will say how it ended.
	if event.Type == stripe.EventTypeCheckoutSessionCompleted && s.PaymentStatus == stripe.CheckoutSessionPaymentStatusUnpaid {
		outcome = payment.OutcomeIgnored
	}
	rid := s.Metadata["reservation_id"]
	if rid == "" {
		rid = s.ClientReferenceID
	}
	return payment.Notification{Outcome: outcome, PaymentID: s.ID, ReservationID: rid, AmountCents: s.AmountTotal, Currency: string(s.Currency)}, nil
}
