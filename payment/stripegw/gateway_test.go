package stripegw_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/servicetest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/payment/stripegw"
	"github.com/seckill-go/seckill/payment/stripegw/stripetest"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
)

const (
	suiteWebhookSecret = "whsec_gateway_suite_0123456789abcdef"
	suiteForgedSecret  = "whsec_not_the_endpoint_secret_012345"
)

// TestGatewayStripe runs the gateway suite on the Stripe gateway, against stripe-mock (every
// call checked against Stripe's OpenAPI specification) behind stripetest's record of sessions
// and refunds (what stripe-mock forgets). Notifications are Stripe events signed as Stripe
// signs them.
func TestGatewayStripe(t *testing.T) {
	mock := testenv.StripeMock(t)
	seckilltest.TestGateway(t, seckilltest.GatewayHarness{
		Open: func(t *testing.T, _ *seckilltest.ManualClock) seckilltest.GatewayUnderTest {
			api := stripetest.NewServer(mock)
			t.Cleanup(api.Close)
			g, err := stripegw.New(stripegw.Config{SecretKey: "sk_test_suite", WebhookSecret: suiteWebhookSecret,
				APIURL: api.URL, SuccessURL: "http://127.0.0.1:8080/"})
			if err != nil {
				t.Fatal(err)
			}
			return seckilltest.GatewayUnderTest{
				Gateway: g,
				Notify:  notify,
				Sign: func(_ *testing.T, body []byte, at time.Time, forged bool) http.Header {
					if forged {
						return stripegw.Sign(suiteForgedSecret, body, at)
					}
					return stripegw.Sign(suiteWebhookSecret, body, at)
				},
				Settle: func(t *testing.T, id string) {
					if err := api.Settle(id); err != nil {
						t.Fatal(err)
					}
				},
				Refunds: func(_ *testing.T, id string) int { return api.Refunds(id) },
			}
		},
		NewService: func(t *testing.T, clock seckill.Clock, payments seckill.Payments) (*service.Service, seckill.OrderStore) {
			return servicetest.NewWithStore(t, clock, payments)
		},
	})
}

// notify is the event Stripe sends for outcome o of the session Start created.
func notify(t *testing.T, req payment.StartRequest, intent seckill.PaymentIntent, o payment.Outcome) []byte {
	s := stripegw.EventSession{ID: intent.PaymentID, ReservationID: req.ReservationID, AmountCents: req.AmountCents, Currency: req.Currency}
	var typ string
	switch o {
	case payment.OutcomeSucceeded:
		typ, s.Status, s.PaymentStatus = "checkout.session.completed", "complete", "paid"
	case payment.OutcomeFailed:
		typ, s.Status, s.PaymentStatus = "checkout.session.async_payment_failed", "complete", "unpaid"
	case payment.OutcomeCancelled:
		typ, s.Status, s.PaymentStatus = "checkout.session.expired", "expired", "unpaid"
	default:
		t.Fatalf("Stripe sends no %q event", o)
	}
	_, body := stripegw.SignedEvent(suiteWebhookSecret, "evt_"+seckill.NewID(), typ, s, time.Now())
	return body
}
