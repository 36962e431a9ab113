package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/client"
)

// startMetricsApp starts a --dev server with cfg's settings (startGatewayApp).
func startMetricsApp(t *testing.T, cfg config) *app {
	t.Helper()
	cfg.Dev, cfg.ExportGiveUp = true, time.Hour
	return startGatewayApp(t, &cfg)
}

// scrape GETs url with an optional bearer token and returns the status and the body.
func scrape(t *testing.T, url, token string) (int, string) {
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
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestMetricsLabelSinksByName: /metrics labels the export's series by each sink's name (its
// name= option, else its scheme and place), never its URL, whose path may hold a token (as a
// chat service's incoming-webhook URL does). Before, the label was the URL, token and all.
func TestMetricsLabelSinksByName(t *testing.T) {
	const token = "xoxb-path-token-never-shown"
	a := startMetricsApp(t, config{Export: "http://127.0.0.1:1/hooks/T0AAAA/B0BBBB/" + token + ",http://127.0.0.1:1/other?name=shop.orders"})
	status, body := scrape(t, a.url+"/metrics", "")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	if strings.Contains(body, token) || strings.Contains(body, "127.0.0.1:1") {
		t.Fatalf("/metrics shows a sink's URL:\n%q", grepLines(body, "seckill_export_events_total"))
	}
	for _, want := range []string{`seckill_export_events_total{sink="http-0"}`, `seckill_export_events_total{sink="shop.orders"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%q", want, grepLines(body, "seckill_export_events_total"))
		}
	}
}

// TestMetricsToken: with SECKILL_METRICS_TOKEN, /metrics answers 401 without a bearer token,
// 403 with another one (the admin token included), and the metrics with it.
func TestMetricsToken(t *testing.T) {
	const token = "metrics-token-0123456789abcdef0123456789"
	a := startMetricsApp(t, config{MetricsToken: token})
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {"not-it", 403}, {token, 200}} {
		if status, body := scrape(t, a.url+"/metrics", c.token); status != c.want || (status == 200) != strings.Contains(body, "go_goroutines") {
			t.Errorf("/metrics with token %q: %d, want %d", c.token, status, c.want)
		}
	}
}

// TestMetricsAddr: with --metrics-addr, /metrics is served on that listener only; the API's
// listener answers 404 there.
func TestMetricsAddr(t *testing.T) {
	a := startMetricsApp(t, config{MetricsAddr: "127.0.0.1:0"})
	if status, _ := scrape(t, a.url+"/metrics", ""); status != http.StatusNotFound {
		t.Errorf("/metrics on the API's listener: %d, want 404", status)
	}
	status, body := scrape(t, "http://"+a.metrics.listener.Addr().String()+"/metrics", "")
	if status != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics on --metrics-addr: %d", status)
	}
	if _, err := client.New("http://"+a.metrics.listener.Addr().String()).ListSales(t.Context(), client.ListOptions{}); statusOf(err) != http.StatusNotFound {
		t.Errorf("the API on --metrics-addr: %v, want 404", err)
	}
}

// TestMetricsTokenRefused: outside --dev the metrics token needs 32 bytes and may equal no
// other secret (an admin token handed to the scraper would make it an admin).
func TestMetricsTokenRefused(t *testing.T) {
	cfg := exportTestConfig()
	cfg.MetricsToken = cfg.AdminToken
	if _, err := cfg.secrets(); err == nil || !strings.Contains(err.Error(), "SECKILL_METRICS_TOKEN equals SECKILL_ADMIN_TOKEN") {
		t.Errorf("metrics token equal to the admin token: %v", err)
	}
	cfg.MetricsToken = "short"
	if _, err := cfg.secrets(); err == nil || !strings.Contains(err.Error(), "SECKILL_METRICS_TOKEN (5 bytes)") {
		t.Errorf("a short metrics token: %v", err)
	}
	cfg.MetricsToken = cfg.ExportSecret
	if _, err := cfg.secrets(); err == nil || !strings.Contains(err.Error(), "SECKILL_EXPORT_SECRET equals SECKILL_METRICS_TOKEN") {
		t.Errorf("metrics token equal to the export secret: %v", err)
	}
}
