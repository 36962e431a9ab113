package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill-go/seckill/client"
)

// TestCallCountsWhatFailed: a transport error that a retry overcomes (a connection dropped
// under load) is a retry, not an error, as for a client; an answer that is a server's fault
// (500) is an error, and the sample says which request got which answer.
func TestCallCountsWhatFailed(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case strings.HasSuffix(req.URL.Path, "/sales/boom"):
			http.Error(w, `{"code":"internal"}`, http.StatusInternalServerError)
		case n.Add(1) == 1: // the first request's connection is dropped unanswered
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		default:
			_, _ = w.Write([]byte(`{"orders":[]}`))
		}
	}))
	defer srv.Close()
	cfg := Config{Targets: []string{srv.URL}, Client: &http.Client{Timeout: 10 * time.Second}}
	r := &runner{cfg: cfg, clients: clientsOf(cfg),
		start: time.Now(), period: newHist(), res: Result{Latency: map[string]*hdrhistogram.Histogram{}, All: newHist()}}
	for _, s := range Steps {
		r.res.Latency[s] = newHist()
	}
	ctx := context.Background()
	orders := func(c *client.Client) error { _, err := c.Orders(ctx); return err }
	if a, ok := r.call(ctx, 0, "path", "", time.Time{}, orders); !ok || a.err != nil {
		t.Fatalf("GET /api/v1/orders after a dropped connection: %v, %v; want 200 after a retry", a.err, ok)
	}
	if r.res.Errors != 0 || r.res.RetriedTransport != 1 {
		t.Fatalf("a dropped connection, retried and answered: errors %d %q, retried %d; want 0 errors, 1 retry",
			r.res.Errors, r.res.ErrorSample, r.res.RetriedTransport)
	}
	boom := func(c *client.Client) error { _, err := c.Sale(ctx, "boom"); return err }
	if a, ok := r.call(ctx, 0, "path", "", time.Time{}, boom); !ok || a.status() != 500 {
		t.Fatalf("GET /api/v1/sales/boom: %v, %v", a.err, ok)
	}
	if r.res.Errors != 1 || len(r.res.ErrorSample) != 1 || !strings.Contains(r.res.ErrorSample[0], `GET /api/v1/sales/boom: 500 internal`) {
		t.Fatalf("a 500: errors %d, sample %q; want 1 error saying the request and its answer", r.res.Errors, r.res.ErrorSample)
	}
}
