package main

import (
	"html/template"
	"net/http"

	"github.com/seckill-go/seckill/payment"
)

// gatewayPageTmpl is the dev mock gateway's payment page. A real gateway would show a payment
// form here; the mock one has already settled the payment (or is about to) and only says where
// it stands: being processed, succeeded, paid back or closed unpaid. It is shown in the storefront's frame or in a tab of its own, so its link back to the
// shop leaves any frame. A payment id the mock did not issue gets the same page with "not
// found" and status 404, as a real gateway answers a made-up checkout link.
var gatewayPageTmpl = template.Must(template.New("gateway").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{if .Known}}Mock payment gateway{{else}}Payment not found — mock payment gateway{{end}}</title>
<style>
 body{font:16px/1.45 system-ui,sans-serif;margin:0;padding:1rem;color:#1d2126;background:#fffbea}
 h1{font-size:1.1rem;margin:0 0 .4rem} p{margin:.4rem 0} code{overflow-wrap:anywhere}
 a{display:inline-block;margin-top:.4rem;padding:.45rem .9rem;border-radius:8px;background:#0b57d0;color:#fff;text-decoration:none}
 a:focus-visible{outline:3px solid #0b57d0;outline-offset:2px}
</style>
</head>
<body>
<h1>Mock payment gateway</h1>
{{if eq .State "succeeded"}}<p data-testid="gateway-message">Payment <code>{{.ID}}</code> succeeded; the shop has been told and confirms the order.</p>
{{else if eq .State "refunded"}}<p data-testid="gateway-message">Payment <code>{{.ID}}</code> was paid back: the shop could not honour it.</p>
{{else if eq .State "closed"}}<p data-testid="gateway-message">Payment <code>{{.ID}}</code> was closed unpaid: its hold ended.</p>
{{else if .Known}}<p data-testid="gateway-message">Payment <code>{{.ID}}</code> is being processed; its signed webhook will confirm it.</p>
{{else}}<p data-testid="gateway-message">Payment not found: this gateway started no payment with this link.</p>
{{end}}<p><a href="/" target="_top">Back to the shop</a></p>
</body>
</html>
`))

// gatewayPage serves GET /mock-gateway/pay/{id} (--dev only): the page the storefront shows
// after /pay, at the mock gateway's redirect_url.
func gatewayPage(g *payment.MockGateway) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		st, err := g.State(r.Context(), id)
		known := err == nil && st != payment.StateUnknown
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !known {
			w.WriteHeader(http.StatusNotFound)
		}
		_ = gatewayPageTmpl.Execute(w, struct {
			Known bool
			State payment.State // what the page says: processing until the mock has settled it
			ID    string
		}{known, st, id})
	}
}
