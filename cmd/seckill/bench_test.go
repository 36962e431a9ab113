package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/loadgen"
)

// startDevApp runs an in-process server in dev mode on SQLite, with the engine wrapped if asked,
// and without the per-address bounds: its tests' crowds come from this one process
// (httpLimits.withoutPerAddr).
func startDevApp(t *testing.T, wrap func(seckill.Inventory) seckill.Inventory) (*app, config) {
	t.Helper()
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: "sqlite://" + filepath.Join(t.TempDir(), "b.db"), Dev: true,
		HTTP: httpLimits{}.withoutPerAddr()}
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	a, err := startApp(context.Background(), cfg, appOptions{buyRate: -1, wrapInventory: wrap}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.close(context.Background()) })
	return a, cfg
}

func benchAgainst(t *testing.T, a *app, cfg config, extra ...string) (string, error) {
	var out, errb bytes.Buffer
	env := map[string]string{"SECKILL_ADMIN_TOKEN": cfg.AdminToken, "SECKILL_AUTH_SECRET": cfg.AuthSecret, "SECKILL_PAYMENT_SECRET": cfg.PaymentSecret}
	args := append([]string{"--target", a.url, "--units", "20", "--buyers", "600", "--hold", "1s"}, extra...)
	err := bench(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return out.String() + errb.String(), err
}

// TestBenchAgainstServe: bench against a running --dev server sells exactly the stock and
// reports the invariants ok, with a Markdown report and its SVG. The environment holds the
// payment secret, as after sourcing the dev secrets file, yet the crowd pays through the mock
// gateway the server runs (POST /pay), and no refund owed fails.
func TestBenchAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	a, cfg := startDevApp(t, nil)
	report := filepath.Join(t.TempDir(), "r.md")
	out, err := benchAgainst(t, a, cfg, "--report", report)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	for _, want := range []string{"20 / 20 of 20", "invariants  ok", "payments: the targets' gateway (POST /pay)"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	if failed := regexp.MustCompile(`failed [1-9]`).FindString(out); failed != "" {
		t.Errorf("bench output shows refunds %q: the mock gateway refunds every one:\n%s", failed, out)
	}
	md, _ := os.ReadFile(report)
	svg, _ := os.ReadFile(strings.TrimSuffix(report, ".md") + ".svg")
	if !bytes.Contains(md, []byte("(r.svg)")) || !bytes.HasPrefix(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("polyline")) {
		t.Errorf("report %q / chart of %d bytes: want the Markdown to show the SVG chart", md, len(svg))
	}
}

// skipsStockCheck is a deliberately broken engine, kept here only: when a buy finds nothing
// to sell, it adds a unit behind the store's back and sells that.
type skipsStockCheck struct{ seckill.Inventory }

func (b skipsStockCheck) Buy(ctx context.Context, req seckill.BuyRequest) (seckill.BuyResult, error) {
	res, err := b.Inventory.Buy(ctx, req)
	if c := seckill.ErrorCode(err); c == seckill.CodeSoldOut || c == seckill.CodeQueueFull {
		if _, _, err := b.Inventory.AddStock(ctx, req.SaleID, 1); err != nil {
			return res, err
		}
		return b.Inventory.Buy(ctx, req)
	}
	return res, err
}

// TestBenchCatchesABrokenTarget: against an engine that skips the stock check, bench reports
// the violations and fails.
func TestBenchCatchesABrokenTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	a, cfg := startDevApp(t, func(inv seckill.Inventory) seckill.Inventory { return skipsStockCheck{inv} })
	out, err := benchAgainst(t, a, cfg)
	var exit exitError
	if !errors.As(err, &exit) || !strings.Contains(out, "invariants  FAILED") || !strings.Contains(out, "violation:") {
		t.Fatalf("bench against a broken engine: %v; want an invariant failure:\n%s", err, out)
	}
	t.Logf("caught:\n%s", out[strings.Index(out, "invariants"):])
}

func TestParseMix(t *testing.T) {
	m, err := parseMix("cancel=5, abandon=10,late=0,retry=85")
	if err != nil || m != (loadgen.Mix{Cancel: 5, Abandon: 10, PayLate: 0, Retry: 85}) {
		t.Fatalf("parseMix = %+v, %v", m, err)
	}
	for _, bad := range []string{"cancel=50,abandon=60", "cancel", "cancel=x", "dance=1", "cancel=-1"} {
		if _, err := parseMix(bad); err == nil {
			t.Errorf("parseMix(%q) = nil error", bad)
		}
	}
}

// TestBenchStrategies: the command prints one table in which only the no-lock strategy
// oversells.
func TestBenchStrategies(t *testing.T) {
	url := testenv.Redis(t)
	var out bytes.Buffer
	err := bench(context.Background(), []string{"strategies", "--redis-url", url, "--stock", "20", "--buyers", "600", "--workers", "32"},
		noEnv, &out, &out)
	if err != nil {
		t.Fatalf("bench strategies: %v\n%s", err, out.String())
	}
	for _, want := range []string{"no-lock", "oversold", "setnx", "lock", "lua", "embedded", "exact"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// auditFront fronts a running app: it forwards everything, except that the first fail audit
// requests are answered 503 with Retry-After: 1, as an instance whose dependency is down does.
type auditFront struct {
	*httptest.Server
	mu    sync.Mutex
	fail  int
	times []time.Time // when each audit request came
}

func newAuditFront(t *testing.T, backend string, fail int) *auditFront {
	t.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	f := &auditFront{fail: fail}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/audit") {
			f.mu.Lock()
			f.times = append(f.times, time.Now())
			n := len(f.times)
			f.mu.Unlock()
			if n <= f.fail {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"type":"about:blank","title":"Service Unavailable","status":503,"code":"unavailable"}`)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *auditFront) auditTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.times)
}

// smallBench is a short bench run against targets, with a Markdown report in a temp dir.
func smallBench(t *testing.T, cfg config, targets ...string) benchOptions {
	t.Helper()
	o := benchOptions{targets: targets, adminToken: cfg.AdminToken, authSecret: cfg.AuthSecret, paymentSecret: cfg.PaymentSecret,
		units: 10, perUser: 1, hold: time.Second, buyers: 200, concurrency: 32, mix: loadgen.DefaultMix, seed: 1,
		deadline: time.Minute, report: filepath.Join(t.TempDir(), "r.md")}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestBenchRetriesAnUnavailableAudit: an instance whose audit answers 503 (Retry-After: 1)
// twice is asked again after the wait it gives, as a client would; the run is verified and
// its report written.
func TestBenchRetriesAnUnavailableAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	a, cfg := startDevApp(t, nil)
	front := newAuditFront(t, a.url, 2)
	o := smallBench(t, cfg, front.URL)
	var out bytes.Buffer
	if err := runBench(context.Background(), o, &out, &out); err != nil {
		t.Fatalf("bench with two 503 audits: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "invariants  ok") || !strings.Contains(out.String(), "instance 1 "+front.URL+"  audit ok") {
		t.Errorf("want a verified run:\n%s", out.String())
	}
	t.Log(out.String())
	if md, err := os.ReadFile(o.report); err != nil || !bytes.Contains(md, []byte("Invariants: **ok**")) {
		t.Errorf("report: %v\n%s", err, md)
	}
	times := front.auditTimes()
	if len(times) < 3 {
		t.Fatalf("%d audit requests; want the two 503s and a retry", len(times))
	}
	for i := 1; i < 3; i++ {
		if gap := times[i].Sub(times[i-1]); gap < 900*time.Millisecond {
			t.Errorf("audit retry %d came %v after a 503 with Retry-After: 1", i, gap)
		}
	}
}

// TestBenchReportsADeadInstance: an instance that dies after the crowd and before the audit
// is named in the report (JSON on stdout and Markdown), which is written all the same; the
// run exits non-zero as not fully verified.
func TestBenchReportsADeadInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	a, cfg := startDevApp(t, nil)
	alive, dying := newAuditFront(t, a.url, 0), newAuditFront(t, a.url, 0)
	o := smallBench(t, cfg, alive.URL, dying.URL)
	o.asJSON = true
	o.settle = dying.Close
	var out, errb bytes.Buffer
	err := runBench(context.Background(), o, &out, &errb)
	var exit exitError
	if !errors.As(err, &exit) || !strings.Contains(err.Error(), "could not be fully verified") || !strings.Contains(err.Error(), dying.URL) {
		t.Fatalf("bench with a dead instance: %v; want a not-verified exit naming %s\n%s", err, dying.URL, out.String())
	}
	var rp struct {
		Instances []struct {
			Target  string `json:"target"`
			AuditOK bool   `json:"audit_ok"`
			Error   string `json:"error"`
		} `json:"instances"`
		Verdict loadgen.Verdict `json:"verdict"`
	}
	if err := json.Unmarshal(out.Bytes(), &rp); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, out.String())
	}
	if len(rp.Instances) != 2 || !rp.Instances[0].AuditOK || rp.Instances[1].Target != dying.URL || rp.Instances[1].Error == "" {
		t.Errorf("instances %+v: want the first ok and the second named with its error", rp.Instances)
	}
	if rp.Verdict.OK || len(rp.Verdict.Violations) != 0 || len(rp.Verdict.Unverified) == 0 {
		t.Errorf("verdict %+v: want no violation and the dead instance unverified", rp.Verdict)
	}
	md, err := os.ReadFile(o.report)
	if err != nil || !bytes.Contains(md, []byte("**UNVERIFIED**")) || !bytes.Contains(md, []byte(dying.URL)) {
		t.Errorf("Markdown report: %v\n%s", err, md)
	}
	t.Logf("Markdown report:\n%s", md)
}
