package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/service"
)

// wantQueued fails unless the reservation is queued at pos, with no expires_at.
func wantQueued(t *testing.T, e *env, user, rid string, pos int) {
	t.Helper()
	res, f := e.reservation(t, user, rid)
	if res.Status != seckill.StatusQueued || res.Position != pos || f["expires_at"] != nil {
		t.Fatalf("%s's reservation = %v, want queued at %d without expires_at", user, f, pos)
	}
}

// wantHeld fails unless the reservation is held until until, with no position.
func wantHeld(t *testing.T, e *env, user, rid string, until time.Time) {
	t.Helper()
	res, f := e.reservation(t, user, rid)
	if res.Status != seckill.StatusHeld || res.ExpiresAt == nil || !res.ExpiresAt.Equal(until) || f["position"] != nil {
		t.Fatalf("%s's reservation = %v, want held until %s without position", user, f, until)
	}
}

// wantGone fails unless the reservation has status and neither expires_at nor position.
func wantGone(t *testing.T, e *env, user, rid string, status seckill.ReservationStatus) {
	t.Helper()
	res, f := e.reservation(t, user, rid)
	if res.Status != status || f["expires_at"] != nil || f["position"] != nil {
		t.Fatalf("%s's reservation = %v, want %s without expires_at or position", user, f, status)
	}
}

// TestFIFOOverHTTP follows one unit through a queue: A holds, B, C, D queue (1, 2, 3); A
// cancels → B is granted a fresh hold; B's hold lapses (read as expired, no expires_at) → C;
// C pays → the sale is sold out and D is rejected.
func TestFIFOOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 1, "hold_seconds": 30})
	a := e.mustBuy(t, "A", "s1", http.StatusCreated)
	b := e.mustBuy(t, "B", "s1", http.StatusAccepted)
	c := e.mustBuy(t, "C", "s1", http.StatusAccepted)
	d := e.mustBuy(t, "D", "s1", http.StatusAccepted)
	for i, r := range []seckill.Reservation{b, c, d} {
		if r.Position != i+1 {
			t.Fatalf("buyer %d queued at %d", i+2, r.Position)
		}
	}
	e.wantStock(t, "s1", seckill.StockState{Sellable: 1, Held: 1, Queued: 3})

	e.clock.Advance(10 * time.Second)
	wantStatus(t, e.do(t, "DELETE", "/api/v1/reservations/"+a.ID, e.user(t, "A"), nil), http.StatusOK)
	wantGone(t, e, "A", a.ID, seckill.StatusCancelled)
	wantHeld(t, e, "B", b.ID, e.clock.Now().Add(30*time.Second)) // the hold starts at the grant
	wantQueued(t, e, "C", c.ID, 1)
	wantQueued(t, e, "D", d.ID, 2)
	e.wantStock(t, "s1", seckill.StockState{Sellable: 1, Held: 1, Queued: 2})

	e.clock.Advance(30 * time.Second) // B's hold lapses exactly now
	wantGone(t, e, "B", b.ID, seckill.StatusExpired)
	wantHeld(t, e, "C", c.ID, e.clock.Now().Add(30*time.Second))
	wantQueued(t, e, "D", d.ID, 1)
	e.refused(t, http.StatusConflict, seckill.CodeHoldExpired, func() response {
		return e.do(t, "POST", "/api/v1/reservations/"+b.ID+"/pay", e.user(t, "B"), nil)
	})

	e.wantResult(t, succeeded(e.pay(t, "C", c.ID).PaymentID, c), seckill.PaymentApplied)
	wantGone(t, e, "C", c.ID, seckill.StatusPaid)
	wantGone(t, e, "D", d.ID, seckill.StatusRejected)
	e.wantStock(t, "s1", seckill.StockState{Sellable: 1, Sold: 1})
	if st := e.sale(t, "s1").Status; st != seckill.SaleSoldOut {
		t.Fatalf("sale status %s, want sold_out", st)
	}
	e.refused(t, http.StatusConflict, seckill.CodeSoldOut, func() response { return e.buy(t, "E", e.path(t, "E", "s1"), nil, "") })
}

// TestAdminStock: adding stock serves queued buyers first (in order), then new buyers; bad
// amounts are 400 and an unknown sale is 404, changing nothing.
func TestAdminStock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 1})
	e.mustBuy(t, "A", "s1", http.StatusCreated)
	b := e.mustBuy(t, "B", "s1", http.StatusAccepted)
	c := e.mustBuy(t, "C", "s1", http.StatusAccepted)
	add := func(id string, body any) response {
		return e.do(t, "POST", "/api/v1/sales/"+id+"/stock", admin(), body)
	}

	for _, body := range []any{nil, ``, `{}`, `{"add":0}`, `{"add":-1}`, `{"add":"1"}`, `{"add":1,"x":1}`, `{"add":1000000001}`} {
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response { return add("s1", body) })
	}
	e.refused(t, http.StatusNotFound, seckill.CodeNotFound, func() response { return add("nope", map[string]int{"add": 1}) })

	r := add("s1", map[string]int{"add": 1})
	wantStatus(t, r, http.StatusOK)
	var v service.SaleView
	r.decode(t, &v)
	if v.Stock != 2 || v.StockState != (seckill.StockState{Sellable: 2, Held: 2, Queued: 1}) {
		t.Fatalf("after adding a unit: %s", r.Body)
	}
	wantHeld(t, e, "B", b.ID, e.clock.Now().Add(60*time.Second))
	wantQueued(t, e, "C", c.ID, 1)
	// A newcomer queues behind C rather than taking the next unit.
	d := e.mustBuy(t, "D", "s1", http.StatusAccepted)
	if d.Position != 2 {
		t.Fatalf("newcomer at %d, want 2", d.Position)
	}
	wantStatus(t, add("s1", map[string]int{"add": 3}), http.StatusOK)
	wantHeld(t, e, "C", c.ID, e.clock.Now().Add(60*time.Second))
	wantHeld(t, e, "D", d.ID, e.clock.Now().Add(60*time.Second))
	e.wantStock(t, "s1", seckill.StockState{Sellable: 5, Available: 1, Held: 4})
	e.mustBuy(t, "E", "s1", http.StatusCreated)
}

// TestAdminClose: closing ends the sale now: the queue is rejected, buys and paths are 410,
// an open hold can still be paid until it lapses, and the unit it frees is not resold.
func TestAdminClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 2, "hold_seconds": 30})
	a := e.mustBuy(t, "A", "s1", http.StatusCreated)
	b := e.mustBuy(t, "B", "s1", http.StatusCreated)
	c := e.mustBuy(t, "C", "s1", http.StatusAccepted)
	cPath := e.path(t, "C", "s1")
	e.refused(t, http.StatusNotFound, seckill.CodeNotFound, func() response {
		return e.do(t, "POST", "/api/v1/sales/nope/close", admin(), nil)
	})

	e.clock.Advance(5 * time.Second)
	r := e.do(t, "POST", "/api/v1/sales/s1/close", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	var v service.SaleView
	r.decode(t, &v)
	if v.Status != seckill.SaleEnded || !v.EndsAt.Equal(e.clock.Now()) || v.StockState != (seckill.StockState{Sellable: 2, Held: 2}) {
		t.Fatalf("closed sale: %s", r.Body)
	}
	wantGone(t, e, "C", c.ID, seckill.StatusRejected)
	e.refused(t, http.StatusGone, seckill.CodeEnded, func() response { return e.buy(t, "C", cPath, nil, "") })
	e.refused(t, http.StatusGone, seckill.CodeEnded, func() response {
		return e.do(t, "GET", "/api/v1/sales/s1/path", e.user(t, "D"), nil)
	})
	// Closing again is harmless and does not move ends_at.
	e.clock.Advance(time.Second)
	r = e.do(t, "POST", "/api/v1/sales/s1/close", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	var again service.SaleView
	r.decode(t, &again)
	if !again.EndsAt.Equal(v.EndsAt) {
		t.Fatalf("second close moved ends_at from %s to %s", v.EndsAt, again.EndsAt)
	}

	e.wantResult(t, succeeded(e.pay(t, "A", a.ID).PaymentID, a), seckill.PaymentApplied)
	pb := e.pay(t, "B", b.ID).PaymentID
	e.clock.Advance(30 * time.Second)
	wantGone(t, e, "B", b.ID, seckill.StatusExpired)
	e.wantResult(t, succeeded(pb, b), seckill.PaymentRefundRequired)
	e.wantStock(t, "s1", seckill.StockState{Sellable: 2, Available: 1, Sold: 1})
	e.refused(t, http.StatusGone, seckill.CodeEnded, func() response { return e.buy(t, "C", cPath, nil, "") })
}

// TestAudit runs a mixed scenario (holds, queue, cancel, expiry with grant, payments applied,
// duplicated, late, refunded, a wrong amount, a restock and a close), waits for the event
// pipeline to drain, and expects the audit to find engine and database in agreement.
func TestAudit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 5, "holdback": 1, "per_user_limit": 2, "hold_seconds": 20, "price_cents": 700})
	audit := func() (a service.Audit) {
		t.Helper()
		r := e.do(t, "GET", "/api/v1/sales/s1/audit", admin(), nil)
		wantStatus(t, r, http.StatusOK)
		r.decode(t, &a)
		return a
	}
	e.refused(t, http.StatusNotFound, seckill.CodeNotFound, func() response {
		return e.do(t, "GET", "/api/v1/sales/nope/audit", admin(), nil)
	})

	var holds []seckill.Reservation
	for _, u := range []string{"u1", "u2", "u3"} {
		holds = append(holds, e.mustBuy(t, u, "s1", http.StatusCreated))
	}
	r := e.buy(t, "u4", e.path(t, "u4", "s1"), `{"quantity":2}`, "")
	wantStatus(t, r, http.StatusAccepted) // 1 free but the buyer wants 2: queued
	var q4 seckill.Reservation
	r.decode(t, &q4)
	q5 := e.mustBuy(t, "u5", "s1", http.StatusAccepted)

	p1 := e.pay(t, "u1", holds[0].ID).PaymentID
	e.wantResult(t, succeeded(p1, holds[0]), seckill.PaymentApplied)
	e.wantResult(t, succeeded(p1, holds[0]), seckill.PaymentDuplicate)
	wrong := succeeded("pay_wrong", holds[1])
	wrong.AmountCents++
	e.wantResult(t, wrong, seckill.PaymentRefundRequired)
	wantStatus(t, e.do(t, "DELETE", "/api/v1/reservations/"+holds[2].ID, e.user(t, "u3"), nil), http.StatusOK)
	// u3's unit plus the free one: u4 (2 units) is granted; u5 waits.
	wantHeld(t, e, "u4", q4.ID, e.clock.Now().Add(20*time.Second))
	wantQueued(t, e, "u5", q5.ID, 1)

	p2 := e.pay(t, "u2", holds[1].ID).PaymentID
	e.clock.Advance(20 * time.Second) // u2 and u4 lapse: u5 is granted
	wantHeld(t, e, "u5", q5.ID, e.clock.Now().Add(20*time.Second))
	e.wantResult(t, succeeded(p2, holds[1]), seckill.PaymentLateApplied) // 2 units were free
	wantStatus(t, e.do(t, "POST", "/api/v1/sales/s1/stock", admin(), map[string]int{"add": 2}), http.StatusOK)
	e.mustBuy(t, "u6", "s1", http.StatusCreated)
	e.wantResult(t, payment.Event{PaymentID: "pay_failed", ReservationID: q5.ID, AmountCents: 700, Status: payment.StatusFailed}, seckill.PaymentIgnored)
	e.wantResult(t, succeeded(e.pay(t, "u5", q5.ID).PaymentID, q5), seckill.PaymentApplied)
	wantStatus(t, e.do(t, "POST", "/api/v1/sales/s1/close", admin(), nil), http.StatusOK)

	e.drain(t)
	a := audit()
	if !a.OK || len(a.Violations) != 0 {
		t.Fatalf("audit: %+v", a)
	}
	want := seckill.StockState{Sellable: 6, Available: 2, Held: 1, Sold: 3}
	if a.Engine != want || a.Database.Sold != 3 || a.Database.PaidUnits != 3 || a.Database.PaidOrders != 3 || a.Database.Refunds != 1 {
		t.Fatalf("audit counts: %+v, want engine %+v and 3 sold, 3 paid orders, 1 refund in the database", a, want)
	}
	if f := func() map[string]any { r := e.do(t, "GET", "/api/v1/sales/s1/audit", admin(), nil); return r.fields(t) }(); f["violations"] == nil {
		t.Fatalf("violations must be a JSON array, not null: %v", f)
	}

	// After the open hold lapses the audit still agrees.
	e.clock.Advance(time.Minute)
	e.drain(t)
	if a := audit(); !a.OK || a.Engine != (seckill.StockState{Sellable: 6, Available: 3, Sold: 3}) {
		t.Fatalf("audit after the last hold lapsed: %+v", a)
	}
}
