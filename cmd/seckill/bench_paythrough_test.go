package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill-go/seckill/loadgen"
	"github.com/seckill-go/seckill/payment"
)

// TestBenchWebhookSchemeRefundsOwedByHand: against a target whose payments come through the
// built-in webhook scheme (a shop's own payment service), the bench signs the webhooks itself,
// and the refunds owed to late payers, which that scheme cannot pay back, are reported as owed
// by hand (the shop's list), not as failures, in the table, its footnote and the JSON alike.
func TestBenchWebhookSchemeRefundsOwedByHand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: "sqlite://" + filepath.Join(t.TempDir(), "w.db"),
		AdminToken: strings.Repeat("a", 40), AuthSecret: strings.Repeat("s", 40), PaymentSecret: strings.Repeat("p", 40),
		HTTP: httpLimits{}.withoutPerAddr()} // the crowd is this process: one address
	a, err := startApp(context.Background(), cfg, appOptions{buyRate: -1}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.close(context.Background()) })
	if a.payGW.Name() != payment.WebhookName {
		t.Fatalf("gateway %q; this test needs the built-in webhook scheme", a.payGW.Name())
	}
	env := map[string]string{"SECKILL_ADMIN_TOKEN": cfg.AdminToken, "SECKILL_AUTH_SECRET": cfg.AuthSecret, "SECKILL_PAYMENT_SECRET": cfg.PaymentSecret}
	run := func(extra ...string) string {
		var out, errb bytes.Buffer
		args := append([]string{"--target", a.url, "--units", "20", "--buyers", "600", "--hold", "1s", "--mix", "cancel=10,abandon=10,late=30,retry=10"}, extra...)
		if err := bench(context.Background(), args, func(k string) string { return env[k] }, &out, &errb); err != nil {
			t.Fatalf("bench: %v\n%s%s", err, out.String(), errb.String())
		}
		return out.String()
	}
	out := run()
	for _, want := range []string{"invariants  ok", "payments: signed webhooks", ", owed by hand ", ", failed 0,", "listed in GET /api/v1/refunds for the shop to pay back itself"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	var rep struct {
		Database struct {
			Refunds       int `json:"refunds"`
			RefundsFailed int `json:"refunds_failed"`
		} `json:"database"`
		ByHand int `json:"refunds_owed_by_hand"`
	}
	js := run("--json")
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, js)
	}
	if rep.Database.Refunds == 0 {
		t.Fatalf("no refund owed: the late payers' refunds are what this test is about\n%s", js)
	}
	if rep.ByHand != rep.Database.Refunds || rep.Database.RefundsFailed != rep.Database.Refunds {
		t.Fatalf("refunds %d, refund_failed %d, owed by hand %d; want every refund owed by hand", rep.Database.Refunds, rep.Database.RefundsFailed, rep.ByHand)
	}
}

// TestBenchPaysThroughTheTargetsGateway: the gateway the target names decides how the crowd
// pays, whatever else the environment holds; a missing secret or stand-in is an error naming
// the flags, before the crowd.
func TestBenchPaysThroughTheTargetsGateway(t *testing.T) {
	all := benchOptions{paymentSecret: "p", stripeSecret: "whsec_x", stripeStandIn: "http://127.0.0.1:12100/"}
	for _, c := range []struct {
		gateway       string
		o             benchOptions
		signs, stripe bool
		wantErr       string
	}{
		{"mock", all, false, false, ""},
		{"webhook", all, true, false, ""},
		{"stripe", all, false, true, ""},
		{"", all, true, true, ""}, // a target too old to say: as the flags say
		{"webhook", benchOptions{}, false, false, "--payment-secret"},
		{"stripe", benchOptions{paymentSecret: "p", stripeSecret: "whsec_x"}, false, false, "--stripe-stand-in"},
		{"alipay", all, false, false, `"alipay"`},
	} {
		var cfg loadgen.Config
		err := c.o.payThrough(c.gateway, &cfg)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %v; want an error naming %s", c.gateway, err, c.wantErr)
			}
			continue
		}
		if err != nil || (cfg.PaymentSecret != nil) != c.signs || (cfg.Stripe != nil) != c.stripe {
			t.Errorf("%q: err %v, signs webhooks %v, Stripe %v; want %v, %v", c.gateway, err, cfg.PaymentSecret != nil, cfg.Stripe != nil, c.signs, c.stripe)
		}
	}
}
