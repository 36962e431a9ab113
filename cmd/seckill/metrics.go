package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// bindMetricsConfig registers where /metrics is served and what it asks (docs/SECURITY.md):
// serve's only.
func bindMetricsConfig(fs *flag.FlagSet, env func(name, def string) string, c *config) {
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("SECKILL_METRICS_ADDR", ""), "serve /metrics on this address of its own, e.g. 127.0.0.1:9090, and not on --addr; default: on --addr (SECKILL_METRICS_ADDR)")
	fs.StringVar(&c.MetricsToken, "metrics-token", env("SECKILL_METRICS_TOKEN", ""), "bearer token /metrics requires (Prometheus' authorization credentials); default none (SECKILL_METRICS_TOKEN)")
}

// metricsServer serves /metrics on --metrics-addr: a listener of its own, so that the API's
// listener can face the internet while the metrics stay on a private network.
type metricsServer struct {
	listener net.Listener
	http     *http.Server
	done     chan error
}

// listenMetrics binds addr before the app starts, so that a busy address is a startup error.
func listenMetrics(addr string) (*metricsServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: listen on %s: %w", addr, err)
	}
	return &metricsServer{listener: l}, nil
}

// start serves h at GET /metrics (everything else is 404).
func (m *metricsServer) start(h http.Handler, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	m.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	m.done = make(chan error, 1)
	go func() { m.done <- m.http.Serve(m.listener) }()
	log.Info("metrics", "url", "http://"+m.listener.Addr().String()+"/metrics")
}

// close stops the server (a scrape in progress is cut: it is retried at the next interval) and
// waits for it.
func (m *metricsServer) close() error {
	if m.http == nil {
		return m.listener.Close()
	}
	_ = m.http.Close()
	if err := <-m.done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
