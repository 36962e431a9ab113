package main

// `seckill bench --sales N`: a flash-sale day in one run. N sales start one after another
// over --spread, the crowd is shared over them by a Zipf law (a few hot sales, a long tail of
// cold ones), each sale's buyers rush it when it starts, and every sale gets the single
// sale's verdict (loadgen.Check on its own records and every instance's audit of it), then
// the run one overall verdict: ok only if every sale is.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/loadgen"
)

// maxBenchSales bounds --sales: each sale is created, run, settled and audited by the
// generator, which keeps every sale's records until the end.
const maxBenchSales = 100_000

// benchWorkers bounds the generator's parallel admin calls (creating, settling and auditing
// the sales), so that creating thousands of sales is quick without flooding the targets.
const benchWorkers = 16

// maxSaleRows is how many sales the text report lists one per line; past it, only the sales
// that failed or could not be verified are listed, and the hottest few.
const maxSaleRows = 20

// salePlan is one sale of a many-sales run: its id, when it starts (after the first), how
// many of the crowd buy in it, and the seed of their behaviour.
type salePlan struct {
	ID        string
	Start     time.Duration
	Buyers    int
	FirstUser int // its buyers are loadgen.UserName(FirstUser …): nobody buys in two sales
	Seed      uint64
}

// planSales shares buyers over n sales named prefix-1 … prefix-n, starting evenly over spread
// in that order. Buyer i goes to the sale of rank k with the Zipf law's probability ∝ (1+k)^-s,
// and the ranks are shuffled over the sales, so that the hottest sale is not always the first
// to start. The plan depends on the arguments only: the tests break the hottest sale on purpose.
func planSales(prefix string, n, buyers int, spread time.Duration, s float64, seed uint64) []salePlan {
	rng := rand.New(rand.NewPCG(seed, 0x5a1e5))
	rankOf := rng.Perm(n) // sale i has rank rankOf[i]
	perRank := make([]int, n)
	z := rand.NewZipf(rng, s, 1, uint64(n-1))
	for range buyers {
		perRank[z.Uint64()]++
	}
	plan := make([]salePlan, n)
	first := 0
	for i := range plan {
		plan[i] = salePlan{ID: fmt.Sprintf("%s-%d", prefix, i+1), Buyers: perRank[rankOf[i]], FirstUser: first, Seed: seed + uint64(i)}
		first += plan[i].Buyers
		if n > 1 {
			plan[i].Start = spread * time.Duration(i) / time.Duration(n-1)
		}
	}
	return plan
}

// saleRun is one sale of the run, as it went.
type saleRun struct {
	plan     salePlan
	startsAt time.Time
	res      *loadgen.Result
	sale     client.Sale
	audits   []loadgen.InstanceAudit
	facts    loadgen.SaleFacts
	verdict  loadgen.Verdict
	err      error // the crowd could not run (the sale's run, not its verdict)
}

// runManySales is runBench for o.sales sales at once (see the file's comment).
func runManySales(ctx context.Context, o benchOptions, stdout, stderr io.Writer) error {
	if o.stripeSecret != "" || o.stripeStandIn != "" {
		return errors.New("bench: --sales is not supported with the Stripe stand-in yet; bench one sale at a time there")
	}
	plan := planSales(o.saleID, o.sales, o.buyers, o.spread, o.zipf, o.seed)
	// The first sale starts once the others are likely created (a sale whose start has passed
	// by its creation is created all the same: it is on sale at once).
	base := time.Now().UTC().Add(time.Second + time.Duration(o.sales)*time.Millisecond).Truncate(time.Millisecond)
	runs := make([]*saleRun, len(plan))
	for i, p := range plan {
		runs[i] = &saleRun{plan: p, startsAt: base.Add(p.Start).Truncate(time.Millisecond)}
	}
	title := o.title
	if title == "" {
		title = fmt.Sprintf("seckill bench: %d sales of %d units, %d per user, %s holds; starts over %s, crowd Zipf s=%g",
			o.sales, o.units, o.perUser, o.hold, o.spread, o.zipf)
		if o.segments > 1 {
			title += fmt.Sprintf(", %d segments", o.segments)
		}
	}
	createStart := time.Now()
	if err := forEach(ctx, runs, func(i int, r *saleRun) error {
		s, err := o.admin(i).CreateSale(ctx, client.NewSale{
			ID: r.plan.ID, Name: "seckill bench " + r.plan.ID, PriceCents: 999, Stock: o.units,
			StartsAt: r.startsAt, EndsAt: r.startsAt.Add(10 * time.Minute),
			PerUserLimit: o.perUser, HoldSeconds: int(o.hold.Seconds()),
			Listed: client.Ptr(false), Segments: o.segments,
		})
		r.sale = s
		if err != nil {
			return fmt.Errorf("create sale %s: %w", r.plan.ID, err)
		}
		return nil
	}); err != nil {
		if _, isNetErr := errors.AsType[net.Error](err); isNetErr {
			return fmt.Errorf("no server answers at %s (start one with seckill serve --dev, or point --target at yours): %w", o.targets[0], err)
		}
		return err
	}
	fmt.Fprintf(stderr, "created %d sales in %s\n", len(runs), time.Since(createStart).Round(time.Millisecond))

	gw, err := fetchAudit(ctx, o.targets[0], runs[0].plan.ID, o.adminToken, time.Now().Add(o.auditWait))
	if err != nil {
		return fmt.Errorf("ask the target which payment gateway it runs (a sale's audit): %w", err)
	}
	// One crowd config, the whole crowd's; each sale's is a share of it.
	crowd := loadgen.Config{
		Targets: o.targets, Buyers: o.buyers, Concurrency: o.concurrency, Rate: o.rate,
		Mix: o.mix, Seed: o.seed, Hold: o.hold, Deadline: o.deadline, Sample: time.Second,
		Token: func(u string) (string, error) {
			return httpapi.MintToken([]byte(o.authSecret), u, time.Now(), time.Hour)
		},
	}
	if err := o.payThrough(gw.Gateway, &crowd); err != nil {
		return err
	}
	conns := o.concurrency + 16
	if o.rate > 0 {
		conns = 512
	}
	crowd.Client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	if !o.asJSON {
		fmt.Fprintf(stdout, "%s\n%s\nagainst %s\n", title, crowd.Describe(), strings.Join(o.targets, ", "))
	}

	crowdStart := time.Now()
	var started, done, buyersDone atomic.Int64
	stopProgress := make(chan struct{})
	var progress sync.WaitGroup
	progress.Go(func() {
		for wait.Sleep(ctx, 2*time.Second) {
			select {
			case <-stopProgress:
				return
			default:
			}
			fmt.Fprintf(stderr, "%5.1fs  sales started %d/%d, done %d | buyers done %d/%d\n", time.Since(crowdStart).Seconds(),
				started.Load(), len(runs), done.Load(), buyersDone.Load(), o.buyers)
		}
	})
	var crowds sync.WaitGroup
	var allMu sync.Mutex
	all := hdrhistogram.New(1, 120_000_000, 3) // every request of every sale
	for _, r := range runs {
		crowds.Go(func() {
			defer done.Add(1)
			if !wait.Sleep(ctx, time.Until(r.startsAt)) {
				r.err = ctx.Err()
				return
			}
			started.Add(1)
			cfg := crowd
			cfg.SaleID, cfg.Buyers, cfg.FirstUser, cfg.Seed = r.plan.ID, r.plan.Buyers, r.plan.FirstUser, r.plan.Seed
			cfg.Concurrency = max(1, (o.concurrency*r.plan.Buyers+o.buyers-1)/o.buyers)
			cfg.Rate = o.rate * float64(r.plan.Buyers) / float64(o.buyers)
			if r.plan.Buyers == 0 {
				r.res = emptyResult() // nobody came: the sale is still audited
				return
			}
			r.res, r.err = loadgen.Run(ctx, cfg)
			buyersDone.Add(int64(r.plan.Buyers))
			if r.res != nil {
				// A run's histograms take about 1 MB: merged and dropped as each sale ends, so
				// that only the sales in flight hold theirs.
				allMu.Lock()
				all.Merge(r.res.All)
				allMu.Unlock()
				r.res.All, r.res.Latency = nil, nil
			}
		})
	}
	crowds.Wait()
	close(stopProgress)
	progress.Wait()
	for _, r := range runs {
		if r.err != nil {
			return fmt.Errorf("sale %s: %w", r.plan.ID, r.err)
		}
	}
	fmt.Fprintf(stderr, "crowd done in %s; waiting for the last holds to expire and the last payments to land, then auditing %d sales on %d instance(s)…\n",
		time.Since(crowdStart).Round(100*time.Millisecond), len(runs), len(o.targets))
	if o.settle != nil {
		o.settle()
	}
	_ = forEach(ctx, runs, func(_ int, r *saleRun) error {
		so := o
		so.saleID = r.plan.ID
		r.sale = settleSale(ctx, so, r.sale)
		settleRefunds(ctx, so)
		r.audits = auditAll(ctx, so)
		r.facts = loadgen.SaleFacts{Sellable: r.sale.StockState.Sellable, PerUserLimit: o.perUser, Sold: r.sale.StockState.Sold}
		r.verdict = loadgen.Check(r.res, r.facts, r.audits, loadgen.PayersFrom(r.plan.FirstUser, r.plan.Buyers, r.plan.Seed, o.mix))
		return nil
	})
	sum := summarize(runs, all, time.Since(crowdStart))
	if o.asJSON {
		err = sum.writeJSON(stdout, title, crowd.Describe(), o.targets)
	} else {
		fmt.Fprintln(stdout)
		err = sum.writeText(stdout)
	}
	if err != nil {
		return err
	}
	if o.report != "" {
		if err := sum.writeMarkdown(o.report, title, crowd.Describe(), o.targets); err != nil {
			return err
		}
		if !o.asJSON {
			fmt.Fprintf(stdout, "report: %s\n", o.report)
		}
	}
	switch {
	case len(sum.failed) > 0:
		return exitError(fmt.Sprintf("invariant check failed in %d of %d sales: %s", len(sum.failed), len(runs), idsOf(sum.failed, 10)))
	case len(sum.unverified) > 0:
		return exitError(fmt.Sprintf("%d of %d sales could not be fully verified: %s", len(sum.unverified), len(runs), idsOf(sum.unverified, 10)))
	}
	return nil
}

// forEach calls f on every run, benchWorkers at a time, and returns the first error (the
// others still run).
func forEach(ctx context.Context, runs []*saleRun, f func(i int, r *saleRun) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(benchWorkers, len(runs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(runs) || ctx.Err() != nil {
					return
				}
				if err := f(i, runs[i]); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return cmp.Or(first, ctx.Err())
}

// emptyResult is the record of a sale nobody came to (no histograms: see the crowd's).
func emptyResult() *loadgen.Result {
	return &loadgen.Result{Payments: map[string]string{}, PaidUnits: map[string]int{}}
}

// manySummary is the run's overall figures and verdict.
type manySummary struct {
	runs                []*saleRun
	failed, unverified  []*saleRun
	buyers, held        int
	requests, errs      int64
	sellable, soldDB    int
	paidOrders, refunds int
	elapsed             time.Duration
	all                 *hdrhistogram.Histogram
}

func summarize(runs []*saleRun, all *hdrhistogram.Histogram, elapsed time.Duration) manySummary {
	s := manySummary{runs: runs, elapsed: elapsed, all: all}
	for _, r := range runs {
		switch r.verdict.Word() {
		case "FAILED":
			s.failed = append(s.failed, r)
		case "UNVERIFIED":
			s.unverified = append(s.unverified, r)
		}
		s.buyers += r.plan.Buyers
		s.held += int(r.res.Held)
		s.requests += r.res.Requests
		s.errs += r.res.Errors
		s.sellable += r.facts.Sellable
		if a, ok := loadgen.FirstAudit(r.audits); ok {
			s.soldDB += a.Database.Sold
			s.paidOrders += a.Database.PaidOrders
			s.refunds += a.Database.Refunds
		}
	}
	return s
}

// word is the overall verdict: FAILED if any sale failed, UNVERIFIED if any could not be
// verified, else ok.
func (s manySummary) word() string {
	switch {
	case len(s.failed) > 0:
		return "FAILED"
	case len(s.unverified) > 0:
		return "UNVERIFIED"
	}
	return "ok"
}

func idsOf(runs []*saleRun, most int) string {
	var ids []string
	for _, r := range runs[:min(most, len(runs))] {
		ids = append(ids, r.plan.ID)
	}
	if len(runs) > most {
		ids = append(ids, fmt.Sprintf("… %d more", len(runs)-most))
	}
	return strings.Join(ids, ", ")
}

// writeText prints the sales (every one up to maxSaleRows; past it, the failed, the
// unverified and the five hottest), each failure's violations, then the overall figures.
func (s manySummary) writeText(w io.Writer) error {
	rows := s.runs
	if len(rows) > maxSaleRows {
		hottest := slices.Clone(s.runs)
		slices.SortStableFunc(hottest, func(a, b *saleRun) int { return cmp.Compare(b.plan.Buyers, a.plan.Buyers) })
		rows = append(append(slices.Clone(s.failed), s.unverified...), hottest[:5]...)
		rows = slices.CompactFunc(rows, func(a, b *saleRun) bool { return a == b })
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sale\tstarts\tbuyers\tsold (engine / database)\theld / queued\tpaid / refunds owed\tverdict")
	for _, r := range rows {
		db := loadgen.Audit{}
		if a, ok := loadgen.FirstAudit(r.audits); ok {
			db = a
		}
		fmt.Fprintf(tw, "%s\t+%.1fs\t%d\t%d / %d of %d\t%d / %d\t%d / %d\t%s\n", r.plan.ID, r.plan.Start.Seconds(), r.plan.Buyers,
			r.facts.Sold, db.Database.Sold, r.facts.Sellable, r.res.Held, r.res.Queued, db.Database.PaidOrders, db.Database.Refunds, r.verdict.Word())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) < len(s.runs) {
		fmt.Fprintf(w, "(%d sales listed: the failed, the unverified and the five hottest; the other %d are ok)\n", len(rows), len(s.runs)-len(rows))
	}
	for _, r := range append(slices.Clone(s.failed), s.unverified...) {
		fmt.Fprintf(w, "%s %s:\n", r.plan.ID, r.verdict.Word())
		for _, v := range r.verdict.Violations {
			fmt.Fprintf(w, "  violation: %s\n", v)
		}
		for _, u := range r.verdict.Unverified {
			fmt.Fprintf(w, "  unverified: %s\n", u)
		}
	}
	reqPS := float64(s.requests) / max(s.elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "\nsales       %d: %d ok, %d FAILED, %d UNVERIFIED\n", len(s.runs), len(s.runs)-len(s.failed)-len(s.unverified), len(s.failed), len(s.unverified))
	fmt.Fprintf(w, "buyers      %d (%d held a unit); %d requests in %s (%.0f/s), %d errors\n", s.buyers, s.held, s.requests, s.elapsed.Round(100*time.Millisecond), reqPS, s.errs)
	fmt.Fprintf(w, "latency     p50 %s, p99 %s, max %s (every request)\n", ms(s.all.ValueAtQuantile(50)), ms(s.all.ValueAtQuantile(99)), ms(s.all.Max()))
	fmt.Fprintf(w, "units       %d sold of %d sellable (database); %d paid orders, %d refunds owed\n", s.soldDB, s.sellable, s.paidOrders, s.refunds)
	_, err := fmt.Fprintf(w, "invariants  %s (every sale: the single sale's checks on its own records and every instance's audit)\n", s.word())
	return err
}

func ms(us int64) string { return fmt.Sprintf("%.2f ms", float64(us)/1000) }

// saleJSON is one sale in the JSON report.
type saleJSON struct {
	ID         string          `json:"id"`
	StartsAt   time.Time       `json:"starts_at"`
	Buyers     int             `json:"buyers"`
	Sellable   int             `json:"sellable"`
	SoldEngine int             `json:"sold_engine"`
	SoldDB     int             `json:"sold_database"`
	Held       int64           `json:"held"`
	Queued     int64           `json:"queued"`
	PaidOrders int             `json:"paid_orders"`
	Refunds    int             `json:"refunds_owed"`
	Requests   int64           `json:"requests"`
	Errors     int64           `json:"errors"`
	Verdict    loadgen.Verdict `json:"verdict"`
}

func (s manySummary) writeJSON(w io.Writer, title, config string, targets []string) error {
	type overall struct {
		Verdict    string   `json:"verdict"`
		OK         bool     `json:"ok"`
		Sales      int      `json:"sales"`
		Failed     []string `json:"failed"`
		Unverified []string `json:"unverified"`
		Buyers     int      `json:"buyers"`
		Held       int      `json:"held"`
		Requests   int64    `json:"requests"`
		Errors     int64    `json:"errors"`
		ElapsedMS  int64    `json:"elapsed_ms"`
		P50us      int64    `json:"p50_us"`
		P99us      int64    `json:"p99_us"`
		Sellable   int      `json:"sellable"`
		SoldDB     int      `json:"sold_database"`
	}
	out := struct {
		Title   string     `json:"title"`
		Config  string     `json:"config"`
		Targets []string   `json:"targets"`
		Version string     `json:"version"`
		Overall overall    `json:"overall"`
		Sales   []saleJSON `json:"sales"`
	}{Title: title, Config: config, Targets: targets, Version: versionString(), Overall: overall{
		Verdict: s.word(), OK: s.word() == "ok", Sales: len(s.runs), Failed: []string{}, Unverified: []string{},
		Buyers: s.buyers, Held: s.held, Requests: s.requests, Errors: s.errs, ElapsedMS: s.elapsed.Milliseconds(),
		P50us: s.all.ValueAtQuantile(50), P99us: s.all.ValueAtQuantile(99), Sellable: s.sellable, SoldDB: s.soldDB,
	}}
	for _, r := range s.failed {
		out.Overall.Failed = append(out.Overall.Failed, r.plan.ID)
	}
	for _, r := range s.unverified {
		out.Overall.Unverified = append(out.Overall.Unverified, r.plan.ID)
	}
	for _, r := range s.runs {
		a, _ := loadgen.FirstAudit(r.audits)
		out.Sales = append(out.Sales, saleJSON{ID: r.plan.ID, StartsAt: r.startsAt, Buyers: r.plan.Buyers, Sellable: r.facts.Sellable,
			SoldEngine: r.facts.Sold, SoldDB: a.Database.Sold, Held: r.res.Held, Queued: r.res.Queued, PaidOrders: a.Database.PaidOrders,
			Refunds: a.Database.Refunds, Requests: r.res.Requests, Errors: r.res.Errors, Verdict: r.verdict})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeMarkdown writes the text report as a Markdown page.
func (s manySummary) writeMarkdown(path, title, config string, targets []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n%s; against %s; %s\n\n```\n", title, config, strings.Join(targets, ", "), versionString())
	if err := s.writeText(&b); err != nil {
		return err
	}
	b.WriteString("```\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
