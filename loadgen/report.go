package loadgen

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a run as the reports show it: what was run, what happened, and the verdict.
type Report struct {
	Title  string
	Config string // Config.Describe
	Sale   SaleFacts
	Result *Result
	Audit  Audit // the first instance's that gave one
	// Instances are every target's audit, or why it gave none (the report still shows the
	// run: an instance that died or kept answering 503 is named, not a reason to lose it).
	Instances []InstanceAudit
	Verdict   Verdict
	// RefundsByHand are the refunds of Audit's refunds_failed owed through a gateway that
	// cannot pay money back (the built-in webhook scheme): the shop pays them back by hand,
	// from GET /api/v1/refunds. They are reported as owed by hand, not as failures.
	RefundsByHand int

	// What was measured, so that a report read later says it: the target instances, the sale,
	// when the run started (shown in UTC) and the seckill that ran it (Version: the generator's
	// version line; the targets do not report theirs).
	Targets []string
	SaleID  string
	Date    time.Time
	Version string
}

// about is the run's identity, as label/value pairs: targets, sale, date (UTC), version.
func (rp Report) about() [][2]string {
	var rows [][2]string
	add := func(k, v string) {
		if v != "" {
			rows = append(rows, [2]string{k, v})
		}
	}
	add("target(s)", strings.Join(rp.Targets, ", "))
	add("sale", rp.SaleID)
	if !rp.Date.IsZero() {
		add("date", rp.Date.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	add("seckill version", rp.Version)
	return rows
}

// refundsShort is refundsNote in one line of the text report.
func (rp Report) refundsShort() string {
	s := "refunds owed: payments that landed after their hold had expired or been cancelled and its unit was " +
		"gone (the mix's late payers); recorded refund_required, never sold, and paid back by the server's refunder"
	if rp.RefundsByHand > 0 {
		s += fmt.Sprintf(", except the %d owed by hand: the built-in webhook scheme took them and cannot pay money back, "+
			"so they are listed in GET /api/v1/refunds for the shop to pay back itself", rp.RefundsByHand)
	}
	return s
}

// refundsNote explains the "refunds owed" figure: money taken for a unit that could not be
// given, paid back rather than oversold, and by whom (so that it agrees with the table).
func (rp Report) refundsNote() string {
	s := "Refunds owed are payments that succeeded at the gateway for a hold that had already " +
		"expired or been cancelled, when no unit was free any more (the mix's late payers, whose payment lands after " +
		"their hold ran out). Each is recorded refund_required, never as a sale, and the server's refunder pays it back " +
		"through the gateway that took it; a late payer whose unit was still free is paid (late_applied) instead."
	if rp.RefundsByHand > 0 {
		s += fmt.Sprintf(" The %d owed by hand were taken by the built-in webhook scheme (the shop's own payment service), "+
			"through which seckill cannot pay money back: they are recorded refund_failed and listed in GET /api/v1/refunds "+
			"for the shop to pay back itself.", rp.RefundsByHand)
	}
	return s
}

// instanceRows are the targets and their audits: "ok", "not ok", or why there was none.
func (rp Report) instanceRows() [][2]string {
	var rows [][2]string
	for i, in := range rp.Instances {
		state := "audit ok"
		switch {
		case in.Err != "":
			state = "no audit (unreachable or unavailable): " + in.Err
		case !in.Audit.OK:
			state = "audit not ok"
		}
		rows = append(rows, [2]string{fmt.Sprintf("instance %d %s", i+1, in.Target), state})
	}
	return rows
}

// ms renders a histogram quantile (µs) as milliseconds.
func ms(us int64) string { return fmt.Sprintf("%.2f ms", float64(us)/1000) }

// rows are the report's key figures, shared by the text and Markdown forms.
func (rp Report) rows() [][2]string {
	r, db := rp.Result, rp.Audit.Database
	reqPS := float64(r.Requests) / max(r.Elapsed.Seconds(), 1e-9)
	oversold := max(0, rp.Sale.Sold-rp.Sale.Sellable, db.Sold-rp.Sale.Sellable)
	refunds := fmt.Sprintf("%d / %d", db.PaidOrders, db.Refunds)
	if db.Refunds > 0 {
		byHand := ""
		if rp.RefundsByHand > 0 {
			byHand = fmt.Sprintf(", owed by hand %d", rp.RefundsByHand)
		}
		refunds += fmt.Sprintf(" (paid back %d%s, failed %d, open %d when audited)",
			db.Refunded, byHand, db.RefundsFailed-rp.RefundsByHand, db.RefundsRequired+db.RefundsPending)
	}
	rows := [][2]string{
		{"units sold (engine / database)", fmt.Sprintf("%d / %d of %d", rp.Sale.Sold, db.Sold, rp.Sale.Sellable)},
		{"oversold", fmt.Sprint(oversold)},
		{"paid orders / refunds owed", refunds},
		{"buyers held / queued / handed off / rejected", fmt.Sprintf("%d / %d / %d / %d", r.Held, r.Queued, r.Handoffs, r.Rejected)},
		{"cancelled / abandoned / expired", fmt.Sprintf("%d / %d / %d", r.Cancelled, r.Abandoned, r.Expired)},
		{"told sold out / queue full (retried)", fmt.Sprintf("%d / %d", r.SoldOut, r.QueueFull)},
		{"payments begun / idempotent replays", fmt.Sprintf("%d / %d", r.PaymentsBegun, r.Replays)},
		{"requests / per second", fmt.Sprintf("%d / %.0f", r.Requests, reqPS)},
		{"503 retried / 429 retried / errors / gave up", fmt.Sprintf("%d / %d / %d / %d", r.Retried503, r.RateLimited, r.Errors, r.GaveUp)},
		{"elapsed", r.Elapsed.Round(time.Millisecond).String()},
	}
	if r.ClosedBeforePaid > 0 {
		// Stripe mode: late buyers who found their payment closed, a late refund each avoided.
		rows = append(rows[:7:7], append([][2]string{{"payments closed before the buyer paid", fmt.Sprint(r.ClosedBeforePaid)}}, rows[7:]...)...)
	}
	return rows
}

// WriteText writes the report as an aligned text table.
func (rp Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if rp.Title != "" {
		fmt.Fprintf(tw, "%s\n%s\n", rp.Title, rp.Config)
	}
	for _, row := range rp.about() {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	fmt.Fprintln(tw)
	for _, row := range rp.rows() {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if rp.Audit.Database.Refunds > 0 {
		fmt.Fprintf(tw, "(%s)\n", rp.refundsShort())
	}
	fmt.Fprintf(tw, "\nlatency\tcount\tp50\tp90\tp99\tmax\n")
	for _, step := range append(Steps, "all") {
		h := rp.Result.All
		if step != "all" {
			h = rp.Result.Latency[step]
		}
		if h.TotalCount() == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", step, h.TotalCount(), ms(h.ValueAtQuantile(50)),
			ms(h.ValueAtQuantile(90)), ms(h.ValueAtQuantile(99)), ms(h.Max()))
	}
	if rows := rp.instanceRows(); len(rows) > 0 {
		fmt.Fprintln(tw)
		for _, row := range rows {
			fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
		}
	}
	fmt.Fprintf(tw, "\ninvariants\t%s %s\n", rp.Verdict.Word(), rp.Verdict.counts())
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range rp.Verdict.Violations {
		if _, err := fmt.Fprintln(w, "  violation:", v); err != nil {
			return err
		}
	}
	for _, v := range rp.Verdict.Unverified {
		if _, err := fmt.Fprintln(w, "  unverified:", v); err != nil {
			return err
		}
	}
	for _, v := range rp.Verdict.NotExercised {
		if _, err := fmt.Fprintln(w, "  not exercised:", v); err != nil {
			return err
		}
	}
	return nil
}

// counts says how many checks ran, and how many had nothing to check: "(8 checked, 1 not
// exercised)".
func (v Verdict) counts() string {
	s := fmt.Sprintf("(%d checked", len(v.Checked))
	if n := len(v.NotExercised); n > 0 {
		s += fmt.Sprintf(", %d not exercised", n)
	}
	return s + ")"
}

// WriteJSON writes the report as one JSON object.
func (rp Report) WriteJSON(w io.Writer) error {
	latency := map[string]map[string]int64{}
	for _, step := range append(Steps, "all") {
		h := rp.Result.All
		if step != "all" {
			h = rp.Result.Latency[step]
		}
		latency[step] = map[string]int64{"count": h.TotalCount(), "p50_us": h.ValueAtQuantile(50),
			"p90_us": h.ValueAtQuantile(90), "p99_us": h.ValueAtQuantile(99), "max_us": h.Max()}
	}
	r := rp.Result
	out := map[string]any{
		"title": rp.Title, "config": rp.Config, "targets": rp.Targets, "sale_id": rp.SaleID,
		"date": rp.Date.UTC().Format(time.RFC3339), "version": rp.Version,
		"sale":     map[string]int{"sellable": rp.Sale.Sellable, "per_user_limit": rp.Sale.PerUserLimit, "engine_sold": rp.Sale.Sold},
		"database": rp.Audit.Database, "refunds_owed_by_hand": rp.RefundsByHand,
		"counts": map[string]int64{"buyers": int64(r.Buyers), "requests": r.Requests, "errors": r.Errors,
			"retried_503": r.Retried503, "rate_limited": r.RateLimited, "held": r.Held, "queued": r.Queued,
			"handoffs": r.Handoffs, "rejected": r.Rejected, "sold_out": r.SoldOut, "queue_full": r.QueueFull,
			"replays": r.Replays, "replay_mismatch": r.ReplayMismatch, "cancelled": r.Cancelled,
			"abandoned": r.Abandoned, "expired": r.Expired, "payments_begun": r.PaymentsBegun, "gave_up": r.GaveUp,
			"closed_before_paid": r.ClosedBeforePaid},
		"elapsed_ms": r.Elapsed.Milliseconds(), "latency": latency, "series": r.Series,
		"instances": instancesJSON(rp.Instances), "verdict": rp.Verdict,
		"payments": r.Payments, // payment id -> the result a target answered 200 with
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// instancesJSON is each target with whether its audit was ok, or why it gave none.
func instancesJSON(ins []InstanceAudit) []map[string]any {
	out := []map[string]any{}
	for _, in := range ins {
		m := map[string]any{"target": in.Target, "audit_ok": in.Err == "" && in.Audit.OK}
		if in.Err != "" {
			m["error"] = in.Err
		}
		out = append(out, m)
	}
	return out
}

// WriteMarkdown writes the report as Markdown that shows the chart svgName (written with
// WriteSVG next to it).
func (rp Report) WriteMarkdown(w io.Writer, svgName string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", rp.Title)
	for _, row := range rp.about() {
		fmt.Fprintf(&b, "- **%s:** %s\n", row[0], mdEscape(row[1]))
	}
	fmt.Fprintf(&b, "- **crowd:** %s\n\n", rp.Config)
	fmt.Fprintf(&b, "Invariants: **%s** %s.\n", rp.Verdict.Word(), rp.Verdict.counts())
	if len(rp.Verdict.Violations)+len(rp.Verdict.Unverified) > 0 {
		b.WriteString("\n")
	}
	for _, v := range rp.Verdict.Violations {
		fmt.Fprintf(&b, "- violation: %s\n", v)
	}
	for _, v := range rp.Verdict.Unverified {
		fmt.Fprintf(&b, "- unverified: %s\n", v)
	}
	if rows := rp.instanceRows(); len(rows) > 0 {
		b.WriteString("\n| instance | audit |\n|---|---|\n")
		for _, row := range rows {
			fmt.Fprintf(&b, "| %s | %s |\n", row[0], strings.ReplaceAll(row[1], "|", "\\|"))
		}
	}
	b.WriteString("\n| figure | value |\n|---|---|\n")
	for _, row := range rp.rows() {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	fmt.Fprintf(&b, "\n%s\n", rp.refundsNote())
	b.WriteString("\n| latency | count | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n")
	for _, step := range append(Steps, "all") {
		h := rp.Result.All
		if step != "all" {
			h = rp.Result.Latency[step]
		}
		if h.TotalCount() > 0 {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", step, h.TotalCount(), ms(h.ValueAtQuantile(50)),
				ms(h.ValueAtQuantile(90)), ms(h.ValueAtQuantile(99)), ms(h.Max()))
		}
	}
	fmt.Fprintf(&b, "\n![requests/s, p99 latency, the stock and the crowd over time](%s)\n\nChecked:\n", svgName)
	for _, c := range rp.Verdict.Checked {
		fmt.Fprintf(&b, "- %s\n", c)
	}
	for _, c := range rp.Verdict.NotExercised {
		fmt.Fprintf(&b, "- not exercised: %s\n", c)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdEscape keeps a value from being read as Markdown (emphasis, code, a table cell, HTML).
func mdEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "|", `\|`, "<", "&lt;").Replace(s)
}

// svgSeries is one line of a chart panel.
type svgSeries struct {
	name, color string
	v           func(Sample) float64
	stock       bool // from the sale's stock: only samples where it was read
	perPeriod   bool // a rate or a quantile of the sample's period: not drawn for a sliver of one
}

// WriteSVG draws the time series in four panels that share the time axis: requests/s, p99
// latency, the stock (units: available, held, sold) and the crowd (buyers: the server's queue
// and what the generator's buyers are doing). Queued buyers are buyers, not units: they have
// their own panel and axis. Every axis has ticks at round numbers (1, 2 or 5 times a power of
// ten), gridlines and its unit; every panel has a legend.
func (rp Report) WriteSVG(w io.Writer) error {
	s := rp.Result.Series
	const width, left, right, plotH, titleH, axisH = 800, 72, 20, 140, 34, 40
	panels := []struct {
		title, unit string
		series      []svgSeries
	}{
		{"requests per second", "requests/s", []svgSeries{{"requests/s", "#1f77b4", func(p Sample) float64 { return p.RequestsPS }, false, true}}},
		{"p99 latency of the requests that ended in each period", "ms", []svgSeries{{"p99", "#d62728",
			func(p Sample) float64 { return float64(p.P99.Microseconds()) / 1000 }, false, true}}},
		{"stock of the sale", "units", []svgSeries{
			{"available", "#2ca02c", func(p Sample) float64 { return float64(p.Available) }, true, false},
			{"held", "#ff7f0e", func(p Sample) float64 { return float64(p.Held) }, true, false},
			{"sold", "#9467bd", func(p Sample) float64 { return float64(p.Sold) }, true, false},
		}},
		{"the crowd", "buyers", []svgSeries{
			{"queued (server)", "#8c564b", func(p Sample) float64 { return float64(p.Queued) }, true, false},
			{"buying", "#17becf", func(p Sample) float64 { return float64(p.Crowd.Buying) }, false, false},
			{"holding", "#ff7f0e", func(p Sample) float64 { return float64(p.Crowd.Holding) }, false, false},
			{"paying", "#2ca02c", func(p Sample) float64 { return float64(p.Crowd.Paying) }, false, false},
		}},
	}
	block := titleH + plotH + axisH
	height := len(panels)*block + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	var end time.Duration
	if len(s) > 0 {
		end = s[len(s)-1].At
	}
	sliver := slivers(s)
	xTicks := niceTicks(max(end.Seconds(), 1), 10)
	xMax := xTicks[len(xTicks)-1]
	x := func(sec float64) float64 { return left + sec/xMax*float64(width-left-right) }
	for i, pn := range panels {
		top := i*block + titleH
		bottom := top + plotH
		hi := 0.0
		for _, ser := range pn.series {
			for k, p := range s {
				if (!ser.stock || p.StockKnown) && !(ser.perPeriod && sliver[k]) {
					hi = max(hi, ser.v(p))
				}
			}
		}
		yTicks := niceTicks(max(hi, 1e-9), 5)
		if hi == 0 {
			yTicks = []float64{0, 1}
		}
		yMax := yTicks[len(yTicks)-1]
		y := func(v float64) float64 { return float64(bottom) - v/yMax*plotH }
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold" font-size="12">%s</text>`+"\n", left, top-14, html.EscapeString(pn.title))
		// Legend: a swatch and a name per series, right-aligned on the title's line.
		lx := width - right
		for j := len(pn.series) - 1; j >= 0; j-- {
			ser := pn.series[j]
			lx -= 7*len(ser.name) + 26
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
				lx, top-20, ser.color, lx+18, top-14, html.EscapeString(ser.name))
		}
		// Gridlines and ticks.
		for _, v := range yTicks {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e4e4e4"/>`+"\n", left, y(v), width-right, y(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-5, y(v)+4, tickLabel(v, yTicks))
		}
		for _, v := range xTicks {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>`+"\n", x(v), top, x(v), bottom)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(v), bottom+14, tickLabel(v, xTicks))
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#666"/>`+"\n", left, bottom, width-right, bottom)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#666"/>`+"\n", left, top, left, bottom)
		// Units: the y axis's along it, the x axis's under it.
		fmt.Fprintf(&b, `<text transform="translate(%d,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", 14, top+plotH/2, html.EscapeString(pn.unit))
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#444">seconds since the crowd started</text>`+"\n", left+(width-left-right)/2, bottom+30)
		for _, ser := range pn.series {
			var pts []string
			for k, p := range s {
				if ser.stock && !p.StockKnown || ser.perPeriod && sliver[k] {
					continue
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.At.Seconds()), y(ser.v(p))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", ser.color, strings.Join(pts, " "))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// slivers marks the samples whose period is under a quarter of the usual one (the median gap
// between samples): a sampler that fell behind takes its next sample at once, and the final
// sample ends a partial period. Their rate and p99 come from a few requests, or none, and
// would draw spikes and drops to zero that did not happen.
func slivers(s []Sample) []bool {
	out := make([]bool, len(s))
	if len(s) < 3 {
		return out
	}
	gaps := make([]time.Duration, 0, len(s)-1)
	for k := 1; k < len(s); k++ {
		gaps = append(gaps, s[k].At-s[k-1].At)
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	usual := sorted[len(sorted)/2]
	for k := 1; k < len(s); k++ {
		out[k] = gaps[k-1] < usual/4
	}
	return out
}

// niceTicks are the ticks of an axis from 0 to at least hi (> 0): at most about n+1 of them,
// a round step apart (1, 2 or 5 times a power of ten), the last one the axis's end.
func niceTicks(hi float64, n int) []float64 {
	if !(hi > 0) || math.IsInf(hi, 0) {
		hi = 1
	}
	raw := hi / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw*(1-1e-9) {
			step = m * mag
			break
		}
	}
	count := int(math.Ceil(hi/step - 1e-9))
	ticks := make([]float64, 0, count+1)
	for i := 0; i <= count; i++ {
		ticks = append(ticks, float64(i)*step)
	}
	return ticks
}

// tickLabel writes a tick with as many decimals as the ticks' step needs (none for a step of
// 1 or more), and thousands as "k".
func tickLabel(v float64, ticks []float64) string {
	step := 1.0
	if len(ticks) > 1 {
		step = ticks[1] - ticks[0]
	}
	if v == 0 {
		return "0"
	}
	if step >= 1000 && math.Mod(v, 1000) == 0 {
		return fmt.Sprintf("%.0fk", v/1000)
	}
	decimals := 0
	if step < 1 {
		decimals = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	return fmt.Sprintf("%.*f", decimals, v)
}
