package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
)

// A payment gateway's calls: signed notifications of payments (docs/API.md, Payment webhook),
// as the shop's payment service posts them for the built-in scheme (Webhook), or any configured
// gateway's (Notify). A gateway must retry every answer other than 200, signing each retry
// afresh: the client does both with WithRetries, for 503 and 429; a caller retrying itself
// calls again (each call signs anew).

// Webhook posts the built-in scheme's notification of ev to POST /api/v1/payments/webhook,
// signed with secret (the servers' SECKILL_PAYMENT_SECRET; package payment's Sign), and answers
// what the server did with it: applied, late_applied, duplicate, refund_required or ignored.
// A refused signature is invalid_signature.
func (c *Client) Webhook(ctx context.Context, secret []byte, ev payment.Event) (seckill.PaymentResult, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return "", err
	}
	return c.Notify(ctx, "", func(now time.Time) payment.SignedBody { return payment.Signed(secret, now, body) })
}

// Notify posts a notification to the route of the named gateway, POST
// /api/v1/payments/webhook/{gateway} ("": the built-in scheme's original route, POST
// /api/v1/payments/webhook), signed by sign, which is called for every attempt with the time
// to sign at (a Stripe event: stripegw.SignedEvent). The answer is the server's result.
func (c *Client) Notify(ctx context.Context, gateway string, sign func(now time.Time) payment.SignedBody) (seckill.PaymentResult, error) {
	target := c.base + WebhookPath(gateway)
	// A gateway is known by its signature, not by a token: none is sent.
	resp, err := c.WithToken("").send(ctx, func() (*http.Request, error) {
		return payment.NewRequest(ctx, target, sign(time.Now()))
	})
	if err != nil {
		return "", err
	}
	var out WebhookResult
	err = decode(resp, &out)
	return out.Result, err
}

// WebhookPath is the route of the named gateway's notifications, /api/v1/payments/webhook/{gateway}
// ("": the built-in scheme's original route), for a gateway that is given a URL to post to (the
// mock gateway over HTTP, the Stripe stand-in).
func WebhookPath(gateway string) string {
	if gateway == "" {
		return "/api/v1/payments/webhook"
	}
	return "/api/v1/payments/webhook/" + url.PathEscape(gateway)
}
