package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/payment"
)

// fakeGateway is a gateway named "fake" whose notifications are a tiny JSON body
// {"outcome","payment_id","reservation_id","amount_cents"}, "signed" by a header
// Fake-Signature: ok. Every method but Parse counts as a call the webhook handler must not
// make.
type fakeGateway struct {
	parses, others atomic.Int64
}

func (f *fakeGateway) Name() string { return "fake" }

func (f *fakeGateway) Start(context.Context, payment.StartRequest) (seckill.PaymentIntent, error) {
	f.others.Add(1)
	return seckill.PaymentIntent{}, nil
}

func (f *fakeGateway) Parse(h http.Header, body []byte, _ time.Time) (payment.Notification, error) {
	f.parses.Add(1)
	if h.Get("Fake-Signature") != "ok" {
		return payment.Notification{}, seckill.Errorf(seckill.CodeInvalidSignature, "fake: not signed")
	}
	var in struct {
		Outcome       payment.Outcome `json:"outcome"`
		PaymentID     string          `json:"payment_id"`
		ReservationID string          `json:"reservation_id"`
		AmountCents   int64           `json:"amount_cents"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return payment.Notification{}, seckill.Errorf(seckill.CodeInvalidArgument, "fake: bad body")
	}
	return payment.Notification{Outcome: in.Outcome, PaymentID: in.PaymentID, ReservationID: in.ReservationID, AmountCents: in.AmountCents}, nil
}

func (f *fakeGateway) ClosePayment(context.Context, string) error { f.others.Add(1); return nil }

func (f *fakeGateway) Refund(context.Context, payment.RefundRequest) (payment.RefundResult, error) {
	f.others.Add(1)
	return payment.RefundResult{}, nil
}

func (f *fakeGateway) State(context.Context, string) (payment.State, error) {
	f.others.Add(1)
	return payment.StateUnknown, nil
}

func fakeBody(o payment.Outcome, paymentID string, r seckill.Reservation) map[string]any {
	return map[string]any{"outcome": o, "payment_id": paymentID, "reservation_id": r.ID, "amount_cents": r.AmountCents}
}

func resultOf(t *testing.T, r response) seckill.PaymentResult {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	var got struct{ Result seckill.PaymentResult }
	r.decode(t, &got)
	return got.Result
}

// TestGatewayWebhookRoute: each configured gateway gets its notifications at
// /api/v1/payments/webhook/{name}, verified and parsed by that gateway alone (the handler calls
// nothing but Parse): succeeded is applied (then duplicate), cancelled and ignored events change
// nothing and answer "ignored", a refused notification is the gateway's error and changes
// nothing, and a name that is not configured is 404.
func TestGatewayWebhookRoute(t *testing.T) {
	t.Parallel()
	fake := &fakeGateway{}
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.Gateways = []payment.Gateway{fake} }))
	e.createSale(t, "s1", nil)
	res := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	const url = "/api/v1/payments/webhook/fake"
	sig := []string{"Fake-Signature", "ok"}

	for _, o := range []payment.Outcome{payment.OutcomeCancelled, payment.OutcomeIgnored, payment.OutcomeFailed} {
		e.unchanged(t, func() {
			if got := resultOf(t, e.do(t, "POST", url, "", fakeBody(o, "pay_f1", res), sig...)); got != seckill.PaymentIgnored {
				t.Fatalf("%s notification: result %q, want ignored", o, got)
			}
		})
	}
	e.refused(t, http.StatusUnauthorized, seckill.CodeInvalidSignature, func() response {
		return e.do(t, "POST", url, "", fakeBody(payment.OutcomeSucceeded, "pay_f1", res))
	})
	e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
		return e.do(t, "POST", url, "", []byte(`{"outcome":`), sig...)
	})
	if got := resultOf(t, e.do(t, "POST", url, "", fakeBody(payment.OutcomeSucceeded, "pay_f1", res), sig...)); got != seckill.PaymentApplied {
		t.Fatalf("succeeded notification: %q, want applied", got)
	}
	if e.status(t, "alice", res.ID) != seckill.StatusPaid {
		t.Fatal("the applied payment did not make the reservation paid")
	}
	if got := resultOf(t, e.do(t, "POST", url, "", fakeBody(payment.OutcomeSucceeded, "pay_f1", res), sig...)); got != seckill.PaymentDuplicate {
		t.Fatalf("the same notification again: %q, want duplicate", got)
	}
	// The built-in scheme's notification is not the fake gateway's: refused by its Parse.
	body, _ := json.Marshal(succeeded("pay_f2", res))
	e.refused(t, http.StatusUnauthorized, seckill.CodeInvalidSignature, func() response {
		return e.do(t, "POST", url, "", body, payment.SignatureHeader, payment.Sign([]byte(paySecret), e.clock.Now(), body))
	})
	for _, name := range []string{"stripe", "mock", "Fake", "nope"} {
		before := fake.parses.Load()
		e.refused(t, http.StatusNotFound, seckill.CodeNotFound, func() response {
			return e.do(t, "POST", "/api/v1/payments/webhook/"+name, "", fakeBody(payment.OutcomeSucceeded, "pay_f3", res), sig...)
		})
		if fake.parses.Load() != before {
			t.Fatalf("a notification for %q reached the fake gateway", name)
		}
	}
	if n := fake.others.Load(); n != 0 {
		t.Fatalf("the webhook handler called the gateway's other methods %d times; it may only Parse", n)
	}
}

// TestGatewayWebhookBuiltIn: the built-in scheme is served at /api/v1/payments/webhook/webhook
// and at its original route, by the same code path: a payment applied at one is a duplicate at
// the other, and both refuse what the scheme refuses.
func TestGatewayWebhookBuiltIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", nil)
	res := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	intent := e.pay(t, "alice", res.ID)
	body, _ := json.Marshal(succeeded(intent.PaymentID, res))
	send := func(url string, secret string) response {
		return e.do(t, "POST", url, "", body, payment.SignatureHeader, payment.Sign([]byte(secret), e.clock.Now(), body))
	}
	e.refused(t, http.StatusUnauthorized, seckill.CodeInvalidSignature, func() response {
		return send("/api/v1/payments/webhook/webhook", "not-the-payment-secret")
	})
	if got := resultOf(t, send("/api/v1/payments/webhook/webhook", paySecret)); got != seckill.PaymentApplied {
		t.Fatalf("at /webhook/webhook: %q, want applied", got)
	}
	if got := resultOf(t, send(webhookURL, paySecret)); got != seckill.PaymentDuplicate {
		t.Fatalf("then at the original route: %q, want duplicate", got)
	}
}

// TestGatewayWebhookBodyBound: the per-gateway route reads at most 64 KiB, like every body.
func TestGatewayWebhookBodyBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := `{"payment_id":"` + strings.Repeat("p", httpapi.MaxBody) + `"}`
	e.refused(t, http.StatusRequestEntityTooLarge, seckill.CodeTooLarge, func() response {
		return e.do(t, "POST", "/api/v1/payments/webhook/webhook", "", []byte(big), payment.SignatureHeader, "t=1,v1=00")
	})
}

// TestGatewayWebhookBuiltInOff: without PaymentSecret the built-in scheme is not configured:
// both of its routes answer 404 not_found and change nothing, while the configured gateway
// still takes its own notifications.
func TestGatewayWebhookBuiltInOff(t *testing.T) {
	t.Parallel()
	fake := &fakeGateway{}
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.PaymentSecret, c.Gateways = nil, []payment.Gateway{fake} }))
	e.createSale(t, "s1", nil)
	res := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	body, _ := json.Marshal(succeeded("pay_b1", res))
	for _, url := range []string{webhookURL, "/api/v1/payments/webhook/webhook"} {
		for _, secret := range []string{paySecret, ""} {
			e.refused(t, http.StatusNotFound, seckill.CodeNotFound, func() response {
				return e.do(t, "POST", url, "", body, payment.SignatureHeader, payment.Sign([]byte(secret), e.clock.Now(), body))
			})
		}
	}
	if got := resultOf(t, e.do(t, "POST", "/api/v1/payments/webhook/fake", "", fakeBody(payment.OutcomeSucceeded, "pay_f1", res), "Fake-Signature", "ok")); got != seckill.PaymentApplied {
		t.Fatalf("the configured gateway's notification: %q, want applied", got)
	}
}
