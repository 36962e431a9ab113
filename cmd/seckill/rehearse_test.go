package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// TestStripeRehearsal runs the rehearsal of docs/PAYMENTS.md with the real binary: `seckill
// stripe-rehearse` in front of stripe-mock, and `seckill serve --dev --gateway stripe` pointed
// at it. A buyer holds a unit, starts the payment, opens the session's page at the stand-in,
// clicks "Pay", is sent back to the shop, and the reservation is paid: by the stand-in's signed
// checkout.session.completed event, which serve verified with the same webhook secret. A second
// buyer lets a one-second hold run out: the closer expires the session, and its page then
// refuses the payment.
func TestStripeRehearsal(t *testing.T) {
	mock := testenv.StripeMock(t)
	bin := seckillBinary(t)
	const whsec = "whsec_rehearsal_0123456789abcdef0123456789abcdef"
	standInPort, servePort := freePort(t), freePort(t)
	c := &cluster{t: t, bin: bin, env: append(os.Environ(), "SECKILL_STRIPE_WEBHOOK_SECRET="+whsec)}
	standIn := c.spawn("stripe-rehearse", "stripe-rehearse", "--addr", "127.0.0.1:"+standInPort, "--stripe-mock", mock,
		"--webhook-url", "http://127.0.0.1:"+servePort)
	standInURL := "http://127.0.0.1:" + standInPort
	waitFor(t, "the stand-in", func() bool { return strings.Contains(standIn.log.String(), "Stripe stand-in at "+standInURL) })
	db := filepath.Join(t.TempDir(), "r.db")
	serve := c.spawn("serve", "serve", "--dev", "--addr", "127.0.0.1:"+servePort, "--db", "sqlite://"+db,
		"--gateway", "stripe", "--stripe-secret-key", "sk_test_rehearsal", "--stripe-api-url", standInURL)
	shop := "http://127.0.0.1:" + servePort
	waitFor(t, "serve", func() bool { return strings.Contains(serve.log.String(), "msg=serving") })
	admin := regexp.MustCompile(`SECKILL_ADMIN_TOKEN=([0-9a-f]+)`).FindStringSubmatch(serve.log.String())
	if admin == nil {
		t.Fatalf("serve --dev printed no admin token:\n%s", serve.log.String())
	}
	ctx := context.Background()
	for _, sale := range []client.NewSale{{ID: "r", Name: "rehearsal", PriceCents: 1999, Stock: 2, HoldSeconds: 120},
		{ID: "short", Name: "short hold", PriceCents: 500, Stock: 2, HoldSeconds: 1}} {
		if _, err := client.New(shop, client.WithToken(admin[1])).CreateSale(ctx, sale); err != nil {
			t.Fatal(err)
		}
	}

	// The buyer pays on the stand-in's page.
	rid, token, page := startStripePayment(t, shop, "r", "alice")
	if !strings.HasPrefix(page, standInURL+"/checkout/") {
		t.Fatalf("redirect_url %q; want the stand-in's hosted page", page)
	}
	if _, body := get(t, page); !strings.Contains(body, ">Pay</button>") || !strings.Contains(body, "19.99 USD") {
		t.Fatalf("the hosted page shows no Pay button for 19.99 USD:\n%s", body)
	}
	resp, err := http.PostForm(page, nil) // "Pay", then back to the shop (303, followed)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.String() != shop+"/#/sale/r" {
		t.Fatalf("after paying: %d at %s; want the sale's page in the shop's storefront", resp.StatusCode, resp.Request.URL)
	}
	waitFor(t, "the reservation paid", func() bool { return reservationStatus(t, shop, rid, token) == "paid" })

	// The other buyer's hold runs out: the session is expired, and too late to pay.
	rid, token, page = startStripePayment(t, shop, "short", "bob")
	waitFor(t, "the session expired", func() bool { _, body := get(t, page); return strings.Contains(body, "expired") })
	if resp, err := http.PostForm(page, nil); err != nil || resp.StatusCode != http.StatusConflict {
		t.Fatalf("paying an expired session: %v %v; want 409", resp, err)
	}
	if st := reservationStatus(t, shop, rid, token); st != "expired" {
		t.Fatalf("the second reservation is %q; want expired", st)
	}
	for _, want := range []string{"event=checkout.session.completed", `{\"result\":\"applied\"}`, "event=checkout.session.expired"} {
		waitFor(t, "the stand-in's log of "+want, func() bool { return strings.Contains(standIn.log.String(), want) })
	}
	if strings.Contains(serve.log.String()+standIn.log.String(), whsec) {
		t.Fatal("a log shows the webhook secret")
	}
}

// startStripePayment has user hold one unit of sale and start its payment; it returns the
// reservation id, the user's token and the payment's redirect_url.
func startStripePayment(t *testing.T, shop, sale, user string) (rid, token, redirect string) {
	t.Helper()
	ctx := context.Background()
	step := func(n int, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: step %d: %v", user, n, err)
		}
	}
	tok, err := client.New(shop).DevToken(ctx, user)
	step(1, err)
	buyer := client.New(shop, client.WithToken(tok))
	path, err := buyer.Path(ctx, sale)
	step(2, err)
	res, err := buyer.Buy(ctx, path.Path, 1, "")
	step(3, err)
	intent, err := buyer.Pay(ctx, res.ID)
	step(4, err)
	return res.ID, tok, intent.RedirectURL
}

func reservationStatus(t *testing.T, shop, rid, token string) string {
	t.Helper()
	r, err := client.New(shop, client.WithToken(token)).Reservation(context.Background(), rid)
	if err != nil {
		t.Fatal(err)
	}
	return string(r.Status)
}

// waitFor polls cond every 50 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestStripeRehearseRefusesBadInput: a non-loopback address, no webhook secret and a relative
// webhook URL are usage errors naming the fix; a stripe-mock still starting (503 twice) is
// waited for, one that never answers is named with how to install it.
func TestStripeRehearseRefusesBadInput(t *testing.T) {
	secret := func(k string) string {
		if k == "SECKILL_STRIPE_WEBHOOK_SECRET" {
			return "whsec_x"
		}
		return ""
	}
	for _, c := range []struct {
		args   []string
		getenv func(string) string
		want   string
	}{
		{[]string{"--addr", "0.0.0.0:12100"}, secret, "listens on loopback only"},
		{[]string{"--addr", "12100"}, secret, "want a loopback host:port"},
		{nil, noEnv, "--stripe-webhook-secret (or SECKILL_STRIPE_WEBHOOK_SECRET) is needed"},
		{[]string{"--webhook-url", "127.0.0.1:8080"}, secret, "want an absolute http(s) URL"},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), append([]string{"stripe-rehearse"}, c.args...), c.getenv, &out, &out); code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("stripe-rehearse %v: exit %d, %q; want 2 and %q", c.args, code, out.String(), c.want)
		}
	}

	var asked atomic.Int32
	starting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) <= 2 {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"id":"cs_probe"}`))
	}))
	defer starting.Close()
	if err := probeStripeMock(context.Background(), starting.URL); err != nil || asked.Load() != 3 {
		t.Fatalf("a stripe-mock answering on the third request: %v after %d requests", err, asked.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	if err := probeStripeMock(ctx, "http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "go install github.com/stripe/stripe-mock@v0.203.0") {
		t.Fatalf("no stripe-mock: %v; want the way to install it", err)
	}
}
