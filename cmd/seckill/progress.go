package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seckill-go/seckill/loadgen"
)

// progressBar shows what the crowd is doing while it runs, from every sample: how many buyers
// are done, the units sold, and how many buyers are in the queue, holding a unit, paying,
// buying, fetching the path (or waiting for the sale to start), with the request rate. Counting
// only the finished buyers would look stalled: most of them finish together at the end.
//
// On a terminal it is one line redrawn in place, with a bar, cut to the terminal's width (a
// wrapped line could not be redrawn). Elsewhere (CI logs, a file) it prints a plain line
// every second for the first ten seconds, then every five.
type progressBar struct {
	w     io.Writer
	tty   bool
	width int           // the terminal's columns
	next  time.Duration // plain lines: when the next one is due
	last  string        // plain lines: the last sample's line, printed by finish if not yet
	shown bool
}

func newProgressBar(w io.Writer) *progressBar {
	p := &progressBar{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
			p.width = terminalWidth(f)
		}
	}
	if p.width <= 0 {
		p.width = 80
	}
	return p
}

// progressLine is a sample in words, the most telling first (a terminal cuts the end): buyers
// done, units sold of the sellable, the crowd by step, then the request rate.
func progressLine(s loadgen.Sample) string {
	c := s.Crowd
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d done", s.BuyersDone, s.TotalBuyers)
	if s.StockKnown {
		fmt.Fprintf(&b, " | sold %d/%d", s.Sold, s.Available+s.Held+s.Sold)
	} else if s.At > 0 {
		b.WriteString(" | stock unknown (no answer)")
	}
	if s.Retried > 0 { // an outage: say why the crowd is not moving
		fmt.Fprintf(&b, " | %d answered 503/429, retrying", s.Retried)
	}
	sep := " | "
	for _, part := range []struct {
		n    int
		what string
	}{{c.InQueue, "in queue"}, {c.Holding, "holding"}, {c.Paying, "paying"}, {c.Buying, "buying"}, {c.Path, "at the door"}, {c.Waiting, "waiting"}} {
		if part.n > 0 {
			fmt.Fprintf(&b, "%s%d %s", sep, part.n, part.what)
			sep = ", "
		}
	}
	fmt.Fprintf(&b, " | %.0f req/s, p99 %v", s.RequestsPS, s.P99.Round(100*time.Microsecond))
	return b.String()
}

func (p *progressBar) update(s loadgen.Sample) {
	if s.TotalBuyers == 0 {
		return
	}
	line := fmt.Sprintf("%5.1fs  %s", s.At.Seconds(), progressLine(s))
	if p.tty {
		const cells = 20
		full := min(cells, s.BuyersDone*cells/s.TotalBuyers)
		line = fmt.Sprintf("%5.1fs [%s%s] %s", s.At.Seconds(), strings.Repeat("#", full), strings.Repeat(".", cells-full), progressLine(s))
		fmt.Fprintf(p.w, "\r\x1b[K%s", truncateRunes(line, p.width-1))
		p.shown = true
		return
	}
	p.last = line
	if s.At >= p.next {
		fmt.Fprintln(p.w, line)
		p.last = ""
		step := time.Second
		if s.At >= 10*time.Second {
			step = 5 * time.Second
		}
		p.next = s.At.Truncate(step) + step
	}
}

// finish ends the progress: the terminal's line is kept, a plain run gets its last sample.
func (p *progressBar) finish() {
	switch {
	case p.tty && p.shown:
		fmt.Fprintln(p.w)
	case !p.tty && p.last != "":
		fmt.Fprintln(p.w, p.last)
	}
}

// truncateRunes cuts s to at most n characters.
func truncateRunes(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
