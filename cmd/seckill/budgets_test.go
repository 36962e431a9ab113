package main

import (
	"flag"
	"testing"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
)

// TestBudgetFlags: --rate-per-addr and --burst-per-addr (and their variables) set the
// per-address budget that the HTTP API and the Redis engine's buys share (budgetConfig); 0 is
// the default (500/s, burst 1 000), --rate-per-addr -1 none; the per-user budget is 10/s,
// burst 10, off with the load generator's buyRate -1; bad values are refused.
func TestBudgetFlags(t *testing.T) {
	budgets := func(env map[string]string, opts appOptions, args ...string) (user, addr seckill.RateLimit) {
		t.Helper()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var c config
		bindConfig(fs, func(k string) string { return env[k] }, &c)
		if err := fs.Parse(args); err != nil || c.envErr != nil {
			t.Fatal(err, c.envErr)
		}
		return budgetConfig(c, opts).Budgets()
	}
	user, addr := budgets(nil, appOptions{})
	if user != (seckill.RateLimit{Rate: 10, Burst: 10}) || addr != (seckill.RateLimit{Rate: httpapi.DefaultAddrRate, Burst: httpapi.DefaultAddrBurst}) {
		t.Fatalf("defaults: user %+v, address %+v", user, addr)
	}
	_, addr = budgets(map[string]string{"SECKILL_RATE_PER_ADDR": "50"}, appOptions{}, "--burst-per-addr", "70")
	if addr != (seckill.RateLimit{Rate: 50, Burst: 70}) {
		t.Fatalf("address %+v, want 50/s burst 70", addr)
	}
	user, addr = budgets(nil, appOptions{buyRate: -1}, "--rate-per-addr", "-1")
	if user.On() || addr.On() {
		t.Fatalf("off: user %+v, address %+v", user, addr)
	}
	wantRefused(t, "SECKILL_BURST_PER_ADDR", "lots", [][]string{{"--rate-per-addr", "-2"}, {"--burst-per-addr", "-1"}, {"--rate-per-addr", "1.5"}})
}
