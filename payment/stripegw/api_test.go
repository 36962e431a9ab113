package stripegw

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/payment/stripegw/stripetest"
)

// fakeStripe serves canned Stripe JSON by "METHOD path" and records every request, so that the
// tests see both what the gateway sends and what it makes of answers stripe-mock never gives
// (a complete session, an already refunded charge, a 404).
type fakeStripe struct {
	mu       sync.Mutex
	routes   map[string]fakeReply
	requests []fakeRequest
}

type fakeReply struct {
	status int
	body   string
}

type fakeRequest struct {
	route          string
	form           map[string]string
	idempotencyKey string
}

func newFake(t *testing.T, routes map[string]fakeReply) (*fakeStripe, *Gateway) {
	t.Helper()
	f := &fakeStripe{routes: routes}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	g, err := New(Config{SecretKey: "sk_test_123", WebhookSecret: testWebhookSecret, APIURL: srv.URL,
		SuccessURL: "https://shop.example/", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return f, g
}

func (f *fakeStripe) serve(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	form := map[string]string{}
	for k, v := range r.PostForm {
		form[k] = v[0]
	}
	route := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.requests = append(f.requests, fakeRequest{route: route, form: form, idempotencyKey: r.Header.Get("Idempotency-Key")})
	reply, ok := f.routes[route]
	f.mu.Unlock()
	if !ok {
		reply = fakeReply{404, `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such object"}}`}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.status)
	_, _ = w.Write([]byte(reply.body))
}

func (f *fakeStripe) calls() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.requests...)
}

func session(status, paymentStatus, paymentIntent string) fakeReply {
	pi := "null"
	if paymentIntent != "" {
		pi = strconv.Quote(paymentIntent)
	}
	return fakeReply{200, `{"id":"cs_1","object":"checkout.session","status":"` + status + `","payment_status":"` + paymentStatus +
		`","payment_intent":` + pi + `,"url":"https://checkout.stripe.com/c/pay/cs_1"}`}
}

var badRequest = fakeReply{400, `{"error":{"type":"invalid_request_error","message":"This Checkout Session is not in an expirable state"}}`}

func TestStartSendsOneSessionPerHold(t *testing.T) {
	f, g := newFake(t, map[string]fakeReply{"POST /v1/checkout/sessions": session("open", "unpaid", "")})
	hold := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	intent, err := g.Start(context.Background(), payment.StartRequest{ReservationID: "r-1", UserID: "u-1",
		AmountCents: 1999, ExpiresAt: hold, IdempotencyKey: "r-1", SaleID: "phone-1", SaleName: "Phone X",
		HeldAt: hold.Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if intent.PaymentID != "cs_1" || intent.RedirectURL != "https://checkout.stripe.com/c/pay/cs_1" {
		t.Fatalf("intent %+v", intent)
	}
	calls := f.calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	c := calls[0]
	want := map[string]string{
		"mode":                                   "payment",
		"client_reference_id":                    "r-1",
		"metadata[reservation_id]":               "r-1",
		"metadata[user_id]":                      "u-1",
		"metadata[seckill]":                      "seckill",
		"line_items[0][quantity]":                "1",
		"line_items[0][price_data][currency]":    "usd",
		"line_items[0][price_data][unit_amount]": "1999",
		"success_url":                            "https://shop.example/#/sale/phone-1", // the sale's page in the storefront
		"cancel_url":                             "https://shop.example/#/sale/phone-1",
		"expires_at":                             strconv.FormatInt(hold.Add(31*time.Minute).Unix(), 10),
		"line_items[0][price_data][product_data][name]": "Phone X", // the sale's name
	}
	for k, v := range want {
		if c.form[k] != v {
			t.Errorf("%s = %q, want %q", k, c.form[k], v)
		}
	}
	if c.idempotencyKey != "r-1" {
		t.Errorf("idempotency key %q, want r-1", c.idempotencyKey)
	}
}

func TestClosePayment(t *testing.T) {
	const expire, get = "POST /v1/checkout/sessions/cs_1/expire", "GET /v1/checkout/sessions/cs_1"
	cases := []struct {
		name   string
		routes map[string]fakeReply
		want   error // nil, ErrAlreadyPaid, or errAny
	}{
		{"expired now", map[string]fakeReply{expire: session("expired", "unpaid", "")}, nil},
		{"expired before", map[string]fakeReply{expire: badRequest, get: session("expired", "unpaid", "")}, nil},
		{"paid before", map[string]fakeReply{expire: badRequest, get: session("complete", "paid", "pi_1")}, payment.ErrAlreadyPaid},
		{"still open", map[string]fakeReply{expire: badRequest, get: session("open", "unpaid", "")}, errAny},
		{"unknown session", map[string]fakeReply{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, g := newFake(t, c.routes)
			err := g.ClosePayment(context.Background(), "cs_1")
			switch {
			case c.want == errAny && err == nil:
				t.Fatal("Close of a session still open returned nil")
			case c.want != errAny && !errors.Is(err, c.want) && err != c.want:
				t.Fatalf("Close = %v, want %v", err, c.want)
			}
			if calls := f.calls(); calls[0].route != expire || calls[0].idempotencyKey != "close-cs_1" {
				t.Fatalf("first call %+v, want %s with key close-cs_1", calls[0], expire)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestState(t *testing.T) {
	const get = "GET /v1/checkout/sessions/cs_1"
	refunded := fakeReply{200, `{"id":"cs_1","object":"checkout.session","status":"complete","payment_status":"paid",` +
		`"payment_intent":{"id":"pi_1","object":"payment_intent","latest_charge":{"id":"ch_1","object":"charge","refunded":true}}}`}
	cases := []struct {
		name  string
		reply *fakeReply
		want  payment.State
	}{
		{"open", &[]fakeReply{session("open", "unpaid", "")}[0], payment.StateOpen},
		{"paid", &[]fakeReply{session("complete", "paid", "pi_1")}[0], payment.StateSucceeded},
		{"async pending", &[]fakeReply{session("complete", "unpaid", "pi_1")}[0], payment.StateOpen},
		{"expired", &[]fakeReply{session("expired", "unpaid", "")}[0], payment.StateClosed},
		{"refunded", &refunded, payment.StateRefunded},
		{"unknown", nil, payment.StateUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			routes := map[string]fakeReply{}
			if c.reply != nil {
				routes[get] = *c.reply
			}
			_, g := newFake(t, routes)
			got, err := g.State(context.Background(), "cs_1")
			if err != nil || got != c.want {
				t.Fatalf("State = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestRefund(t *testing.T) {
	const get, create = "GET /v1/checkout/sessions/cs_1", "POST /v1/refunds"
	refund := func(status string) fakeReply {
		return fakeReply{200, `{"id":"re_1","object":"refund","status":"` + status + `","amount":1999}`}
	}
	cases := []struct {
		name   string
		routes map[string]fakeReply
		want   payment.RefundStatus
		sent   bool // whether a refund was created
	}{
		{"succeeded", map[string]fakeReply{get: session("complete", "paid", "pi_1"), create: refund("succeeded")}, payment.RefundSucceeded, true},
		{"pending", map[string]fakeReply{get: session("complete", "paid", "pi_1"), create: refund("pending")}, payment.RefundPending, true},
		{"requires action", map[string]fakeReply{get: session("complete", "paid", "pi_1"), create: refund("requires_action")}, payment.RefundPending, true},
		{"failed", map[string]fakeReply{get: session("complete", "paid", "pi_1"), create: refund("failed")}, payment.RefundFailed, true},
		{"already refunded", map[string]fakeReply{get: session("complete", "paid", "pi_1"), create: {400,
			`{"error":{"type":"invalid_request_error","code":"charge_already_refunded","message":"Charge ch_1 has already been refunded."}}`}},
			payment.RefundSucceeded, true},
		{"refused", map[string]fakeReply{get: session("complete", "paid", "pi_1"), create: {400,
			`{"error":{"type":"invalid_request_error","code":"amount_too_large","message":"Refund amount is greater than unrefunded amount"}}`}},
			payment.RefundFailed, true},
		{"never paid", map[string]fakeReply{get: session("expired", "unpaid", "")}, payment.RefundFailed, false},
		{"unknown session", map[string]fakeReply{}, payment.RefundFailed, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, g := newFake(t, c.routes)
			res, err := g.Refund(context.Background(), payment.RefundRequest{PaymentID: "cs_1", AmountCents: 1999})
			if err != nil || res.Status != c.want {
				t.Fatalf("Refund = %+v, %v; want %s", res, err, c.want)
			}
			var sent []fakeRequest
			for _, r := range f.calls() {
				if r.route == create {
					sent = append(sent, r)
				}
			}
			if !c.sent {
				if len(sent) != 0 {
					t.Fatalf("a refund was sent: %+v", sent)
				}
				return
			}
			if len(sent) != 1 {
				t.Fatalf("%d refunds sent", len(sent))
			}
			r := sent[0]
			if r.idempotencyKey != "refund-cs_1" || r.form["payment_intent"] != "pi_1" || r.form["amount"] != "1999" {
				t.Fatalf("refund request %+v", r)
			}
		})
	}
}

// A Stripe outage is an error to retry, never a verdict: not RefundFailed, not StateUnknown.
func TestOutageIsAnError(t *testing.T) {
	down := fakeReply{400, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}}`}
	f, g := newFake(t, map[string]fakeReply{"GET /v1/checkout/sessions/cs_1": session("complete", "paid", "pi_1"), "POST /v1/refunds": down})
	if res, err := g.Refund(context.Background(), payment.RefundRequest{PaymentID: "cs_1", AmountCents: 1}); err == nil {
		t.Fatalf("Refund = %+v, nil after an idempotency clash", res)
	}
	_ = f
	f.mu.Lock()
	f.routes["GET /v1/checkout/sessions/cs_1"] = fakeReply{401, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided"}}`}
	f.mu.Unlock()
	if st, err := g.State(context.Background(), "cs_1"); err == nil {
		t.Fatalf("State = %q, nil with a refused key", st)
	}
}

// A Start retried later (a lost answer, another instance) sends the same parameters, so Stripe
// replays the first session instead of refusing the reused idempotency key; an expires_at
// computed from the time of the call (max(hold, now + 30 min), or a cap of now + 24 h for a long
// hold) would be refused. The retry is made in a later second than the first call (the
// parameters are whole seconds), with holds short and longer than Stripe's 24 hours (issue 26:
// a hold over ~23.5 h made /pay fail on retry).
func TestStartRetriedLaterIsTheSameSession(t *testing.T) {
	api := stripetest.NewServer("") // keeps sessions and idempotency keys as Stripe does
	defer api.Close()
	g, err := New(Config{SecretKey: "sk_test_123", WebhookSecret: testWebhookSecret, APIURL: api.URL, SuccessURL: "https://shop.example/"})
	if err != nil {
		t.Fatal(err)
	}
	heldAt := time.Now().Truncate(time.Second)
	var reqs []payment.StartRequest
	for i, hold := range []time.Duration{time.Minute, 23 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour} {
		rid := "r-" + strconv.Itoa(i)
		reqs = append(reqs, payment.StartRequest{ReservationID: rid, AmountCents: 100, HeldAt: heldAt,
			ExpiresAt: heldAt.Add(hold), IdempotencyKey: rid, SaleID: "s", SaleName: "Phone"})
	}
	first := make([]string, len(reqs))
	for i, req := range reqs {
		intent, err := g.Start(context.Background(), req)
		if err != nil {
			t.Fatalf("Start of a %s hold: %v", req.ExpiresAt.Sub(heldAt), err)
		}
		first[i] = intent.PaymentID
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond))) // into the next second
	for i, req := range reqs {
		again, err := g.Start(context.Background(), req)
		if err != nil {
			t.Fatalf("Start of a %s hold retried a second later: %v", req.ExpiresAt.Sub(heldAt), err)
		}
		if again.PaymentID != first[i] {
			t.Fatalf("retried Start of a %s hold made session %s, then %s", req.ExpiresAt.Sub(heldAt), first[i], again.PaymentID)
		}
	}
}

// The line item names the sale, else the configured product name, else the reservation; the
// buyer comes back to the sale's page (the storefront's #/sale/<id>), or to the storefront
// when no sale is named (issue 26: "Reservation phone-0000…" and the storefront root).
func TestStartNamesTheSaleAndReturnsToItsPage(t *testing.T) {
	cases := []struct {
		name, productName, saleName, saleID, success, cancel, cancelURL, want string
	}{
		{"named sale", "", "Phone X", "phone", "https://shop.example/#/sale/phone", "https://shop.example/#/sale/phone", "", "Phone X"},
		{"blank name", "", "  ", "phone", "https://shop.example/#/sale/phone", "https://shop.example/#/sale/phone", "", "Reservation r-1"},
		{"configured name", "Flash deal", "", "phone", "https://shop.example/#/sale/phone", "https://shop.example/#/sale/phone", "", "Flash deal"},
		{"no sale", "", "", "", "https://shop.example/", "https://shop.example/", "", "Reservation r-1"},
		{"own cancel page", "", "Lamp", "lamp", "https://shop.example/#/sale/lamp", "https://shop.example/store?x=1#/sale/lamp", "https://shop.example/store?x=1#top", "Lamp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeStripe{routes: map[string]fakeReply{"POST /v1/checkout/sessions": session("open", "unpaid", "")}}
			srv := httptest.NewServer(http.HandlerFunc(f.serve))
			defer srv.Close()
			g, err := New(Config{SecretKey: "sk_test_123", WebhookSecret: testWebhookSecret, APIURL: srv.URL,
				SuccessURL: "https://shop.example/", CancelURL: c.cancelURL, ProductName: c.productName, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			hold := time.Unix(1_900_000_000, 0)
			if _, err := g.Start(context.Background(), payment.StartRequest{ReservationID: "r-1", AmountCents: 100,
				ExpiresAt: hold, IdempotencyKey: "r-1", SaleID: c.saleID, SaleName: c.saleName}); err != nil {
				t.Fatal(err)
			}
			form := f.calls()[0].form
			if got := form["line_items[0][price_data][product_data][name]"]; got != c.want {
				t.Errorf("line item %q, want %q", got, c.want)
			}
			if form["success_url"] != c.success || form["cancel_url"] != c.cancel {
				t.Errorf("success_url %q, cancel_url %q; want %q, %q", form["success_url"], form["cancel_url"], c.success, c.cancel)
			}
		})
	}
}
