package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/sinks"
	"github.com/seckill-go/seckill/payment"
)

// exportTestConfig is a production configuration (no --dev) whose secrets all differ.
func exportTestConfig() config {
	long := strings.Repeat("s", minSecretLen)
	return config{AuthSecret: "auth-" + long, AdminToken: "admin-" + long, PaymentSecret: "payment-" + long,
		ExportSecret: "export-" + long, StripeSecretKey: "sk_live_" + long, StripeWebhookSecret: "whsec_" + long,
		MetricsToken: "metrics-" + long}
}

// TestExportSecretSignsCallbacks: an HTTP sink without secret_env signs its callbacks with
// SECKILL_EXPORT_SECRET, never with the payment secret, so a callback receiver holds no key
// that mints payments. Before the export had its own secret, the callback verified with the
// payment secret.
func TestExportSecretSignsCallbacks(t *testing.T) {
	var got struct {
		body []byte
		sig  string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.body, _ = io.ReadAll(r.Body)
		got.sig = r.Header.Get(payment.SignatureHeader)
	}))
	defer srv.Close()
	cfg := exportTestConfig()
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	opts, err := cfg.exportOptions()
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sinks.OpenAll(context.Background(), srv.URL+"/hook", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ss[0].Close()
	if err := ss[0].Publish(context.Background(), []events.Event{{ID: "r:held", Type: events.TypeHeld, SchemaVersion: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := payment.Verify([]byte(cfg.ExportSecret), got.sig, got.body, time.Now()); err != nil {
		t.Fatalf("the callback does not verify with SECKILL_EXPORT_SECRET: %v", err)
	}
	if payment.Verify([]byte(cfg.PaymentSecret), got.sig, got.body, time.Now()) == nil {
		t.Fatal("the callback verifies with SECKILL_PAYMENT_SECRET: its receiver could mint payments")
	}
}

// TestExportSecretRefused: the export secret must be long enough outside --dev and equal to no
// other secret; a sink's secret_env secret equal to another secret is refused too; an HTTP sink
// without secret_env needs the export secret. Each refusal names the problem, never a value.
func TestExportSecretRefused(t *testing.T) {
	base := exportTestConfig()
	for i := range base.otherSecrets() {
		cfg := exportTestConfig()
		other := cfg.otherSecrets()[i]
		cfg.ExportSecret = *other.v
		if _, err := cfg.secrets(); err == nil || !strings.Contains(err.Error(), "SECKILL_EXPORT_SECRET equals "+other.name) {
			t.Errorf("export secret equal to %s: %v, want a refusal naming it", other.name, err)
		} else if strings.Contains(err.Error(), cfg.ExportSecret) {
			t.Errorf("the refusal shows the secret: %v", err)
		}
	}
	short := exportTestConfig()
	short.ExportSecret = "short"
	if _, err := short.secrets(); err == nil || !strings.Contains(err.Error(), "SECKILL_EXPORT_SECRET (5 bytes)") {
		t.Errorf("a short export secret: %v, want a refusal", err)
	}
	short.Dev = true
	if _, err := short.exportOptions(); err != nil {
		t.Errorf("a short export secret with --dev: %v, want accepted", err)
	}

	cfg := exportTestConfig()
	opts, err := cfg.exportOptions()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHOP_HOOK_SECRET", cfg.PaymentSecret)
	if _, err := sinks.Open(context.Background(), "https://shop.example/hook?secret_env=SHOP_HOOK_SECRET", opts); !errors.Is(err, events.ErrBadURL) ||
		!strings.Contains(err.Error(), "equals another of seckill's secrets") || strings.Contains(err.Error(), cfg.PaymentSecret) {
		t.Errorf("secret_env equal to the payment secret: %v, want a refusal", err)
	}
	t.Setenv("SHOP_HOOK_SECRET", "shop-own-"+strings.Repeat("h", minSecretLen))
	if s, err := sinks.Open(context.Background(), "https://shop.example/hook?secret_env=SHOP_HOOK_SECRET", opts); err != nil {
		t.Errorf("secret_env with its own secret: %v", err)
	} else {
		_ = s.Close()
	}
	cfg.ExportSecret = ""
	if opts, err = cfg.exportOptions(); err != nil {
		t.Fatal(err)
	}
	if _, err := sinks.Open(context.Background(), "https://shop.example/hook", opts); !errors.Is(err, events.ErrBadURL) || !strings.Contains(err.Error(), "SECKILL_EXPORT_SECRET") {
		t.Errorf("an HTTP sink without any secret: %v, want a refusal naming SECKILL_EXPORT_SECRET", err)
	}
}

// TestReplaySinkUsesExportSecret: `seckill events replay` and `dead-letters --replay` open
// their sink with SECKILL_EXPORT_SECRET and its checks, not with the payment secret.
func TestReplaySinkUsesExportSecret(t *testing.T) {
	cfg := exportTestConfig()
	env := map[string]string{"SECKILL_PAYMENT_SECRET": cfg.PaymentSecret}
	getenv := func(k string) string { return env[k] }
	if _, err := openReplaySink(context.Background(), "https://shop.example/hook", getenv); err == nil || !strings.Contains(err.Error(), "SECKILL_EXPORT_SECRET") {
		t.Fatalf("replay with only the payment secret: %v, want a refusal naming SECKILL_EXPORT_SECRET", err)
	}
	env["SECKILL_EXPORT_SECRET"] = cfg.PaymentSecret
	if _, err := openReplaySink(context.Background(), "https://shop.example/hook", getenv); err == nil || !strings.Contains(err.Error(), "equals SECKILL_PAYMENT_SECRET") {
		t.Fatalf("replay with the export secret equal to the payment secret: %v, want a refusal", err)
	}
	env["SECKILL_EXPORT_SECRET"] = cfg.ExportSecret
	s, err := openReplaySink(context.Background(), "https://shop.example/hook", getenv)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
}
