package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// The browser tests drive the storefront (/) and the dashboard (/admin) in headless Chromium
// against the real server, started in process in dev mode. Each test gets a browser of its
// own (a fresh profile) and 60 s. Screenshots of each step go to $SECKILL_SCREENSHOTS/<test>/
// when that is set, else to a temporary folder that the test logs and keeps only if it fails.
// Run them with: go test -race -run Browser -count=1 ./cmd/seckill

// browserPath finds Chromium: $SECKILL_TEST_BROWSER, /usr/bin/chromium, or chromium on PATH.
// Without one the test is skipped, except under CI=true, where it fails.
func browserPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a browser")
	}
	if p := os.Getenv("SECKILL_TEST_BROWSER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("SECKILL_TEST_BROWSER=%s: %v", p, err)
		}
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if testenv.InCI() {
		t.Fatal("no browser: set SECKILL_TEST_BROWSER or install chromium (under CI=true the browser tests must run)")
	}
	t.Skip("no browser: set SECKILL_TEST_BROWSER or install chromium")
	return ""
}

// browser is one headless Chromium for one test.
type browser struct {
	t     *testing.T
	ctx   context.Context // the browser's own context: no deadline (it would close the browser)
	shots string
	n     atomic.Int32 // screenshots taken
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	exe := browserPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	start, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(bctx) }() // starts the browser
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("start %s: %v", exe, err)
		}
	case <-start.Done():
		t.Fatalf("start %s: no answer in 30 s", exe)
	}
	b := &browser{t: t, ctx: bctx}
	if dir := os.Getenv("SECKILL_SCREENSHOTS"); dir != "" {
		b.shots = filepath.Join(dir, t.Name())
		if err := os.MkdirAll(b.shots, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshots: %s", b.shots)
	} else {
		dir, err := os.MkdirTemp("", "seckill-screenshots-")
		if err != nil {
			t.Fatal(err)
		}
		b.shots = dir
		t.Cleanup(func() {
			if !t.Failed() {
				_ = os.RemoveAll(dir)
			}
		})
		t.Logf("screenshots: %s (kept if the test fails; set SECKILL_SCREENSHOTS to keep them)", b.shots)
	}
	return b
}

// tab is a page in a browser context of its own (its own storage: another buyer).
type tab struct {
	b    *browser
	t    *testing.T
	name string
	ctx  context.Context // has the test's deadline

	mu      sync.Mutex
	console []string
}

// newTab opens a tab; with noEvents, the page cannot reach the events stream (as behind a
// proxy that does not stream), so it must fall back to polling.
func (b *browser) newTab(name string, deadline time.Time, noEvents bool) *tab {
	t := b.t
	t.Helper()
	tctx, cancelTab := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	if err := chromedp.Do(tctx); err != nil { // opens the tab, with no deadline
		t.Fatalf("open tab %s: %v", name, err)
	}
	if noEvents {
		if _, err := chromedp.Call(tctx, network.SetBlockedURLs, network.SetBlockedURLsParams{
			URLPatterns: []*network.BlockPattern{{URLPattern: "*://*:*/api/v1/sales/*/events", Block: true}},
		}); err != nil {
			t.Fatalf("block the events stream: %v", err)
		}
	}
	ctx, cancel := context.WithDeadline(tctx, deadline)
	tb := &tab{b: b, t: t, name: name, ctx: ctx}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.console = append(tb.console, fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line+1, m))
			tb.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelTab()
		<-done
	})
	return tb
}

func (tb *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		tb.fail("%s: %v", what, err)
	}
}

// wait polls a JavaScript expression in the page until it is truthy.
func (tb *tab) wait(what, expr string) {
	tb.t.Helper()
	timeout := 30 * time.Second
	if dl, ok := tb.ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	if _, err := chromedp.Run(tb.ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout))); err != nil {
		tb.fail("waiting until %s (%s): %v", what, expr, err)
	}
}

func evalIn[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.fail("evaluate %s: %v", expr, err)
	}
	return v
}

// shot saves a screenshot of the whole page as NN-<tab>-<step>.png.
func (tb *tab) shot(step string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Logf("screenshot %s: %v", step, err)
		return
	}
	name := fmt.Sprintf("%02d-%s-%s.png", tb.b.n.Add(1), tb.name, step)
	if err := os.WriteFile(filepath.Join(tb.b.shots, name), buf, 0o644); err != nil {
		tb.t.Logf("screenshot %s: %v", step, err)
	}
}

// fail records what the page showed (a screenshot, its status line, its console) and stops.
func (tb *tab) fail(format string, args ...any) {
	tb.t.Helper()
	msg := fmt.Sprintf(format, args...)
	if tb.ctx.Err() == nil {
		tb.shot("failure")
		if s, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`(document.getElementById('status')||{}).textContent || ''`)); err == nil {
			msg += fmt.Sprintf("\n%s's status line: %q", tb.name, s)
		}
	}
	tb.mu.Lock()
	if len(tb.console) > 0 {
		msg += "\n" + tb.name + "'s console:\n  " + strings.Join(tb.console, "\n  ")
	}
	tb.mu.Unlock()
	tb.t.Fatal(msg)
}

// signIn signs in by user name (dev tokens) and waits for the page to say so.
func (tb *tab) signIn(user string) {
	tb.t.Helper()
	tb.do("sign in", // with the keyboard: Enter submits the form
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=signin-user]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=signin-user]`), user+"\r"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=who]`)),
	)
	tb.wait("signed in as "+user, fmt.Sprintf(`document.querySelector('[data-testid=who]').textContent === %q`, user))
}

func jsQ(sel string) string { return fmt.Sprintf(`document.querySelector(%q)`, sel) }

// noOverflow fails if the page scrolls sideways: wider than the window (a table may scroll in
// its own container; the page must not).
func (tb *tab) noOverflow(what string) {
	tb.t.Helper()
	if !evalIn[bool](tb, `document.documentElement.scrollWidth <= document.documentElement.clientWidth`) {
		tb.fail("%s scrolls sideways: %d px wide in a %d px window", what,
			evalIn[int](tb, `document.documentElement.scrollWidth`), evalIn[int](tb, `document.documentElement.clientWidth`))
	}
}

// createSale creates a sale through the API.
func createSale(t *testing.T, a *app, cfg config, s client.NewSale) client.Sale {
	t.Helper()
	sale, err := client.New(a.url, client.WithToken(cfg.AdminToken)).CreateSale(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return sale
}

// TestBrowserBuyAndPay: on a phone-sized screen whose clock is an hour fast, a buyer sees the
// buy button disabled before the sale starts (with a countdown by the server's clock) and
// enabled once the server says it is active, buys, sees the hold's countdown run, pays
// through the dev gateway, sees "paid", and finds the order in the list.
func TestBrowserBuyAndPay(t *testing.T) {
	b := startBrowser(t)
	a, cfg := startDevApp(t, nil)
	deadline := time.Now().Add(60 * time.Second)
	tb := b.newTab("alice", deadline, false)
	// The phone's clock is an hour fast: countdowns must follow the server's clock.
	if _, err := chromedp.Call(tb.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `{ const now = Date.now.bind(Date); Date.now = () => now() + 3600e3; }`,
	}); err != nil {
		t.Fatal(err)
	}
	tb.do("open the storefront", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile),
		chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#view-list`)))
	if skew := evalIn[float64](tb, `Date.now() - new Date().getTime()`); skew < 3500e3 {
		t.Fatalf("the page's clock is %v ms off, want an hour", skew)
	}
	tb.signIn("alice")
	tb.shot("signed-in")

	// The sale starts 3 s from now; the page must wait for the server's word.
	start := time.Now().UTC().Add(3 * time.Second)
	sale := createSale(t, a, cfg, client.NewSale{ID: "phone", Name: "Phone <b>X</b>", PriceCents: 99900, Stock: 5, HoldSeconds: 60, StartsAt: start, EndsAt: start.Add(time.Hour)})
	// Straight to the sale's page (the list refreshes every 2 s; the other test clicks its links).
	tb.do("open the sale", chromedp.Evaluate[chromedp.Void](`location.hash = '#/sale/phone'`))
	tb.wait("the sale page shows the sale", `['upcoming', 'active'].includes(`+jsQ(`[data-testid=sale-status]`)+`.dataset.status)`)
	if evalIn[string](tb, jsQ(`[data-testid=sale-status]`)+`.dataset.status`) == "upcoming" {
		// Before the start the button must be disabled (checked on the same page state).
		if ok := evalIn[bool](tb, jsQ(`[data-testid=sale-status]`)+`.dataset.status !== 'upcoming' || `+jsQ(`[data-testid=buy-button]`)+`.disabled`); !ok {
			tb.fail("the buy button is enabled before the sale started")
		}
		cd, status := jsQ(`[data-testid=sale-countdown]`), jsQ(`[data-testid=sale-status]`)
		tb.wait("a countdown to the start", cd+`.dataset.ms !== undefined`)
		if ok := evalIn[bool](tb, `(ms => ms > 0 && ms <= 3000)(Number(`+cd+`.dataset.ms)) || `+status+`.dataset.status !== 'upcoming'`); !ok {
			tb.fail("the countdown to the start shows %s, want at most 3 s by the server's clock", evalIn[string](tb, cd+`.textContent`))
		}
		tb.shot("before-start")
	} else {
		t.Logf("the machine is slow: the sale started before the page showed it (%v late); the disabled button was not seen", time.Since(start))
	}
	tb.wait("the live stream is connected", jsQ(`[data-testid=feed-mode]`)+`.textContent === 'live'`)
	if name := evalIn[string](tb, jsQ(`[data-testid=sale-name]`)+`.textContent`); name != sale.Name {
		tb.fail("sale name shown as %q, want the server's string as text %q", name, sale.Name)
	}
	tb.wait("the buy button is enabled once the sale is active",
		jsQ(`[data-testid=sale-status]`)+`.dataset.status === 'active' && !`+jsQ(`[data-testid=buy-button]`)+`.disabled`)
	if time.Now().Before(start) {
		tb.fail("the buy button was enabled %v before the start", time.Until(start))
	}
	tb.shot("started")

	tb.do("buy with the keyboard", chromedp.Focus(chromedp.CSS(`[data-testid=buy-button]`)), chromedp.KeyEvent("\r"))
	tb.wait("the reservation is held", jsQ(`[data-testid=reservation-status]`)+`?.dataset.status === 'held'`)
	tb.wait("the keyboard focus moves to the pay button", `document.activeElement?.dataset.testid === 'pay-button'`)
	tb.wait("the hold countdown shows", `/^\d+:\d\d$/.test(`+jsQ(`[data-testid=hold-countdown]`)+`.textContent)`)
	left := evalIn[int](tb, `Number(`+jsQ(`[data-testid=hold-countdown]`)+`.dataset.ms)`)
	if left <= 0 || left > 60_000 {
		tb.fail("hold countdown at %d ms, want within the 60 s hold", left)
	}
	tb.wait("the hold countdown runs", fmt.Sprintf(`Number(%s.dataset.ms) <= %d`, jsQ(`[data-testid=hold-countdown]`), left-1000))
	tb.shot("held")
	rid := evalIn[string](tb, jsQ(`[data-testid=reservation]`)+`.dataset.rid`)

	tb.do("pay", chromedp.Click(chromedp.CSS(`[data-testid=pay-button]`)))
	tb.wait("the gateway's page is linked", jsQ(`[data-testid=gateway-link]`)+`?.href.includes('/mock-gateway/pay/')`)
	gateway := evalIn[string](tb, jsQ(`[data-testid=gateway-link]`)+`.href`)
	tb.wait("the reservation is paid", jsQ(`[data-testid=reservation-status]`)+`.dataset.status === 'paid'`)
	tb.wait("the result says paid", jsQ(`[data-testid=result]`)+`.textContent.startsWith('Paid')`)
	tb.wait("the order is listed", fmt.Sprintf(`[...document.querySelectorAll('[data-testid=order-row]')].some(r => r.dataset.rid === %q && r.dataset.status === 'paid')`, rid))
	if overflow := evalIn[int](tb, `document.documentElement.scrollWidth - window.innerWidth`); overflow > 0 {
		tb.fail("the page is %d px wider than a 360 px screen", overflow)
	}
	// Once paid, the gateway's page is no longer offered, and "Paid." is said once (on the card).
	tb.wait("the payment page's link goes", jsQ(`[data-testid=gateway-link]`)+`.offsetParent === null`)
	if n := evalIn[int](tb, `document.body.innerText.split('Your order is confirmed').length - 1`); n != 1 {
		tb.fail("the success message is shown %d times, want once", n)
	}
	tb.shot("paid")

	// The gateway's page (shown in a frame while the payment was pending) is a page of its own.
	resp, err := http.Get(gateway)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "succeeded") || !strings.Contains(string(body), `href="/"`) {
		t.Fatalf("gateway page %s: %d %s\n%s", gateway, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	tb.do("open the gateway's page", chromedp.Navigate(gateway), chromedp.WaitVisible(chromedp.CSS(`[data-testid=gateway-message]`)))
	tb.shot("gateway")
}

// TestBrowserQueueHandoff: two buyers in two browser contexts on a 1-unit sale with 3 s holds.
// The first buys and does not pay; the second is queued and sees its position; when the
// first hold expires, the second gets the unit (held) and the first sees "expired". Once with
// the live events stream, once with the stream blocked (the pages poll).
func TestBrowserQueueHandoff(t *testing.T) {
	for _, mode := range []string{"live", "polling"} {
		t.Run(mode, func(t *testing.T) { queueHandoff(t, mode) })
	}
}

func queueHandoff(t *testing.T, mode string) {
	b := startBrowser(t)
	a, cfg := startDevApp(t, nil)
	createSale(t, a, cfg, client.NewSale{ID: "one", Name: "The last one", PriceCents: 500, Stock: 1, HoldSeconds: 3})
	deadline := time.Now().Add(60 * time.Second)
	first, second := b.newTab("ann", deadline, mode == "polling"), b.newTab("ben", deadline, mode == "polling")
	for _, tb := range []*tab{first, second} {
		tb.do("open the storefront", chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#view-list`)))
		tb.signIn(tb.name)
		tb.wait("the sale is listed", jsQ(`[data-testid="sale-link-one"]`)+` !== null`)
		tb.do("open the sale", chromedp.Click(chromedp.CSS(`[data-testid="sale-link-one"]`)))
		tb.wait("the buy button is enabled", `!`+jsQ(`[data-testid=buy-button]`)+`.disabled`)
		tb.wait("the page is "+mode, fmt.Sprintf(`%s.textContent === %q`, jsQ(`[data-testid=feed-mode]`), mode))
	}

	first.do("buy", chromedp.Click(chromedp.CSS(`[data-testid=buy-button]`)))
	first.wait("the unit is held", jsQ(`[data-testid=reservation-status]`)+`?.dataset.status === 'held'`)
	second.do("buy", chromedp.Click(chromedp.CSS(`[data-testid=buy-button]`)))
	second.wait("the second buyer is queued", jsQ(`[data-testid=reservation-status]`)+`?.dataset.status`)
	if st := evalIn[string](second, jsQ(`[data-testid=reservation-status]`)+`.dataset.status`); st != "queued" {
		second.fail("the second buyer's reservation is %s, want queued behind the first hold (a slow machine may have let the 3 s hold expire first)", st)
	}
	second.wait("the queue position shows", jsQ(`[data-testid=queue-position]`)+`.textContent === '1'`)
	second.shot("queued")
	first.shot("held")

	// The first buyer does not pay: the hold expires and the unit passes to the second.
	second.wait("the second buyer gets the unit", jsQ(`[data-testid=reservation-status]`)+`.dataset.status === 'held'`)
	second.wait("the grant is announced", `!`+jsQ(`[data-testid=granted]`)+`.hidden`)
	second.wait("the new hold counts down", `/^\d+:\d\d$/.test(`+jsQ(`[data-testid=hold-countdown]`)+`.textContent)`)
	second.shot("granted")
	first.wait("the first buyer sees the hold expired", jsQ(`[data-testid=reservation-status]`)+`.dataset.status === 'expired'`)
	first.wait("and the result says so", jsQ(`[data-testid=result]`)+`.textContent.includes('expired')`)
	first.shot("expired")

	if mode == "live" { // the second buyer cancels: the unit is for sale again
		second.do("cancel", chromedp.Click(chromedp.CSS(`[data-testid=cancel-button]`)))
		second.wait("the reservation is cancelled", jsQ(`[data-testid=reservation-status]`)+`.dataset.status === 'cancelled'`)
		first.wait("the first buyer sees the unit available", jsQ(`[data-testid=count-available]`)+`.textContent === '1'`)
		second.shot("cancelled")
		return
	}
	// The second buyer pays: the sale is sold out, and both pages say so.
	second.do("pay", chromedp.Click(chromedp.CSS(`[data-testid=pay-button]`)))
	second.wait("the reservation is paid", jsQ(`[data-testid=reservation-status]`)+`.dataset.status === 'paid'`)
	for _, tb := range []*tab{first, second} {
		tb.wait("the sale is sold out", jsQ(`[data-testid=sale-status]`)+`.dataset.status === 'sold_out' && `+jsQ(`[data-testid=buy-button]`)+`.disabled`)
	}
	second.shot("paid")
	first.shot("sold-out")
}

// TestBrowserDashboard: the dashboard with the admin token creates a sale from its form; while
// a crowd buys through the HTTP API (some pay, some let their holds expire), its gauges
// change, the audit stays ok and the activity chart shows bars.
func TestBrowserDashboard(t *testing.T) {
	b := startBrowser(t)
	a, cfg := startDevApp(t, nil)
	tb := b.newTab("admin", time.Now().Add(60*time.Second), false)
	tb.do("open the dashboard", chromedp.Navigate(a.url+"/admin"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=admin-token]`)))
	tb.do("enter the admin token",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=admin-token]`), cfg.AdminToken),
		chromedp.Click(chromedp.CSS(`[data-testid=admin-save]`)))
	tb.do("fill the form",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-id]`), "dash"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-name]`), "Dashboard sale"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-price]`), "5.00"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-stock]`), "150"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-starts-in]`), "0"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-hold]`), "2"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-preheat]`), "120"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-button]`)))
	tb.wait("the new sale is shown", jsQ(`[data-testid=detail-status]`)+`.dataset.status === 'active' && `+jsQ(`[data-testid=gauge-available]`)+`.dataset.value === '150'`)
	tb.wait("the audit is ok", jsQ(`[data-testid=audit-status]`)+`.dataset.ok === 'true'`)
	// The hot and cold panel counts the sale on now, not one that starts in two days (its
	// preheat is five minutes); the memory engine has no cold cache.
	createSale(t, a, cfg, client.NewSale{ID: "later", PriceCents: 100, Stock: 1, StartsAt: time.Now().Add(48 * time.Hour)})
	tb.wait("the panel shows one hot sale, named", jsQ(`[data-testid=hot-summary]`)+`.dataset.hot === '1' && `+
		jsQ(`[data-testid=hot-sales]`)+`.textContent === 'dash' && `+jsQ(`[data-testid=cold-summary]`)+`.dataset.max === '0'`)
	if got := evalIn[string](tb, jsQ(`[data-testid=hot-summary]`)+`.textContent`); got != "1 hot sale" {
		tb.fail("the panel says %q, want \"1 hot sale\"", got)
	}
	sale, err := client.New(a.url).Sale(context.Background(), "dash")
	if err != nil {
		t.Fatal(err)
	}
	if sale.PriceCents != 500 || sale.HoldSeconds != 2 || sale.Stock != 150 || sale.PreheatSeconds != 120 {
		t.Fatalf("the form created %+v", sale.Sale)
	}
	tb.shot("created")

	// The crowd: 600 buyers at about 100 a second, 8 at a time; every other one pays.
	var running atomic.Bool
	running.Store(true)
	crowdDone := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	finished := make(chan struct{})
	t.Cleanup(func() { // before the app stops, even if the test fails half-way
		stop()
		<-finished
	})
	go func() {
		defer close(finished)
		defer running.Store(false)
		crowdDone <- crowd(ctx, a.url, []byte(cfg.AuthSecret), "dash", 600, 8, 100)
	}()
	gauge := func(k string) int {
		return evalIn[int](tb, `Number(`+jsQ(`[data-testid=gauge-`+k+`]`)+`.dataset.value)`)
	}
	tb.wait("the gauges move", jsQ(`[data-testid=gauge-available]`)+`.dataset.value !== '150'`)
	if !running.Load() {
		tb.fail("the dashboard showed no change before the crowd (6 s) was over")
	}
	sold := gauge("sold")
	tb.wait("units are sold while the crowd runs", fmt.Sprintf(`Number(%s.dataset.value) > %d`, jsQ(`[data-testid=gauge-sold]`), sold))
	if !running.Load() {
		t.Logf("the crowd ended before the second change was seen")
	}
	tb.wait("the chart shows bars", `document.querySelectorAll('[data-testid=activity-chart] rect.bar').length > 0`)
	tb.shot("during")
	if err := <-crowdDone; err != nil {
		t.Fatal(err)
	}
	// At the end the dashboard agrees with the API.
	if sale, err = client.New(a.url).Sale(context.Background(), "dash"); err != nil {
		t.Fatal(err)
	}
	st := sale.StockState
	t.Logf("after the crowd: available %d held %d sold %d queued %d; chart bars %d", st.Available, st.Held, st.Sold, st.Queued,
		evalIn[int](tb, `document.querySelectorAll('[data-testid=activity-chart] rect.bar').length`))
	tb.wait("the gauges show the final sold count", fmt.Sprintf(`Number(%s.dataset.value) >= %d`, jsQ(`[data-testid=gauge-sold]`), sale.StockState.Sold))
	tb.wait("the legend counts held buys", jsQ(`[data-testid=legend-held]`)+` !== null`)
	tb.wait("the audit is still ok", jsQ(`[data-testid=audit-status]`)+`.dataset.ok === 'true'`)
	tb.shot("after")

	// Restock 10 units, then close the sale (two clicks).
	tb.do("restock", chromedp.SetValue(chromedp.CSS(`[data-testid=restock-amount]`), "10"), chromedp.Click(chromedp.CSS(`[data-testid=restock-button]`)))
	tb.wait("the stock grew", `document.getElementById('g-sellable').textContent.startsWith('160 sellable')`)
	tb.do("close", chromedp.Click(chromedp.CSS(`[data-testid=close-button]`)), chromedp.Click(chromedp.CSS(`[data-testid=close-button]`)))
	tb.wait("the sale is closed", jsQ(`[data-testid=detail-status]`)+`.dataset.status === 'ended'`)
	if sale, err = client.New(a.url).Sale(context.Background(), "dash"); err != nil {
		t.Fatal(err)
	}
	if sale.Stock != 160 || sale.Status != seckill.SaleEnded {
		t.Fatalf("after restock and close: stock %d, status %s", sale.Stock, sale.Status)
	}
	tb.shot("closed")

	// A sale with a waiting room, from the same form (its other fields as they were left).
	tb.do("create a sale with a waiting room",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-id]`), "dash-room"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-starts-in]`), "3600"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-room]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-room-order]`), "fifo"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-room-admit]`), "50"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-room-active]`), "20"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-room-pow]`), "4"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-button]`)))
	tb.wait("the sale with a waiting room is shown", `location.hash === '#/sale/dash-room'`)
	if sale, err = client.New(a.url).Sale(context.Background(), "dash-room"); err != nil {
		t.Fatal(err)
	}
	want := seckill.RoomPolicy{Order: seckill.RoomFIFO, OpensSeconds: 120, AdmitPerSecond: 50, MaxActive: 20,
		TokenSeconds: seckill.DefaultTokenSeconds, PowBits: 4}
	if sale.Room == nil || *sale.Room != want {
		t.Fatalf("the form created a waiting room %+v, want %+v", sale.Room, want)
	}
}

// crowd sends n buyers to a sale at about rate per second, conc at a time; every other buyer
// that gets a hold pays for it (through the dev gateway), the others let it expire.
func crowd(ctx context.Context, base string, secret []byte, saleID string, n, conc, rate int) error {
	jobs := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	for range conc {
		wg.Go(func() {
			for i := range jobs {
				user := fmt.Sprintf("crowd-%d", i)
				tok, err := httpapi.MintToken(secret, user, time.Now(), time.Hour)
				if err != nil {
					fail(err)
					continue
				}
				buyer := client.New(base, client.WithToken(tok))
				p, err := buyer.Path(ctx, saleID)
				if err != nil {
					fail(err)
					continue
				}
				res, err := buyer.Buy(ctx, p.Path, 1, "")
				if _, refused := errors.AsType[*client.Error](err); err != nil && !refused {
					fail(err)
					continue
				}
				if err != nil || res.Replayed || res.Status != seckill.StatusHeld || i%2 == 1 {
					continue // queued, sold out, queue full…; or a hold left to expire
				}
				if _, err := buyer.Pay(ctx, res.ID); err != nil && client.CodeOf(err) != seckill.CodeHoldExpired {
					fail(err)
				}
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		<-tick.C
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return firstErr
}

// benchID and benchName are a sale as `seckill bench` names it: a long id, repeated in the name.
const benchID = "bench-1796123456789-7f3a9c2e1b4d5a6f"

func benchName(id string) string { return "seckill bench " + id }

// buyAs holds or queues a unit of sale for user, straight through the service.
func buyAs(t *testing.T, a *app, sale, user string) seckill.Reservation {
	t.Helper()
	r, err := a.svc.Buy(context.Background(), seckill.BuyRequest{SaleID: sale, UserID: user, Quantity: 1})
	if err != nil {
		t.Fatalf("%s buys %s: %v", user, sale, err)
	}
	return r.Reservation
}

// TestBrowserQueuePositionOnPhone: on a 390 px phone, a buyer who is second in line (behind a
// hold and another queued buyer) reads the same place in the status line and on the card, and
// when the buyer ahead cancels both say 1 (one render path: the card's reservation, updated by
// the live stream). With a bench sale's long name on the list and on its page, the page never
// scrolls sideways.
func TestBrowserQueuePositionOnPhone(t *testing.T) {
	b := startBrowser(t)
	a, cfg := startDevApp(t, nil)
	createSale(t, a, cfg, client.NewSale{ID: benchID, Name: benchName(benchID) + " " + benchID, PriceCents: 1999, Stock: 3, HoldSeconds: 60})
	createSale(t, a, cfg, client.NewSale{ID: "line", Name: "The last one", PriceCents: 500, Stock: 1, HoldSeconds: 60})
	if r := buyAs(t, a, "line", "first"); r.Status != seckill.StatusHeld {
		t.Fatalf("the first buyer's reservation is %s, want held", r.Status)
	}
	ahead := buyAs(t, a, "line", "second")
	if ahead.Status != seckill.StatusQueued || ahead.Position != 1 {
		t.Fatalf("the second buyer's reservation is %s at %d, want queued at 1", ahead.Status, ahead.Position)
	}

	tb := b.newTab("carl", time.Now().Add(60*time.Second), false)
	tb.do("open the storefront on a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#view-list`)))
	tb.wait("the sign-in form shows", jsQ(`[data-testid=signin-user]`)+`.offsetParent !== null`)
	tb.noOverflow("the storefront signed out on a 390 px phone")
	tb.signIn("carl")
	tb.wait("both sales are listed", jsQ(`[data-testid="sale-link-line"]`)+` !== null && `+jsQ(`[data-testid="sale-link-`+benchID+`"]`)+` !== null`)
	tb.noOverflow("the list of sales on a 390 px phone")
	tb.shot("list")

	tb.do("open the bench sale", chromedp.Click(chromedp.CSS(`[data-testid="sale-link-`+benchID+`"]`)))
	tb.wait("its page shows its name", jsQ(`[data-testid=sale-name]`)+`.textContent.startsWith('seckill bench')`)
	tb.noOverflow("a bench sale's page on a 390 px phone")
	tb.shot("bench-sale")

	tb.do("open the one-unit sale", chromedp.Evaluate[chromedp.Void](`location.hash = '#/sale/line'`))
	tb.wait("the buy button is enabled", jsQ(`[data-testid=sale-status]`)+`.dataset.status === 'active' && !`+jsQ(`[data-testid=buy-button]`)+`.disabled`)
	tb.wait("the page is live", jsQ(`[data-testid=feed-mode]`)+`.textContent === 'live'`)
	tb.do("buy", chromedp.Click(chromedp.CSS(`[data-testid=buy-button]`)))
	tb.wait("the buyer is queued", jsQ(`[data-testid=reservation-status]`)+`?.dataset.status === 'queued'`)
	tb.wait("the card shows place 2", jsQ(`[data-testid=queue-position]`)+`.textContent === '2'`)
	banner := `document.getElementById('status').textContent`
	if msg := evalIn[string](tb, banner); !strings.Contains(msg, "number 2 in line") {
		tb.fail("the card says place 2, the status line %q", msg)
	}
	if hint := evalIn[string](tb, jsQ(`[data-testid=buy-hint]`)+`.textContent`); strings.Contains(hint, "You have") {
		tb.fail("a buyer in line is told %q", hint)
	}
	tb.noOverflow("the sale page on a 390 px phone")
	tb.shot("queued-second")

	// The buyer ahead leaves the line: the live stream moves the card, and the status line with it.
	tok, err := httpapi.MintToken([]byte(cfg.AuthSecret), "second", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(a.url, client.WithToken(tok)).Cancel(context.Background(), ahead.ID); err != nil {
		t.Fatal(err)
	}
	tb.wait("the card shows place 1", jsQ(`[data-testid=queue-position]`)+`.textContent === '1'`)
	if msg := evalIn[string](tb, banner); !strings.Contains(msg, "number 1 in line") {
		tb.fail("the card says place 1, the status line %q", msg)
	}
	tb.shot("queued-first")
}

// TestBrowserDashboardTokenAndLayout: a saved admin token that the server refuses (one from a
// dev server that has since made new secrets) is said at the top of the page, and the holds
// list says "unknown", not "no unpaid holds", while a hold is live; a wrong token is refused
// when saved and never said to be saved; the right one is accepted. With bench sales' long
// names and ids, the dashboard does not overflow at 1280 px (the sales table fits, its Show
// buttons in view) nor scroll sideways on a 390 px phone, where the chart's labels keep a
// readable size. The "Created sale" message counts down to the start, then says it started.
func TestBrowserDashboardTokenAndLayout(t *testing.T) {
	b := startBrowser(t)
	a, cfg := startDevApp(t, nil)
	for i := range 3 {
		id := fmt.Sprintf("%s-%d", benchID, i)
		// As `seckill bench` makes them: off the storefront's list (the table marks them so).
		createSale(t, a, cfg, client.NewSale{ID: id, Name: benchName(id), PriceCents: 100, Stock: 1000, HoldSeconds: 60, Listed: client.Ptr(i == 0)})
	}
	createSale(t, a, cfg, client.NewSale{ID: "dash", Name: "A sale whose name goes on for quite a while, as some shops like them", PriceCents: 2500, Stock: 10, HoldSeconds: 600})
	buyAs(t, a, "dash", "holder")

	tb := b.newTab("admin", time.Now().Add(60*time.Second), false)
	tb.do("open the dashboard with a token the server no longer takes", chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(a.url+"/admin"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=admin-token]`)),
		chromedp.Evaluate[chromedp.Void](`localStorage.setItem('seckill.admin', JSON.stringify('a-token-of-an-earlier-run')); location.hash = '#/sale/dash'`),
		chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid=sale-detail]`)))
	refused := jsQ(`[data-testid=admin-refused]`)
	tb.wait("the refusal shows at the top", `!`+refused+`.hidden && `+refused+`.textContent.includes('refused')`)
	if !evalIn[bool](tb, refused+`.getBoundingClientRect().bottom <= document.getElementById('main').getBoundingClientRect().top`) {
		tb.fail("the refusal is not above the panels")
	}
	tb.wait("the holds are unknown, not none", jsQ(`[data-testid=expiring-empty]`)+`.textContent.startsWith('Unknown')`)
	if txt := evalIn[string](tb, `document.body.innerText`); strings.Contains(txt, "No unpaid holds") || strings.Contains(txt, "None: every refund") {
		tb.fail("with the token refused, the page says a list is empty")
	}
	tb.shot("saved-token-refused")

	status := jsQ(`[data-testid=message]`)
	tb.do("save a wrong token", chromedp.SetValue(chromedp.CSS(`[data-testid=admin-token]`), "not-the-admin-token"),
		chromedp.Click(chromedp.CSS(`[data-testid=admin-save]`)))
	tb.wait("the wrong token is refused", status+`.classList.contains('error') && `+status+`.textContent.includes('refused')`)
	if msg := evalIn[string](tb, status+`.textContent`); strings.Contains(msg, "token saved") || strings.Contains(msg, "accepted") {
		tb.fail("a wrong token: %q", msg)
	}
	if saved := evalIn[string](tb, `localStorage.getItem('seckill.admin') || ''`); strings.Contains(saved, "not-the-admin-token") {
		tb.fail("the wrong token was stored")
	}
	tb.shot("wrong-token")

	tb.do("save the right token", chromedp.SetValue(chromedp.CSS(`[data-testid=admin-token]`), cfg.AdminToken),
		chromedp.Click(chromedp.CSS(`[data-testid=admin-save]`)))
	tb.wait("the token is accepted", status+`.textContent === 'Admin token accepted and saved.'`)
	tb.wait("the refusal goes", refused+`.hidden`)
	tb.wait("the hold is listed", `document.querySelectorAll('[data-testid=expiring-row]').length === 1`)
	tb.wait("the audit says when it was taken", jsQ(`[data-testid=audit-status]`)+`.dataset.ok === 'true' && /^as of /.test(`+jsQ(`[data-testid=audit-when]`)+`.textContent)`)
	tb.wait("every sale is in the table", `document.querySelectorAll('#sale-rows tr').length === 4`)
	tb.noOverflow("the dashboard at 1280 px")
	wrap := jsQ(`[data-testid=sales-table]`) + `.parentElement`
	if !evalIn[bool](tb, `(w => w.scrollWidth <= w.clientWidth)(`+wrap+`)`) {
		tb.fail("the sales table is %d px wider than its panel at 1280 px", evalIn[int](tb, `(w => w.scrollWidth - w.clientWidth)(`+wrap+`)`))
	}
	if !evalIn[bool](tb, `[...document.querySelectorAll('#sale-rows tr td:last-child button')].every(b => b.getBoundingClientRect().right <= `+wrap+`.getBoundingClientRect().right)`) {
		tb.fail("a Show button is cut off at 1280 px")
	}
	if !evalIn[bool](tb, `[...document.querySelectorAll('[data-testid=sale-label]')].every(l => l.querySelector('strong').getBoundingClientRect().right <= l.getBoundingClientRect().right)`) {
		tb.fail("a sale's id is cut off in the table at 1280 px: the bench sales' rows look alike")
	}
	if title := evalIn[string](tb, jsQ(`[data-testid="sale-row-dash"] [data-testid=sale-label]`)+`.title`); !strings.Contains(title, "as some shops like them") {
		tb.fail("a clipped name's tooltip is %q, want the whole name", title)
	}
	tb.shot("desktop")

	tb.do("create a sale that starts in 3 s",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-id]`), "soon"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-price]`), "1.00"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-starts-in]`), "3"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-button]`)))
	when := jsQ(`[data-testid=created-when]`)
	tb.wait("the message counts down to the start", when+` !== null && /^starts in 0:0[1-3]$/.test(`+when+`.textContent)`)
	tb.shot("created")
	tb.wait("then says the sale started", when+`?.textContent === 'on sale now'`)
	tb.wait("and the sale shows active", jsQ(`[data-testid=detail-status]`)+`.dataset.status === 'active'`)
	tb.shot("started")

	tb.do("turn into a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	tb.wait("the chart is drawn at the phone's width", `(s => s && s.viewBox.baseVal.width < 400)(document.querySelector('[data-testid=activity-chart] svg'))`)
	tb.noOverflow("the dashboard on a 390 px phone")
	if h := evalIn[float64](tb, `Math.min(...[...document.querySelectorAll('[data-testid=activity-chart] svg text')].map(t => t.getBoundingClientRect().height))`); h < 10 {
		tb.fail("the chart's labels are %.1f px tall on a phone, want at least 10", h)
	}
	tb.shot("phone")
}

// TestBrowserDashboardShowsExport: the dashboard lists the export's sinks; a sink that refuses
// every callback shows its lag in events and its failed attempts.
func TestBrowserDashboardShowsExport(t *testing.T) {
	b := startBrowser(t)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: "sqlite://" + filepath.Join(t.TempDir(), "x.db"), Dev: true,
		Export: refusing.URL + "/hook", ExportGiveUp: time.Hour, HTTP: httpLimits{}.withoutPerAddr()} // bench's crowd: one address
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	a, err := startApp(context.Background(), cfg, appOptions{buyRate: -1}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.close(context.Background()) })
	tb := b.newTab("export", time.Now().Add(60*time.Second), false)
	tb.do("open the dashboard", chromedp.Navigate(a.url+"/admin"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=admin-token]`)))
	tb.do("enter the admin token and create a sale",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=admin-token]`), cfg.AdminToken),
		chromedp.Click(chromedp.CSS(`[data-testid=admin-save]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-id]`), "exp"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-name]`), "Export sale"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=create-price]`), "5.00"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-stock]`), "5"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=create-starts-in]`), "0"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-button]`)))
	tb.wait("the sale is shown", jsQ(`[data-testid=detail-status]`)+`.dataset.status === 'active'`)
	if out, err := benchAgainst(t, a, cfg, "--sale", "exp-bench", "--units", "5", "--buyers", "40"); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	sink := jsQ(`[data-testid=export-sinks] li`)
	tb.wait("the refusing sink is listed with its lag and failed attempts",
		sink+` && `+sink+`.dataset.sink === `+strconv.Quote(refusing.URL+"/hook")+` && /lag [1-9]\d* events?/.test(`+sink+`.textContent) && /failed attempts [1-9]/.test(`+sink+`.textContent)`)
}
