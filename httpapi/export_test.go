package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/seckill-go/seckill/delivery"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// TestExportStatusAndReadyz: GET /api/v1/export lists the sinks (admin only), and /readyz
// names a sink far behind, by its name (it is anonymous), while staying 200 ready: a slow shop
// endpoint takes no instance out.
func TestExportStatusAndReadyz(t *testing.T) {
	store, err := sqlstore.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	clock := seckilltest.NewManualClock(t0)
	svc := service.New(service.Config{Inventory: memory.New(clock), Store: store, Clock: clock, AuthSecret: []byte(authSecret)})
	var behind atomic.Bool
	api := httpapi.New(httpapi.Config{Service: svc, AuthSecret: []byte(authSecret), AdminToken: adminToken,
		PaymentSecret: []byte(paySecret), Clock: clock,
		Export: func() []delivery.SinkStatus {
			return []delivery.SinkStatus{{Name: "http-0", Sink: "http://shop/hook", Published: 7, LagEvents: 3, LagSeconds: 90, FarBehind: behind.Load()},
				{Name: "amqp-1", Sink: "amqp://mq:5672/", Published: 10}}
		}})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	get := func(path, token string) (int, map[string]any) {
		resp, b := fetch(t, srv.URL+path, token)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		return resp.StatusCode, body
	}
	if code, _ := get("/api/v1/export", ""); code != http.StatusUnauthorized {
		t.Fatalf("without the admin token: %d, want 401", code)
	}
	code, body := get("/api/v1/export", adminToken)
	sinks, _ := body["sinks"].([]any)
	if code != 200 || len(sinks) != 2 || sinks[0].(map[string]any)["lag_events"] != float64(3) {
		t.Fatalf("GET /api/v1/export: %d %v", code, body)
	}
	checkExportAgainstDocument(t, srv.URL)
	if code, body := get("/readyz", ""); code != 200 || body["export_behind"] != nil {
		t.Fatalf("/readyz with every sink caught up: %d %v; want 200 without export_behind", code, body)
	}
	behind.Store(true)
	code, body = get("/readyz", "")
	list, _ := body["export_behind"].([]any)
	if code != 200 || body["status"] != "ready" || !slices.Equal(list, []any{"http-0"}) {
		t.Fatalf("/readyz with a sink far behind: %d %v; want 200 ready naming it by its name, not its URL", code, body)
	}
}

// checkExportAgainstDocument: the export status with sinks (every field a sink has) is what
// the served OpenAPI document says; a field the document does not name fails
// (additionalProperties is false there).
func checkExportAgainstDocument(t *testing.T, url string) {
	t.Helper()
	_, raw := fetch(t, url+"/openapi.json", "")
	c, err := newContract(raw)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := fetch(t, url+"/api/v1/export", adminToken)
	x := exchange{Op: "exportStatus", Method: "GET", Target: "/api/v1/export", Header: resp.Request.Header,
		Status: resp.StatusCode, RespHeader: resp.Header, RespBody: body}
	if bad := c.check(x); len(bad) > 0 {
		t.Fatalf("GET /api/v1/export against the document: %v\n%s", bad, body)
	}
}

// fetch GETs url with an optional bearer token and returns the answer and its body.
func fetch(t *testing.T, url, token string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
