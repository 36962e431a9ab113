package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/seckill-go/seckill/client"
)

const benchBody = `{"id":"httpbench-0000000000000001a3f0c6e2b2c94d1e","sale_id":"httpbench","user_id":"h-000001","quantity":1,"status":"held","expires_at":"2026-12-03T10:00:00.000Z","amount_cents":100,"created_at":"2026-12-03T09:00:00.000Z"}`

// BenchmarkBuyRequest is one buy through runner.call and the client, against a server that
// answers a fixed reservation: its allocations are the generator's cost per request (the
// server's, in the same process, are counted too).
func BenchmarkBuyRequest(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = w.Write([]byte(benchBody))
	}))
	defer srv.Close()
	cfg := Config{Targets: []string{srv.URL}, Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	r := &runner{cfg: cfg, clients: clientsOf(cfg), start: time.Now(), period: newHist(), res: Result{Latency: map[string]*hdrhistogram.Histogram{}, All: newHist()}}
	for _, s := range Steps {
		r.res.Latency[s] = newHist()
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var got client.Bought
		a, ok := r.call(ctx, 0, "buy", "tok-abcdef", time.Time{}, func(c *client.Client) (err error) {
			got, err = c.Buy(ctx, client.BuyPath("x", "tok"), 1, "k-buyer-1")
			return err
		})
		if !ok || a.err != nil || got.ID == "" {
			b.Fatal(a.err)
		}
	}
}
