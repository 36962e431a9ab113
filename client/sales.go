package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/url"
	"strconv"
)

// The sales: the storefront's reads (anyone) and the admin's writes (the admin token).

// ListOptions picks a page of ListSales: every field may be left zero.
type ListOptions struct {
	// All lists every sale, unlisted ones included (admin only).
	All bool
	// Status keeps the sales in one window now: "upcoming", "selling" or "ended"; "" keeps all.
	Status string
	// Limit is the page's size, 1 to seckill.MaxListLimit; 0: the server's default
	// (seckill.DefaultListLimit).
	Limit int
	// Cursor is the NextCursor of the page before; "": the first page. A cursor must be used
	// with the All and Status it was answered for.
	Cursor string
}

// ListSales is GET /api/v1/sales: one page of the sales (listed ones, or every sale with All),
// by starts_at then id. NextCursor is where the next page starts; "" on the last page.
func (c *Client) ListSales(ctx context.Context, opts ListOptions) (SaleList, error) {
	q := url.Values{}
	if opts.All {
		q.Set("all", "true")
	}
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	path := "/api/v1/sales"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out SaleList
	_, err := c.do(ctx, call{method: "GET", path: path, out: &out})
	return out, err
}

// Sales walks every page of the list from opts (its Cursor, if any, is where it starts),
// yielding each sale in order, or the error that ended the walk. A sale created during the
// walk is yielded if its place is after the page already read (docs/API.md).
func (c *Client) Sales(ctx context.Context, opts ListOptions) iter.Seq2[Sale, error] {
	return func(yield func(Sale, error) bool) {
		for {
			page, err := c.ListSales(ctx, opts)
			if err != nil {
				yield(Sale{}, err)
				return
			}
			for _, s := range page.Sales {
				if !yield(s, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			opts.Cursor = page.NextCursor
		}
	}
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
