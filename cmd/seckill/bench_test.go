package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testenv"
	"github.com/seckill-go/seckill/loadgen"
)

// startDevApp runs an in-process server in dev mode on SQLite, with the engine wrapped if asked.
func startDevApp(t *testing.T, wrap func(seckill.Inventory) seckill.Inventory) (*app, config) {
	t.Helper()
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: "sqlite://" + filepath.Join(t.TempDir(), "b.db"), Dev: true}
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

// TestBenchAgainstServe: bench against a running server sells exactly the stock and reports
// the invariants ok, paying through signed webhooks, with a Markdown report and its SVG.
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
	for _, want := range []string{"20 / 20 of 20", "invariants  ok", "payments: signed webhooks"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
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
