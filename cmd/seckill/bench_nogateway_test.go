package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill-go/seckill/loadgen"
)

// TestBenchStopsWithoutAPaymentPath: against a server that starts no payments (no --dev, the
// built-in webhook scheme: POST /pay answers 503) and without --payment-secret, nobody can
// ever pay. The bench must not spin until its deadline and call that a success: it stops at
// the first such answer with an error naming the flag that fixes it.
func TestBenchStopsWithoutAPaymentPath(t *testing.T) {
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: "sqlite://" + filepath.Join(t.TempDir(), "n.db"),
		AdminToken: strings.Repeat("a", 40), AuthSecret: strings.Repeat("s", 40), PaymentSecret: strings.Repeat("p", 40),
		HTTP: httpLimits{}.withoutPerAddr()} // the crowd is this process: one address
	a, err := startApp(context.Background(), cfg, appOptions{buyRate: -1}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.close(context.Background()) })
	if a.payGW.Name() != "webhook" {
		t.Fatalf("gateway %q; this test needs one that starts no payments", a.payGW.Name())
	}
	env := map[string]string{"SECKILL_ADMIN_TOKEN": cfg.AdminToken, "SECKILL_AUTH_SECRET": cfg.AuthSecret}
	var out bytes.Buffer
	err = bench(context.Background(), []string{"--target", a.url, "--units", "20", "--buyers", "600", "--hold", "1s", "--deadline", "3m"},
		func(k string) string { return env[k] }, &out, &out)
	if !errors.Is(err, loadgen.ErrNoPaymentPath) || !strings.Contains(err.Error(), "--payment-secret") {
		t.Fatalf("bench against a target without a payment path: %v, want loadgen.ErrNoPaymentPath naming --payment-secret\n%s", err, out.String())
	}
}
