package stripetest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/payment/stripegw"
)

// post sends a form as stripe-go does and decodes the answer.
func post(t *testing.T, s *Server, path, key string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return resp.StatusCode, out
}

func sessionForm(expiresAt time.Time) url.Values {
	return url.Values{
		"mode": {"payment"}, "client_reference_id": {"r-1"}, "metadata[reservation_id]": {"r-1"},
		"line_items[0][quantity]": {"1"}, "line_items[0][price_data][currency]": {"usd"},
		"line_items[0][price_data][unit_amount]": {"1999"}, "expires_at": {strconv.FormatInt(expiresAt.Unix(), 10)},
	}
}

// The stand-in holds the gateway to Stripe's rules: one session per idempotency key, a key
// reused with other parameters refused, expires_at within 30 min … 24 h, expire only an open
// session, refund at most what was paid.
func TestStandInKeepsStripesRules(t *testing.T) {
	s := NewServer("")
	defer s.Close()
	ok := time.Now().Add(40 * time.Minute)

	if code, out := post(t, s, "/v1/checkout/sessions", "k1", sessionForm(time.Now().Add(10*time.Minute))); code != 400 {
		t.Fatalf("expires_at in 10 min: %d %v, want 400", code, out)
	}
	code, first := post(t, s, "/v1/checkout/sessions", "k1", sessionForm(ok))
	if code != 200 || first["status"] != "open" || first["amount_total"] != float64(1999) {
		t.Fatalf("create: %d %v", code, first)
	}
	if _, again := post(t, s, "/v1/checkout/sessions", "k1", sessionForm(ok)); again["id"] != first["id"] {
		t.Fatalf("same key, same parameters: %v then %v", first["id"], again["id"])
	}
	if code, _ := post(t, s, "/v1/checkout/sessions", "k1", sessionForm(ok.Add(time.Second))); code != 400 {
		t.Fatalf("same key, other parameters: %d, want 400", code)
	}
	if _, other := post(t, s, "/v1/checkout/sessions", "k2", sessionForm(ok)); other["id"] == first["id"] {
		t.Fatal("two keys made one session")
	}

	id := first["id"].(string)
	if err := s.Settle(id); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, s, "/v1/checkout/sessions/"+id+"/expire", "", nil); code != 400 {
		t.Fatalf("expire a paid session: %d, want 400", code)
	}
	pi := url.Values{"payment_intent": {"pi_test_" + strings.TrimPrefix(id, "cs_test_")}, "amount": {"1999"}}
	if code, out := post(t, s, "/v1/refunds", "refund-1", pi); code != 200 || out["status"] != "succeeded" {
		t.Fatalf("refund: %d %v", code, out)
	}
	if code, out := post(t, s, "/v1/refunds", "refund-other-key", pi); code != 400 || out["error"].(map[string]any)["code"] != "charge_already_refunded" {
		t.Fatalf("second refund under another key: %d %v", code, out)
	}
	if n := s.Refunds(id); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}

// A rehearsal's stand-in plays Stripe for the gateway end to end: the session's url is its
// hosted page, where the buyer's "Pay" settles the session and sends them to success_url; the
// completed event, and the expired one of a session the gateway closes, reach the webhook
// target signed with its secret, verified by the Stripe gateway's own Parse; a target that
// fails at first is retried; a live key is refused.
func TestStandInPlaysStripeForTheGateway(t *testing.T) {
	const whsec = "whsec_rehearsal_0123456789"
	type got struct {
		n   payment.Notification
		err error
	}
	events := make(chan got, 8)
	var failFirst sync.Once
	var g *stripegw.Gateway
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fail := false
		failFirst.Do(func() { fail = true })
		if fail {
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		n, err := g.Parse(r.Header, body, time.Now())
		events <- got{n, err}
	}))
	defer target.Close()
	s, err := Start(Config{WebhookURL: target.URL + client.WebhookPath(stripegw.Name), WebhookSecret: whsec})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err = stripegw.New(stripegw.Config{SecretKey: "sk_test_x", WebhookSecret: whsec, APIURL: s.URL, SuccessURL: "http://shop.test/done"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	expires := time.Now().Add(time.Minute)
	intent, err := g.Start(ctx, payment.StartRequest{ReservationID: "r-1", UserID: "alice", AmountCents: 1999, ExpiresAt: expires, IdempotencyKey: "r-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(intent.RedirectURL, s.URL+PagePrefix) {
		t.Fatalf("redirect_url %q; want the stand-in's hosted page", intent.RedirectURL)
	}
	resp, err := http.Get(intent.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), ">Pay</button>") || !strings.Contains(string(page), "19.99 USD") {
		t.Fatalf("hosted page: %d\n%s", resp.StatusCode, page)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.PostForm(intent.RedirectURL, url.Values{"pay": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "http://shop.test/done" {
		t.Fatalf("pay: %d to %q; want 303 to the success URL", resp.StatusCode, resp.Header.Get("Location"))
	}
	if e := <-events; e.err != nil || e.n.Outcome != payment.OutcomeSucceeded || e.n.PaymentID != intent.PaymentID ||
		e.n.ReservationID != "r-1" || e.n.AmountCents != 1999 {
		t.Fatalf("completed event (after one refused delivery): %+v, %v", e.n, e.err)
	}
	if resp, _ := noRedirect.PostForm(intent.RedirectURL, nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("paying a complete session again: %d, want 409", resp.StatusCode)
	}

	other, err := g.Start(ctx, payment.StartRequest{ReservationID: "r-2", AmountCents: 500, ExpiresAt: expires, IdempotencyKey: "r-2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.ClosePayment(ctx, other.PaymentID); err != nil {
		t.Fatal(err)
	}
	if e := <-events; e.err != nil || e.n.Outcome != payment.OutcomeCancelled || e.n.PaymentID != other.PaymentID {
		t.Fatalf("expired event: %+v, %v", e.n, e.err)
	}

	live, err := stripegw.New(stripegw.Config{SecretKey: "sk_live_x", WebhookSecret: whsec, APIURL: s.URL, SuccessURL: "https://shop.test/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.Start(ctx, payment.StartRequest{ReservationID: "r-3", AmountCents: 500, ExpiresAt: expires}); err == nil ||
		!strings.Contains(err.Error(), "test keys") {
		t.Fatalf("a live key: %v; want refused", err)
	}
}
