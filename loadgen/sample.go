// The time series of a run: what the crowd is doing (Crowd) and the sale's stock, sampled
// every Config.Sample.

package loadgen

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
)

// Sample is one point of the time series.
type Sample struct {
	At          time.Duration `json:"-"` // since the start (at_ms in the JSON)
	BuyersDone  int           `json:"buyers_done"`
	Requests    int64         `json:"requests"`       // in this period
	RequestsPS  float64       `json:"requests_per_s"` // in this period
	P99         time.Duration `json:"-"`              // of the requests that ended in this period (p99_us)
	Available   int           `json:"available"`
	Held        int           `json:"held"`
	Sold        int           `json:"sold"`
	Queued      int           `json:"queued"`
	StockKnown  bool          `json:"stock_known"`
	TotalBuyers int           `json:"-"`
	// Retried are the answers 503 (or 429) in this period that buyers are retrying after
	// Retry-After: during an outage the crowd waits on these, and the progress line says so.
	Retried int64 `json:"retried"`
	// Crowd is what the buyers are doing at the sample, as the generator sees it: the finished
	// ones (BuyersDone) alone crawl while the sale moves, then jump at its end.
	Crowd Crowd `json:"crowd"`
}

// Crowd counts the buyers by what they are doing. Waiting ones have not started (closed loop:
// no slot free yet; open loop: not yet arrived); Path ones are fetching the purchase path or
// waiting for the sale to start; Buying ones are sending their buy (or coming back after
// queue_full); InQueue ones were answered 202 and wait for a unit; Holding ones hold a unit
// and are deciding (cancelling, or abandoning it until it expires); Paying ones have started
// their payment and wait for it to land.
type Crowd struct {
	Waiting int `json:"waiting"`
	Path    int `json:"path"`
	Buying  int `json:"buying"`
	InQueue int `json:"in_queue"`
	Holding int `json:"holding"`
	Paying  int `json:"paying"`
}

// phase is a buyer's current step, counted in runner.phases for Crowd.
type phase int

const (
	phasePath phase = iota
	phaseBuy
	phaseQueue
	phaseHold
	phasePay
	numPhases
)

// tracker moves one buyer from phase to phase in its runner's counts.
type tracker struct {
	r   *runner
	cur phase
	in  bool
}

// track counts a buyer that starts, in phasePath; end uncounts it.
func (r *runner) track() *tracker {
	r.started.Add(1)
	r.phases[phasePath].Add(1)
	return &tracker{r: r, cur: phasePath, in: true}
}

func (t *tracker) set(p phase) {
	if t.in {
		t.r.phases[t.cur].Add(-1)
	}
	t.r.phases[p].Add(1)
	t.cur, t.in = p, true
}

func (t *tracker) end() {
	if t.in {
		t.r.phases[t.cur].Add(-1)
		t.in = false
	}
}

// crowd reads the phase counts (each exact, together nearly simultaneous).
func (r *runner) crowd() Crowd {
	return Crowd{
		Waiting: max(0, r.cfg.Buyers-int(r.started.Load())),
		Path:    int(r.phases[phasePath].Load()), Buying: int(r.phases[phaseBuy].Load()),
		InQueue: int(r.phases[phaseQueue].Load()), Holding: int(r.phases[phaseHold].Load()),
		Paying: int(r.phases[phasePay].Load()),
	}
}

// MarshalJSON writes durations as numbers (ms for at, µs for p99).
func (s Sample) MarshalJSON() ([]byte, error) {
	type plain Sample
	return json.Marshal(struct {
		plain
		At  int64 `json:"at_ms"`
		P99 int64 `json:"p99_us"`
	}{plain(s), s.At.Milliseconds(), s.P99.Microseconds()})
}

// stockReadWait bounds a sample's read of the sale's stock.
const stockReadWait = time.Second

// sample records the time series until stop.
func (r *runner) sample(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(r.cfg.Sample)
	defer t.Stop()
	last := time.Now()
	var retriedBefore int64
	for {
		var final bool
		select {
		case <-stop:
			final = true
		case <-t.C:
		}
		now := time.Now()
		r.mu.Lock()
		s := Sample{At: now.Sub(r.start), BuyersDone: int(r.done.Load()), Requests: r.periodN,
			P99: time.Duration(r.period.ValueAtQuantile(99)) * time.Microsecond, TotalBuyers: r.cfg.Buyers, Crowd: r.crowd()}
		r.period.Reset()
		r.periodN = 0
		r.mu.Unlock()
		s.RequestsPS = float64(s.Requests) / now.Sub(last).Seconds()
		last = now
		retried := atomic.LoadInt64(&r.res.Retried503) + atomic.LoadInt64(&r.res.RateLimited)
		s.Retried, retriedBefore = retried-retriedBefore, retried
		if st, ok := r.stock(ctx); ok {
			s.Available, s.Held, s.Sold, s.Queued, s.StockKnown = st.Available, st.Held, st.Sold, st.Queued, true
		}
		r.mu.Lock()
		r.res.Series = append(r.res.Series, s)
		r.mu.Unlock()
		if r.cfg.Progress != nil {
			r.cfg.Progress(s)
		}
		if final {
			return
		}
	}
}

// StockState is the sale's counts as GET /api/v1/sales/{id} shows them.
type StockState = seckill.StockState

// stock reads the sale's stock from the first target (not counted as a request).
func (r *runner) stock(ctx context.Context) (StockState, bool) {
	// A target that hangs (its Redis paused) must not hold up the samples, and with them the
	// progress line: the stock is then unknown for this sample.
	ctx, cancel := context.WithTimeout(ctx, stockReadWait)
	defer cancel()
	sale, err := r.clients[0].Sale(ctx, r.cfg.SaleID)
	return sale.StockState, err == nil
}
