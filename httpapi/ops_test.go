package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/service"
)

// TestSegmentsOnMemoryEngine: a sale split into segments is refused by the memory engine with
// a clear 400 (it has no segments, docs/API.md), nothing is created, and the same id is free for
// a one-segment sale, which reads back with segments 1.
func TestSegmentsOnMemoryEngine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var p httpapi.Problem
	e.unchanged(t, func() {
		r := e.do(t, "POST", "/api/v1/sales", admin(), map[string]any{"id": "seg", "price_cents": 1, "stock": 10, "segments": 2})
		p = wantProblem(t, r, http.StatusBadRequest, seckill.CodeInvalidArgument)
	})
	if !strings.Contains(p.Detail, "memory engine") {
		t.Fatalf("refusal detail %q does not say the memory engine has no segments", p.Detail)
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/seg", "", nil), http.StatusNotFound, seckill.CodeNotFound)
	if v := e.createSale(t, "seg", map[string]any{"segments": 1}); v.Segments != 1 {
		t.Fatalf("segments = %d, want 1", v.Segments)
	}
	if v := e.sale(t, "seg"); v.Segments != 1 {
		t.Fatalf("GET: segments = %d, want 1", v.Segments)
	}
}

// TestPreheatSecondsRoundTrip: preheat_seconds as created (0 and the bound included) is what
// the create answers and what a read shows; omitted, it is the default.
func TestPreheatSecondsRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, p := range []any{0, 1, 450, seckill.MaxPreheatSeconds, nil} {
		id := fmt.Sprintf("pre%d", i)
		want := seckill.DefaultPreheatSeconds
		fields := map[string]any{}
		if p != nil {
			want, fields["preheat_seconds"] = p.(int), p
		}
		if v := e.createSale(t, id, fields); v.PreheatSeconds != want {
			t.Fatalf("created with preheat_seconds %v: answered %d, want %d", p, v.PreheatSeconds, want)
		}
		if v := e.sale(t, id); v.PreheatSeconds != want {
			t.Fatalf("created with preheat_seconds %v: GET %d, want %d", p, v.PreheatSeconds, want)
		}
	}
}

// TestCreateAndReadSales: create answers 201 with the full sale JSON of docs/API.md (defaults
// filled, RFC 3339 UTC times, live stock_state, server_time); bad input is 400, a taken id 409,
// an oversized body 413; reads list and fetch sales, an unknown id is 404.
func TestCreateAndReadSales(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(t, "POST", "/api/v1/sales", admin(), map[string]any{"id": "s1", "price_cents": 990, "stock": 10, "holdback": 2})
	wantStatus(t, r, http.StatusCreated)
	f := r.fields(t)
	for _, k := range []string{"id", "name", "price_cents", "stock", "holdback", "starts_at", "ends_at", "per_user_limit",
		"hold_seconds", "queue_limit", "segments", "preheat_seconds", "status", "stock_state", "server_time"} {
		if _, ok := f[k]; !ok {
			t.Fatalf("sale JSON lacks %q: %s", k, r.Body)
		}
	}
	var v service.SaleView
	r.decode(t, &v)
	if v.Status != seckill.SaleActive || v.PerUserLimit != 1 || v.HoldSeconds != 60 || v.QueueLimit != 80 || v.Segments != 1 ||
		v.PreheatSeconds != seckill.DefaultPreheatSeconds ||
		!v.StartsAt.Equal(t0) || !v.EndsAt.Equal(t0.Add(time.Hour)) || !v.ServerTime.Equal(t0) ||
		v.StockState != (seckill.StockState{Sellable: 8, Available: 8}) {
		t.Fatalf("created sale %s", r.Body)
	}
	for _, k := range []string{"starts_at", "ends_at", "server_time"} {
		if s, _ := f[k].(string); !strings.HasSuffix(s, "Z") {
			t.Fatalf("%s = %v, want RFC 3339 UTC", k, f[k])
		}
	}

	bad := []any{
		`{`, `[]`, ``, `{"id":"s2","price_cents":1,"stock":1,"colour":"red"}`,
		map[string]any{"id": "s2", "stock": 1},                                  // no price
		map[string]any{"id": "s2", "price_cents": 1},                            // no stock
		map[string]any{"id": "bad id", "price_cents": 1, "stock": 1},            // id syntax
		map[string]any{"id": "s2", "price_cents": -1, "stock": 1},               // negative price
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "holdback": 2}, // holdback > stock
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "hold_seconds": 0},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "per_user_limit": 0},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "queue_limit": -1},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "starts_at": t0, "ends_at": t0},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "starts_at": "tomorrow"},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "segments": 0},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "segments": seckill.MaxSegments + 1},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "preheat_seconds": -1},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "preheat_seconds": seckill.MaxPreheatSeconds + 1},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "preheat_seconds": "abc"},
		map[string]any{"id": "s2", "price_cents": 1, "stock": 1, "preheat_seconds": 1.5},
	}
	for _, b := range bad {
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response { return e.do(t, "POST", "/api/v1/sales", admin(), b) })
	}
	e.refused(t, http.StatusConflict, seckill.CodeConflict, func() response {
		return e.do(t, "POST", "/api/v1/sales", admin(), map[string]any{"id": "s1", "price_cents": 1, "stock": 1})
	})
	e.refused(t, http.StatusRequestEntityTooLarge, seckill.CodeTooLarge, func() response {
		return e.serve("POST", "/api/v1/sales", admin(), bytes.NewReader(bytes.Repeat([]byte(" "), 1<<20)))
	})

	// A sale without an id gets a random one; a zero-stock sale is allowed (and sold out).
	e.clock.Advance(time.Second) // so that the list's "oldest first" has an order to show
	anon := e.createSale(t, "", map[string]any{"id": nil, "stock": 0})
	if !seckill.ValidID(anon.ID) || anon.Status != seckill.SaleSoldOut {
		t.Fatalf("sale without id: %+v", anon)
	}

	e.clock.Advance(59 * time.Second)
	r = e.do(t, "GET", "/api/v1/sales", "", nil)
	wantStatus(t, r, http.StatusOK)
	var list struct {
		Sales      []service.SaleView
		ServerTime time.Time `json:"server_time"`
	}
	r.decode(t, &list)
	if len(list.Sales) != 2 || list.Sales[0].ID != "s1" || list.Sales[1].ID != anon.ID || !list.ServerTime.Equal(t0.Add(time.Minute)) {
		t.Fatalf("sale list %s", r.Body)
	}
	if got := e.sale(t, "s1"); !got.ServerTime.Equal(t0.Add(time.Minute)) || got.StockState.Available != 8 {
		t.Fatalf("sale %+v", got)
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/nope", "", nil), http.StatusNotFound, seckill.CodeNotFound)
}

// TestHealthAndDocs: /healthz and /readyz answer JSON, /readyz turns 503 unavailable (with
// Retry-After) when a readiness check fails; /metrics carries the request, reservation and
// stock series; /openapi.json is OpenAPI 3.1.0; unknown endpoints are problem+json 404.
func TestHealthAndDocs(t *testing.T) {
	t.Parallel()
	var notReady atomic.Bool
	e := newEnv(t, withServer(func(c *httpapi.Config) {
		c.Checks = map[string]func(context.Context) error{"redis": func(context.Context) error {
			if notReady.Load() {
				return errors.New("warming up")
			}
			return nil
		}}
	}))
	wantStatus(t, e.do(t, "GET", "/healthz", "", nil), http.StatusOK)
	r := e.do(t, "GET", "/readyz", "", nil)
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(string(r.Body), `"checks":{"database":"ok","redis":"ok"}`) {
		t.Fatalf("/readyz body %s: want each check reported ok", r.Body)
	}
	notReady.Store(true)
	r = e.do(t, "GET", "/readyz", "", nil)
	wantProblem(t, r, http.StatusServiceUnavailable, seckill.CodeUnavailable)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if !strings.Contains(string(r.Body), `not ready: database ok, redis unavailable`) {
		t.Fatalf("/readyz body %s: want the failing check named", r.Body)
	}
	notReady.Store(false)

	e.createSale(t, "s1", nil)
	e.mustBuy(t, "alice", "s1", http.StatusCreated)
	r = e.do(t, "GET", "/metrics", "", nil)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`seckill_http_requests_total{route="POST /api/v1/sales/{id}/buy/{token}",status="201"} 1`,
		`seckill_http_requests_total{route="GET /readyz",status="503"} 1`,
		`seckill_reservations_total{outcome="held"} 1`,
		`seckill_stock_units{sale="s1",state="held"} 1`,
		`seckill_stock_units{sale="s1",state="available"} 9`,
		`seckill_http_request_duration_seconds_bucket`,
	} {
		if !bytes.Contains(r.Body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	r = e.do(t, "GET", "/openapi.json", "", nil)
	wantStatus(t, r, http.StatusOK)
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	r.decode(t, &doc)
	if doc.OpenAPI != "3.1.0" || len(doc.Paths) == 0 {
		t.Fatalf("openapi = %q with %d paths", doc.OpenAPI, len(doc.Paths))
	}

	for _, p := range []struct{ method, path string }{{"GET", "/nope"}, {"GET", "/api/v1/nope"}, {"PUT", "/api/v1/sales"}} {
		wantProblem(t, e.do(t, p.method, p.path, "", nil), http.StatusNotFound, seckill.CodeNotFound)
	}
	for _, p := range []string{"/", "/admin"} {
		if r := e.do(t, "GET", p, "", nil); r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %s", p, r.Status, r.Header.Get("Content-Type"))
		}
	}
}

// TestDevToken: the token endpoint exists only with Dev; its tokens authenticate the user.
func TestDevToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wantProblem(t, e.do(t, "POST", "/api/v1/dev/token", "", `{"user":"alice"}`), http.StatusNotFound, seckill.CodeNotFound)

	d := newEnv(t, withServer(func(c *httpapi.Config) { c.Dev = true }))
	for _, b := range []string{``, `{}`, `{"user":""}`, `{"user":"a b"}`, `{"user":"alice","x":1}`} {
		wantProblem(t, d.do(t, "POST", "/api/v1/dev/token", "", b), http.StatusBadRequest, seckill.CodeInvalidArgument)
	}
	r := d.do(t, "POST", "/api/v1/dev/token", "", `{"user":"alice"}`)
	wantStatus(t, r, http.StatusOK)
	var tok struct{ Token string }
	r.decode(t, &tok)
	wantStatus(t, d.do(t, "GET", "/api/v1/orders", "Bearer "+tok.Token, nil), http.StatusOK)
	var orders map[string]json.RawMessage
	d.do(t, "GET", "/api/v1/orders", "Bearer "+tok.Token, nil).decode(t, &orders)
	if string(orders["orders"]) != "[]" {
		t.Fatalf("orders of a new user = %s, want []", orders["orders"])
	}
}
