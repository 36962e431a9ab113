package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
)

// rawWords are what a shopper must never read: the API's codes and statuses as they are on the
// wire, and plurals of one.
var rawWords = regexp.MustCompile(`\b(sold_out|queue_full|replayed|not_found|limit_exceeded|not_started|hold_expired|rate_limited|` +
	`invalid_token|invalid_argument|refund_required|refund_pending|refund_failed|invalid_signature)\b|` +
	`\b1 (units|buyers|seconds)\b|\bundefined\b|\bNaN\b`)

// noRawWords fails if the page's visible text has a raw code or a broken plural.
func (tb *tab) noRawWords(where string) {
	tb.t.Helper()
	text := evalIn[string](tb, `document.body.innerText`)
	if m := rawWords.FindString(text); m != "" {
		tb.fail("%s shows %q to a shopper:\n%s", where, m, text)
	}
}

// TestBrowserSalesOnStorefront: a sale made by `seckill bench` is unlisted: the storefront's
// list does not show it (its own page still works), the dashboard does and marks it; a sale
// nobody reserved in is deleted from the dashboard, one with reservations is refused; an
// unknown sale's page says "not found"; prices carry their currency; no page shows a raw code
// or "1 units"; the mock gateway's page refuses a payment id it did not issue.
func TestBrowserSalesOnStorefront(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser and runs a bench")
	}
	b := startBrowser(t)
	a, cfg := startDevApp(t, nil)
	deadline := time.Now().Add(90 * time.Second)

	// A bench run against the server: its sale is created unlisted.
	out, err := benchAgainst(t, a, cfg, "--sale", "benchrun", "--units", "3", "--buyers", "12", "--concurrency", "4")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	bench, err := client.New(a.url).Sale(context.Background(), "benchrun")
	if err != nil {
		t.Fatal(err)
	}
	if bench.Listed {
		t.Fatalf("the bench's sale is listed: %+v", bench.Sale)
	}
	createSale(t, a, cfg, client.NewSale{ID: "lamp", Name: "Desk lamp", PriceCents: 1999, Currency: "eur", Stock: 3, PerUserLimit: 2})
	createSale(t, a, cfg, client.NewSale{ID: "gone", Name: "Sold-out mug", PriceCents: 500, Stock: 0})
	createSale(t, a, cfg, client.NewSale{ID: "draft", Name: "Draft", PriceCents: 100, Stock: 1})

	shop := b.newTab("shopper", deadline, false)
	shopStorefront(t, a, shop)

	// The dashboard: every sale, the bench's marked unlisted; delete refused for a sale with
	// reservations, done for one without; hiding takes a sale off the storefront.
	adm := b.newTab("admin", deadline, false)
	adminDashboard(t, a, cfg, adm, shop)
}

// shopStorefront is the shopper's half of TestBrowserSalesOnStorefront: the list without the
// bench's sale, a sold-out sale, a hold paid through the mock gateway, an unknown sale.
func shopStorefront(t *testing.T, a *app, shop *tab) {
	shop.do("open the storefront", chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=sale-link-lamp]`)))
	shop.wait("the list is complete", jsQ(`[data-testid=sale-link-draft]`)+` !== null`)
	if evalIn[bool](shop, jsQ(`[data-testid=sale-link-benchrun]`)+` !== null || document.body.innerText.includes('seckill bench')`) {
		shop.fail("the storefront lists the bench's sale")
	}
	if price := evalIn[string](shop, jsQ(`[data-testid=sale-link-lamp] .card-price`)+`.textContent`); price != "€19.99" {
		shop.fail("the lamp's price reads %q, want €19.99", price)
	}
	shop.noRawWords("the list of sales")
	shop.shot("list-without-bench-sale")

	// The bench's sale is still reachable by its link.
	shop.do("open the bench's sale by link", chromedp.Evaluate[chromedp.Void](`location.hash = '#/sale/benchrun'`))
	shop.wait("the bench's sale page", jsQ(`[data-testid=sale-status]`)+`.dataset.status !== undefined && `+jsQ(`[data-testid=sale-status]`)+`.textContent !== ''`)
	shop.noRawWords("the bench's sale page")

	// A sold-out sale's page, signed in.
	shop.signIn("bob")
	shop.do("open the sold-out sale", chromedp.Evaluate[chromedp.Void](`location.hash = '#/sale/gone'`))
	shop.wait("the sold-out sale page", jsQ(`[data-testid=sale-status]`)+`.dataset.status === 'sold_out'`)
	shop.wait("its hint", jsQ(`[data-testid=buy-hint]`)+`.textContent !== ''`)
	shop.noRawWords("a sold-out sale's page")
	shop.shot("sold-out")

	// A hold: prices in euros on the button and the card, no raw word.
	shop.do("open the lamp", chromedp.Evaluate[chromedp.Void](`location.hash = '#/sale/lamp'`))
	shop.wait("the lamp can be bought", `!`+jsQ(`[data-testid=buy-button]`)+`.disabled`)
	if txt := evalIn[string](shop, jsQ(`[data-testid=buy-button]`)+`.textContent`); !strings.Contains(txt, "€19.99") {
		shop.fail("the buy button reads %q, want the price in euros", txt)
	}
	shop.do("buy", chromedp.Click(chromedp.CSS(`[data-testid=buy-button]`)))
	shop.wait("held", jsQ(`[data-testid=reservation-status]`)+`?.dataset.status === 'held'`)
	if txt := evalIn[string](shop, jsQ(`[data-testid=pay-button]`)+`.textContent`); !strings.Contains(txt, "€19.99") {
		shop.fail("the pay button reads %q, want the price in euros", txt)
	}
	shop.noRawWords("a sale page with a hold")
	shop.shot("held")
	shop.do("pay", chromedp.Click(chromedp.CSS(`[data-testid=pay-button]`)))
	shop.wait("the gateway's page is linked", jsQ(`[data-testid=gateway-link]`)+`?.href.includes('/mock-gateway/pay/')`)
	gateway := evalIn[string](shop, jsQ(`[data-testid=gateway-link]`)+`.href`)
	shop.wait("paid", jsQ(`[data-testid=reservation-status]`)+`?.dataset.status === 'paid'`)
	shop.wait("the order is listed", jsQ(`[data-testid=order-row]`)+` !== null`)
	if txt := evalIn[string](shop, jsQ(`[data-testid=order-row]`)+`.textContent`); !strings.Contains(txt, "1 unit ·") || !strings.Contains(txt, "€19.99") {
		shop.fail("the order reads %q, want 1 unit at €19.99", txt)
	}
	shop.noRawWords("a sale page after paying")
	shop.shot("paid")

	// The mock gateway's page: its own payment, and an id it never issued.
	// The order is paid: the page says the payment succeeded, no longer that it is being processed.
	if code, body := get(t, gateway); code != http.StatusOK || !strings.Contains(body, "succeeded") || strings.Contains(body, "being processed") {
		t.Fatalf("gateway page of a real payment: %d\n%s", code, body)
	}
	made := a.url + "/mock-gateway/pay/pay_0123456789abcdef0123456789abcdef"
	if code, body := get(t, made); code != http.StatusNotFound || !strings.Contains(body, "Payment not found") || strings.Contains(body, "succeeded") {
		t.Fatalf("gateway page of a made-up payment: %d, want 404 \"Payment not found\"\n%s", code, body)
	}
	shop.do("open a made-up gateway page", chromedp.Navigate(made), chromedp.WaitVisible(chromedp.CSS(`[data-testid=gateway-message]`)))
	shop.shot("gateway-unknown-payment")

	// An unknown sale: "not found", not a page of dashes.
	shop.do("open an unknown sale", chromedp.Navigate(a.url+"/#/sale/no-such-sale"))
	shop.wait("not found is shown", jsQ(`[data-testid=sale-missing]`)+`?.offsetParent !== null`)
	if evalIn[bool](shop, jsQ(`#view-sale`)+`.offsetParent !== null || document.body.innerText.includes('–')`) {
		shop.fail("the unknown sale's page shows the sale view or dashes")
	}
	if !evalIn[bool](shop, `document.body.innerText.includes('Sale not found')`) {
		shop.fail("the unknown sale's page does not say \"Sale not found\"")
	}
	// A fresh page learns the currency of an order's sale from the sale itself.
	shop.wait("the order, on a fresh page, in euros", jsQ(`[data-testid=order-row]`)+`?.textContent.includes('Desk lamp') && `+
		jsQ(`[data-testid=order-row]`)+`.textContent.includes('€19.99')`)
	shop.noRawWords("an unknown sale's page")
	shop.shot("sale-not-found")
}

// adminDashboard is the dashboard's half of TestBrowserSalesOnStorefront: the unlisted badge,
// deleting, creating a sale in yen, hiding a sale from the shopper's storefront.
func adminDashboard(t *testing.T, a *app, cfg config, adm, shop *tab) {
	adm.do("open the dashboard", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(a.url+"/admin"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=admin-token]`)))
	adm.do("enter the admin token",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=admin-token]`), cfg.AdminToken),
		chromedp.Click(chromedp.CSS(`[data-testid=admin-save]`)))
	row := func(id string) string { return jsQ(fmt.Sprintf(`[data-testid=sale-row-%s]`, id)) }
	adm.wait("the bench's sale is listed on the dashboard, marked unlisted",
		row("benchrun")+`?.querySelector('[data-testid=unlisted-badge]')?.offsetParent != null`)
	if evalIn[bool](adm, row("lamp")+`.querySelector('[data-testid=unlisted-badge]').offsetParent !== null`) {
		adm.fail("a listed sale is marked unlisted")
	}
	adm.shot("dashboard-unlisted-badge")

	deleteFrom := func(id string) {
		adm.do("select "+id, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/sale/%s'`, id)))
		adm.wait(id+" is shown", fmt.Sprintf(`document.getElementById('detail-title').textContent.includes(%q) && `, id)+
			jsQ(`[data-testid=detail-status]`)+`.dataset.status !== undefined`)
		adm.do("delete "+id+" (two clicks)", chromedp.Click(chromedp.CSS(`[data-testid=delete-button]`)),
			chromedp.Click(chromedp.CSS(`[data-testid=delete-button]`)))
	}
	deleteFrom("benchrun")
	adm.wait("the delete is refused", `document.getElementById('status').textContent.includes('cannot be deleted')`)
	adm.shot("delete-refused")
	adm.wait("the bench's activity has a legend", jsQ(`[data-testid=activity-legend] li`)+` !== null`)
	adm.noRawWords("the dashboard of the bench's sale")
	deleteFrom("draft")
	adm.wait("the deleted sale leaves the table", row("draft")+` === null && document.getElementById('status').textContent.includes('deleted')`)
	adm.shot("deleted")
	if _, err := client.New(a.url).Sale(context.Background(), "draft"); client.CodeOf(err) != seckill.CodeNotFound {
		t.Fatalf("GET of the deleted sale: %v, want 404", err)
	}
	if _, err := client.New(a.url).Sale(context.Background(), "benchrun"); err != nil {
		t.Fatalf("the sale whose delete was refused: %v", err)
	}

	// The create form takes a currency (the price in its own unit: yen have no decimals) and
	// can keep the new sale off the storefront.
	adm.do("create a sale in yen, unlisted",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-id]`), "yen"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-price]`), "500"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-currency]`), "jpy"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-starts-in]`), "0"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-listed]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=create-button]`)))
	adm.wait("the yen sale is shown", `document.getElementById('d-terms').textContent.startsWith('¥500 ')`)
	yen, err := client.New(a.url).Sale(context.Background(), "yen")
	if err != nil {
		t.Fatal(err)
	}
	if yen.PriceCents != 500 || yen.Currency != "jpy" || yen.Listed {
		t.Fatalf("the form created %+v, want 500 jpy, unlisted", yen.Sale)
	}
	adm.shot("created-in-yen")

	adm.do("select the lamp", chromedp.Evaluate[chromedp.Void](`location.hash = '#/sale/lamp'`))
	adm.wait("the lamp is shown", `document.getElementById('detail-title').textContent.includes('lamp') && `+
		jsQ(`[data-testid=listed-button]`)+`.textContent === 'Hide from storefront'`)
	adm.do("hide the lamp", chromedp.Click(chromedp.CSS(`[data-testid=listed-button]`)))
	adm.wait("the lamp is marked unlisted", row("lamp")+`.querySelector('[data-testid=unlisted-badge]').offsetParent !== null && `+
		jsQ(`[data-testid=listed-button]`)+`.textContent === 'Show on storefront'`)
	adm.shot("hidden")
	shop.do("back to the list", chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=sale-link-gone]`)))
	if evalIn[bool](shop, jsQ(`[data-testid=sale-link-lamp]`)+` !== null`) {
		shop.fail("the storefront lists a sale the admin hid")
	}
	shop.noRawWords("the list of sales, after hiding")
	shop.shot("list-after-hiding")
}

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
