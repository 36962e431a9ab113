package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/background"
)

// reportingService reports one error when it starts, then works until stopped.
type reportingService struct {
	name     string
	err      error
	reported chan struct{}
}

func (s reportingService) Name() string { return s.name }

func (s reportingService) Run(ctx context.Context) error {
	background.Report(ctx, s.err)
	close(s.reported)
	<-ctx.Done()
	return nil
}

// TestMetricsShowBackgroundErrors: Config.Collectors are served at /metrics: after a background
// service reported an error, seckill_background_errors_total counts it under the service's
// name (and a quiet service at 0); a server without the collector has no such series (the
// negative control of the check).
func TestMetricsShowBackgroundErrors(t *testing.T) {
	runner := background.NewRunner(nil)
	failing := reportingService{name: "sweeper", err: errors.New("redis down"), reported: make(chan struct{})}
	quiet := reportingService{name: "orders-consumer", reported: make(chan struct{})}
	runner.Start(quiet, failing)
	t.Cleanup(func() { _ = runner.Stop(context.Background()) })
	<-failing.reported
	<-quiet.reported

	e := newEnv(t, withServer(func(c *httpapi.Config) { c.Collectors = []prometheus.Collector{runner.Collector()} }))
	r := e.do(t, "GET", "/metrics", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("/metrics: %s", r)
	}
	for _, want := range []string{
		`seckill_background_errors_total{service="sweeper"} 1`,
		`seckill_background_errors_total{service="orders-consumer"} 0`,
	} {
		if !bytes.Contains(r.Body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	plain := newEnv(t)
	r = plain.do(t, "GET", "/metrics", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("/metrics: %s", r)
	}
	if bytes.Contains(r.Body, []byte("seckill_background_errors_total")) {
		t.Error("a server without the collector shows seckill_background_errors_total")
	}
}
