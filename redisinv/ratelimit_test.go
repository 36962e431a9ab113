package redisinv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"pgregory.net/rapid"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// gcraModel is the plain Go model of every GCRA the package runs: seckill.RateLimit.GCRA over
// a map of theoretical arrival times.
type gcraModel map[string]int64

// spend is one request of the subjects (key → limit): all of them are decided at now; those
// with room are spent (the Limiter's way) or, with allOrNothing (buy.lua's), only if every one
// had room. It answers the longest wait (0: allowed).
func (m gcraModel) spend(now int64, allOrNothing bool, keys []string, limits []seckill.RateLimit) time.Duration {
	var wait int64
	newTATs := map[string]int64{}
	for i, k := range keys {
		ok, tat, w := limits[i].GCRA(m[k], now)
		if ok {
			newTATs[k] = tat
		}
		wait = max(wait, w)
	}
	if wait == 0 || !allOrNothing {
		for k, tat := range newTATs {
			m[k] = tat
		}
	}
	return time.Duration(wait) * time.Microsecond
}

// drawLimit is a limit whose interval is whole or not (333 333.3 µs rounds), burst 1 to 12.
func drawLimit(t *rapid.T, name string) seckill.RateLimit {
	return seckill.RateLimit{Rate: rapid.SampledFrom([]float64{0.5, 1, 3, 10, 250}).Draw(t, name+" rate"),
		Burst: rapid.IntRange(1, 12).Draw(t, name+" burst")}
}

// TestLimiterMatchesModel: the Limiter's script answers exactly what the model does, to the
// microsecond, over random sequences of requests by a few users from a few addresses with the
// clock moving by random steps (a test clock: the script's time is the model's).
func TestLimiterMatchesModel(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	rapid.Check(t, func(rt *rapid.T) {
		if msg := limiterVsModel(t, rt, c, gcraScript); msg != "" {
			rt.Fatal(msg)
		}
	})
}

// TestLimiterModelControl is the negative control of TestLimiterMatchesModel: a script with a
// burst one larger than asked is caught by the same comparison within rapid's sequences.
func TestLimiterModelControl(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	const from = "local tau = t * (b - 1)"
	if !strings.Contains(gcraSource, from) {
		t.Fatalf("the script no longer contains the text the mutation replaces: %q", from)
	}
	src := strings.Replace(gcraSource, from, "local tau = t * b", 1)
	broken := &script{name: "gcra", src: src, lua: rueidis.NewLuaScript(src)}
	caught := ""
	rapid.Check(t, func(rt *rapid.T) {
		if caught == "" {
			caught = limiterVsModel(t, rt, c, broken)
		}
	})
	if caught == "" {
		t.Fatal("a script allowing one request more than the burst matched the model")
	}
	t.Logf("caught: %s", caught)
}

// limiterVsModel runs one random sequence of requests through a Limiter with script s and the
// model, and describes the first difference ("" for none).
func limiterVsModel(t testing.TB, rt *rapid.T, c *Clients, s *script) string {
	{
		clock := seckilltest.NewManualClock(t0)
		prefix := testPrefix()
		defer dropPrefix(t, c.Inventory, prefix)
		l := New(c.Inventory, WithTestClock(clock), WithPrefix(prefix)).NewLimiter()
		l.script = s
		user, addr := drawLimit(rt, "user"), drawLimit(rt, "address")
		m := gcraModel{}
		for i := range rapid.IntRange(1, 60).Draw(rt, "requests") {
			clock.Advance(time.Duration(rapid.SampledFrom([]int{0, 0, 0, 1, 40, 99, 100, 101, 333, 1000, 4000}).Draw(rt, "step ms")) * time.Millisecond)
			u := rapid.SampledFrom([]string{"ann", "bob"}).Draw(rt, "user")
			a := rapid.SampledFrom([]string{"", "10.0.0.1", "2001:db8::"}).Draw(rt, "address")
			keys, limits := []string{"u:" + u}, []seckill.RateLimit{user}
			if a != "" {
				keys, limits = append(keys, "a:"+a), append(limits, addr)
			}
			want := m.spend(clock.Now().UnixMicro(), false, keys, limits)
			got, err := l.Allow(context.Background(), "path", u, a, user, addr)
			if err != nil {
				return fmt.Sprintf("request %d: %v", i, err)
			}
			if got != want {
				return fmt.Sprintf("request %d (%s from %q at +%v): wait %v, the model says %v", i, u, a, clock.Now().Sub(t0), got, want)
			}
		}
	}
	return ""
}

// TestLimiterKeys: the Limiter's state is one string key per subject and scope, expiring when
// its time has passed (real clock: Redis TIME); a limit that is off writes nothing; every
// request of a burst at once but the last… is allowed, the next waits one interval.
func TestLimiterKeys(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	l := New(c.Inventory, WithPrefix(prefix)).NewLimiter()
	ctx := context.Background()
	lim := seckill.RateLimit{Rate: 0.5, Burst: 2} // one request per 2 s: the test is far faster
	for i := range 2 {
		if w, err := l.Allow(ctx, "pay", "ann", "10.0.0.1", lim, seckill.RateLimit{}); err != nil || w != 0 {
			t.Fatalf("request %d of the burst: wait %v, %v", i+1, w, err)
		}
	}
	w, err := l.Allow(ctx, "pay", "ann", "10.0.0.1", lim, seckill.RateLimit{})
	if err != nil || w <= 0 || w > 2*time.Second {
		t.Fatalf("past the burst: wait %v, %v; want (0, 2s]", w, err)
	}
	rdb := c.Inventory
	ttl, err := rdb.Do(ctx, rdb.B().Pttl().Key(prefix+"rate:pay:u:ann").Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > 4000 {
		t.Fatalf("PTTL of ann's key = %d, %v; want (0, 4000] ms", ttl, err)
	}
	if n := keysExisting(t, rdb, []string{prefix + "rate:pay:a:10.0.0.1"}); n != 0 {
		t.Fatal("an address whose limit is off has a key")
	}
}

// gcraBlock is buy.lua's gcra block for two limits.
func gcraBlock(user, addr seckill.RateLimit) string {
	return "gcra:" + gcraPart(user) + ":" + gcraPart(addr)
}

// TestBuyLimitsMatchModel: with WithRateLimits, buy.lua refuses exactly the buys the model
// refuses (user and address budgets, all or nothing, before the other rules: a buy refused for
// its budget changes nothing else), with the model's wait, over random sequences; sent alone
// or several in one call (one call is the same as the calls one after the other).
func TestBuyLimitsMatchModel(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	rapid.Check(t, func(rt *rapid.T) {
		clock := seckilltest.NewManualClock(t0)
		user, addr := drawLimit(rt, "user"), drawLimit(rt, "address")
		prefix := testPrefix()
		defer dropPrefix(t, c.Inventory, prefix)
		e := New(c.Inventory, WithTestClock(clock), WithPrefix(prefix), WithRateLimits(user, addr))
		defer e.Close()
		def := boundarySale("rl", 100000, 0, 100000, 0)
		if err := e.LoadSale(context.Background(), def, 0); err != nil {
			rt.Fatal(err)
		}
		m := gcraModel{}
		for i := range rapid.IntRange(1, 40).Draw(rt, "calls") {
			clock.Advance(time.Duration(rapid.SampledFrom([]int{0, 0, 1, 50, 100, 333, 2000}).Draw(rt, "step ms")) * time.Millisecond)
			n := rapid.IntRange(1, 4).Draw(rt, "buyers")
			args := []string{strconv.FormatInt(clock.Now().UnixMilli(), 10), gcraBlock(user, addr)}
			var wants []time.Duration
			for j := range n {
				u := rapid.SampledFrom([]string{"ann", "bob", "cy"}).Draw(rt, "user")
				a := rapid.SampledFrom([]string{"", "10.0.0.1", "10.0.0.2"}).Draw(rt, "address")
				keys, limits := []string{"u:" + u}, []seckill.RateLimit{user}
				if a != "" {
					keys, limits = append(keys, "a:"+a), append(limits, addr)
				}
				wants = append(wants, m.spend(clock.Now().UnixMilli()*1000, true, keys, limits))
				args = append(args, u, "1", "", fmt.Sprintf("%016x", i*8+j), a)
			}
			got, err := execScript(c.Inventory, e.scripts.buy, e.keys("rl"), args)
			if err != nil || len(got) != n+1 || got[0] != "ok" {
				rt.Fatalf("call %d: %q, %v", i, got, err)
			}
			for j, want := range wants {
				a := got[j+1]
				switch {
				case want == 0 && !strings.HasPrefix(a, `["ok"`):
					rt.Fatalf("call %d buyer %d: %s, the model allows it", i, j, a)
				case want > 0 && !strings.HasPrefix(a, fmt.Sprintf(`["rate_limited" %d `, want.Microseconds())):
					rt.Fatalf("call %d buyer %d: %s, the model says rate_limited after %v", i, j, a, want)
				}
			}
		}
	})
}

// TestBuyRateLimitedAnswer: through the engine, a buy over its budget is rate_limited (code,
// wait) before its other rules: a replayed idempotency key too; a segment's signal spends no
// budget; the refusal writes nothing but the budgets.
func TestBuyRateLimitedAnswer(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(t0)
	e := newTestEngine(t, c.Inventory, clock, WithRateLimits(seckill.RateLimit{Rate: 10, Burst: 2}, seckill.RateLimit{Rate: 1, Burst: 3}))
	loadT(t, e, boundarySale("s", 100, 0, 100, 0))
	ctx := context.Background()
	buy := func(user, addr, key string) error {
		_, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: user, Quantity: 1, IdempotencyKey: key, ClientAddr: addr})
		return err
	}
	if err := buy("ann", "10.0.0.1", "k"); err != nil {
		t.Fatal(err)
	}
	if err := buy("ann", "10.0.0.1", "k"); err != nil { // a replay spends too
		t.Fatal(err)
	}
	err := buy("ann", "10.0.0.1", "k")
	wantCode(t, "ann's third buy at once", err, seckill.CodeRateLimited)
	var rl *seckill.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter() != 100*time.Millisecond {
		t.Fatalf("ann's refusal %v: want a RateLimitedError of 100ms", err)
	}
	// The address had 3 at once: ann spent 2, bob the third; cy is refused for the address.
	if err := buy("bob", "10.0.0.1", ""); err != nil {
		t.Fatal(err)
	}
	err = buy("cy", "10.0.0.1", "")
	if !errors.As(err, &rl) || rl.RetryAfter() != time.Second || !strings.Contains(err.Error(), "address") {
		t.Fatalf("cy's refusal %v: want the address's, 1s", err)
	}
	// Without an address only the user's budget counts.
	if err := buy("cy", "", ""); err != nil {
		t.Fatal(err)
	}
	// An address out of the script's alphabet is refused before Redis.
	wantCode(t, "an address with a capital", buy("dee", "2001:DB8::", ""), seckill.CodeInvalidArgument)
	clock.Advance(100 * time.Millisecond)
	if err := buy("ann", "", ""); err != nil {
		t.Fatalf("ann after one interval: %v", err)
	}
}

// TestBuyRateKeyGoesWithTheSale: the rate key is the sale's eighth key, and a drop of the sale
// removes it with the others (cool.lua deletes the same eight).
func TestBuyRateKeyGoesWithTheSale(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(t0)
	e := newTestEngine(t, c.Inventory, clock, WithRateLimits(seckill.RateLimit{Rate: 10, Burst: 2}, seckill.RateLimit{}))
	def := boundarySale("later", 10, 0, 10, 0)
	def.StartsAt = t0.Add(time.Hour)
	loadT(t, e, def)
	ctx := context.Background()
	_, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "later", UserID: "ann", Quantity: 1})
	wantCode(t, "a buy before the start", err, seckill.CodeNotStarted)
	ks := e.keys("later")
	if len(ks) != 8 || !strings.HasSuffix(ks[7], "}:rate") {
		t.Fatalf("keys %q: want eight, the last :rate", ks)
	}
	if n := keysExisting(t, c.Inventory, ks[7:]); n != 1 {
		t.Fatal("a buy refused not_started spent nothing: the budget comes first")
	}
	if _, _, err := e.CloseSale(ctx, "later"); err != nil {
		t.Fatal(err)
	}
	if err := e.DropSale(ctx, "later"); err != nil {
		t.Fatal(err)
	}
	if n := keysExisting(t, c.Inventory, ks); n != 0 {
		t.Fatalf("%d of the sale's keys left after the drop", n)
	}
}

// TestBuyGCRAValidation: the gcra block and the addresses are validated before the first write
// (each refused case leaves every key unchanged), and the valid form answers.
func TestBuyGCRAValidation(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newFixture(t, c, "gcraval")
	block := "gcra:100000:10:2000:1000"
	base := func() []string { return []string{f.clockMS(), block, "frank", "1", "", "0123456789abcdef", "10.0.0.1"} }
	with := func(i int, v string) []string { a := base(); a[i] = v; return a }
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"block without its fields", with(1, "gcra:")},
		{"block with five fields", with(1, "gcra:1:1:1:1:1")},
		{"user burst 0", with(1, "gcra:100000:0:2000:1000")},
		{"address burst above 10^6", with(1, "gcra:100000:10:2000:1000001")},
		{"user interval above 10^9", with(1, "gcra:1000000001:10:2000:1000")},
		{"negative interval", with(1, "gcra:-1:10:2000:1000")},
		{"interval not digits", with(1, "gcra:1e5:10:2000:1000")},
		{"address with a capital", with(6, "2001:DB8::")},
		{"address with a slash", with(6, "10.0.0.1/32")},
		{"address of 40 bytes", with(6, strings.Repeat("1", 40))},
		{"address missing (4 per buyer)", base()[:6]},
		{"second buyer short", append(base(), "bob", "1", "", "0123456789abcdef")},
	} {
		t.Run(tc.name, func(t *testing.T) { refuses(t, f, f.e.scripts.buy, f.keys, tc.argv) })
	}
	got, err := execScript(f.rdb, f.e.scripts.buy, f.keys, base())
	if err != nil || len(got) != 2 || got[0] != "ok" {
		t.Fatalf("the valid form: %q, %v", got, err)
	}
	// The old layout (no block) still answers, and checks no budget.
	got, err = execScript(f.rdb, f.e.scripts.buy, f.keys, []string{f.clockMS(), "frank", "1", "", "0123456789abcdef"})
	if err != nil || len(got) != 2 || got[0] != "ok" {
		t.Fatalf("the plain form: %q, %v", got, err)
	}
}

// TestLimitsOnCluster: the Limiter and buy.lua's budgets on a Redis Cluster: one key per
// Limiter call (any slot), the buy's under the sale's hash tag; a burst at once is allowed and
// the next is refused, on each.
func TestLimitsOnCluster(t *testing.T) {
	c := dialT(t, testenv.RedisCluster(t))
	clock := seckilltest.NewManualClock(t0)
	user := seckill.RateLimit{Rate: 10, Burst: 3}
	e := newTestEngine(t, c.Inventory, clock, WithRateLimits(user, seckill.RateLimit{Rate: 10, Burst: 5}))
	ctx := context.Background()
	l := e.NewLimiter()
	for i := range 3 {
		for k, u := range []string{"ann", "bob", "cy", "dee"} { // users on several nodes' slots
			if w, err := l.Allow(ctx, "path", u, fmt.Sprintf("10.9.%d.%d", k, i), user, user); err != nil || w != 0 {
				t.Fatalf("%s's request %d: %v, %v", u, i+1, w, err)
			}
		}
	}
	if w, err := l.Allow(ctx, "path", "ann", "", user, user); err != nil || w != 100*time.Millisecond {
		t.Fatalf("ann past her burst: %v, %v; want 100ms", w, err)
	}
	for _, sale := range []string{"c1", "c2", "c3"} {
		loadT(t, e, boundarySale(sale, 100, 0, 100, 0))
		for i := range 3 {
			if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: sale, UserID: "ann", Quantity: 1, ClientAddr: "10.0.0.1"}); err != nil {
				t.Fatalf("%s buy %d: %v", sale, i+1, err)
			}
		}
		_, err := e.Buy(ctx, seckill.BuyRequest{SaleID: sale, UserID: "ann", Quantity: 1, ClientAddr: "10.0.0.1"})
		wantCode(t, sale+" past the burst", err, seckill.CodeRateLimited)
	}
}

// TestBuyLimitsControl is the negative control of TestBuyLimitsMatchModel: a buy.lua broken on
// purpose (a burst one larger than asked) is caught by the same comparison with the model.
func TestBuyLimitsControl(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(t0)
	const from = "local tau = t * (b - 1)"
	broken := newScriptSet(func(name string) string {
		src := scriptSource(name)
		if name == "buy.lua" {
			if !strings.Contains(src, from) {
				t.Fatalf("buy.lua no longer contains the text the mutation replaces: %q", from)
			}
			src = strings.Replace(src, from, "local tau = t * b", 1)
		}
		return src
	})
	user := seckill.RateLimit{Rate: 10, Burst: 2}
	e := newTestEngine(t, c.Inventory, clock, WithRateLimits(user, seckill.RateLimit{}))
	loadT(t, e, boundarySale("ctl", 100, 0, 100, 0))
	m := gcraModel{}
	args := []string{strconv.FormatInt(clock.Now().UnixMilli(), 10), gcraBlock(user, seckill.RateLimit{})}
	mismatches := 0
	var wants []time.Duration
	for j := range 3 {
		wants = append(wants, m.spend(clock.Now().UnixMilli()*1000, true, []string{"u:ann"}, []seckill.RateLimit{user}))
		args = append(args, "ann", "1", "", fmt.Sprintf("%016x", j), "")
	}
	got, err := execScript(c.Inventory, broken.buy, e.keys("ctl"), args)
	if err != nil || len(got) != 4 {
		t.Fatalf("%q, %v", got, err)
	}
	for j, want := range wants {
		if (want == 0) != strings.HasPrefix(got[j+1], `["ok"`) {
			mismatches++
		}
	}
	if mismatches == 0 {
		t.Fatalf("the broken script's answers %q all matched the model %v", got, wants)
	}
}

// TestBuyRoundTripsWithLimits measures, on a Redis of its own (INFO commandstats, no MONITOR),
// that the buy limits add no round trip: 200 buys one after the other make one script call
// each with the limits as without, and no other command reaches Redis from outside the
// script. It logs the commands the script runs per buy in each mode (the limits' cost inside
// the one call).
func TestBuyRoundTripsWithLimits(t *testing.T) {
	testenv.Redis(t) // runs with the integration tests
	_, url := startPrivateRedis(t)
	c := dialT(t, url)
	rdb := c.Inventory
	ctx := context.Background()
	const buys = 200
	perBuy := map[bool]map[string]float64{}
	// Negative control: a check of its own before each buy (the Limiter's) is a second script
	// call per buy, which the count below sees.
	{
		e := newTestEngine(t, rdb, seckilltest.NewManualClock(t0))
		loadT(t, e, boundarySale("rtctl", 21, 0, 1, 0))
		_, _ = e.Buy(ctx, seckill.BuyRequest{SaleID: "rtctl", UserID: "warm", Quantity: 1})
		l, lim := e.NewLimiter(), seckill.RateLimit{Rate: 10, Burst: 10}
		_, _ = l.Allow(ctx, "buy", "warm", "", lim, seckill.RateLimit{})
		if err := rdb.Do(ctx, rdb.B().ConfigResetstat().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if w, err := l.Allow(ctx, "buy", fmt.Sprint("u", i), "", lim, seckill.RateLimit{}); err != nil || w != 0 {
				t.Fatal(w, err)
			}
			if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "rtctl", UserID: fmt.Sprint("u", i), Quantity: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if st := redistest.CommandStats(t, rdb); st["evalsha"]+st["eval"] != 40 {
			t.Fatalf("control: %d script calls for 20 buys each checked apart, want 40", st["evalsha"]+st["eval"])
		}
	}
	for _, limited := range []bool{false, true} {
		var opts []Option
		if limited {
			opts = append(opts, WithRateLimits(seckill.RateLimit{Rate: 10, Burst: 10}, seckill.RateLimit{Rate: 500, Burst: 1000}))
		}
		e := newTestEngine(t, rdb, seckilltest.NewManualClock(t0), opts...)
		sale := fmt.Sprint("rt", limited)
		loadT(t, e, boundarySale(sale, buys+1, 0, 1, 0))
		if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: sale, UserID: "warm", Quantity: 1, ClientAddr: "10.0.0.1"}); err != nil {
			t.Fatal(err) // the script is on the server
		}
		if err := rdb.Do(ctx, rdb.B().ConfigResetstat().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		for i := range buys {
			if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: sale, UserID: fmt.Sprint("u", i), Quantity: 1, ClientAddr: "10.0.0.1"}); err != nil {
				t.Fatalf("buy %d: %v", i, err)
			}
		}
		after := redistest.CommandStats(t, rdb)
		scripts := after["evalsha"] + after["eval"]
		if scripts != buys {
			t.Errorf("limited=%v: %d script calls for %d buys, want one each", limited, scripts, buys)
		}
		m := map[string]float64{}
		for k, v := range after {
			if k != "config|resetstat" && k != "info" {
				m[k] = float64(v) / buys
			}
		}
		perBuy[limited] = m
		t.Logf("limited=%v, per buy: %v", limited, m)
	}
	for k := range perBuy[true] {
		if _, ok := perBuy[false][k]; !ok && !strings.HasPrefix(k, "z") && k != "type" {
			t.Errorf("the limits brought command %s (%.2f per buy), not a ZSET command of the script", k, perBuy[true][k])
		}
	}
}
