package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
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

// holdAndPay holds a unit for user and asks /pay for it, through the API.
func holdAndPay(t *testing.T, a *app, cfg config, user string) (seckill.Reservation, seckill.PaymentIntent, error) {
	t.Helper()
	res, err := a.svc.Buy(context.Background(), seckill.BuyRequest{SaleID: "g", UserID: user, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := httpapi.MintToken([]byte(cfg.AuthSecret), user, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	intent, err := client.New(a.url, client.WithToken(tok)).Pay(context.Background(), res.Reservation.ID)
	return res.Reservation, intent, err
}

// notify posts our scheme's succeeded notification of r's payment paymentID, signed with
// secret, to the named gateway's route ("": the scheme's original route).
func notify(t *testing.T, a *app, gateway, secret, paymentID string, r seckill.Reservation) (seckill.PaymentResult, error) {
	t.Helper()
	body, err := json.Marshal(payment.Event{PaymentID: paymentID, ReservationID: r.ID, AmountCents: r.AmountCents, Status: payment.StatusSucceeded})
	if err != nil {
		t.Fatal(err)
	}
	return client.New(a.url).Notify(context.Background(), gateway, func(now time.Time) payment.SignedBody {
		return payment.Signed([]byte(secret), now, body)
	})
}

// statusOf is the HTTP status of an error answer (200 for none).
func statusOf(err error) int {
	if e, ok := errors.AsType[*client.Error](err); ok {
		return e.Status
	}
	return http.StatusOK
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
	r, _, err := holdAndPay(t, a, cfg, "alice")
	if statusOf(err) != http.StatusServiceUnavailable || client.CodeOf(err) != seckill.CodeUnavailable {
		t.Fatalf("/pay with the webhook gateway: %v, want 503 unavailable", err)
	}
	if result, err := notify(t, a, payment.WebhookName, cfg.PaymentSecret, "pay_shop_1", r); err != nil || result != seckill.PaymentApplied {
		t.Fatalf("the shop's webhook: %v %v, want 200 applied", result, err)
	}
	if _, err := notify(t, a, payment.MockName, cfg.PaymentSecret, "pay_shop_1", r); statusOf(err) != http.StatusNotFound {
		t.Fatalf("the mock's route without the mock: %v, want 404", err)
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
	r, intent, err := holdAndPay(t, a, cfg, "alice")
	if err != nil || intent.PaymentID == "" {
		t.Fatalf("/pay: %+v %v", intent, err)
	}
	if err := a.gateway.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if result, err := notify(t, a, payment.MockName, cfg.PaymentSecret, intent.PaymentID, r); err != nil || result != seckill.PaymentDuplicate {
		t.Fatalf("the mock's payment again at its route: %v %v, want 200 duplicate", result, err)
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
	_, intent, err := holdAndPay(t, a, cfg, "alice")
	if err != nil || intent.PaymentID == "" || intent.RedirectURL == "" {
		t.Fatalf("/pay with stripe: %+v %v, want a session and its page", intent, err)
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
		for _, route := range []string{"", payment.WebhookName} { // the original route and the per-gateway one
			result, err := notify(t, a, route, cfg.PaymentSecret, "pay_minted", r.Reservation)
			switch {
			case !accept && (statusOf(err) != http.StatusNotFound || client.CodeOf(err) != seckill.CodeNotFound):
				t.Fatalf("the built-in webhook at %q with stripe: %v, want 404 not_found", client.WebhookPath(route), err)
			case accept && (err != nil || result == ""):
				t.Fatalf("the built-in webhook at %q with --accept-webhook: %v %v, want 200", client.WebhookPath(route), result, err)
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
