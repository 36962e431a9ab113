package httpapi_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

// listIDs is the ids GET path lists, in order.
func (e *env) listIDs(t *testing.T, path, auth string) []string {
	t.Helper()
	r := e.do(t, "GET", path, auth, nil)
	wantStatus(t, r, http.StatusOK)
	var list struct {
		Sales []service.SaleView `json:"sales"`
	}
	r.decode(t, &list)
	ids := []string{}
	for _, v := range list.Sales {
		ids = append(ids, v.ID)
	}
	return ids
}

// TestSaleCurrencyAndListed: the defaults (usd, listed), the values a client may send, and the
// 400 invalid_argument for every other currency or listed value, with nothing created.
func TestSaleCurrencyAndListed(t *testing.T) {
	e := newEnv(t)
	if v := e.createSale(t, "plain", nil); v.Currency != "usd" || !v.Listed {
		t.Fatalf("defaults: currency %q, listed %v; want usd, true", v.Currency, v.Listed)
	}
	if v := e.createSale(t, "euro", map[string]any{"currency": "eur", "listed": false}); v.Currency != "eur" || v.Listed {
		t.Fatalf("currency eur, listed false: got %q, %v", v.Currency, v.Listed)
	}
	if v := e.sale(t, "euro"); v.Currency != "eur" || v.Listed {
		t.Fatalf("GET of the unlisted sale: currency %q, listed %v", v.Currency, v.Listed)
	}
	for _, bad := range []any{"EUR", "eu", "euro", "", "e1r", " usd", 840, "zzz", "abc"} { // zzz, abc: not ISO 4217 codes
		body := map[string]any{"id": "bad", "price_cents": 1, "stock": 1, "currency": bad}
		wantProblem(t, e.do(t, "POST", "/api/v1/sales", admin(), body), http.StatusBadRequest, seckill.CodeInvalidArgument)
	}
	for _, bad := range []any{"true", 1, "no"} {
		body := map[string]any{"id": "bad", "price_cents": 1, "stock": 1, "listed": bad}
		wantProblem(t, e.do(t, "POST", "/api/v1/sales", admin(), body), http.StatusBadRequest, seckill.CodeInvalidArgument)
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/bad", "", nil), http.StatusNotFound, seckill.CodeNotFound)
}

// TestUnlistedSalesLeftOffTheList: the public list leaves unlisted sales out, the sale's own
// endpoint still answers, ?all=true lists every sale for an admin only, and PATCH moves a sale
// on and off the list.
func TestUnlistedSalesLeftOffTheList(t *testing.T) {
	e := newEnv(t)
	e.createSale(t, "shown", nil)
	e.clock.Advance(time.Second)
	e.createSale(t, "hidden", map[string]any{"listed": false})
	if ids := e.listIDs(t, "/api/v1/sales", ""); !slices.Equal(ids, []string{"shown"}) {
		t.Fatalf("public list = %v, want [shown]", ids)
	}
	if ids := e.listIDs(t, "/api/v1/sales?all=false", ""); !slices.Equal(ids, []string{"shown"}) {
		t.Fatalf("public list with all=false = %v, want [shown]", ids)
	}
	if ids := e.listIDs(t, "/api/v1/sales?all=true", admin()); !slices.Equal(ids, []string{"shown", "hidden"}) {
		t.Fatalf("admin list = %v, want [shown hidden]", ids)
	}
	e.sale(t, "hidden") // reachable by id
	wantProblem(t, e.do(t, "GET", "/api/v1/sales?all=true", "", nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales?all=true", e.user(t, "alice"), nil), http.StatusForbidden, seckill.CodeForbidden)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales?all=yes", admin(), nil), http.StatusBadRequest, seckill.CodeInvalidArgument)

	r := e.do(t, "PATCH", "/api/v1/sales/shown", admin(), map[string]any{"listed": false})
	wantStatus(t, r, http.StatusOK)
	var v service.SaleView
	r.decode(t, &v)
	if v.Listed || v.ID != "shown" || v.StockState.Sellable != 10 {
		t.Fatalf("PATCH listed false = %+v", v)
	}
	wantStatus(t, e.do(t, "PATCH", "/api/v1/sales/hidden", admin(), map[string]any{"listed": true}), http.StatusOK)
	if ids := e.listIDs(t, "/api/v1/sales", ""); !slices.Equal(ids, []string{"hidden"}) {
		t.Fatalf("public list after the PATCHes = %v, want [hidden]", ids)
	}
	if v := e.sale(t, "shown"); v.Listed {
		t.Fatal("GET after PATCH listed false: still listed")
	}

	for _, bad := range []string{`{}`, `{"listed":"no"}`, `{"listed":null}`, `{"listed":true,"currency":"eur"}`, `null`, `[]`} {
		wantProblem(t, e.do(t, "PATCH", "/api/v1/sales/shown", admin(), bad), http.StatusBadRequest, seckill.CodeInvalidArgument)
	}
	wantProblem(t, e.do(t, "PATCH", "/api/v1/sales/nope", admin(), `{"listed":true}`), http.StatusNotFound, seckill.CodeNotFound)
	wantProblem(t, e.do(t, "PATCH", "/api/v1/sales/shown", "", `{"listed":true}`), http.StatusUnauthorized, seckill.CodeUnauthorized)
	wantProblem(t, e.do(t, "PATCH", "/api/v1/sales/shown", e.user(t, "alice"), `{"listed":true}`), http.StatusForbidden, seckill.CodeForbidden)
	if v := e.sale(t, "shown"); v.Listed {
		t.Fatal("a refused PATCH changed the sale")
	}
}

// TestDeleteSale: an admin deletes a sale nobody reserved in (204; then 404 everywhere, and
// the id is free again); a sale with a reservation, even a cancelled one, is 409 conflict and
// stays open; an unknown sale is 404; users and strangers get 403 and 401.
func TestDeleteSale(t *testing.T) {
	e := newEnv(t)
	e.createSale(t, "empty", nil)
	e.createSale(t, "busy", nil)
	res := e.mustBuy(t, "alice", "busy", http.StatusCreated)
	wantStatus(t, e.do(t, "DELETE", "/api/v1/reservations/"+res.ID, e.user(t, "alice"), nil), http.StatusOK)

	wantProblem(t, e.do(t, "DELETE", "/api/v1/sales/empty", "", nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
	wantProblem(t, e.do(t, "DELETE", "/api/v1/sales/empty", e.user(t, "bob"), nil), http.StatusForbidden, seckill.CodeForbidden)
	e.sale(t, "empty")

	p := wantProblem(t, e.do(t, "DELETE", "/api/v1/sales/busy", admin(), nil), http.StatusConflict, seckill.CodeConflict)
	if p.Detail == "" {
		t.Fatal("the conflict has no detail")
	}
	if v := e.sale(t, "busy"); v.Status != seckill.SaleActive {
		t.Fatalf("a refused delete left the sale %s, want active", v.Status)
	}
	e.mustBuy(t, "bob", "busy", http.StatusCreated)

	if r := e.do(t, "DELETE", "/api/v1/sales/empty", admin(), nil); r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("DELETE of a sale nobody reserved in = %s, want 204 without a body", r)
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/empty", "", nil), http.StatusNotFound, seckill.CodeNotFound)
	wantProblem(t, e.do(t, "DELETE", "/api/v1/sales/empty", admin(), nil), http.StatusNotFound, seckill.CodeNotFound)
	wantProblem(t, e.do(t, "DELETE", "/api/v1/sales/never", admin(), nil), http.StatusNotFound, seckill.CodeNotFound)
	if ids := e.listIDs(t, "/api/v1/sales?all=true", admin()); !slices.Equal(ids, []string{"busy"}) {
		t.Fatalf("admin list after the delete = %v, want [busy]", ids)
	}
	if _, _, err := e.store.Sale(t.Context(), "empty"); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("the database still has the deleted sale: %v", err)
	}
	// The id is free again, and the new sale sells (its purchase path is its own).
	e.createSale(t, "empty", map[string]any{"stock": 2})
	e.mustBuy(t, "carol", "empty", http.StatusCreated)
}
