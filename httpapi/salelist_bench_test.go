package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// BenchmarkListPage: a page of 50 of 10 000 listed sales (the memory engine, SQLite), through
// the handler: cached (the page read again), cold (the cache emptied before each read: every
// definition read from the store, the page's 50 sales from the engine), an If-None-Match
// answered 304, and a page deep in the list with a filter.
func BenchmarkListPage(b *testing.B) {
	const sales = 10_000
	ctx := b.Context()
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := seckilltest.NewManualClock(t0)
	store, err := sqlstore.Open(ctx, "sqlite://"+b.TempDir()+"/bench.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	cfg := service.Config{Inventory: memory.New(clock), Store: store, Clock: clock, AuthSecret: []byte("k")}
	svc := service.New(cfg)
	price, stock := int64(100), 100
	for i := range sales {
		starts := t0.Add(time.Duration(i-sales/2) * time.Minute)
		ends := starts.Add(time.Hour)
		if _, err := svc.CreateSale(ctx, seckill.SaleInput{ID: fmt.Sprintf("s%05d", i), PriceCents: &price, Stock: &stock,
			StartsAt: &starts, EndsAt: &ends}); err != nil {
			b.Fatal(err)
		}
	}
	srv := httpapi.New(httpapi.Config{Service: svc, AuthSecret: []byte("k"), AdminToken: "admin", Clock: clock})
	b.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	get := func(b *testing.B, target, inm string, want int) *httptest.ResponseRecorder {
		return serve(b, h, target, inm, want)
	}
	b.Run("cached", func(b *testing.B) {
		get(b, "/api/v1/sales?limit=50", "", http.StatusOK)
		for b.Loop() {
			get(b, "/api/v1/sales?limit=50", "", http.StatusOK)
		}
	})
	b.Run("not-modified", func(b *testing.B) {
		etag := get(b, "/api/v1/sales?limit=50", "", http.StatusOK).Header().Get("ETag")
		for b.Loop() {
			get(b, "/api/v1/sales?limit=50", etag, http.StatusNotModified)
		}
	})
	b.Run("deep-filtered", func(b *testing.B) {
		// The selling sales start in the middle of the list: the page is found by position.
		for b.Loop() {
			get(b, "/api/v1/sales?limit=50&status=selling", "", http.StatusOK)
		}
	})
	b.Run("after-admin-change", func(b *testing.B) {
		listed := false
		for b.Loop() {
			b.StopTimer()
			if _, err := svc.SetListed(ctx, "s09999", listed); err != nil { // applied to the cache
				b.Fatal(err)
			}
			listed = !listed
			b.StartTimer()
			get(b, "/api/v1/sales?limit=50", "", http.StatusOK)
		}
	})
	b.Run("cold", func(b *testing.B) {
		// A new instance over the same engine and store: every definition read from the
		// store, the page's sales from the engine.
		for b.Loop() {
			b.StopTimer()
			fresh := httpapi.New(httpapi.Config{Service: service.New(cfg), AuthSecret: []byte("k"), AdminToken: "admin", Clock: clock})
			b.StartTimer()
			serve(b, fresh.Handler(), "/api/v1/sales?limit=50", "", http.StatusOK)
			b.StopTimer()
			fresh.Close()
			b.StartTimer()
		}
	})
}

func serve(b *testing.B, h http.Handler, target, inm string, want int) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", target, nil)
	if inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != want {
		b.Fatalf("GET %s: %d %s", target, w.Code, w.Body)
	}
	return w
}
