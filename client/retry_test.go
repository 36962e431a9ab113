package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
)

// flaky answers 503 unavailable with Retry-After: 1 until it has refused n requests.
func flaky(t *testing.T, n int32) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= n {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"about:blank","title":"Unavailable","status":503,"detail":"busy","code":"unavailable"}`))
			return
		}
		_, _ = w.Write([]byte(`{"orders":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// Without WithRetries a 503 is the caller's, with its code and Retry-After; errors.As finds it,
// and the root package's ErrorCode reads it.
func TestErrorIsTheCallers(t *testing.T) {
	srv, calls := flaky(t, 1)
	_, err := client.New(srv.URL).Orders(context.Background())
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 503 || e.Code != seckill.CodeUnavailable || e.RetryAfter != time.Second || !e.Temporary() {
		t.Fatalf("err = %#v", err)
	}
	if seckill.ErrorCode(err) != seckill.CodeUnavailable || client.CodeOf(err) != seckill.CodeUnavailable {
		t.Fatalf("codes of %v: %s, %s", err, seckill.ErrorCode(err), client.CodeOf(err))
	}
	if calls.Load() != 1 {
		t.Fatalf("%d calls, want 1", calls.Load())
	}
}

// WithRetries waits about the Retry-After (at most maxWait) and tries again, a bounded number
// of times.
func TestRetriesHonourRetryAfter(t *testing.T) {
	srv, calls := flaky(t, 2)
	start := time.Now()
	if _, err := client.New(srv.URL, client.WithRetries(2, 200*time.Millisecond)).Orders(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Each wait is at least half the capped 200 ms (the cap itself: TestRetryWaitIsCapped).
	if took := time.Since(start); took < 200*time.Millisecond || calls.Load() != 3 {
		t.Errorf("two retries capped at 200 ms took %v and %d calls", took, calls.Load())
	}
	srv, calls = flaky(t, 5)
	_, err := client.New(srv.URL, client.WithRetries(2, 10*time.Millisecond)).Orders(context.Background())
	if client.CodeOf(err) != seckill.CodeUnavailable || calls.Load() != 3 {
		t.Errorf("after 2 retries: %v, %d calls; want unavailable after 3", err, calls.Load())
	}
}
