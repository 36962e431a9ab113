package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/payment/stripegw"
	"github.com/seckill-go/seckill/payment/stripegw/stripetest"
)

// stripeRehearse runs the Stripe stand-in (payment/stripegw/stripetest) in front of a local
// stripe-mock, so that a shop owner can run the whole Stripe flow on a laptop before going
// live (docs/PAYMENTS.md, "Rehearsal on a laptop"): serve's Stripe client calls it
// (SECKILL_STRIPE_API_URL), buyers pay on its hosted page, and it delivers Stripe's signed
// checkout.session.* events to serve's webhook. It listens on loopback only: it takes any test
// key and plays Stripe for whoever asks.
func stripeRehearse(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stripe-rehearse", flag.ContinueOnError)
	env := envOr(getenv)
	addr := fs.String("addr", "127.0.0.1:12100", "listen address of the stand-in, loopback only; give serve http://<addr> as SECKILL_STRIPE_API_URL")
	mock := fs.String("stripe-mock", env("SECKILL_STRIPE_MOCK_URL", "http://127.0.0.1:12111"), "URL of the stripe-mock that checks every API call against Stripe's specification (SECKILL_STRIPE_MOCK_URL)")
	target := fs.String("webhook-url", "http://127.0.0.1:8080", "the seckill instance that receives Stripe's events, or its full webhook URL (an instance's is <instance>"+client.WebhookPath(stripegw.Name)+")")
	secret := fs.String("stripe-webhook-secret", env("SECKILL_STRIPE_WEBHOOK_SECRET", ""), "signing secret (whsec_...) of the events, the same as serve's (SECKILL_STRIPE_WEBHOOK_SECRET)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	webhook, err := rehearsalWebhook(*target)
	if err != nil {
		return err
	}
	switch host, _, err := net.SplitHostPort(*addr); {
	case err != nil:
		return usageError{fmt.Errorf("stripe-rehearse: --addr %q: want a loopback host:port such as 127.0.0.1:12100", *addr)}
	case !isLoopbackHost(host):
		return usageError{fmt.Errorf("stripe-rehearse: --addr %q: the stand-in listens on loopback only (it accepts any test key)", *addr)}
	}
	if *secret == "" {
		return usageError{errors.New("stripe-rehearse: --stripe-webhook-secret (or SECKILL_STRIPE_WEBHOOK_SECRET) is needed: the events are signed with it, and serve checks them with the same secret")}
	}
	if err := probeStripeMock(ctx, *mock); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := stripetest.Start(stripetest.Config{Addr: *addr, MockURL: *mock, WebhookURL: webhook, WebhookSecret: *secret, Logger: log})
	if err != nil {
		return fmt.Errorf("stripe-rehearse: %w", err)
	}
	defer s.Close()
	fmt.Fprintf(stdout, `Stripe stand-in at %s, in front of stripe-mock at %s.
Give seckill serve: --gateway stripe --stripe-api-url %s (SECKILL_STRIPE_API_URL)
  with a test key (sk_test_...) and the same --stripe-webhook-secret.
Buyers pay on the session's page (%s<session id>); its checkout.session.completed and
checkout.session.expired events go to %s, signed.
Stop with Ctrl-C.
`, s.URL, *mock, s.URL, s.URL+stripetest.PagePrefix, webhook)
	log.Info("stripe stand-in serving", "url", s.URL, "stripe_mock", *mock, "webhook", webhook)
	<-ctx.Done()
	log.Info("stripe stand-in stopping")
	return nil
}

// rehearsalWebhook is the webhook URL of target: target itself when it has a path, else
// target's Stripe route.
func rehearsalWebhook(target string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(target))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageError{fmt.Errorf("stripe-rehearse: --webhook-url %q: want an absolute http(s) URL such as http://127.0.0.1:8080", target)}
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = client.WebhookPath(stripegw.Name)
	}
	return u.String(), nil
}

// probeStripeMock checks that a stripe-mock answers at base, so that a missing one is named
// at once rather than in every payment's error. It asks for up to probeWait, every 250 ms: a
// stripe-mock started a moment before takes a few seconds to load Stripe's specification.
func probeStripeMock(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	var err error
	for {
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/checkout/sessions/cs_probe", nil)
		if err != nil {
			break
		}
		req.SetBasicAuth("sk_test_probe", "")
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("answered %s", resp.Status)
		}
		if !wait.Sleep(ctx, 250*time.Millisecond) {
			break
		}
	}
	return fmt.Errorf("stripe-rehearse: no stripe-mock at %s (%v): install it with `go install github.com/stripe/stripe-mock@v0.203.0`, run `stripe-mock`, and pass its HTTP address as --stripe-mock", base, err)
}

// probeWait is how long stripe-rehearse waits for stripe-mock to answer.
const probeWait = 10 * time.Second
