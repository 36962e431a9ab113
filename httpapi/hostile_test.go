package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// The regressions of a hostile pass over the API: each case was reproduced against the server
// before it was fixed (the far-future sale dropped every list's connection for good; a sale
// closed before its start stayed upcoming; a `null` buy body bought a unit; ids "." and ".."
// and a NUL in a name were stored).

// TestSaleTimesAreBounded: a sale whose times (after defaults) leave the documented range is
// refused with 400 before anything is written, and the list keeps working.
func TestSaleTimesAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "good", nil)
	for _, b := range []string{
		`{"id":"far","price_cents":1,"stock":1,"starts_at":"9999-12-31T23:30:00Z"}`, // default ends_at in year 10000
		`{"id":"far","price_cents":1,"stock":1,"starts_at":"2030-01-01T00:00:00Z","ends_at":"9999-12-31T23:59:59Z"}`,
		`{"id":"far","price_cents":1,"stock":1,"starts_at":"1969-12-31T23:00:00Z"}`, // before 1970
		`{"id":"far","price_cents":1,"stock":1,"starts_at":"0001-01-01T00:00:00Z"}`,
	} {
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "POST", "/api/v1/sales", admin(), b)
		})
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/far", "", nil), http.StatusNotFound, seckill.CodeNotFound)
	r := e.do(t, "GET", "/api/v1/sales", "", nil)
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(string(r.Body), `"id":"good"`) {
		t.Fatalf("list = %s", r.Body)
	}
}

// TestUnrenderableSaleBreaksNothingElse: a sale stored before times were bounded, whose end
// cannot be written as RFC 3339, is left out of the list (the others are answered), and its
// own answer is a 500 problem, never a dropped connection.
func TestUnrenderableSaleBreaksNothingElse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "good", nil)
	// As a database written by an older release would have it, after a restart: the row (an
	// update skips the creation bounds) and the engine's copy of it.
	legacy := seckill.Sale{ID: "legacy", Name: "legacy", PriceCents: 1, Stock: 1, PerUserLimit: 1, HoldSeconds: 60,
		StartsAt: time.Date(9999, 12, 31, 23, 30, 0, 0, time.UTC), CreatedAt: t0}
	legacy.EndsAt = legacy.StartsAt.Add(time.Hour)
	ok := legacy
	ok.StartsAt, ok.EndsAt = t0, t0.Add(time.Hour)
	if err := e.store.CreateSale(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	if err := e.store.UpdateSale(t.Context(), legacy); err != nil {
		t.Fatal(err)
	}
	if err := e.engine.LoadSale(t.Context(), legacy, 0); err != nil {
		t.Fatal(err)
	}
	for range 2 { // and again: nothing is broken for good
		r := e.do(t, "GET", "/api/v1/sales", "", nil)
		wantStatus(t, r, http.StatusOK)
		if body := string(r.Body); !strings.Contains(body, `"id":"good"`) || strings.Contains(body, `"id":"legacy"`) {
			t.Fatalf("list = %s; want good without legacy", body)
		}
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/legacy", "", nil), http.StatusInternalServerError, seckill.CodeInternal)
	// Its live feed sends no sale event it cannot render, and neither it nor the feed's
	// background reads panic (a panic there would end the test binary).
	ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/sales/legacy/events", nil)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("feed of an unrenderable sale: %v", err)
	}
	{
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "event: sale") {
			t.Fatalf("feed of an unrenderable sale: %d %q", resp.StatusCode, body)
		}
	}
	wantStatus(t, e.do(t, "GET", "/api/v1/sales/good", "", nil), http.StatusOK)
}

// TestCloseBeforeStartEnds: closing a sale that has not started ends it: status ended, /path
// 410 (not 425), buys 410.
func TestCloseBeforeStartEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.clock.Now()
	e.createSale(t, "later", map[string]any{"starts_at": now.Add(time.Hour), "ends_at": now.Add(2 * time.Hour)})
	buyPath := e.pathAt(t, "alice", "later", now.Add(90*time.Minute))
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/later/path", e.user(t, "alice"), nil), http.StatusTooEarly, seckill.CodeNotStarted)
	r := e.do(t, "POST", "/api/v1/sales/later/close", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	var v service.SaleView
	r.decode(t, &v)
	if v.Status != seckill.SaleEnded {
		t.Fatalf("closed before its start: status %s, want ended", v.Status)
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/later/path", e.user(t, "alice"), nil), http.StatusGone, seckill.CodeEnded)
	wantProblem(t, e.buy(t, "alice", buyPath, nil, ""), http.StatusGone, seckill.CodeEnded)
	e.clock.Advance(90 * time.Minute) // past the original start: still ended
	wantProblem(t, e.buy(t, "alice", buyPath, nil, ""), http.StatusGone, seckill.CodeEnded)
}

// TestBodiesAndIDsRefused: a `null` body is not an object; ids "." and ".." and names with
// control characters are refused; money beyond the amount bound is refused at creation. Each
// is 400 and changes nothing.
func TestBodiesAndIDsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.BuyRate = -1; c.Dev = true }))
	e.createSale(t, "s1", map[string]any{"stock": 5})
	path := e.path(t, "alice", "s1")
	for _, b := range []string{`null`, ` null `, `"x"`, `[{"quantity":1}]`} {
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response { return e.buy(t, "alice", path, b, "") })
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "POST", "/api/v1/sales/s1/stock", admin(), b)
		})
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "POST", "/api/v1/sales", admin(), b)
		})
		wantProblem(t, e.do(t, "POST", "/api/v1/dev/token", "", b), http.StatusBadRequest, seckill.CodeInvalidArgument)
	}
	for _, b := range []map[string]any{
		{"id": "", "price_cents": 1, "stock": 1}, // given and empty: out of bounds, not "choose one"
		{"id": ".", "price_cents": 1, "stock": 1},
		{"id": "..", "price_cents": 1, "stock": 1},
		{"id": "nul", "price_cents": 1, "stock": 1, "name": "a\x00b"},
		{"id": "ctl", "price_cents": 1, "stock": 1, "name": "line\nbreak"},
		{"id": "money", "price_cents": seckill.MaxPriceCents, "stock": 1, "per_user_limit": seckill.MaxQuantity},
	} {
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "POST", "/api/v1/sales", admin(), b)
		})
	}
	for _, u := range []string{".", ".."} {
		wantProblem(t, e.do(t, "POST", "/api/v1/dev/token", "", map[string]any{"user": u}), http.StatusBadRequest, seckill.CodeInvalidArgument)
	}
	e.wantStock(t, "s1", seckill.StockState{Sellable: 5, Available: 5})
	// An omitted id is chosen: 16 random hex digits.
	r := e.do(t, "POST", "/api/v1/sales", admin(), map[string]any{"price_cents": 1, "stock": 1})
	wantStatus(t, r, http.StatusCreated)
	var v service.SaleView
	if err := json.Unmarshal(r.Body, &v); err != nil || len(v.ID) != 16 || strings.Trim(v.ID, "0123456789abcdef") != "" {
		t.Fatalf("a sale created without an id: %s (%v); want 16 hex digits", r.Body, err)
	}
}

// refusingEngine is an engine whose LoadSale fails, as the Redis engine's did for a sale that
// started before 1970 after the database row was already committed.
type refusingEngine struct {
	seckill.Inventory
	refuse bool
}

func (r *refusingEngine) LoadSale(ctx context.Context, s seckill.Sale, sold int) error {
	if r.refuse {
		return errors.New("engine refuses the sale")
	}
	return r.Inventory.LoadSale(ctx, s, sold)
}

// TestCreateSaleAllOrNothing: when the engine does not take a new sale, the database row is
// taken back: the sale does not exist, and the same id can be created once the engine takes it.
func TestCreateSaleAllOrNothing(t *testing.T) {
	t.Parallel()
	store, err := sqlstore.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	eng := &refusingEngine{Inventory: memory.New(seckill.SystemClock{}), refuse: true}
	svc := service.New(service.Config{Inventory: eng, Store: store, AuthSecret: []byte(authSecret)})
	in := seckill.SaleInput{ID: "once", PriceCents: ptrTo(int64(1)), Stock: ptrTo(1)}
	if _, err := svc.CreateSale(t.Context(), in); err == nil {
		t.Fatal("CreateSale succeeded although the engine refused the sale")
	}
	if _, _, err := store.Sale(t.Context(), "once"); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("after a refused create the database has the sale: %v", err)
	}
	eng.refuse = false
	if _, err := svc.CreateSale(t.Context(), in); err != nil {
		t.Fatalf("CreateSale of the same id once the engine takes it: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }
