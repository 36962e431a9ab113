package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/loadgen"
)

// manySalesArgs are the tests' flash-sale day: 5 sales of 10 units over 1 s, 400 buyers.
var manySalesArgs = []string{"--sales", "5", "--sale", "day", "--units", "10", "--buyers", "400", "--hold", "1s", "--spread", "1s", "--seed", "7"}

// TestBenchManySales: five sales at once against a --dev server (memory engine): each sale
// gets its own verdict, every one ok, the crowd is shared over them (Zipf: unevenly, all
// buyers counted once), and every sale whose paying buyers outnumber its units sold them all.
func TestBenchManySales(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five flash sales over HTTP")
	}
	a, cfg := startDevApp(t, nil)
	out, err := benchAgainst(t, a, cfg, append(slices2(manySalesArgs), "--json")...)
	if err != nil {
		t.Fatalf("bench --sales 5: %v\n%s", err, out)
	}
	var rp struct {
		Overall struct {
			Verdict string   `json:"verdict"`
			Sales   int      `json:"sales"`
			Failed  []string `json:"failed"`
			Buyers  int      `json:"buyers"`
		} `json:"overall"`
		Sales []struct {
			ID       string          `json:"id"`
			Buyers   int             `json:"buyers"`
			Sellable int             `json:"sellable"`
			SoldDB   int             `json:"sold_database"`
			Verdict  loadgen.Verdict `json:"verdict"`
		} `json:"sales"`
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &rp); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, out)
	}
	if rp.Overall.Verdict != "ok" || rp.Overall.Sales != 5 || len(rp.Sales) != 5 || rp.Overall.Buyers != 400 {
		t.Fatalf("overall %+v with %d sales: want ok, 5 sales, 400 buyers\n%s", rp.Overall, len(rp.Sales), out)
	}
	plan := planSales("day", 5, 400, time.Second, 1.1, 7)
	buyers, most, least := 0, 0, 400
	for i, s := range rp.Sales {
		buyers += s.Buyers
		most, least = max(most, s.Buyers), min(least, s.Buyers)
		if s.ID != fmt.Sprintf("day-%d", i+1) || !s.Verdict.OK || len(s.Verdict.Checked) == 0 {
			t.Errorf("sale %d: %s verdict %+v; want day-%d ok with its checks", i, s.ID, s.Verdict, i+1)
		}
		if payers := loadgen.PayersFrom(plan[i].FirstUser, s.Buyers, 7+uint64(i), loadgen.DefaultMix); payers >= s.Sellable && s.SoldDB != s.Sellable {
			t.Errorf("sale %s: %d payers for %d units, but %d sold", s.ID, payers, s.Sellable, s.SoldDB)
		}
	}
	if buyers != 400 || most <= least {
		t.Errorf("buyers per sale add up to %d (want 400), from %d to %d (want a Zipf crowd, uneven)", buyers, least, most)
	}
}

// slices2 copies args, so that a test's appends never share the package's array.
func slices2(args []string) []string { return append([]string(nil), args...) }

// skipsStockCheckIn is skipsStockCheck in one sale only: the others are sold honestly.
type skipsStockCheckIn struct {
	seckill.Inventory
	sale string
}

func (b skipsStockCheckIn) Buy(ctx context.Context, req seckill.BuyRequest) (seckill.BuyResult, error) {
	if req.SaleID == b.sale {
		return skipsStockCheck{b.Inventory}.Buy(ctx, req)
	}
	return b.Inventory.Buy(ctx, req)
}

// TestBenchManySalesCatchesABrokenSale is the negative control: one sale of five (the hottest,
// which surely sells out) is served by an engine that skips the stock check. That sale, and
// only it, fails its verdict; the run fails overall and names it.
func TestBenchManySalesCatchesABrokenSale(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five flash sales over HTTP")
	}
	plan := planSales("day", 5, 400, time.Second, 1.1, 7)
	hot := plan[0]
	for _, p := range plan {
		if p.Buyers > hot.Buyers {
			hot = p
		}
	}
	a, cfg := startDevApp(t, func(inv seckill.Inventory) seckill.Inventory { return skipsStockCheckIn{inv, hot.ID} })
	// The broken sale's audits stay not ok: a short --audit-wait ends the wait for them.
	out, err := benchAgainst(t, a, cfg, append(slices2(manySalesArgs), "--audit-wait", "3s")...)
	var exit exitError
	if !errors.As(err, &exit) || !strings.Contains(out, "invariants  FAILED") || !strings.Contains(out, "sales       5: 4 ok, 1 FAILED") {
		t.Fatalf("bench --sales 5 with %s broken: %v; want one sale failed:\n%s", hot.ID, err, out)
	}
	if !regexp.MustCompile(`(?m)^`+hot.ID+` .*FAILED$`).MatchString(out) || !strings.Contains(out, hot.ID+" FAILED:\n  violation:") {
		t.Errorf("the report does not name %s as the failed sale with its violations:\n%s", hot.ID, out)
	}
	if !strings.Contains(err.Error(), hot.ID) {
		t.Errorf("exit error %q does not name %s", err, hot.ID)
	}
	t.Logf("caught:\n%s", out[strings.Index(out, "sale "):])
}

// TestPlanSales: the plan shares every buyer, each to one sale (no buyer pays in many sales
// at once: the targets limit a user's payments), spreads the starts from 0 to the spread, and
// is the same for the same arguments.
func TestPlanSales(t *testing.T) {
	p := planSales("x", 100, 5000, 10*time.Second, 1.1, 3)
	total, hottest := 0, 0
	for _, s := range p {
		if s.FirstUser != total {
			t.Errorf("sale %s: buyers from %d; want %d (each sale its own buyers)", s.ID, s.FirstUser, total)
		}
		total += s.Buyers
		hottest = max(hottest, s.Buyers)
	}
	if total != 5000 || p[0].Start != 0 || p[99].Start != 10*time.Second || p[99].ID != "x-100" {
		t.Errorf("plan: %d buyers, starts %v … %v, last %s", total, p[0].Start, p[99].Start, p[99].ID)
	}
	if hottest < 5000/20 {
		t.Errorf("hottest sale has %d of 5000 buyers: not a Zipf crowd", hottest)
	}
	if q := planSales("x", 100, 5000, 10*time.Second, 1.1, 3); fmt.Sprint(q) != fmt.Sprint(p) {
		t.Error("the same arguments planned differently")
	}
}
