package main

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/internal/testkit/oidctest"
)

// startOIDCApp starts a production-mode server (no --dev: no test accounts, no token box)
// whose buyers sign in at the stand-in provider p.
func startOIDCApp(t *testing.T, p *oidctest.Provider) (*app, config) {
	t.Helper()
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: "sqlite://" + filepath.Join(t.TempDir(), "o.db"),
		AuthSecret: strings.Repeat("a", 32), AdminToken: strings.Repeat("b", 32), PaymentSecret: strings.Repeat("c", 32),
		OIDC: oidcConfig{Issuer: p.URL, Audience: oidctest.Audience, UserClaim: "sub"}}
	a, err := startApp(context.Background(), cfg, appOptions{}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.close(context.Background()) })
	return a, cfg
}

// TestBrowserSignInWithTheShop: a buyer on a sale's page of a production storefront is sent to
// the shop's login page (the stand-in provider, ES256), signs in there, comes back to the same
// sale page signed in, with the token gone from the address bar, and buys. An answer that
// this page did not ask for (another state) signs nobody in.
func TestBrowserSignInWithTheShop(t *testing.T) {
	b := startBrowser(t)
	p := oidctest.Start("ES256")
	t.Cleanup(p.Close)
	a, cfg := startOIDCApp(t, p)
	createSale(t, a, cfg, client.NewSale{ID: "drop", Name: "Drop", PriceCents: 1500, Stock: 3})
	tb := b.newTab("carol", time.Now().Add(60*time.Second), false)

	tb.do("open the sale", chromedp.Navigate(a.url+"/#/sale/drop"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=oidc-signin]`)))
	if evalIn[bool](tb, jsQ(`[data-testid=signin-user]`)+`.offsetParent !== null || `+jsQ(`[data-testid=signin-jwt]`)+`.offsetParent !== null`) {
		tb.fail("a production storefront with the shop's login offers test accounts or a token box")
	}
	tb.shot("signed-out")
	tb.do("go to the shop's login page", chromedp.Click(chromedp.CSS(`[data-testid=oidc-signin]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=oidc-user]`)))
	if u := evalIn[string](tb, `location.href`); !strings.HasPrefix(u, p.URL+"/authorize?") {
		tb.fail("the sign-in button went to %s, want the provider's authorization_endpoint", u)
	}
	tb.shot("login-page")
	tb.do("sign in at the shop", chromedp.SendKeys(chromedp.CSS(`[data-testid=oidc-user]`), "carol"),
		chromedp.Click(chromedp.CSS(`[data-testid=oidc-login]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=who]`)))
	tb.wait("back, signed in as carol", `document.querySelector('[data-testid=who]')?.textContent === 'carol'`)
	if h := evalIn[string](tb, `location.href`); h != a.url+"/#/sale/drop" {
		tb.fail("back at %s, want the sale page the buyer left, without the token", h)
	}
	tb.wait("the buy button is enabled", `!`+jsQ(`[data-testid=buy-button]`)+`.disabled`)
	tb.do("buy", chromedp.Click(chromedp.CSS(`[data-testid=buy-button]`)))
	tb.wait("the reservation is held", jsQ(`[data-testid=reservation-status]`)+`?.dataset.status === 'held'`)
	tb.shot("held")
	rid := evalIn[string](tb, jsQ(`[data-testid=reservation]`)+`.dataset.rid`)
	if res, err := a.svc.Reservation(context.Background(), rid, "carol"); err != nil || res.SaleID != "drop" {
		t.Fatalf("the page's reservation %s is not carol's of drop: %+v, %v", rid, res, err)
	}

	// A token pushed at the page with a state it did not make (login CSRF) is not taken.
	other := b.newTab("mallory", time.Now().Add(60*time.Second), false)
	frag := url.Values{"id_token": {p.Token("mallory")}, "state": {"not-this-page"}}
	other.do("open a forged sign-in answer", chromedp.Navigate(a.url+"/#"+frag.Encode()), chromedp.WaitVisible(chromedp.CSS(`[data-testid=oidc-signin]`)))
	other.wait("the page refuses it", `document.getElementById('status').textContent.includes('not for this page')`)
	if evalIn[bool](other, `document.getElementById('signed-in').hidden === false`) || strings.Contains(evalIn[string](other, `location.href`), "id_token") {
		other.fail("a forged sign-in answer signed the page in, or stayed in the address bar")
	}
}
