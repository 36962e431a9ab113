package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/payment"
)

// TestGatewayFlags: --gateway and SECKILL_GATEWAY choose the gateway (the flag wins); the
// default is mock with --dev and webhook without; mock outside --dev, stripe without its key
// or webhook secret, a live Stripe key without an https --public-url, and an unknown name are
// refused with a message naming the fix.
func TestGatewayFlags(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		want    string
		wantErr string
	}{
		{"dev default", nil, []string{"--dev"}, "mock", ""},
		{"default", nil, nil, "webhook", ""},
		{"env", map[string]string{"SECKILL_GATEWAY": "webhook", "SECKILL_DEV": "1"}, nil, "webhook", ""},
		{"flag wins", map[string]string{"SECKILL_GATEWAY": "webhook"}, []string{"--dev", "--gateway", "mock"}, "mock", ""},
		{"mock outside dev", nil, []string{"--gateway", "mock"}, "", "--dev only"},
		{"stripe without secrets", nil, []string{"--gateway", "stripe"}, "", "SECKILL_STRIPE_SECRET_KEY and SECKILL_STRIPE_WEBHOOK_SECRET"},
		{"stripe without webhook secret", map[string]string{"SECKILL_STRIPE_SECRET_KEY": "sk_test_x"}, []string{"--gateway", "stripe"}, "", "needs SECKILL_STRIPE_WEBHOOK_SECRET"},
		{"stripe", map[string]string{"SECKILL_STRIPE_SECRET_KEY": "sk_test_x", "SECKILL_STRIPE_API_URL": "http://127.0.0.1:1"},
			[]string{"--gateway", "stripe", "--stripe-webhook-secret", "whsec_x"}, "stripe", ""},
		{"unknown", nil, []string{"--gateway", "alipay"}, "", `unknown gateway "alipay"`},
		{"live key without public url", map[string]string{"SECKILL_STRIPE_SECRET_KEY": "sk_live_x", "SECKILL_STRIPE_WEBHOOK_SECRET": "whsec_x"},
			[]string{"--gateway", "stripe"}, "", "a live Stripe key needs --public-url"},
		{"live key with an http public url", map[string]string{"SECKILL_STRIPE_SECRET_KEY": "sk_live_x", "SECKILL_STRIPE_WEBHOOK_SECRET": "whsec_x"},
			[]string{"--gateway", "stripe", "--public-url", "http://shop.example/"}, "", `needs an https --public-url (SECKILL_PUBLIC_URL), not "http://shop.example/"`},
		{"restricted live key with a relative public url", map[string]string{"SECKILL_STRIPE_SECRET_KEY": "rk_live_x", "SECKILL_STRIPE_WEBHOOK_SECRET": "whsec_x",
			"SECKILL_PUBLIC_URL": "https:/shop"}, []string{"--gateway", "stripe"}, "", "needs an https --public-url"},
		{"live key with an https public url", map[string]string{"SECKILL_STRIPE_SECRET_KEY": "sk_live_x", "SECKILL_STRIPE_WEBHOOK_SECRET": "whsec_x",
			"SECKILL_PUBLIC_URL": "https://shop.example/"}, []string{"--gateway", "stripe"}, "stripe", ""},
		{"test key with an http public url", map[string]string{"SECKILL_STRIPE_SECRET_KEY": "sk_test_x", "SECKILL_STRIPE_WEBHOOK_SECRET": "whsec_x"},
			[]string{"--gateway", "stripe", "--public-url", "http://127.0.0.1:8080/"}, "stripe", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cfg config
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			bindConfig(fs, func(k string) string { return c.env[k] }, &cfg)
			if err := parseFlags(fs, c.args, io.Discard); err != nil {
				t.Fatal(err)
			}
			got, err := cfg.gatewayName()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("gatewayName = %q, %v; want an error containing %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("gatewayName = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// startGatewayApp starts a server on a private SQLite database with the given gateway; cfg
// gets the generated secrets.
func startGatewayApp(t *testing.T, cfg *config) *app {
	t.Helper()
	return startGatewayAppWith(t, cfg, appOptions{buyRate: -1})
}

// startGatewayAppWith is startGatewayApp with the given options.
func startGatewayAppWith(t *testing.T, cfg *config, opts appOptions) *app {
	t.Helper()
	cfg.Addr, cfg.Engine, cfg.DB = "127.0.0.1:0", "memory", "sqlite://"+filepath.Join(t.TempDir(), "g.db")
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	a, err := startApp(context.Background(), *cfg, opts, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.close(context.Background()) })
	price, stock := int64(700), 2
	if _, err := a.svc.CreateSale(context.Background(), seckill.SaleInput{ID: "g", Name: "g", PriceCents: &price, Stock: &stock}); err != nil {
		t.Fatal(err)
	}
	return a
}

// postTo sends body to the app and returns the status and the decoded answer.
func postTo(t *testing.T, a *app, path, auth string, body []byte, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", a.url+path, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// holdAndPay holds a unit for user and asks /pay for it.
func holdAndPay(t *testing.T, a *app, cfg config, user string) (seckill.Reservation, int, map[string]any) {
	t.Helper()
	res, err := a.svc.Buy(context.Background(), seckill.BuyRequest{SaleID: "g", UserID: user, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := httpapi.MintToken([]byte(cfg.AuthSecret), user, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	status, out := postTo(t, a, "/api/v1/reservations/"+res.Reservation.ID+"/pay", tok, nil)
	return res.Reservation, status, out
}

// signed is our scheme's succeeded notification for r, signed with secret now.
func signed(t *testing.T, secret, paymentID string, r seckill.Reservation) ([]byte, string) {
	t.Helper()
	body, err := json.Marshal(payment.Event{PaymentID: paymentID, ReservationID: r.ID, AmountCents: r.AmountCents, Status: payment.StatusSucceeded})
	if err != nil {
		t.Fatal(err)
	}
	return body, payment.Sign([]byte(secret), time.Now(), body)
}

// TestServeGatewayWebhook: with the webhook gateway, /pay answers 503 (the shop's payment
// service starts payments) and the shop's signed webhook is applied at the per-gateway route;
// no mock runs.
func TestServeGatewayWebhook(t *testing.T) {
	cfg := config{Dev: true, Gateway: "webhook"}
	a := startGatewayApp(t, &cfg)
	if a.gateway != nil {
		t.Fatal("the mock gateway runs though --gateway webhook was chosen")
	}
	r, status, out := holdAndPay(t, a, cfg, "alice")
	if status != http.StatusServiceUnavailable || out["code"] != "unavailable" {
		t.Fatalf("/pay with the webhook gateway: %d %v, want 503 unavailable", status, out)
	}
	body, sig := signed(t, cfg.PaymentSecret, "pay_shop_1", r)
	if status, out := postTo(t, a, "/api/v1/payments/webhook/webhook", "", body, payment.SignatureHeader, sig); status != 200 || out["result"] != "applied" {
		t.Fatalf("the shop's webhook: %d %v, want 200 applied", status, out)
	}
	if status, out := postTo(t, a, "/api/v1/payments/webhook/mock", "", body, payment.SignatureHeader, sig); status != http.StatusNotFound {
		t.Fatalf("the mock's route without the mock: %d %v, want 404", status, out)
	}
}

// TestServeGatewayMockDefault: --dev without --gateway runs the mock: /pay starts a payment whose
// webhook the mock delivers, and the mock's route answers the same scheme.
func TestServeGatewayMockDefault(t *testing.T) {
	cfg := config{Dev: true}
	a := startGatewayApp(t, &cfg)
	if a.gateway == nil || a.payGW.Name() != "mock" {
		t.Fatal("--dev without --gateway does not run the mock")
	}
	r, status, out := holdAndPay(t, a, cfg, "alice")
	if status != 200 || out["payment_id"] == "" {
		t.Fatalf("/pay: %d %v", status, out)
	}
	if err := a.gateway.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	body, sig := signed(t, cfg.PaymentSecret, out["payment_id"].(string), r)
	if status, out := postTo(t, a, "/api/v1/payments/webhook/mock", "", body, payment.SignatureHeader, sig); status != 200 || out["result"] != "duplicate" {
		t.Fatalf("the mock's payment again at its route: %d %v, want 200 duplicate", status, out)
	}
}

// TestServeGatewayStripe: --gateway stripe against stripe-mock starts a Checkout Session on
// /pay and answers its hosted page as redirect_url.
func TestServeGatewayStripe(t *testing.T) {
	api := testenv.StripeMock(t)
	cfg := config{Dev: true, Gateway: "stripe", StripeSecretKey: "sk_test_123", StripeWebhookSecret: "whsec_test_secret", StripeAPIURL: api}
	a := startGatewayApp(t, &cfg)
	if a.payGW.Name() != "stripe" {
		t.Fatalf("gateway %q, want stripe", a.payGW.Name())
	}
	_, status, out := holdAndPay(t, a, cfg, "alice")
	if status != 200 || out["payment_id"] == "" || out["redirect_url"] == "" {
		t.Fatalf("/pay with stripe: %d %v, want a session and its page", status, out)
	}
}

// TestServeLogsStripeSecretsMasked: serve's configuration line shows the Stripe key and webhook
// secret as their lengths only, and a startup error does not quote them either.
func TestServeLogsStripeSecretsMasked(t *testing.T) {
	key, whsec := "sk_test_key-never-logged-4f1d", "whsec_never-logged-8c2a"
	var out, errb testenv.Buffer
	code := run(context.Background(), []string{"serve", "--dev", "--addr", "127.0.0.1:0", "--db", "postgres://nobody@127.0.0.1:1/x?connect_timeout=1",
		"--gateway", "stripe", "--stripe-secret-key", key, "--stripe-webhook-secret", whsec}, noEnv, &out, &errb)
	if code != 1 {
		t.Fatalf("serve on an unreachable database exited %d, want 1:\n%s", code, errb.String())
	}
	if want := fmt.Sprintf("stripe_secret_key=\"(%d bytes)\" stripe_webhook_secret=\"(%d bytes)\"", len(key), len(whsec)); !strings.Contains(errb.String(), want) {
		t.Errorf("want the masked Stripe key in the configuration line:\n%s", errb.String())
	}
	assertNoSecret(t, "serve's log and error", out.String()+errb.String(), key, whsec)
}

// TestServeGatewayStripeRefusesBuiltInWebhook: with --gateway stripe the built-in signed
// webhook is not a way to pay: though SECKILL_PAYMENT_SECRET is set, a notification signed
// with it is 404 at both of its routes and the hold stays held. --accept-webhook turns it on.
// Outside --dev the secret is not required with stripe.
func TestServeGatewayStripeRefusesBuiltInWebhook(t *testing.T) {
	api := testenv.StripeMock(t)
	long := strings.Repeat("k", minSecretLen)
	base := config{Gateway: "stripe", StripeSecretKey: "sk_test_123", StripeWebhookSecret: "whsec_test_secret", StripeAPIURL: api,
		AuthSecret: "auth-" + long, AdminToken: "admin-" + long}
	if _, err := base.secrets(); err != nil {
		t.Fatalf("stripe without SECKILL_PAYMENT_SECRET: %v, want no error (the built-in webhook is off)", err)
	}
	for _, accept := range []bool{false, true} {
		cfg := base
		cfg.PaymentSecret, cfg.AcceptWebhook = "payment-"+long, accept
		a := startGatewayApp(t, &cfg)
		r, err := a.svc.Buy(context.Background(), seckill.BuyRequest{SaleID: "g", UserID: "alice", Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		body, sig := signed(t, cfg.PaymentSecret, "pay_minted", r.Reservation)
		for _, path := range []string{"/api/v1/payments/webhook", "/api/v1/payments/webhook/webhook"} {
			status, out := postTo(t, a, path, "", body, payment.SignatureHeader, sig)
			switch {
			case !accept && (status != http.StatusNotFound || out["code"] != "not_found"):
				t.Fatalf("the built-in webhook at %s with stripe: %d %v, want 404 not_found", path, status, out)
			case accept && (status != 200 || out["result"] == nil):
				t.Fatalf("the built-in webhook at %s with --accept-webhook: %d %v, want 200", path, status, out)
			}
		}
		got, err := a.svc.Reservation(context.Background(), r.Reservation.ID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]seckill.ReservationStatus{false: seckill.StatusHeld, true: seckill.StatusPaid}[accept]; got.Status != want {
			t.Fatalf("accept-webhook %v: the reservation is %s, want %s", accept, got.Status, want)
		}
	}
}

// TestAcceptWebhookFlag: SECKILL_ACCEPT_WEBHOOK and --accept-webhook set it (the flag wins); a
// value that is not a boolean is an error secrets reports.
func TestAcceptWebhookFlag(t *testing.T) {
	for _, c := range []struct {
		env, flag string
		want      bool
		wantErr   bool
	}{{"", "", false, false}, {"1", "", true, false}, {"true", "--accept-webhook=false", false, false}, {"", "--accept-webhook", true, false}, {"maybe", "", false, true}} {
		var cfg config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		bindConfig(fs, func(k string) string { return map[string]string{"SECKILL_ACCEPT_WEBHOOK": c.env}[k] }, &cfg)
		var args []string
		if c.flag != "" {
			args = []string{c.flag}
		}
		if err := parseFlags(fs, args, io.Discard); err != nil {
			t.Fatal(err)
		}
		if cfg.AcceptWebhook != c.want || (cfg.envErr != nil) != c.wantErr {
			t.Errorf("env %q flag %q: AcceptWebhook %v, env error %v; want %v, error %v", c.env, c.flag, cfg.AcceptWebhook, cfg.envErr, c.want, c.wantErr)
		}
	}
}
