package payment

import (
	"context"
	"net/http"
	"time"

	"github.com/seckill-go/seckill"
)

// Gateway names, as SECKILL_GATEWAY and the webhook route /api/v1/payments/webhook/{name} spell
// them.
const (
	WebhookName = "webhook" // the built-in signed webhook of a shop's own payment service
	MockName    = "mock"    // the in-process MockGateway
)

// ErrNoStart is the answer of WebhookGateway.Start: with the built-in scheme, payments are
// started by the shop's own payment service, never by seckill. It is coded unavailable, so
// POST /api/v1/reservations/{rid}/pay answers 503 as it did before gateways were configurable.
var ErrNoStart = seckill.Errorf(seckill.CodeUnavailable, "no payment gateway here starts payments; the shop's payment service does")

// WebhookGateway is the built-in signed-webhook scheme, for shops with an in-house payment
// service: that service takes the money and posts our signed webhook (Sign, Event). Seckill
// cannot call the service, so the gateway only verifies and parses notifications; Start,
// ClosePayment, Refund and State answer what a gateway without an API can honestly answer
// (docs/PAYMENTS.md).
//
// It is safe for concurrent use and holds no state but the secret.
type WebhookGateway struct {
	secret []byte
}

var _ Gateway = (*WebhookGateway)(nil)

// NewWebhookGateway returns the built-in gateway verifying with secret (SECKILL_PAYMENT_SECRET).
// An empty secret is accepted here and refused by every Parse (Verify refuses an empty key).
func NewWebhookGateway(secret []byte) *WebhookGateway {
	return &WebhookGateway{secret: append([]byte(nil), secret...)}
}

// Name is "webhook".
func (g *WebhookGateway) Name() string { return WebhookName }

// Start returns ErrNoStart: the shop's payment service starts payments.
func (g *WebhookGateway) Start(context.Context, StartRequest) (seckill.PaymentIntent, error) {
	return seckill.PaymentIntent{}, ErrNoStart
}

// Parse verifies the Seckill-Signature header over the raw body at now, then parses the body
// strictly (VerifyEvent).
func (g *WebhookGateway) Parse(header http.Header, body []byte, now time.Time) (Notification, error) {
	return parseSigned(g.secret, header, body, now)
}

// ClosePayment answers nil and does nothing: there is no provider API to call. The shop's
// service must stop taking money once the hold has ended; a payment that comes in anyway
// follows the late rule of docs/MODEL.md (paid if a unit is free, else refund_required).
func (g *WebhookGateway) ClosePayment(context.Context, string) error { return nil }

// Refund answers RefundFailed without an error: seckill cannot pay back through a service it
// cannot call, so the refund is left for an operator to pay by hand.
func (g *WebhookGateway) Refund(context.Context, RefundRequest) (RefundResult, error) {
	return RefundResult{Status: RefundFailed}, nil
}

// State answers StateUnknown for every payment: seckill keeps no record of the service's
// payments beyond what their webhooks told the order store.
func (g *WebhookGateway) State(context.Context, string) (State, error) { return StateUnknown, nil }

// parseSigned is Parse for our signed scheme, shared by the webhook gateway and the mock:
// verify first, then parse, so nothing unauthenticated is parsed into a payment.
func parseSigned(secret []byte, header http.Header, body []byte, now time.Time) (Notification, error) {
	ev, err := VerifyEvent(secret, header.Get(SignatureHeader), body, now)
	if err != nil {
		return Notification{}, err
	}
	n := Notification{Outcome: OutcomeFailed, PaymentID: ev.PaymentID, ReservationID: ev.ReservationID, AmountCents: ev.AmountCents}
	if ev.Succeeded() {
		n.Outcome = OutcomeSucceeded
	}
	return n, nil
}

// SignedHeader returns the header our scheme sends with body, signed with secret at t: what a
// shop's payment service (and the mock) sends, and what tests use to make notifications.
func SignedHeader(secret []byte, t time.Time, body []byte) http.Header {
	h := make(http.Header)
	h.Set("Content-Type", "application/json")
	h.Set(SignatureHeader, Sign(secret, t, body))
	return h
}

// StartRequestFor is the StartRequest for a held reservation: its amount, user, sale and hold
// expiry, with the reservation id as the idempotency key (one payment per hold).
func StartRequestFor(r seckill.Reservation) StartRequest {
	req := StartRequest{
		ReservationID: r.ID, UserID: r.UserID, AmountCents: r.AmountCents,
		Currency: DefaultCurrency, IdempotencyKey: r.ID, SaleID: r.SaleID,
	}
	if r.ExpiresAt != nil {
		req.ExpiresAt = *r.ExpiresAt
	}
	return req
}

// StartRequestForSale is StartRequestFor with what the sale adds: its currency, its name, and
// when the hold began (expires_at − hold_seconds).
func StartRequestForSale(r seckill.Reservation, sale seckill.Sale) StartRequest {
	req := StartRequestFor(r)
	if sale.Currency != "" {
		req.Currency = sale.Currency
	}
	req.SaleName = sale.Name
	if r.ExpiresAt != nil && sale.HoldSeconds > 0 {
		req.HeldAt = r.ExpiresAt.Add(-time.Duration(sale.HoldSeconds) * time.Second)
	}
	return req
}

// ForService adapts a Gateway to seckill.Payments, the interface service.Service.Pay calls, so
// that neither the vocabulary nor the service imports this package.
func ForService(g Gateway) seckill.Payments { return servicePayments{g} }

type servicePayments struct{ g Gateway }

// CreatePaymentFor starts the payment for the reservation of sale (StartRequestForSale).
func (p servicePayments) CreatePaymentFor(ctx context.Context, r seckill.Reservation, sale seckill.Sale) (seckill.PaymentIntent, error) {
	return p.start(ctx, StartRequestForSale(r, sale))
}

func (p servicePayments) start(ctx context.Context, req StartRequest) (seckill.PaymentIntent, error) {
	intent, err := p.g.Start(ctx, req)
	intent.Gateway = p.g.Name() // recorded with the open payment: the gateway that must close it
	return intent, err
}
