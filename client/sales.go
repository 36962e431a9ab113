package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
)

// The sales: the storefront's reads (anyone) and the admin's writes (the admin token).

// ListSales is GET /api/v1/sales: the listed sales, oldest first; with all, every sale,
// unlisted ones included (admin only).
func (c *Client) ListSales(ctx context.Context, all bool) (SaleList, error) {
	path := "/api/v1/sales"
	if all {
		path += "?all=true"
	}
	var out SaleList
	_, err := c.do(ctx, call{method: "GET", path: path, out: &out})
	return out, err
}

// Sale is GET /api/v1/sales/{id}: one sale, listed or not, with its live stock.
func (c *Client) Sale(ctx context.Context, id string) (Sale, error) {
	var out Sale
	_, err := c.do(ctx, call{method: "GET", path: salePath(id), out: &out})
	return out, err
}

// CreateSale is POST /api/v1/sales (admin): it creates the sale and answers it. An existing
// id is conflict; a sale that breaks a rule is invalid_argument, and is not created.
func (c *Client) CreateSale(ctx context.Context, s NewSale) (Sale, error) {
	body, err := json.Marshal(s)
	if err != nil {
		return Sale{}, err
	}
	var out Sale
	_, err = c.do(ctx, call{method: "POST", path: "/api/v1/sales", body: body, out: &out})
	return out, err
}

// SetListed is PATCH /api/v1/sales/{id} (admin): it puts the sale on the storefront's list or
// takes it off. An unlisted sale still sells to anyone who has its link.
func (c *Client) SetListed(ctx context.Context, id string, listed bool) (Sale, error) {
	body := []byte(`{"listed":false}`)
	if listed {
		body = []byte(`{"listed":true}`)
	}
	var out Sale
	_, err := c.do(ctx, call{method: "PATCH", path: salePath(id), body: body, out: &out})
	return out, err
}

// DeleteSale is DELETE /api/v1/sales/{id} (admin): it deletes a sale nobody has reserved in.
// Any reservation makes it conflict (hide the sale instead: SetListed).
func (c *Client) DeleteSale(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: "DELETE", path: salePath(id)})
	return err
}

// AddStock is POST /api/v1/sales/{id}/stock (admin): add more units (≥ 1), which go to queued
// buyers first.
func (c *Client) AddStock(ctx context.Context, id string, add int) (Sale, error) {
	var out Sale
	body := []byte(`{"add":` + strconv.Itoa(add) + `}`)
	_, err := c.do(ctx, call{method: "POST", path: salePath(id) + "/stock", body: body, out: &out})
	return out, err
}

// CloseSale is POST /api/v1/sales/{id}/close (admin): the sale ends now. Queued buyers are
// rejected; holds can still be paid until they expire. Closing again is harmless.
func (c *Client) CloseSale(ctx context.Context, id string) (Sale, error) {
	var out Sale
	_, err := c.do(ctx, call{method: "POST", path: salePath(id) + "/close", out: &out})
	return out, err
}

// salePath is a sale's path. Ids are [A-Za-z0-9_.-], which need no escaping: PathEscape then
// returns its argument as it is, without allocating.
func salePath(id string) string { return "/api/v1/sales/" + url.PathEscape(id) }
