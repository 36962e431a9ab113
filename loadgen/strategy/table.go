package strategy

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

var header = []string{"strategy", "sold", "oversold", "ops/s", "p99 (µs)", "verdict"}

// row is one result as table cells, shared by both formats so they never disagree.
func row(r Result) []string {
	return []string{r.Strategy, fmt.Sprint(r.Sold), fmt.Sprint(r.Oversold), fmt.Sprintf("%.0f", r.OpsPerSec),
		fmt.Sprint(r.P99.Microseconds()), r.Verdict()}
}

// WriteTable prints rs as one aligned text table for a terminal.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, cells := range append([][]string{header}, rows(rs)...) {
		if _, err := fmt.Fprintln(tw, strings.Join(cells, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// WriteMarkdown prints rs as a GitHub-flavoured Markdown table, numbers right-aligned, for docs.
func WriteMarkdown(w io.Writer, rs []Result) error {
	lines := []string{"| " + strings.Join(header, " | ") + " |", "|---|--:|--:|--:|--:|---|"}
	for _, cells := range rows(rs) {
		lines = append(lines, "| "+strings.Join(cells, " | ")+" |")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

func rows(rs []Result) [][]string {
	out := make([][]string, len(rs))
	for i, r := range rs {
		out[i] = row(r)
	}
	return out
}
