package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/seckill-go/seckill"
)

// The operator's reads (the admin token), and the calls about the server itself.

// Audit is GET /api/v1/sales/{id}/audit (admin): the invariants checked for one sale, and the
// gateway that takes this instance's payments.
func (c *Client) Audit(ctx context.Context, saleID string) (Audit, error) {
	var out Audit
	_, err := c.do(ctx, call{method: "GET", path: salePath(saleID) + "/audit", out: &out})
	return out, err
}

// Refunds is GET /api/v1/refunds (admin): the refunds with status (""; refund_failed, the ones
// an operator must settle by hand), oldest payment first, at most limit (0: the server's
// default, 100; at most 1 000).
func (c *Client) Refunds(ctx context.Context, status seckill.RefundStatus, limit int) ([]seckill.Refund, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", string(status))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/api/v1/refunds"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct {
		Refunds []seckill.Refund `json:"refunds"`
	}
	_, err := c.do(ctx, call{method: "GET", path: path, out: &out})
	return out.Refunds, err
}

// Export is GET /api/v1/export (admin): where each sink of the event export stands on the
// instance that answers (none when it exports nothing).
func (c *Client) Export(ctx context.Context) ([]SinkStatus, error) {
	var out struct {
		Sinks []SinkStatus `json:"sinks"`
	}
	_, err := c.do(ctx, call{method: "GET", path: "/api/v1/export", out: &out})
	return out.Sinks, err
}

// Hot is GET /api/v1/hot (admin): the instance's hot sales (the count, and the first 100 ids
// in the sale list's order) and, with the Redis engine, its cold cache (zeros with memory).
func (c *Client) Hot(ctx context.Context) (HotStatus, error) {
	var out HotStatus
	_, err := c.do(ctx, call{method: "GET", path: "/api/v1/hot", out: &out})
	return out, err
}

// Activity is GET /api/v1/sales/{id}/activity (admin): the dashboard's feed.
func (c *Client) Activity(ctx context.Context, saleID string) (Activity, error) {
	var out Activity
	_, err := c.do(ctx, call{method: "GET", path: salePath(saleID) + "/activity", out: &out})
	return out, err
}

// DevToken is POST /api/v1/dev/token: a user JWT valid for 24 h, from a server run with --dev
// only (otherwise not_found).
func (c *Client) DevToken(ctx context.Context, user string) (string, error) {
	body, err := json.Marshal(struct {
		User string `json:"user"`
	}{user})
	if err != nil {
		return "", err
	}
	var out struct {
		Token string `json:"token"`
	}
	_, err = c.do(ctx, call{method: "POST", path: "/api/v1/dev/token", body: body, out: &out})
	return out.Token, err
}

// SignIn is GET /api/v1/signin: where the storefront sends buyers to sign in.
func (c *Client) SignIn(ctx context.Context) (SignIn, error) {
	var out SignIn
	_, err := c.do(ctx, call{method: "GET", path: "/api/v1/signin", out: &out})
	return out, err
}

// Ready is GET /readyz: whether this instance can serve buys (an *Error with Status 503 when
// it cannot; "degraded" when only the database is down).
func (c *Client) Ready(ctx context.Context) (Readiness, error) {
	var out Readiness
	_, err := c.do(ctx, call{method: "GET", path: "/readyz", out: &out})
	return out, err
}

// Health is GET /healthz: nil while the process serves HTTP (a load balancer's liveness check).
func (c *Client) Health(ctx context.Context) error {
	var out struct {
		Status string `json:"status"`
	}
	_, err := c.do(ctx, call{method: "GET", path: "/healthz", out: &out})
	return err
}
