package loadgen

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
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
	return [][2]string{
		{"units sold (engine / database)", fmt.Sprintf("%d / %d of %d", rp.Sale.Sold, db.Sold, rp.Sale.Sellable)},
		{"oversold", fmt.Sprint(oversold)},
		{"paid orders / refunds owed", fmt.Sprintf("%d / %d", db.PaidOrders, db.Refunds)},
		{"buyers held / queued / handed off / rejected", fmt.Sprintf("%d / %d / %d / %d", r.Held, r.Queued, r.Handoffs, r.Rejected)},
		{"cancelled / abandoned / expired", fmt.Sprintf("%d / %d / %d", r.Cancelled, r.Abandoned, r.Expired)},
		{"told sold out / queue full (retried)", fmt.Sprintf("%d / %d", r.SoldOut, r.QueueFull)},
		{"payments begun / idempotent replays", fmt.Sprintf("%d / %d", r.PaymentsBegun, r.Replays)},
		{"requests / per second", fmt.Sprintf("%d / %.0f", r.Requests, reqPS)},
		{"503 retried / 429 retried / errors / gave up", fmt.Sprintf("%d / %d / %d / %d", r.Retried503, r.RateLimited, r.Errors, r.GaveUp)},
		{"elapsed", r.Elapsed.Round(time.Millisecond).String()},
	}
}

// WriteText writes the report as an aligned text table.
func (rp Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if rp.Title != "" {
		fmt.Fprintf(tw, "%s\n%s\n\n", rp.Title, rp.Config)
	}
	for _, row := range rp.rows() {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
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
	fmt.Fprintf(tw, "\ninvariants\t%s (%d checked)\n", rp.Verdict.Word(), len(rp.Verdict.Checked))
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
	return nil
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
		"title": rp.Title, "config": rp.Config,
		"sale":     map[string]int{"sellable": rp.Sale.Sellable, "per_user_limit": rp.Sale.PerUserLimit, "engine_sold": rp.Sale.Sold},
		"database": rp.Audit.Database,
		"counts": map[string]int64{"buyers": int64(r.Buyers), "requests": r.Requests, "errors": r.Errors,
			"retried_503": r.Retried503, "rate_limited": r.RateLimited, "held": r.Held, "queued": r.Queued,
			"handoffs": r.Handoffs, "rejected": r.Rejected, "sold_out": r.SoldOut, "queue_full": r.QueueFull,
			"replays": r.Replays, "replay_mismatch": r.ReplayMismatch, "cancelled": r.Cancelled,
			"abandoned": r.Abandoned, "expired": r.Expired, "payments_begun": r.PaymentsBegun, "gave_up": r.GaveUp},
		"elapsed_ms": r.Elapsed.Milliseconds(), "latency": latency, "series": r.Series,
		"instances": instancesJSON(rp.Instances), "verdict": rp.Verdict,
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
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", rp.Title, rp.Config)
	fmt.Fprintf(&b, "Invariants: **%s** (%d checked).\n\n", rp.Verdict.Word(), len(rp.Verdict.Checked))
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
	b.WriteString("\n| | |\n|---|---|\n")
	for _, row := range rp.rows() {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
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
	fmt.Fprintf(&b, "\n![requests/s, p99 and the stock over time](%s)\n\nChecked:\n", svgName)
	for _, c := range rp.Verdict.Checked {
		fmt.Fprintf(&b, "- %s\n", c)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSVG draws the time series: requests/s, p99 latency, and the stock (available, held,
// sold, queued) over time, in three panels that share the time axis.
func (rp Report) WriteSVG(w io.Writer) error {
	s := rp.Result.Series
	const width, panel, left, gap = 760, 150, 60, 30
	height := 3*(panel+gap) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	end := time.Second
	if len(s) > 0 {
		end = max(end, s[len(s)-1].At)
	}
	x := func(t time.Duration) float64 { return left + float64(t)/float64(end)*float64(width-left-20) }
	draw := func(top int, title, unit string, series []struct {
		name, color string
		v           func(Sample) float64
	}) {
		top += 20
		hi := 1.0
		for _, ser := range series {
			for _, p := range s {
				hi = max(hi, ser.v(p))
			}
		}
		y := func(v float64) float64 { return float64(top+panel) - v/hi*float64(panel) }
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", left, top-6, html.EscapeString(title))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`+"\n", left, top+panel, width-20, top+panel)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`+"\n", left, top, left, top+panel)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%.0f%s</text>`+"\n", left-4, top+8, hi, unit)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">0</text>`+"\n", left-4, top+panel)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%.1f s</text>`+"\n", width-20, top+panel+14, end.Seconds())
		for i, ser := range series {
			var pts []string
			for _, p := range s {
				if ser.name != "requests/s" && ser.name != "p99" && !p.StockKnown {
					continue
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.At), y(ser.v(p))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", ser.color, strings.Join(pts, " "))
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s" text-anchor="end">%s</text>`+"\n", width-20-(len(series)-1-i)*80, top-6, ser.color, ser.name)
		}
	}
	type ser = struct {
		name, color string
		v           func(Sample) float64
	}
	draw(0, "requests per second", "", []ser{{"requests/s", "#1f77b4", func(p Sample) float64 { return p.RequestsPS }}})
	draw(panel+gap, "p99 latency of the requests that ended in each period", " ms", []ser{{"p99", "#d62728",
		func(p Sample) float64 { return float64(p.P99.Microseconds()) / 1000 }}})
	draw(2*(panel+gap), "stock (units)", "", []ser{
		{"available", "#2ca02c", func(p Sample) float64 { return float64(p.Available) }},
		{"held", "#ff7f0e", func(p Sample) float64 { return float64(p.Held) }},
		{"sold", "#9467bd", func(p Sample) float64 { return float64(p.Sold) }},
		{"queued", "#8c564b", func(p Sample) float64 { return float64(p.Queued) }},
	})
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
