package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/seckill-go/seckill/pow"
)

// TestBrowserPow: the storefront's solver (/assets/pow.js, as the server serves it) answers
// challenges that Go issued, and Go's Verify accepts its answers: in a Web Worker and on the
// page, at 12 bits, each the same counter pow.Solve finds. The negative control: an answer
// the page found at 1 bit is refused at the challenge's 12 (unless it happens to have 12 zero
// bits, which Go counts itself). A 16-bit solve in the worker logs the browser's hash rate.
func TestBrowserPow(t *testing.T) {
	b := startBrowser(t)
	a, _ := startDevApp(t, nil)
	tb := b.newTab("buyer", time.Now().Add(60*time.Second), false)
	tb.do("open the storefront", chromedp.Navigate(a.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#view-list`)))
	// Count the workers the page starts and their load errors: the worker path must be the one
	// that ran, not the on-page fallback.
	tb.do("watch workers", chromedp.Evaluate[chromedp.Void](`(() => {
		window.powWorkers = { created: 0, errors: 0 };
		const W = window.Worker;
		window.Worker = class extends W {
			constructor(...args) {
				super(...args);
				window.powWorkers.created++;
				this.addEventListener('error', () => window.powWorkers.errors++);
			}
		};
	})()`))

	secret := []byte("browser-pow-test-secret-32-bytes")
	const sale, user = "pow-sale", "pow-user"
	type result struct {
		Solution string  `json:"solution"`
		MS       float64 `json:"ms"`
	}
	solveInPage := func(ch string, bits int, worker bool) result {
		t.Helper()
		expr := fmt.Sprintf(`import('/assets/pow.js').then(async (m) => {
			const start = performance.now();
			const solution = await m.solve(%q, %d, { worker: %t });
			return { solution, ms: performance.now() - start };
		})`, ch, bits, worker)
		r, err := chromedp.Run(tb.ctx, chromedp.Evaluate[result](expr, chromedp.EvalAwaitPromise))
		if err != nil {
			tb.fail("solve %s at %d bits (worker %t): %v", ch, bits, worker, err)
		}
		return r
	}
	issue := func(bits int) string {
		t.Helper()
		c, err := pow.Issue(secret, sale, user, bits, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return c.String()
	}
	solveAndCheck := func(bits int, worker bool) result {
		t.Helper()
		ch := issue(bits)
		r := solveInPage(ch, bits, worker)
		if err := pow.Verify(secret, ch, r.Solution, sale, user, time.Now(), time.Minute); err != nil {
			t.Fatalf("Go refused the page's solution %q of %s at %d bits (worker %t): %v", r.Solution, ch, bits, worker, err)
		}
		want, err := pow.Solve(context.Background(), ch, bits)
		if err != nil {
			t.Fatal(err)
		}
		if r.Solution != want {
			t.Fatalf("the page found %s, Go's Solve %s: not the same search order", r.Solution, want)
		}
		return r
	}

	for _, worker := range []bool{true, false} {
		r := solveAndCheck(12, worker)
		t.Logf("12 bits, worker %t: %s in %.0f ms", worker, r.Solution, r.MS)
	}
	if n := evalIn[int](tb, `window.powWorkers.created`); n != 1 {
		tb.fail("%d workers started, want 1 (the on-page solve must not start one)", n)
	}
	if n := evalIn[int](tb, `window.powWorkers.errors`); n != 0 {
		tb.fail("the worker failed to load %d times: the page solved instead", n)
	}

	// The negative control: too little work is refused.
	ch := issue(12)
	weak := solveInPage(ch, 1, true).Solution
	sum := sha256.Sum256([]byte(ch + ":" + weak))
	err := pow.Verify(secret, ch, weak, sale, user, time.Now(), time.Minute)
	if pow.LeadingZeroBits(sum[:]) < 12 && !errors.Is(err, pow.ErrInsufficientWork) {
		t.Fatalf("a 1-bit answer with %d zero bits passed a 12-bit challenge: %v", pow.LeadingZeroBits(sum[:]), err)
	}

	// The hash rate, logged (never asserted: the machine may be slow).
	var hashes, ms float64
	for range 3 {
		r := solveAndCheck(16, true)
		var n float64
		fmt.Sscan(r.Solution, &n)
		hashes += n + 1
		ms += r.MS
	}
	t.Logf("16 bits in the worker: 3 solves, %.0f hashes in %.0f ms: %.0f hashes/s (2^16 = 65 536 expected per solve)", hashes, ms, hashes/ms*1000)
}
