package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/loadgen"
	"github.com/seckill-go/seckill/payment/stripegw/stripetest"
)

// TestBenchStripeThreeInstances is the money path's acceptance run: `seckill bench` against
// three Redis-engine instances whose gateway is Stripe (a stand-in in front of stripe-mock).
// Buyers start Checkout Sessions with POST /pay and pay on the stand-in's page; the bench plays
// Stripe, delivering signed events — some after the hold expired, some twice, some out of
// order — and some buyers reach the page only after their hold expired. The bench's verdict
// covers the invariants and, against the stand-in's record, that every refund_required payment
// was paid back exactly once and no paid one at all. Here the stand-in's own log is checked
// again, independently of the bench: sessions were closed when their holds ended, refunds were
// made, each once, and every refund request carried the payment's idempotency key.
func TestBenchStripeThreeInstances(t *testing.T) {
	skipShort(t)
	mock := testenv.StripeMock(t)
	standIn := stripetest.NewServer(mock)
	t.Cleanup(standIn.Close)
	const whsec = "whsec_bench_0123456789abcdef0123456789abcdef"
	c := startCluster(t, 3, "--gateway", "stripe", "--stripe-secret-key", "sk_test_0123456789abcdef0123456789abcdef",
		"--stripe-webhook-secret", whsec, "--stripe-api-url", standIn.URL)
	var urls []string
	for _, in := range c.insts {
		urls = append(urls, in.url)
	}
	env := map[string]string{"SECKILL_ADMIN_TOKEN": clusterAdmin, "SECKILL_AUTH_SECRET": clusterAuth}
	var out bytes.Buffer
	err := bench(context.Background(), []string{"--target", strings.Join(urls, ","), "--units", "100", "--buyers", "2000",
		"--mix", "cancel=10,abandon=20,late=20,retry=10", "--stripe-stand-in", standIn.URL, "--stripe-webhook-secret", whsec},
		func(k string) string { return env[k] }, &out, &out)
	if err != nil || !strings.Contains(out.String(), "100 / 100 of 100") || !strings.Contains(out.String(), "invariants  ok") {
		t.Fatalf("bench with Stripe against three instances: %v\n%s", err, out.String())
	}
	t.Log(out.String())

	expired, refundKeys := 0, map[string]int{}
	for _, q := range standIn.Requests() {
		switch {
		case q.Method == http.MethodPost && strings.HasSuffix(q.Path, "/expire") && q.Status == http.StatusOK:
			expired++
		case q.Method == http.MethodPost && q.Path == "/v1/refunds":
			if q.IdempotencyKey == "" {
				t.Errorf("a refund request without an idempotency key: %+v", q)
			}
			refundKeys[q.IdempotencyKey]++
		}
	}
	perSession, err := loadgen.StripeRefunds(context.Background(), http.DefaultClient, standIn.URL)
	if err != nil {
		t.Fatal(err)
	}
	if expired == 0 {
		t.Errorf("no Checkout Session was closed at Stripe, though abandoned holds expired")
	}
	if len(perSession) == 0 {
		t.Errorf("no refund was made: the late payments of resold units should have been refunded")
	}
	for id, n := range perSession {
		if n != 1 {
			t.Errorf("session %s was refunded %d times", id, n)
		}
	}
	if len(refundKeys) < len(perSession) {
		t.Errorf("%d sessions refunded with only %d idempotency keys", len(perSession), len(refundKeys))
	}
	t.Logf("stand-in: %d sessions closed, %d refunded (%d refund keys)", expired, len(perSession), len(refundKeys))
}
