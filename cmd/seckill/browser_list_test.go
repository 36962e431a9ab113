package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
)

// TestBrowserListPages: with more listed sales than a page holds, the storefront and the
// dashboard show the first page by start, and "More sales" shows the next; on the last page
// it is gone. An unlisted sale is on the dashboard's pages only.
func TestBrowserListPages(t *testing.T) {
	b := startBrowser(t)
	a, cfg := startDevApp(t, nil)
	deadline := time.Now().Add(60 * time.Second)
	n := seckill.DefaultListLimit + 3
	admin := client.New(a.url, client.WithToken(cfg.AdminToken))
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	for i := range n { // created last-first: the pages go by start, not by creation
		j := n - 1 - i
		s := client.NewSale{ID: fmt.Sprintf("p%02d", j), Name: fmt.Sprintf("Item %02d", j), PriceCents: 100, Stock: 1,
			StartsAt: start.Add(time.Duration(j) * time.Minute), EndsAt: start.Add(24 * time.Hour)}
		if j == 1 {
			s.Listed = client.Ptr(false)
		}
		if _, err := admin.CreateSale(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	link := func(i int) string { return jsQ(fmt.Sprintf(`[data-testid=sale-link-p%02d]`, i)) }
	more := jsQ(`[data-testid=more-sales]`)

	shop := b.newTab("shopper", deadline, false)
	shop.do("open the storefront", chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=sale-link-p00]`)))
	// The first page: 50 listed sales by start (p01 is unlisted), so p00 and p02…p50.
	shop.wait("the first page", link(seckill.DefaultListLimit)+` !== null && !`+more+`.hidden`)
	if evalIn[bool](shop, link(seckill.DefaultListLimit+1)+` !== null || `+link(1)+` !== null`) {
		shop.fail("the first page shows a sale of the second page, or the unlisted one")
	}
	if got := evalIn[string](shop, `[...document.querySelectorAll('[data-testid=sale-list] a')].slice(0, 3).map(a => a.dataset.sale).join(' ')`); got != "p00 p02 p03" {
		shop.fail("the list begins %q, want p00 p02 p03 (by start)", got)
	}
	shop.do("ask for more", chromedp.Click(chromedp.CSS(`[data-testid=more-sales]`)))
	shop.wait("the second page, and no more", link(n-1)+` !== null && `+more+`.hidden`)
	if got := evalIn[int](shop, `document.querySelectorAll('[data-testid=sale-list] a').length`); got != n-1 {
		shop.fail("%d sales shown, want %d", got, n-1)
	}

	adm := b.newTab("admin", deadline, false)
	row := func(i int) string { return jsQ(fmt.Sprintf(`[data-testid=sale-row-p%02d]`, i)) }
	adm.do("open the dashboard", chromedp.Navigate(a.url+"/admin"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=admin-token]`)))
	adm.do("enter the admin token",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=admin-token]`), cfg.AdminToken),
		chromedp.Click(chromedp.CSS(`[data-testid=admin-save]`)))
	// Every sale: the unlisted p01 too, so the first page ends at p49.
	adm.wait("the first page", row(1)+` !== null && `+row(seckill.DefaultListLimit-1)+` !== null && !`+more+`.hidden`)
	if evalIn[bool](adm, row(seckill.DefaultListLimit)+` !== null`) {
		adm.fail("the first page shows a sale of the second")
	}
	adm.do("ask for more", chromedp.Click(chromedp.CSS(`[data-testid=more-sales]`)))
	adm.wait("the second page, and no more", row(n-1)+` !== null && `+more+`.hidden`)
	if got := evalIn[int](adm, `document.querySelectorAll('#sale-rows tr').length`); got != n {
		adm.fail("%d rows, want %d", got, n)
	}
}
