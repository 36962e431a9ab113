package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/service"
)

// TestWebhookSignature: unsigned, wrongly signed, tampered, stale and future deliveries are all
// 401 invalid_signature and change nothing, though the body is a perfectly good payment.
func TestWebhookSignature(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", nil)
	res := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	intent := e.pay(t, "alice", res.ID)
	body, _ := json.Marshal(succeeded(intent.PaymentID, res))
	now := e.clock.Now()
	sign := func(secret string, at time.Time, b []byte) string { return payment.Sign([]byte(secret), at, b) }
	tampered := bytes.Replace(body, []byte(`"amount_cents":1000`), []byte(`"amount_cents":1`), 1)
	cases := map[string]struct {
		body []byte
		sig  string
	}{
		"unsigned":         {body, ""},
		"wrong secret":     {body, sign("not-the-secret", now, body)},
		"stale (-6 min)":   {body, sign(paySecret, now.Add(-6*time.Minute), body)},
		"future (+6 min)":  {body, sign(paySecret, now.Add(6*time.Minute), body)},
		"tampered body":    {tampered, sign(paySecret, now, body)},
		"timestamp moved":  {body, strings.Replace(sign(paySecret, now, body), "t=", "t=1", 1)},
		"no v1":            {body, "t=" + strings.Split(sign(paySecret, now, body), ",")[0][2:]},
		"garbage":          {body, "garbage"},
		"v1 upper-case":    {body, strings.ToUpper(sign(paySecret, now, body))},
		"signed for empty": {body, sign(paySecret, now, nil)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e.refused(t, http.StatusUnauthorized, seckill.CodeInvalidSignature, func() response { return e.webhookRaw(t, c.body, c.sig) })
		})
	}
	// Within the tolerance either way it is accepted.
	r := e.webhookRaw(t, body, sign(paySecret, now.Add(-4*time.Minute), body))
	wantStatus(t, r, http.StatusOK)
	if e.status(t, "alice", res.ID) != seckill.StatusPaid {
		t.Fatalf("payment signed 4 minutes ago was not applied: %s", r.Body)
	}
}

// TestWebhookResults walks through every result of docs/API.md's payment webhook: applied, duplicate (applied
// once), refund_required for a wrong amount / unknown reservation / second payment id,
// ignored for a failed payment, and checks /orders lists exactly one entry per succeeded
// payment.
func TestWebhookResults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 3, "price_cents": 2500})
	a := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	b := e.mustBuy(t, "bob", "s1", http.StatusCreated)
	pa := e.pay(t, "alice", a.ID).PaymentID
	pb := e.pay(t, "bob", b.ID).PaymentID

	// A failed payment is ignored: nothing changes and nothing is recorded.
	e.unchanged(t, func() {
		e.wantResult(t, payment.Event{PaymentID: pa, ReservationID: a.ID, AmountCents: 2500, Status: payment.StatusFailed}, seckill.PaymentIgnored)
	})

	// Wrong amount: refund_required, the hold stays a hold, and the refund is listed.
	wrong := succeeded("pay_wrong_amount", b)
	wrong.AmountCents = 1
	e.wantResult(t, wrong, seckill.PaymentRefundRequired)
	if got := e.status(t, "bob", b.ID); got != seckill.StatusHeld {
		t.Fatalf("after a wrong amount bob's reservation is %s, want held", got)
	}
	e.wantStock(t, "s1", seckill.StockState{Sellable: 3, Available: 1, Held: 2})

	// Applied, then the same payment again (as gateways do, re-signed later) is a duplicate.
	e.wantResult(t, succeeded(pa, a), seckill.PaymentApplied)
	e.wantStock(t, "s1", seckill.StockState{Sellable: 3, Available: 1, Held: 1, Sold: 1})
	e.unchanged(t, func() {
		e.wantResult(t, succeeded(pa, a), seckill.PaymentDuplicate)
		e.clock.Advance(time.Second)
		e.wantResult(t, succeeded(pa, a), seckill.PaymentDuplicate)
		// Even a failed report of the same payment changes nothing.
		e.wantResult(t, payment.Event{PaymentID: pa, ReservationID: a.ID, AmountCents: 2500, Status: payment.StatusFailed}, seckill.PaymentIgnored)
	})

	// A second payment id for a paid reservation: refund_required, it stays paid.
	e.wantResult(t, succeeded("pay_second", a), seckill.PaymentRefundRequired)
	if got := e.status(t, "alice", a.ID); got != seckill.StatusPaid {
		t.Fatalf("alice's reservation is %s after a second payment", got)
	}

	// Bob's real payment still applies after his wrong-amount one.
	e.wantResult(t, succeeded(pb, b), seckill.PaymentApplied)

	// Unknown reservation ids: refund_required (recorded, owed to nobody we know).
	e.wantResult(t, payment.Event{PaymentID: "pay_unknown", ReservationID: "s1-" + strings.Repeat("0", 32), AmountCents: 2500, Status: payment.StatusSucceeded}, seckill.PaymentRefundRequired)
	e.wantResult(t, payment.Event{PaymentID: "pay_garbage", ReservationID: "garbage", AmountCents: 0, Status: payment.StatusSucceeded}, seckill.PaymentRefundRequired)
	e.wantStock(t, "s1", seckill.StockState{Sellable: 3, Available: 1, Sold: 2})

	wantOrders(t, e, "alice", map[string]seckill.ReservationStatus{pa: seckill.StatusPaid, "pay_second": seckill.StatusRefundRequired})
	wantOrders(t, e, "bob", map[string]seckill.ReservationStatus{pb: seckill.StatusPaid, "pay_wrong_amount": seckill.StatusRefundRequired})
	wantOrders(t, e, "carol", map[string]seckill.ReservationStatus{})
}

// wantOrders fails unless user's /orders holds exactly one entry per payment id in want, with
// that status.
func wantOrders(t *testing.T, e *env, user string, want map[string]seckill.ReservationStatus) {
	t.Helper()
	got := e.orders(t, user)
	if len(got) != len(want) {
		t.Fatalf("orders of %s: %+v, want %d entries %v", user, got, len(want), want)
	}
	for _, o := range got {
		if st, ok := want[o.PaymentID]; !ok || st != o.Status || o.UserID != user {
			t.Fatalf("orders of %s: unexpected %+v (want %v)", user, o, want)
		}
	}
}

// TestWebhookLatePayments: a payment for a hold that expired is late_applied when a unit is
// free, and refund_required when the unit went to someone else or the sale has ended.
func TestWebhookLatePayments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "free", map[string]any{"stock": 2, "hold_seconds": 30})
	e.createSale(t, "taken", map[string]any{"stock": 1, "hold_seconds": 30})
	e.createSale(t, "ended", map[string]any{"stock": 2, "hold_seconds": 30, "ends_at": t0.Add(time.Minute)})

	late := e.mustBuy(t, "alice", "free", http.StatusCreated)
	lost := e.mustBuy(t, "alice", "taken", http.StatusCreated)
	over := e.mustBuy(t, "alice", "ended", http.StatusCreated)
	pLate, pLost, pOver := e.pay(t, "alice", late.ID).PaymentID, e.pay(t, "alice", lost.ID).PaymentID, e.pay(t, "alice", over.ID).PaymentID

	e.clock.Advance(30 * time.Second) // every hold lapses
	if _, f := e.reservation(t, "alice", late.ID); f["status"] != "expired" || f["expires_at"] != nil {
		t.Fatalf("lapsed hold reads %v", f)
	}
	bob := e.mustBuy(t, "bob", "taken", http.StatusCreated) // bob takes the freed unit

	e.wantResult(t, succeeded(pLate, late), seckill.PaymentLateApplied)
	e.wantStock(t, "free", seckill.StockState{Sellable: 2, Available: 1, Sold: 1})
	if got := e.status(t, "alice", late.ID); got != seckill.StatusPaid {
		t.Fatalf("late-applied reservation is %s", got)
	}

	e.wantResult(t, succeeded(pLost, lost), seckill.PaymentRefundRequired)
	e.wantStock(t, "taken", seckill.StockState{Sellable: 1, Held: 1})
	if got := e.status(t, "alice", lost.ID); got != seckill.StatusRefundRequired {
		t.Fatalf("refunded reservation is %s", got)
	}
	if got := e.status(t, "bob", bob.ID); got != seckill.StatusHeld {
		t.Fatalf("bob's hold is %s after alice's late payment", got)
	}

	e.clock.Set(t0.Add(time.Minute)) // "ended" is over; its units are not resold
	e.wantResult(t, succeeded(pOver, over), seckill.PaymentRefundRequired)
	e.wantStock(t, "ended", seckill.StockState{Sellable: 2, Available: 2})

	wantOrders(t, e, "alice", map[string]seckill.ReservationStatus{
		pLate: seckill.StatusPaid, pLost: seckill.StatusRefundRequired, pOver: seckill.StatusRefundRequired,
	})
	// Replays of the refunds are duplicates and add no order.
	e.wantResult(t, succeeded(pLost, lost), seckill.PaymentDuplicate)
	e.wantResult(t, succeeded(pOver, over), seckill.PaymentDuplicate)
	if n := len(e.orders(t, "alice")); n != 3 {
		t.Fatalf("alice has %d orders after duplicates, want 3", n)
	}
}

// TestWebhookMalformedBody: a correctly signed body that is not a valid payment event is
// 400 invalid_argument; over 64 KiB it is 413 too_large (checked before the signature).
func TestWebhookMalformedBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", nil)
	res := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	bodies := []string{
		``, `{`, `[]`, `null`, `"x"`,
		`{"payment_id":"p","reservation_id":"` + res.ID + `","amount_cents":1000}`,
		`{"payment_id":"p","reservation_id":"` + res.ID + `","amount_cents":1000,"status":"maybe"}`,
		`{"payment_id":"","reservation_id":"` + res.ID + `","amount_cents":1000,"status":"succeeded"}`,
		`{"payment_id":"p","reservation_id":"` + res.ID + `","amount_cents":-1,"status":"succeeded"}`,
		`{"payment_id":"p","reservation_id":"` + res.ID + `","amount_cents":"1000","status":"succeeded"}`,
		`{"payment_id":"p","payment_id":"q","reservation_id":"` + res.ID + `","amount_cents":1000,"status":"succeeded"}`,
		`{"payment_id":"p","reservation_id":"` + res.ID + `","amount_cents":1000,"status":"succeeded"} {}`,
	}
	for _, b := range bodies {
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
			return e.webhookRaw(t, []byte(b), payment.Sign([]byte(paySecret), e.clock.Now(), []byte(b)))
		})
	}
	big := bytes.Repeat([]byte(" "), 1<<20)
	e.refused(t, http.StatusRequestEntityTooLarge, seckill.CodeTooLarge, func() response {
		return e.serve("POST", webhookURL, "", bytes.NewReader(big), payment.SignatureHeader, payment.Sign([]byte(paySecret), e.clock.Now(), big))
	})
}

// TestWebhookFromMockGateway runs the real mock gateway against the handler (no socket):
// pay, the gateway settles and delivers a signed webhook (sometimes twice), and the payment is
// applied once. The gateway signs with the same manual clock the server verifies with.
func TestWebhookFromMockGateway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withoutPayments())
	gw := payment.NewMockGateway(payment.MockConfig{
		Secret: []byte(paySecret), Clock: e.clock, DuplicateRate: 1,
		Delay:   func(seckill.Reservation) time.Duration { return 0 },
		Deliver: payment.DeliverToHandler(e.api.Handler(), webhookURL),
	})
	t.Cleanup(func() { _ = gw.Close() })
	svc := service.New(service.Config{
		Inventory: e.engine, Store: e.store, Payments: payment.ForService(gw), Clock: e.clock, AuthSecret: []byte(authSecret),
	})
	// A second server on the same engine and store, with the gateway: pay goes through it.
	api := httpapi.New(httpapi.Config{Service: svc, AuthSecret: []byte(authSecret), AdminToken: adminToken, PaymentSecret: []byte(paySecret), Clock: e.clock})
	e.createSale(t, "s1", map[string]any{"stock": 2})
	res := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	r := e.serveWith(api, "POST", "/api/v1/reservations/"+res.ID+"/pay", e.user(t, "alice"))
	wantStatus(t, r, http.StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gw.WaitIdle(ctx); err != nil {
		t.Fatalf("gateway: %v", err)
	}
	if st := gw.Stats(); st.Delivered != 2 || st.Duplicates != 1 || st.DeliveryFailures != 0 {
		t.Fatalf("gateway stats %+v, want 2 deliveries of which 1 duplicate", st)
	}
	if got := e.status(t, "alice", res.ID); got != seckill.StatusPaid {
		t.Fatalf("reservation is %s after the gateway's webhook", got)
	}
	e.wantStock(t, "s1", seckill.StockState{Sellable: 2, Available: 1, Sold: 1})
	if n := len(e.orders(t, "alice")); n != 1 {
		t.Fatalf("alice has %d orders, want 1", n)
	}
}

// serveWith runs one bodiless request through another server's handler.
func (e *env) serveWith(api *httpapi.Server, method, path, auth string) response {
	req, _ := http.NewRequest(method, path, nil)
	req.Header.Set("Authorization", auth)
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, req)
	return response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// TestWebhookQueuedAndRejected: a succeeded payment for a reservation that never held units
// (still queued, or rejected) cannot be honoured: refund_required, listed in /orders, and the
// reservation and the stock are left as they were.
func TestWebhookQueuedAndRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 1})
	a := e.mustBuy(t, "A", "s1", http.StatusCreated)
	b := e.mustBuy(t, "B", "s1", http.StatusAccepted)
	c := e.mustBuy(t, "C", "s1", http.StatusAccepted)
	e.wantResult(t, succeeded("pay_b", b), seckill.PaymentRefundRequired)
	wantQueued(t, e, "B", b.ID, 1)
	e.wantResult(t, succeeded(e.pay(t, "A", a.ID).PaymentID, a), seckill.PaymentApplied)
	wantGone(t, e, "C", c.ID, seckill.StatusRejected)
	e.wantResult(t, succeeded("pay_c", c), seckill.PaymentRefundRequired)
	wantGone(t, e, "C", c.ID, seckill.StatusRejected)
	e.wantStock(t, "s1", seckill.StockState{Sellable: 1, Sold: 1})
	wantOrders(t, e, "B", map[string]seckill.ReservationStatus{"pay_b": seckill.StatusRefundRequired})
	wantOrders(t, e, "C", map[string]seckill.ReservationStatus{"pay_c": seckill.StatusRefundRequired})
}

// TestWebhookRetryAfterStoreFailure: the database fails while a payment is recorded, after
// the engine has already marked the reservation paid. The webhook must not answer 2xx (so the
// gateway retries) and must not leak the internal error; the retry must end with the payment
// recorded exactly once (invariants 4 and 5 of docs/MODEL.md), which /orders and the audit show.
func TestWebhookRetryAfterStoreFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withFlakyStore())
	e.createSale(t, "s1", map[string]any{"stock": 1})
	res := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	pid := e.pay(t, "alice", res.ID).PaymentID

	e.flaky.failPayments.Store(1)
	r := e.webhook(t, succeeded(pid, res))
	// docs/API.md: a dependency that is down is 503 unavailable with Retry-After, and the
	// gateway retries.
	p := wantProblem(t, r, http.StatusServiceUnavailable, seckill.CodeUnavailable)
	if r.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if strings.Contains(p.Detail, "connection reset") {
		t.Fatalf("internal error leaked to the client: %q", p.Detail)
	}

	// The gateway's retry. The engine already has the payment; the database must get it now.
	e.wantResult(t, succeeded(pid, res), seckill.PaymentApplied)
	e.wantResult(t, succeeded(pid, res), seckill.PaymentDuplicate)
	e.drain(t)
	wantOrders(t, e, "alice", map[string]seckill.ReservationStatus{pid: seckill.StatusPaid})
	var a service.Audit
	e.do(t, "GET", "/api/v1/sales/s1/audit", admin(), nil).decode(t, &a)
	if !a.OK || a.Database.Sold != 1 || a.Engine.Sold != 1 {
		t.Fatalf("audit after the retry: %+v", a)
	}
}
