package loadgen

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		hi   float64
		n    int
		want []float64
	}{
		{9.6, 10, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{10, 10, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{13.7, 10, []float64{0, 2, 4, 6, 8, 10, 12, 14}},
		{183, 10, []float64{0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200}},
		{4873, 5, []float64{0, 1000, 2000, 3000, 4000, 5000}},
		{100, 5, []float64{0, 20, 40, 60, 80, 100}},
		{0.73, 5, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8}},
		{1, 5, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{0, 5, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{2600, 5, []float64{0, 1000, 2000, 3000}},
		{2400, 5, []float64{0, 500, 1000, 1500, 2000, 2500}},
	} {
		got := niceTicks(c.hi, c.n)
		if !slices.Equal(got, c.want) {
			t.Errorf("niceTicks(%v, %d) = %v, want %v", c.hi, c.n, got, c.want)
		}
		// Whatever the input: from 0, evenly spaced by 1, 2 or 5 × 10^k, covering hi.
		if got[0] != 0 || got[len(got)-1] < c.hi {
			t.Errorf("niceTicks(%v): %v does not cover [0, hi]", c.hi, got)
		}
	}
	for _, hi := range []float64{0.003, 0.9, 7, 42, 99.9, 101, 777, 12345, 3e6} {
		ticks := niceTicks(hi, 6)
		step := ticks[1]
		mant := step / pow10Floor(step)
		if !(near(mant, 1) || near(mant, 2) || near(mant, 5)) {
			t.Errorf("niceTicks(%v): step %v is not 1, 2 or 5 × 10^k", hi, step)
		}
		if len(ticks) > 8 || ticks[len(ticks)-1] < hi || ticks[len(ticks)-2] >= hi {
			t.Errorf("niceTicks(%v, 6) = %v: too many ticks, or not ending at the first tick past hi", hi, ticks)
		}
	}
}

func pow10Floor(v float64) float64 {
	p := 1.0
	for p*10 <= v*(1+1e-9) {
		p *= 10
	}
	for p > v*(1+1e-9) {
		p /= 10
	}
	return p
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

func TestTickLabel(t *testing.T) {
	for _, c := range []struct {
		v     float64
		ticks []float64
		want  string
	}{
		{0.6000000000000001, []float64{0, 0.2}, "0.6"},
		{0.05, []float64{0, 0.05}, "0.05"},
		{40, []float64{0, 20}, "40"},
		{3000, []float64{0, 1000}, "3k"},
		{1500, []float64{0, 500}, "1500"},
		{0, []float64{0, 2000}, "0"},
	} {
		if got := tickLabel(c.v, c.ticks); got != c.want {
			t.Errorf("tickLabel(%v, step %v) = %q, want %q", c.v, c.ticks[1], got, c.want)
		}
	}
}

// sampleReport is a small finished run, as bench builds its report.
func sampleReport() Report {
	res := &Result{Buyers: 50, Requests: 400, Elapsed: 9600 * time.Millisecond, Latency: map[string]*hdrhistogram.Histogram{}, All: newHist()}
	for _, s := range Steps {
		res.Latency[s] = newHist()
	}
	_ = res.All.RecordValue(1500)
	_ = res.Latency["buy"].RecordValue(1500)
	for i := range 40 {
		res.Series = append(res.Series, Sample{At: time.Duration(i) * 250 * time.Millisecond, RequestsPS: float64(300 + 10*i),
			P99: time.Duration(2+i%5) * time.Millisecond, Available: max(0, 10-i), Held: 3, Sold: min(i, 10), Queued: 180 - i,
			StockKnown: i%7 != 3, Crowd: Crowd{Buying: 5, InQueue: 170, Holding: 3, Paying: 2}})
	}
	rp := Report{Title: "seckill bench: 10 units", Config: "50 buyers", Sale: SaleFacts{Sellable: 10, PerUserLimit: 1, Sold: 10},
		Result: res, Targets: []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}, SaleID: "bench-1796",
		Date: time.Date(2026, 12, 3, 22, 30, 5, 0, time.FixedZone("CET", 3600)), Version: "v1.2.3, revision abc123",
		Verdict: Verdict{OK: true, Checked: []string{"nothing oversold"}}}
	rp.Audit.Database.Refunds = 2
	return rp
}

func TestReportSaysWhatItMeasured(t *testing.T) {
	rp := sampleReport()
	var text, md, js bytes.Buffer
	if err := rp.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rp.WriteMarkdown(&md, "r.svg"); err != nil {
		t.Fatal(err)
	}
	if err := rp.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String(), "json": js.String()} {
		for _, want := range []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080", "bench-1796", "2026-12-03", "21:30:05", "v1.2.3, revision abc123"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s report does not say %q:\n%s", name, want, out)
			}
		}
	}
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String()} {
		if !strings.Contains(out, "2026-12-03 21:30:05 UTC") {
			t.Errorf("%s report does not give the date in UTC:\n%s", name, out)
		}
		if !strings.Contains(strings.ToLower(out), "refunds owed: payments") && !strings.Contains(out, "Refunds owed are payments") {
			t.Errorf("%s report does not explain the refunds owed:\n%s", name, out)
		}
	}
	var j map[string]any
	if err := json.Unmarshal(js.Bytes(), &j); err != nil || j["sale_id"] != "bench-1796" || j["date"] != "2026-12-03T21:30:05Z" {
		t.Errorf("json: sale_id %v, date %v, err %v", j["sale_id"], j["date"], err)
	}
	// Every Markdown table has a header row with words in each cell.
	for _, m := range regexp.MustCompile(`(?m)^(\|.*\|)\n\|[-:|]+\|$`).FindAllStringSubmatch(md.String(), -1) {
		for _, cell := range strings.Split(strings.Trim(m[1], "|"), "|") {
			if strings.TrimSpace(cell) == "" {
				t.Errorf("markdown table with an empty header cell: %q", m[1])
			}
		}
	}
}

func TestReportSVGReadable(t *testing.T) {
	rp := sampleReport()
	var b bytes.Buffer
	if err := rp.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	// Units on each axis, a legend entry per series, gridlines, round ticks on the time axis.
	for _, want := range []string{">requests/s<", ">ms<", ">units<", ">buyers<", "seconds since the crowd started",
		">available<", ">held<", ">sold<", ">queued (server)<", ">holding<", ">paying<", `stroke="#e4e4e4"`,
		`text-anchor="middle">0<`, `text-anchor="middle">5<`, `text-anchor="middle">10<`} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// The odd maximum (9.75 s) is not a tick label; the units panel's axis is not stretched to
	// the 180 queued buyers: its top tick is 10 units, the crowd's 200 buyers.
	if strings.Contains(svg, ">9.8 s<") || strings.Contains(svg, ">9.75<") {
		t.Errorf("SVG labels the series' odd end instead of round ticks")
	}
	panels := strings.Split(svg, `font-weight="bold"`)
	if len(panels) != 5 {
		t.Fatalf("want 4 panels, got %d", len(panels)-1)
	}
	yLabels := func(p string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`text-anchor="end">([0-9.k]+)<`).FindAllStringSubmatch(p, -1) {
			out = append(out, m[1])
		}
		return out
	}
	if units := yLabels(panels[3]); len(units) == 0 || units[len(units)-1] != "10" || strings.Contains(panels[3], "queued") {
		t.Errorf("stock panel: y ticks %v (want up to 10 units), queued drawn there: %v", units, strings.Contains(panels[3], "queued"))
	}
	if buyers := yLabels(panels[4]); len(buyers) == 0 || buyers[len(buyers)-1] != "200" {
		t.Errorf("crowd panel: y ticks %v, want up to 200 buyers", buyers)
	}
}

func TestReportMarkdownHasNoDoubleBlankLine(t *testing.T) {
	for _, v := range []Verdict{{OK: true}, {Violations: []string{"oversold 1"}}, {Unverified: []string{"instance 2"}}} {
		rp := sampleReport()
		rp.Verdict = v
		rp.Instances = []InstanceAudit{{Target: "http://10.0.0.1:8080"}}
		var md bytes.Buffer
		if err := rp.WriteMarkdown(&md, "r.svg"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(md.String(), "\n\n\n") {
			t.Errorf("verdict %+v: the Markdown has a double blank line:\n%s", v, md.String())
		}
		for _, want := range append(v.Violations, v.Unverified...) {
			if !strings.Contains(md.String(), "\n\n- ") || !strings.Contains(md.String(), want) {
				t.Errorf("verdict %+v: %q is not listed after a blank line:\n%s", v, want, md.String())
			}
		}
	}
}

// Refunds the built-in webhook scheme cannot make are owed by hand: the table counts them
// apart from failures, and the footnote (text and Markdown) says who pays them back, from the
// same figures; a report without any says nothing of it.
func TestReportRefundsOwedByHandAgreeWithTheFootnote(t *testing.T) {
	rp := sampleReport()
	rp.Audit.Database.Refunds, rp.Audit.Database.RefundsFailed, rp.Audit.Database.Refunded = 5, 4, 1
	for _, c := range []struct {
		byHand     int
		row, note  string
		noteAbsent bool
	}{
		{3, "(paid back 1, owed by hand 3, failed 1, open 0 when audited)", "the 3 owed by hand", false},
		{0, "(paid back 1, failed 4, open 0 when audited)", "by hand", true},
	} {
		rp.RefundsByHand = c.byHand
		var text, md bytes.Buffer
		if err := rp.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if err := rp.WriteMarkdown(&md, "r.svg"); err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"text": text.String(), "markdown": md.String()} {
			if !strings.Contains(out, c.row) {
				t.Errorf("%s, %d by hand: the refunds row lacks %q:\n%s", name, c.byHand, c.row, out)
			}
			if note := strings.ToLower(out); strings.Contains(note, strings.ToLower(c.note)) == c.noteAbsent {
				t.Errorf("%s, %d by hand: the footnote mentions %q: %v, want %v:\n%s", name, c.byHand, c.note, !c.noteAbsent, !c.noteAbsent, out)
			}
		}
	}
}
