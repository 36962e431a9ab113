package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/service"
)

// TestRefundsVisible: a refund_required payment's refund shows on the buyer's order, in the
// audit, in /metrics and, once refund_failed, in the admin list GET /api/v1/refunds; bad
// parameters are 400 and the list is admin only.
func TestRefundsVisible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"price_cents": 500, "stock": 5})
	res := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	e.wantResult(t, succeeded("p1", res), seckill.PaymentApplied)
	e.wantResult(t, succeeded("p2", res), seckill.PaymentRefundRequired) // paid twice: one is owed back

	orders := e.orders(t, "alice")
	if len(orders) != 2 {
		t.Fatalf("orders %+v; want two", orders)
	}
	for _, o := range orders {
		want := seckill.RefundStatus("")
		if o.PaymentID == "p2" {
			want = seckill.RefundRequired
		}
		if o.RefundStatus != want {
			t.Fatalf("order %s: refund_status %q, want %q", o.PaymentID, o.RefundStatus, want)
		}
	}
	r := e.do(t, "GET", "/api/v1/orders", e.user(t, "alice"), nil)
	if !strings.Contains(string(r.Body), `"refund_status":"refund_required"`) || strings.Count(string(r.Body), "refund_status") != 1 {
		t.Fatalf("orders JSON %s: want refund_status on the refund_required order only", r.Body)
	}

	// A refunder of the gateway that took the money (the built-in route's) gives it up.
	claimed, err := e.store.ClaimRefunds(t.Context(), payment.WebhookName, "test", t0.Add(time.Minute), time.Minute, 10)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	if err := e.store.RecordRefund(t.Context(), seckill.RefundOutcome{PaymentID: "p2", Owner: "test",
		Status: seckill.RefundFailed, Error: "card closed", At: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r = e.do(t, "GET", "/api/v1/refunds", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	var list struct{ Refunds []seckill.Refund }
	r.decode(t, &list)
	if len(list.Refunds) != 1 || list.Refunds[0].PaymentID != "p2" || list.Refunds[0].Status != seckill.RefundFailed ||
		list.Refunds[0].LastError != "card closed" || list.Refunds[0].UserID != "alice" || list.Refunds[0].AmountCents != 500 ||
		list.Refunds[0].Gateway != payment.WebhookName {
		t.Fatalf("GET /api/v1/refunds = %s; want p2 refund_failed, taken by the built-in webhook route", r.Body)
	}
	r = e.do(t, "GET", "/api/v1/refunds?status=refunded&limit=5", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(string(r.Body), `"refunds":[]`) {
		t.Fatalf("refunded list = %s; want empty", r.Body)
	}
	for _, q := range []string{"?status=paid", "?limit=0", "?limit=1001", "?limit=x"} {
		wantProblem(t, e.do(t, "GET", "/api/v1/refunds"+q, admin(), nil), http.StatusBadRequest, seckill.CodeInvalidArgument)
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/refunds", "", nil), http.StatusUnauthorized, seckill.CodeUnauthorized)

	if o := e.orders(t, "alice"); o[0].RefundStatus+o[1].RefundStatus != seckill.RefundFailed {
		t.Fatalf("orders after the failure %+v", o)
	}
	var a service.Audit
	r = e.do(t, "GET", "/api/v1/sales/s1/audit", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &a)
	if d := a.Database; d.Refunds != 1 || d.RefundsFailed != 1 || d.RefundsRequired+d.RefundsPending+d.Refunded != 0 {
		t.Fatalf("audit database %+v; want one refund, refund_failed", d)
	}
	r = e.do(t, "GET", "/metrics", "", nil)
	for _, want := range []string{`seckill_refunds{status="refund_failed"} 1`, `seckill_refunds{status="refund_required"} 0`,
		"seckill_refund_oldest_open_age_seconds 0"} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
