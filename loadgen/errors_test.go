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
)

// TestCallCountsWhatFailed: a transport error that a retry overcomes (a connection dropped
// under load) is a retry, not an error, as for a client; an answer that is a server's fault
// (500) is an error, and the sample says which request got which answer.
func TestCallCountsWhatFailed(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case req.URL.Path == "/boom":
			http.Error(w, `{"code":"internal"}`, http.StatusInternalServerError)
		case n.Add(1) == 1: // the first request's connection is dropped unanswered
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	r := &runner{cfg: Config{Targets: []string{srv.URL}, Client: &http.Client{Timeout: 10 * time.Second}},
		start: time.Now(), period: newHist(), res: Result{Latency: map[string]*hdrhistogram.Histogram{}, All: newHist()}}
	for _, s := range Steps {
		r.res.Latency[s] = newHist()
	}
	ctx := context.Background()
	if a, ok := r.call(ctx, 0, "path", "GET", "/ok", "", nil, nil, time.Time{}); !ok || a.status != 200 {
		t.Fatalf("GET /ok after a dropped connection: %d, %v; want 200 after a retry", a.status, ok)
	}
	if r.res.Errors != 0 || r.res.RetriedTransport != 1 {
		t.Fatalf("a dropped connection, retried and answered: errors %d %q, retried %d; want 0 errors, 1 retry",
			r.res.Errors, r.res.ErrorSample, r.res.RetriedTransport)
	}
	if a, ok := r.call(ctx, 0, "path", "GET", "/boom", "", nil, nil, time.Time{}); !ok || a.status != 500 {
		t.Fatalf("GET /boom: %d, %v", a.status, ok)
	}
	if r.res.Errors != 1 || len(r.res.ErrorSample) != 1 || !strings.Contains(r.res.ErrorSample[0], `GET /boom: 500 {"code":"internal"}`) {
		t.Fatalf("a 500: errors %d, sample %q; want 1 error saying the request and its answer", r.res.Errors, r.res.ErrorSample)
	}
}
