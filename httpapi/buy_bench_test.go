package httpapi_test

import (
	"fmt"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/purchasetoken"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// BenchmarkBuyHandler: one buy through the server's handler, in process (no socket, no
// net/http connection code), the memory engine without its event pipeline: what the HTTP side
// of a buy costs on top of the engine, every buy a new user as in `seckill bench --calibrate`.
// "hold" buys from a sale with stock, "sold-out" from one without, "bare" is the calibration's
// reference handler (a ServeMux route answering a fixed body of the same size), the floor.
// cpu-ns/op is the process's CPU time per buy (GC included), steadier than ns/op on a shared
// machine. Profile with -cpuprofile / -memprofile.
func BenchmarkBuyHandler(b *testing.B) {
	const secret = "bench-auth-secret-0123456789abcdef"
	ctx := b.Context()
	t0 := time.Now()
	clock := seckilltest.NewManualClock(t0)
	store, err := sqlstore.Open(ctx, "sqlite://"+b.TempDir()+"/bench.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	svc := service.New(service.Config{Inventory: memory.New(clock), Store: store, Clock: clock, AuthSecret: []byte(secret)})
	srv := httpapi.New(httpapi.Config{Service: svc, AuthSecret: []byte(secret), AdminToken: "admin", Clock: clock})
	b.Cleanup(func() { srv.Close() })
	key := purchasetoken.Key([]byte(secret))

	users := 0
	run := func(b *testing.B, h http.Handler, saleID string, starts time.Time, want int) {
		// The requests are built before the clock runs: a fresh user each, as the bench's.
		n := b.N
		reqs := make([]*http.Request, n)
		for i := range n {
			users++
			user := "u" + strconv.Itoa(users)
			tok, err := httpapi.MintToken([]byte(secret), user, t0, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			path := "/api/v1/sales/" + saleID + "/buy/" + purchasetoken.New(key, saleID, user, starts)
			r, err := http.NewRequestWithContext(ctx, "POST", path, nil)
			if err != nil {
				b.Fatal(err)
			}
			r.RemoteAddr = "127.0.0.1:40000"
			r.Header.Set("Authorization", "Bearer "+tok)
			r.Header.Set("Content-Type", "application/json")
			reqs[i] = r
		}
		bodies := make([]strings.Reader, n)
		w := &discardWriter{h: http.Header{}}
		b.ReportAllocs()
		b.ResetTimer()
		cpu := testenv.ProcessCPU(b)
		defer func() { b.ReportMetric(float64(testenv.ProcessCPU(b)-cpu)/float64(n), "cpu-ns/op") }()
		for i := range n {
			bodies[i].Reset(`{"quantity":1}`)
			reqs[i].Body = io.NopCloser(&bodies[i])
			clear(w.h)
			w.status = 0
			h.ServeHTTP(w, reqs[i])
			if w.status != want {
				b.Fatalf("buy %d: status %d, want %d", i, w.status, want)
			}
		}
	}
	newSale := func(b *testing.B, stock int) seckill.Sale {
		price, hold, ql := int64(1), 3600, 0
		starts := t0.Add(-time.Minute)
		id := fmt.Sprintf("bench-%d-%d", stock, time.Now().UnixNano())
		v, err := svc.CreateSale(ctx, seckill.SaleInput{ID: id, IDGiven: true, PriceCents: &price, Stock: &stock,
			HoldSeconds: &hold, QueueLimit: &ql, StartsAt: &starts})
		if err != nil {
			b.Fatal(err)
		}
		return v.Sale
	}
	b.Run("hold", func(b *testing.B) {
		s := newSale(b, seckill.MaxQuantity)
		run(b, srv.Handler(), s.ID, s.StartsAt, http.StatusCreated)
	})
	b.Run("sold-out", func(b *testing.B) {
		s := newSale(b, 0)
		run(b, srv.Handler(), s.ID, s.StartsAt, http.StatusConflict)
	})
	b.Run("bare", func(b *testing.B) {
		body := []byte(`{"pad":"` + strings.Repeat("x", 230) + `"}` + "\n")
		mux := http.NewServeMux()
		mux.HandleFunc("POST /api/v1/sales/{id}/buy/{token}", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
		})
		run(b, mux, "bare", t0, http.StatusCreated)
	})
}

// discardWriter is a ResponseWriter that keeps the status and drops the body.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
