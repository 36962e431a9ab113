package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/seckill-go/seckill/client"
)

// TestBrowserFreeSale: a free sale's hold (price 0) offers "Confirm (free)" rather than a
// price to pay; confirming it makes it paid at once, with no gateway page, and lists the order.
func TestBrowserFreeSale(t *testing.T) {
	b := startBrowser(t)
	a, cfg := startDevApp(t, nil)
	tb := b.newTab("alice", time.Now().Add(60*time.Second), false)
	tb.do("open the storefront", chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#view-list`)))
	tb.signIn("alice")
	start := time.Now().UTC().Add(-time.Second)
	createSale(t, a, cfg, client.NewSale{ID: "gift", Name: "Gift", PriceCents: 0, Stock: 5, HoldSeconds: 60, StartsAt: start, EndsAt: start.Add(time.Hour)})
	tb.do("open the sale", chromedp.Evaluate[chromedp.Void](`location.hash = '#/sale/gift'`))
	tb.wait("the buy button is enabled", jsQ(`[data-testid=sale-status]`)+`?.dataset.status === 'active' && !`+jsQ(`[data-testid=buy-button]`)+`.disabled`)
	tb.do("buy", chromedp.Click(chromedp.CSS(`[data-testid=buy-button]`)))
	tb.wait("the reservation is held", jsQ(`[data-testid=reservation-status]`)+`?.dataset.status === 'held'`)
	tb.wait("the button confirms", jsQ(`[data-testid=pay-button]`)+`.textContent === 'Confirm (free)'`)
	rid := evalIn[string](tb, jsQ(`[data-testid=reservation]`)+`.dataset.rid`)
	tb.do("confirm", chromedp.Click(chromedp.CSS(`[data-testid=pay-button]`)))
	tb.wait("the reservation is paid", jsQ(`[data-testid=reservation-status]`)+`.dataset.status === 'paid'`)
	tb.wait("the order is listed", fmt.Sprintf(`[...document.querySelectorAll('[data-testid=order-row]')].some(r => r.dataset.rid === %q && r.dataset.status === 'paid')`, rid))
	if shown := evalIn[bool](tb, jsQ(`[data-testid=gateway-link]`)+`?.offsetParent != null`); shown {
		tb.fail("a gateway page is offered for a free hold")
	}
	tb.shot("free-confirmed")
}
