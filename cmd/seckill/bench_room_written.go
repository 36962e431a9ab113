package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/seckill-go/seckill/httpapi"
)

// closeWritten is the targets' seckill_room_close_written_seconds (httpapi.CloseWrittenMetric)
// summed: how soon the servers wrote the closing ticket to each live stream open at the close,
// from closed_at. The bench reports it beside when its buyers read it: on one machine the
// load generator competes with the servers for the CPU, and what it adds is its own.
type closeWritten struct {
	bounds []float64 // the buckets' upper bounds, seconds
	counts []uint64  // cumulative, per bound
	total  uint64
}

// readCloseWritten reads the histogram of every target, in order; ok is false when a target
// does not serve it (metrics off or behind a token, an older server).
func readCloseWritten(ctx context.Context, hc *http.Client, targets []string) ([]closeWritten, bool) {
	var out []closeWritten
	for _, t := range targets {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, t+"/metrics", nil)
		if err != nil {
			return nil, false
		}
		res, err := hc.Do(req)
		if err != nil {
			return nil, false
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(res.Body)
		_ = res.Body.Close()
		f := fams[httpapi.CloseWrittenMetric]
		if err != nil || res.StatusCode != http.StatusOK || f == nil || len(f.Metric) != 1 || f.Metric[0].Histogram == nil {
			return nil, false
		}
		// The parser keeps the +Inf bucket; the writes past the last bound are total less its
		// count (upTo: -1).
		h := f.Metric[0].Histogram
		c := closeWritten{total: h.GetSampleCount()}
		for _, b := range h.Bucket {
			if !math.IsInf(b.GetUpperBound(), 1) {
				c.bounds, c.counts = append(c.bounds, b.GetUpperBound()), append(c.counts, b.GetCumulativeCount())
			}
		}
		out = append(out, c)
	}
	return out, len(out) > 0
}

// closeWrittenSince sums, over the targets, each one's reading after less its reading before;
// ok is false when one cannot be subtracted (since) or the targets' buckets differ.
func closeWrittenSince(before, after []closeWritten) (closeWritten, bool) {
	if len(before) != len(after) || len(after) == 0 {
		return closeWritten{}, false
	}
	var sum closeWritten
	for i := range after {
		d, ok := after[i].since(before[i])
		switch {
		case !ok:
			return closeWritten{}, false
		case i == 0:
			sum = d
			continue
		case !slices.Equal(sum.bounds, d.bounds):
			return closeWritten{}, false
		}
		for k := range d.counts {
			sum.counts[k] += d.counts[k]
		}
		sum.total += d.total
	}
	return sum, true
}

// since is c less the earlier reading before; ok is false when they cannot be the same
// servers' (other buckets, or fewer counts: a target restarted in between).
func (c closeWritten) since(before closeWritten) (closeWritten, bool) {
	if !slices.Equal(c.bounds, before.bounds) || c.total < before.total {
		return closeWritten{}, false
	}
	out := closeWritten{bounds: c.bounds, counts: slices.Clone(c.counts), total: c.total - before.total}
	for i := range out.counts {
		if out.counts[i] < before.counts[i] {
			return closeWritten{}, false
		}
		out.counts[i] -= before.counts[i]
	}
	return out, true
}

// upTo is the upper bound, in ms, of the bucket holding the q-quantile write (-1 past the
// last bound; 0 without writes).
func (c closeWritten) upTo(q float64) float64 {
	if c.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(c.total)))
	for i, n := range c.counts {
		if n >= max(rank, 1) {
			return c.bounds[i] * 1000
		}
	}
	return -1
}

// msBound prints an upper bound in ms.
func msBound(ms float64) string {
	if ms < 0 {
		return "more than the last bucket"
	}
	return fmt.Sprintf("≤ %.0f ms", ms)
}

// closeWrittenJSON is closeWritten in the report: the streams open at the close, and the
// upper bounds of the buckets holding the median, the 99th percentile and the last write.
type closeWrittenJSON struct {
	Streams uint64  `json:"streams"`
	P50Ms   float64 `json:"p50_le_ms"`
	P99Ms   float64 `json:"p99_le_ms"`
	MaxMs   float64 `json:"max_le_ms"` // -1: past the last bucket (5 s)
}

func (c closeWritten) report() *closeWrittenJSON {
	return &closeWrittenJSON{Streams: c.total, P50Ms: c.upTo(.5), P99Ms: c.upTo(.99), MaxMs: c.upTo(1)}
}
