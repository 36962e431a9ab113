package payment_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/servicetest"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
)

const (
	gwSecret      = "gateway-suite-secret-0123456789abcdef"
	gwWrongSecret = "not-the-gateway-secret-0123456789abcd"
)

// signedScheme plays the provider of our signed webhook: the body of docs/API.md, signed with
// the gateway's secret (or, forged, with another).
func signedScheme(g seckilltest.GatewayUnderTest) seckilltest.GatewayUnderTest {
	g.Notify = func(t *testing.T, req payment.StartRequest, intent seckill.PaymentIntent, o payment.Outcome) []byte {
		status := payment.StatusSucceeded
		switch o {
		case payment.OutcomeSucceeded:
		case payment.OutcomeFailed:
			status = payment.StatusFailed
		default:
			t.Fatalf("our scheme has no %q notification", o)
		}
		b, err := json.Marshal(payment.Event{PaymentID: intent.PaymentID, ReservationID: req.ReservationID, AmountCents: req.AmountCents, Status: status})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	g.Sign = func(_ *testing.T, body []byte, at time.Time, forged bool) http.Header {
		key := gwSecret
		if forged {
			key = gwWrongSecret
		}
		return payment.SignedHeader([]byte(key), at, body)
	}
	return g
}

// TestGatewayMock runs the gateway suite on the mock. Its own webhooks are held back (an hour's
// delay, a receiver that discards them): the suite plays the provider's notifications itself.
func TestGatewayMock(t *testing.T) {
	testGatewayMock(t, func(g payment.Gateway, _ seckill.Clock) payment.Gateway { return g })
}

// TestGatewayBackoff runs the gateway suite on the mock behind WithBackoff, as seckill serve
// runs every gateway: with no "too many requests", the wrapper changes nothing.
func TestGatewayBackoff(t *testing.T) {
	testGatewayMock(t, payment.WithBackoff)
}

func testGatewayMock(t *testing.T, wrap func(payment.Gateway, seckill.Clock) payment.Gateway) {
	seckilltest.TestGateway(t, seckilltest.GatewayHarness{
		Open: func(t *testing.T, clock *seckilltest.ManualClock) seckilltest.GatewayUnderTest {
			g := payment.NewMockGateway(payment.MockConfig{
				Secret: []byte(gwSecret), Clock: clock,
				Delay:   func(seckill.Reservation) time.Duration { return time.Hour },
				Deliver: func(context.Context, []byte, string) (int, error) { return http.StatusOK, nil },
			})
			t.Cleanup(func() { _ = g.Close() })
			return signedScheme(seckilltest.GatewayUnderTest{
				Gateway: wrap(g, clock),
				Settle: func(t *testing.T, id string) {
					if err := g.Settle(id); err != nil {
						t.Fatal(err)
					}
				},
				Refunds: func(*testing.T, string) int { return int(g.Stats().Refunds) },
				TryPay:  func(id string) bool { return g.Settle(id) == nil },
			})
		},
		NewService: func(t *testing.T, clock seckill.Clock, payments seckill.Payments) (*service.Service, seckill.OrderStore) {
			return servicetest.NewWithStore(t, clock, payments)
		},
	})
}

// TestGatewayWebhook runs the gateway suite on the built-in scheme. Seckill does not start
// payments there (the shop's service does), so the suite's payments are started by a mock
// standing in for that service, and their notifications go to the webhook gateway.
func TestGatewayWebhook(t *testing.T) {
	noProvider := "the shop's payment service keeps the payment's state; seckill has no API to call (docs/PAYMENTS.md)"
	seckilltest.TestGateway(t, seckilltest.GatewayHarness{
		Open: func(t *testing.T, clock *seckilltest.ManualClock) seckilltest.GatewayUnderTest {
			shop := payment.NewMockGateway(payment.MockConfig{
				Secret: []byte(gwSecret), Clock: clock,
				Delay:   func(seckill.Reservation) time.Duration { return time.Hour },
				Deliver: func(context.Context, []byte, string) (int, error) { return http.StatusOK, nil },
			})
			t.Cleanup(func() { _ = shop.Close() })
			return signedScheme(seckilltest.GatewayUnderTest{Gateway: shopStarted{payment.NewWebhookGateway([]byte(gwSecret)), shop}})
		},
		NewService: func(t *testing.T, clock seckill.Clock, payments seckill.Payments) (*service.Service, seckill.OrderStore) {
			return servicetest.NewWithStore(t, clock, payments)
		},
		Skip: map[string]string{
			"Close/ThenClosed": noProvider, "Close/AfterSuccess": noProvider,
			"Refund/Once":                   "refunds are paid by hand: Refund answers failed (TestWebhookGatewayNoAPI)",
			"Service/ClosedWhenHoldExpires": noProvider, "Service/ClosedWhenHoldCancelled": noProvider,
		},
	})
}

// shopStarted is the webhook gateway with payments started by the shop's service (a mock):
// every other method is the webhook gateway's.
type shopStarted struct {
	*payment.WebhookGateway
	shop *payment.MockGateway
}

func (s shopStarted) Start(ctx context.Context, req payment.StartRequest) (seckill.PaymentIntent, error) {
	return s.shop.Start(ctx, req)
}

// TestWebhookGatewayNoAPI pins what the built-in gateway answers where it has no provider API:
// Start is unavailable (so /pay answers 503), Close does nothing and succeeds, Refund is failed
// (an operator pays it back), State is unknown.
func TestWebhookGatewayNoAPI(t *testing.T) {
	ctx := context.Background()
	g := payment.NewWebhookGateway([]byte(gwSecret))
	if g.Name() != "webhook" {
		t.Fatalf("name %q", g.Name())
	}
	if _, err := g.Start(ctx, payment.StartRequest{ReservationID: "r1", IdempotencyKey: "r1"}); seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("Start: %v, want unavailable", err)
	}
	if err := g.ClosePayment(ctx, "pay_1"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if rr, err := g.Refund(ctx, payment.RefundRequest{PaymentID: "pay_1", AmountCents: 100}); err != nil || rr.Status != payment.RefundFailed {
		t.Fatalf("Refund: %+v %v, want failed", rr, err)
	}
	if st, err := g.State(ctx, "pay_1"); err != nil || st != payment.StateUnknown {
		t.Fatalf("State: %q %v", st, err)
	}
	svc := servicetest.New(t, seckill.SystemClock{}, payment.ForService(g))
	price, stock := int64(100), 1
	if _, err := svc.CreateSale(ctx, seckill.SaleInput{ID: "s", Name: "s", PriceCents: &price, Stock: &stock}); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: "u", Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Pay(ctx, res.Reservation.ID, "u"); seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("Pay through the webhook gateway: %v, want unavailable", err)
	}
}
