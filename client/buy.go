package client

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"strconv"

	"github.com/seckill-go/seckill"
)

// A buyer's calls (a user's JWT): the purchase path, the buy, the reservation, the payment,
// the orders.

// Path is GET /api/v1/sales/{id}/path: the user's secret path to buy at, once the sale has
// started (before: not_started; after its end: ended). Fetch it once per user and sale.
func (c *Client) Path(ctx context.Context, saleID string) (PurchasePath, error) {
	var out PurchasePath
	_, err := c.do(ctx, call{method: "GET", path: salePath(saleID) + "/path", out: &out})
	return out, err
}

// BuyPath is the path Path answers for a purchase token minted by the caller itself
// (purchasetoken.New, internal to seckill, with the servers' auth secret), as a benchmark that mints a crowd's
// tokens does. Clients fetch it with Path instead.
func BuyPath(saleID, purchaseToken string) string {
	return salePath(saleID) + "/buy/" + url.PathEscape(purchaseToken)
}

// Buy is POST {path} (the PurchasePath's Path): buy quantity units (0 means 1). The answer is
// the reservation, held (Status held) or queued behind other buyers (Status queued, Position
// its place); a refusal is an *Error: sold_out, queue_full, limit_exceeded, ended, not_started,
// rate_limited….
//
// idempotencyKey, if not empty, makes the buy safe to retry: send a fresh random key per
// intended purchase and reuse it on retries; a retry with it answers the same reservation, as
// it is now (Replayed). A client with retries (WithRetries) makes a key of its own when given
// none, so that its retries are safe.
func (c *Client) Buy(ctx context.Context, path string, quantity int, idempotencyKey string) (Bought, error) {
	body := quantityOne
	if quantity > 1 {
		body = []byte(`{"quantity":` + strconv.Itoa(quantity) + `}`)
	}
	if idempotencyKey == "" && c.retries > 0 {
		idempotencyKey = rand.Text()
	}
	var out Bought
	status, err := c.do(ctx, call{method: "POST", path: path, body: body, idemKey: idempotencyKey, out: &out.Reservation})
	out.Replayed = status == http.StatusOK
	return out, err
}

// quantityOne is the body of nearly every buy.
var quantityOne = []byte(`{"quantity":1}`)

// Reservation is GET /api/v1/reservations/{rid}: the caller's reservation as it is now (a
// queued buyer learns of its hold this way). Another user's is not_found, like an unknown one.
func (c *Client) Reservation(ctx context.Context, id string) (seckill.Reservation, error) {
	var out seckill.Reservation
	_, err := c.do(ctx, call{method: "GET", path: reservationPath(id), out: &out})
	return out, err
}

// Cancel is DELETE /api/v1/reservations/{rid}: a held or queued reservation is cancelled (its
// units go to the next buyer); an already ended one is answered as it is; a paid one is
// conflict.
func (c *Client) Cancel(ctx context.Context, id string) (seckill.Reservation, error) {
	var out seckill.Reservation
	_, err := c.do(ctx, call{method: "DELETE", path: reservationPath(id), out: &out})
	return out, err
}

// Pay is POST /api/v1/reservations/{rid}/pay: start the payment of a held reservation at the
// server's gateway, and send the buyer to the answer's RedirectURL; the payment's outcome comes
// later (read the reservation or the orders). A free hold is confirmed at once: the answer
// carries it, paid. A hold that is gone is hold_expired.
func (c *Client) Pay(ctx context.Context, id string) (seckill.PaymentIntent, error) {
	var out seckill.PaymentIntent
	_, err := c.do(ctx, call{method: "POST", path: reservationPath(id) + "/pay", out: &out})
	return out, err
}

// Orders is GET /api/v1/orders: the caller's succeeded payments, newest first, paid or
// refund_required (with where the refund stands).
func (c *Client) Orders(ctx context.Context) ([]seckill.Order, error) {
	var out struct {
		Orders []seckill.Order `json:"orders"`
	}
	_, err := c.do(ctx, call{method: "GET", path: "/api/v1/orders", out: &out})
	return out.Orders, err
}

func reservationPath(id string) string { return "/api/v1/reservations/" + url.PathEscape(id) }
