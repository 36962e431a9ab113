// Package loadgen simulates a flash-sale crowd over HTTP against running seckill instances,
// and checks from its own records that the sale kept the invariants of docs/MODEL.md. Each buyer fetches
// the purchase path, buys, and then pays promptly, cancels, abandons its hold, pays late or
// retries its buy, as a real crowd does, retrying like a real client (Retry-After on 503 and
// 429, backing off on queue_full). Buyers are spread over every target instance. Payments go
// through the targets' own gateway (POST /pay, the --dev mock gateway) or, with the payment
// secret, through signed webhooks that the generator delivers itself, as a third-party gateway
// would, to any instance.
//
// It runs closed loop (a fixed number of buyers in flight) or open loop (buyers arriving at a
// fixed rate; each buyer's first request is timed from its intended arrival, so a stalled
// server cannot hide its queueing). Latencies are kept per step in HDR histograms, and a time
// series (requests/s, p99, the sale's stock) is sampled while it runs. `seckill bench` and
// `seckill demo` are built on it; Check and the report writers turn a Result into a verdict
// and a text, JSON or Markdown (with SVG) report.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill-go/seckill/payment"
)

// Behavior is what a simulated buyer does once it holds a unit.
type Behavior int

// Behaviors.
const (
	PayPromptly Behavior = iota // pays at once
	Cancel                      // cancels the hold
	Abandon                     // never pays; the hold expires
	PayLate                     // pays, but the payment arrives after the hold expired
	Retry                       // repeats the buy with the same Idempotency-Key, then pays
)

var behaviorNames = [...]string{"pay", "cancel", "abandon", "pay_late", "retry"}

func (b Behavior) String() string { return behaviorNames[b] }

// Mix is the share (in percent) of each behavior; the rest pays promptly.
type Mix struct {
	Cancel, Abandon, PayLate, Retry int
}

// DefaultMix is the demo's crowd.
var DefaultMix = Mix{Cancel: 10, Abandon: 20, PayLate: 10, Retry: 10}

// Valid reports whether the shares are each 0–100 and add up to at most 100.
func (m Mix) Valid() bool {
	for _, v := range []int{m.Cancel, m.Abandon, m.PayLate, m.Retry} {
		if v < 0 || v > 100 {
			return false
		}
	}
	return m.Cancel+m.Abandon+m.PayLate+m.Retry <= 100
}

// BehaviorOf is the behavior of user, fixed by the seed so that a payment gateway can make
// exactly the late payers' webhooks late.
func BehaviorOf(user string, seed uint64, mix Mix) Behavior {
	h := fnv.New64a()
	_, _ = h.Write([]byte(user))
	_, _ = h.Write([]byte(strconv.FormatUint(seed, 10)))
	p := int(h.Sum64() % 100)
	switch {
	case p < mix.Cancel:
		return Cancel
	case p < mix.Cancel+mix.Abandon:
		return Abandon
	case p < mix.Cancel+mix.Abandon+mix.PayLate:
		return PayLate
	case p < mix.Cancel+mix.Abandon+mix.PayLate+mix.Retry:
		return Retry
	}
	return PayPromptly
}

// UserName is the id of the i-th simulated buyer.
func UserName(i int) string { return "buyer-" + strconv.Itoa(i) }

// Config describes one run.
type Config struct {
	Targets []string // base URLs of the instances; buyer i starts on Targets[i % len]
	SaleID  string
	Buyers  int
	// Concurrency is the closed loop's buyers in flight (default 64). Rate, if positive, makes
	// the loop open: buyers arrive at Rate per second whatever the server does.
	Concurrency int
	Rate        float64
	Mix         Mix
	Seed        uint64
	// Token returns a bearer token for a user id.
	Token func(user string) (string, error)
	// PaymentSecret, when set, makes the generator the payment gateway: it signs succeeded
	// payments' webhooks and delivers them to the targets. Without it buyers call POST /pay
	// and the targets' gateway delivers (the --dev mock gateway).
	PaymentSecret []byte
	// Stripe, when set, has buyers pay at Stripe Checkout, and the generator deliver Stripe's
	// signed events (see StripeConfig).
	Stripe *StripeConfig
	// Hold is the sale's hold; late payers pay LateBy after their hold expired (default 300 ms).
	Hold, LateBy time.Duration
	// Deadline bounds the whole run; buyers still waiting then give up.
	Deadline time.Duration
	// Sample is the period of the time series (default 250 ms); Progress, if set, is called
	// with each sample.
	Sample   time.Duration
	Progress func(Sample)
	Client   *http.Client
}

// Steps are the kinds of request whose latencies are kept apart.
var Steps = []string{"path", "buy", "poll", "pay", "cancel"}

// Result is what happened, as the generator saw it.
type Result struct {
	Buyers     int
	Requests   int64
	Errors     int64 // 5xx answers other than 503, refusals, transport errors not overcome by retrying
	Retried503 int64 // 503 answers followed by a retry (Retry-After)
	// RetriedTransport counts transport errors (a timeout, a reset connection) followed by a
	// retry on the next target, as a client does: a retry that is answered is no error.
	RetriedTransport int64
	// ErrorSample says what the first errors were (maxErrorSample of them): the request and
	// its answer, or the transport error.
	ErrorSample    []string
	Held           int64 // buyers who got a hold (directly or from the queue)
	Queued         int64 // buys answered 202
	Handoffs       int64 // queued buyers that later got a hold
	Rejected       int64 // queued buyers rejected
	SoldOut        int64 // buyers told sold_out
	QueueFull      int64 // buys answered queue_full (retried)
	RateLimited    int64 // buys answered rate_limited (retried)
	Replays        int64 // idempotent replays answered 200
	ReplayMismatch int64 // a replay that returned another reservation (must be 0)
	Cancelled      int64
	Abandoned      int64
	Expired        int64 // holds observed expired
	PaymentsBegun  int64 // POST /pay answered 200, or webhooks sent
	GaveUp         int64 // buyers who stopped without an outcome (deadline, errors)
	Elapsed        time.Duration
	Latency        map[string]*hdrhistogram.Histogram // per step, microseconds
	All            *hdrhistogram.Histogram            // every request
	Series         []Sample

	// ClosedBeforePaid counts buyers (Stripe mode) who came to pay after their hold expired
	// and found the payment closed: the late payments that closing on expiry prevented.
	ClosedBeforePaid int64

	// Payments are the webhooks a target answered 200, by payment id, with the result it
	// answered (webhook mode only).
	Payments map[string]string
	// PaidUnits are the units each user was told were paid (webhook applied or late_applied,
	// or a reservation read as paid).
	PaidUnits map[string]int
	// Queue is every queued buyer whose outcome was seen, for the FIFO check.
	Queue []QueuedBuyer

	// SoldOutAt are when the sold_out answers were received, and UnsoldAt the latest moment at
	// which the generator knows that the sale still had a unit unsold: when it sent a buy that
	// was answered held (201) or queued (202), or a payment that then paid (a fresh hold needs a
	// free unit, a queue place a held one, a payment an unsold one). Both are measured from the
	// run's start on one monotonic clock. The bench's sale is never restocked and sold never
	// goes down, so a sold_out received before UnsoldAt was answered while a unit was free or
	// held: a false sell-out (Check).
	SoldOutAt []time.Duration
	UnsoldAt  time.Duration
}

// QueuedBuyer is a buyer that was queued: its place in the arrival order (the sequence number
// in its reservation id) and when it was granted a unit, or that it was rejected.
type QueuedBuyer struct {
	Seq      uint64
	Granted  time.Time // the hold's start: expires_at − hold
	Rejected bool
}

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

type runner struct {
	cfg     Config
	res     Result
	start   time.Time
	mu      sync.Mutex // guards res maps, histograms and the period histogram
	period  *hdrhistogram.Histogram
	periodN int64
	done    atomic.Int64
	started atomic.Int64            // buyers that have begun (track)
	phases  [numPhases]atomic.Int64 // buyers in each phase (Crowd)
	stop    context.CancelCauseFunc // ends the run early, with the reason Run returns
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 120_000_000, 3) }

// Run simulates cfg.Buyers buyers and returns what happened.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if len(cfg.Targets) == 0 {
		return nil, errors.New("loadgen: no target")
	}
	if cfg.Token == nil {
		return nil, errors.New("loadgen: no token source")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = 2 * time.Minute
	}
	if cfg.Sample <= 0 {
		cfg.Sample = 250 * time.Millisecond
	}
	if cfg.LateBy <= 0 {
		cfg.LateBy = 300 * time.Millisecond
	}
	if cfg.Client == nil {
		conns := cfg.Concurrency + 16
		if cfg.Rate > 0 {
			conns = 512
		}
		cfg.Client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r := &runner{cfg: cfg, start: time.Now(), period: newHist(), stop: stop}
	r.res = Result{Buyers: cfg.Buyers, Latency: map[string]*hdrhistogram.Histogram{}, All: newHist(),
		Payments: map[string]string{}, PaidUnits: map[string]int{}}
	for _, s := range Steps {
		r.res.Latency[s] = newHist()
	}
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() { r.sample(ctx, stopSampling) })

	var wg sync.WaitGroup
	if cfg.Rate > 0 {
		r.openLoop(ctx, &wg)
	} else {
		r.closedLoop(ctx, &wg)
	}
	wg.Wait()
	r.res.Elapsed = time.Since(r.start)
	close(stopSampling)
	sampling.Wait()
	if err := context.Cause(ctx); errors.Is(err, ErrNoPaymentPath) {
		return &r.res, err
	}
	return &r.res, nil
}

// closedLoop keeps Concurrency buyers in flight until every buyer has run.
func (r *runner) closedLoop(ctx context.Context, wg *sync.WaitGroup) {
	jobs := make(chan int)
	for range r.cfg.Concurrency {
		wg.Go(func() {
			for i := range jobs {
				r.buyer(ctx, i, time.Time{})
				r.done.Add(1)
			}
		})
	}
	defer close(jobs)
	for i := range r.cfg.Buyers {
		select {
		case jobs <- i:
		case <-ctx.Done():
			return
		}
	}
}

// openLoop starts buyer i at start + i/Rate, whether or not earlier buyers are done.
func (r *runner) openLoop(ctx context.Context, wg *sync.WaitGroup) {
	gap := time.Duration(float64(time.Second) / r.cfg.Rate)
	for i := range r.cfg.Buyers {
		due := r.start.Add(time.Duration(i) * gap)
		if d := time.Until(due); d > 0 && !sleep(ctx, d) {
			return
		}
		wg.Go(func() {
			r.buyer(ctx, i, due)
			r.done.Add(1)
		})
	}
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
type StockState struct {
	Sellable  int `json:"sellable"`
	Available int `json:"available"`
	Held      int `json:"held"`
	Sold      int `json:"sold"`
	Queued    int `json:"queued"`
}

// stock reads the sale's stock from the first target (not counted as a request).
func (r *runner) stock(ctx context.Context) (StockState, bool) {
	// A target that hangs (its Redis paused) must not hold up the samples, and with them the
	// progress line: the stock is then unknown for this sample.
	ctx, cancel := context.WithTimeout(ctx, stockReadWait)
	defer cancel()
	var sale struct {
		StockState StockState `json:"stock_state"`
	}
	req, err := http.NewRequestWithContext(ctx, "GET", r.cfg.Targets[0]+"/api/v1/sales/"+r.cfg.SaleID, nil)
	if err != nil {
		return StockState{}, false
	}
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return StockState{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&sale) != nil {
		return StockState{}, false
	}
	return sale.StockState, true
}

// reservation is the part of the reservation JSON the buyers read.
type reservation struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	ExpiresAt   *time.Time `json:"expires_at"`
	Position    int        `json:"position"`
	Quantity    int        `json:"quantity"`
	AmountCents int64      `json:"amount_cents"`
}

type answer struct {
	status     int
	code       string
	body       []byte
	retryAfter time.Duration
	// sent and received are when the request left and its answer was read (since the run's
	// start): the engine decided it in between.
	sent, received time.Duration
}

// do sends one request to target t (an index into Targets) and times it as step. since, if
// set, is when the request was meant to be sent (open loop), and its latency counts from then.
func (r *runner) do(ctx context.Context, t int, step, method, path, token string, body any, hdr map[string]string, since time.Time) (answer, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte: // sent as it is (a signed webhook body)
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.cfg.Targets[t%len(r.cfg.Targets)]+path, rd)
	if err != nil {
		return answer{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	sent := time.Since(r.start)
	if since.IsZero() {
		since = time.Now()
	}
	resp, err := r.cfg.Client.Do(req)
	atomic.AddInt64(&r.res.Requests, 1)
	if err != nil {
		return answer{}, err // the caller retries it, or counts it (call, notify)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.observe(step, time.Since(since))
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, body: b, sent: sent, received: time.Since(r.start)}
	if resp.StatusCode >= 400 {
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(b, &p)
		a.code = p.Code
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			a.retryAfter = time.Duration(s) * time.Second
		}
	}
	if resp.StatusCode >= 500 && resp.StatusCode != 503 {
		r.fail("%s %s: %d %s", method, path, resp.StatusCode, excerpt(b))
	}
	return a, nil
}

// maxErrorSample bounds Result.ErrorSample.
const maxErrorSample = 20

// fail counts an error and keeps what it was, up to maxErrorSample of them.
func (r *runner) fail(format string, args ...any) {
	atomic.AddInt64(&r.res.Errors, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.res.ErrorSample) < maxErrorSample {
		r.res.ErrorSample = append(r.res.ErrorSample, fmt.Sprintf(format, args...))
	}
}

// excerpt is the start of an answer's body, for ErrorSample.
func excerpt(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func (r *runner) observe(step string, d time.Duration) {
	us := max(1, d.Microseconds())
	r.mu.Lock()
	_ = r.res.Latency[step].RecordValue(us)
	_ = r.res.All.RecordValue(us)
	_ = r.period.RecordValue(us)
	r.periodN++
	r.mu.Unlock()
}

// retryFor is how long a buyer keeps retrying a 503 (a sale being rebuilt, an instance going
// away) or a 429 before it gives up.
const retryFor = 30 * time.Second

// call is do with a client's retries: on 503 and 429 it waits Retry-After (or about 100 ms)
// and tries again, on the next target after a transport error. It gives up after retryFor.
func (r *runner) call(ctx context.Context, t int, step, method, path, token string, body any, hdr map[string]string, since time.Time) (answer, bool) {
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		a, err := r.do(ctx, t+attempt, step, method, path, token, body, hdr, since)
		since = time.Time{} // only the first attempt is timed from the intended send time
		if err == nil && a.status != 503 && a.status != 429 {
			return a, true
		}
		if err == nil && step == "pay" && noGateway(a) {
			return a, false // not a passing overload: retrying cannot help (noPaymentPath)
		}
		if ctx.Err() != nil {
			return a, false // the run's end, not the targets' failure
		}
		if time.Now().After(deadline) {
			if err != nil {
				r.fail("%s %s: %v (still failing after %v of retries)", method, path, err, retryFor)
			}
			return a, false
		}
		wait := time.Duration(80+rand.IntN(40)) * time.Millisecond
		if err != nil {
			atomic.AddInt64(&r.res.RetriedTransport, 1)
		} else {
			if a.status == 503 {
				atomic.AddInt64(&r.res.Retried503, 1)
			} else {
				atomic.AddInt64(&r.res.RateLimited, 1)
			}
			if a.retryAfter > 0 {
				wait = a.retryAfter/2 + time.Duration(rand.Int64N(int64(a.retryAfter/2)+1))
			}
		}
		if !sleep(ctx, wait) {
			return a, false
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// buyer is one simulated customer, from fetching the purchase path to a final outcome. due is
// its intended arrival in the open loop (zero in the closed loop).
func (r *runner) buyer(ctx context.Context, i int, due time.Time) {
	user := UserName(i)
	tr := r.track()
	defer tr.end()
	token, err := r.cfg.Token(user)
	if err != nil {
		r.fail("token for %s: %v", user, err)
		return
	}
	b := BehaviorOf(user, r.cfg.Seed, r.cfg.Mix)
	var path struct {
		Path string `json:"path"`
	}
	for {
		a, ok := r.call(ctx, i, "path", "GET", "/api/v1/sales/"+r.cfg.SaleID+"/path", token, nil, nil, due)
		due = time.Time{}
		switch {
		case !ok:
			atomic.AddInt64(&r.res.GaveUp, 1)
			return
		case a.status == 200:
			_ = json.Unmarshal(a.body, &path)
		case a.code == "not_started":
			if !sleep(ctx, 20*time.Millisecond) {
				atomic.AddInt64(&r.res.GaveUp, 1)
				return
			}
			continue
		default:
			return // ended, not found
		}
		break
	}
	key := map[string]string{"Idempotency-Key": "k-" + user}
	tr.set(phaseBuy)
	var res reservation
	for attempt := 0; ; attempt++ {
		a, ok := r.call(ctx, i, "buy", "POST", path.Path, token, map[string]int{"quantity": 1}, key, time.Time{})
		if !ok {
			atomic.AddInt64(&r.res.GaveUp, 1)
			return
		}
		switch {
		case a.status == 201 || a.status == 200:
			_ = json.Unmarshal(a.body, &res)
			if a.status == 201 { // a fresh hold (200 is a replay of an older one)
				r.unsold(a.sent)
			}
		case a.status == 202:
			_ = json.Unmarshal(a.body, &res)
			atomic.AddInt64(&r.res.Queued, 1)
			r.unsold(a.sent)
		case a.code == "queue_full":
			atomic.AddInt64(&r.res.QueueFull, 1)
			// Every unit is held and the line is full: come back a little later.
			if !sleep(ctx, time.Duration(100+min(attempt, 20)*25+rand.IntN(100))*time.Millisecond) {
				atomic.AddInt64(&r.res.GaveUp, 1)
				return
			}
			continue
		case a.code == "sold_out":
			atomic.AddInt64(&r.res.SoldOut, 1)
			r.mu.Lock()
			r.res.SoldOutAt = append(r.res.SoldOutAt, a.received)
			r.mu.Unlock()
			return
		default:
			return // ended, limit_exceeded, …
		}
		break
	}
	if b == Retry {
		if a, ok := r.call(ctx, i, "buy", "POST", path.Path, token, map[string]int{"quantity": 1}, key, time.Time{}); ok && a.status == 200 {
			var again reservation
			_ = json.Unmarshal(a.body, &again)
			atomic.AddInt64(&r.res.Replays, 1)
			if again.ID != res.ID {
				atomic.AddInt64(&r.res.ReplayMismatch, 1)
			}
		}
	}
	if res.Status == "queued" {
		tr.set(phaseQueue)
		if !r.waitForGrant(ctx, i, token, &res) {
			return
		}
		atomic.AddInt64(&r.res.Handoffs, 1)
	}
	if res.Status != "held" {
		return // a replay of something that moved on already
	}
	atomic.AddInt64(&r.res.Held, 1)
	tr.set(phaseHold)
	if r.cfg.Stripe != nil && b != Cancel {
		r.stripeBuyer(ctx, i, user, token, b, res, tr)
		return
	}
	switch b {
	case Cancel:
		if a, ok := r.call(ctx, i, "cancel", "DELETE", "/api/v1/reservations/"+res.ID, token, nil, nil, time.Time{}); ok && a.status == 200 {
			atomic.AddInt64(&r.res.Cancelled, 1)
		}
		return
	case Abandon:
		atomic.AddInt64(&r.res.Abandoned, 1)
		r.waitForEnd(ctx, i, token, res)
		return
	}
	tr.set(phasePay)
	if r.cfg.PaymentSecret == nil {
		// The target's own gateway pays (and, for late payers, pays late: see the demo).
		sent := time.Since(r.start) // the gateway pays after this
		a, ok := r.call(ctx, i, "pay", "POST", "/api/v1/reservations/"+res.ID+"/pay", token, nil, nil, time.Time{})
		if ok && a.status == 200 {
			atomic.AddInt64(&r.res.PaymentsBegun, 1)
		} else if r.noPaymentPath(a) {
			return
		}
		if r.waitForEnd(ctx, i, token, res) == "paid" {
			r.unsold(sent)
			r.mu.Lock()
			r.res.PaidUnits[user] += res.Quantity
			r.mu.Unlock()
		}
		return
	}
	if b == PayLate && res.ExpiresAt != nil {
		if !sleep(ctx, time.Until(*res.ExpiresAt)+r.cfg.LateBy) {
			atomic.AddInt64(&r.res.GaveUp, 1)
			return
		}
	} else {
		sleep(ctx, time.Duration(rand.IntN(100))*time.Millisecond) // the buyer at the gateway
	}
	r.deliver(ctx, i, user, "pay-"+res.ID, res)
}

// deliver is the gateway: the succeeded payment's signed webhook, to any target, retried
// until one answers 200.
func (r *runner) deliver(ctx context.Context, i int, user, pid string, res reservation) {
	body, _ := json.Marshal(map[string]any{"payment_id": pid, "reservation_id": res.ID,
		"amount_cents": res.AmountCents, "status": "succeeded"})
	atomic.AddInt64(&r.res.PaymentsBegun, 1)
	sent := time.Since(r.start) // every attempt, so the one that paid, leaves after this
	if result, ok := r.notify(ctx, i, "/api/v1/payments/webhook", func() ([]byte, map[string]string) {
		return body, map[string]string{"Seckill-Signature": payment.Sign(r.cfg.PaymentSecret, time.Now(), body)}
	}); ok {
		r.recordPayment(user, pid, result, res)
		if result == "applied" || result == "late_applied" {
			r.unsold(sent)
		}
	}
}

// notify is the gateway delivering a notification to path on any target: signed anew by sign
// for every attempt, retried until a target answers 200 (whose result it returns) or refuses
// it for good (counted as an error), or retryFor has passed (counted as given up).
func (r *runner) notify(ctx context.Context, i int, path string, sign func() ([]byte, map[string]string)) (string, bool) {
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		body, hdr := sign()
		a, err := r.do(ctx, i+attempt+1, "pay", "POST", path, "", body, hdr, time.Time{})
		if err == nil && a.status == 200 {
			var out struct{ Result string }
			_ = json.Unmarshal(a.body, &out)
			return out.Result, true
		}
		if err == nil && a.status != 503 {
			if a.status < 500 { // do counted a 5xx
				r.fail("POST %s: %d %s", path, a.status, excerpt(a.body))
			}
			return "", false
		}
		if err != nil && ctx.Err() == nil && time.Now().After(deadline) {
			r.fail("POST %s: %v (still failing after %v of retries)", path, err, retryFor)
		}
		if time.Now().After(deadline) || !sleep(ctx, 100*time.Millisecond) {
			atomic.AddInt64(&r.res.GaveUp, 1)
			return "", false
		}
		if err != nil {
			atomic.AddInt64(&r.res.RetriedTransport, 1)
		}
	}
}

// recordPayment keeps what a target answered for a delivered payment: the first answer other
// than duplicate, and the units a paying one gave the user.
func (r *runner) recordPayment(user, pid, result string, res reservation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.res.Payments[pid]; !ok || prev == "duplicate" {
		r.res.Payments[pid] = result
	}
	if result == "applied" || result == "late_applied" {
		r.res.PaidUnits[user] += res.Quantity
	}
}

// unsold records that the sale still had a unit unsold at at (Result.UnsoldAt).
func (r *runner) unsold(at time.Duration) {
	r.mu.Lock()
	r.res.UnsoldAt = max(r.res.UnsoldAt, at)
	r.mu.Unlock()
}

// ErrNoPaymentPath stops a run whose targets cannot start a payment: nobody could ever pay,
// and holds would only expire in chains until the deadline.
var ErrNoPaymentPath = errors.New("the targets start no payments: POST /pay answers 503, no payment gateway is configured; " +
	"run them with --dev (the mock gateway) or --gateway stripe, or pass the bench --payment-secret " +
	"(the targets' SECKILL_PAYMENT_SECRET) so that it delivers signed payment webhooks itself")

// noPaymentPath reports whether a POST /pay answer says the target has no gateway, and if so
// stops the run with ErrNoPaymentPath.
func (r *runner) noPaymentPath(a answer) bool {
	if !noGateway(a) {
		return false
	}
	r.stop(ErrNoPaymentPath)
	return true
}

// noGateway reports whether an answer is the 503 of a target that has no payment gateway that
// starts payments (docs/API.md: its detail starts with "no payment gateway").
func noGateway(a answer) bool {
	return a.status == http.StatusServiceUnavailable && bytes.Contains(a.body, []byte("no payment gateway"))
}

// waitForGrant polls a queued reservation until it is held (true) or ends (false).
func (r *runner) waitForGrant(ctx context.Context, i int, token string, res *reservation) bool {
	for sleep(ctx, 50*time.Millisecond) {
		a, ok := r.call(ctx, i, "poll", "GET", "/api/v1/reservations/"+res.ID, token, nil, nil, time.Time{})
		if !ok || a.status != 200 {
			return false
		}
		var cur reservation
		_ = json.Unmarshal(a.body, &cur)
		switch cur.Status {
		case "queued":
			continue
		case "held":
			r.queued(QueuedBuyer{Seq: seqOf(res.ID), Granted: cur.ExpiresAt.Add(-r.cfg.Hold)})
			*res = cur
			return true
		case "rejected":
			atomic.AddInt64(&r.res.Rejected, 1)
			r.queued(QueuedBuyer{Seq: seqOf(res.ID), Rejected: true})
		}
		return false
	}
	atomic.AddInt64(&r.res.GaveUp, 1)
	return false
}

func (r *runner) queued(q QueuedBuyer) {
	r.mu.Lock()
	r.res.Queue = append(r.res.Queue, q)
	r.mu.Unlock()
}

// seqOf reads the arrival sequence out of a reservation id "<sale>-<16 hex seq><16 hex random>".
// Ids are opaque to clients; the generator knows the format of this project's engines so that
// it can check the order the engine saw, not one skewed by the network.
func seqOf(id string) uint64 {
	if len(id) < 32 {
		return 0
	}
	n, _ := strconv.ParseUint(id[len(id)-32:len(id)-16], 16, 64)
	return n
}

// waitForEnd polls a held reservation until it is no longer held and returns its status.
func (r *runner) waitForEnd(ctx context.Context, i int, token string, res reservation) string {
	for sleep(ctx, 200*time.Millisecond) {
		a, ok := r.call(ctx, i, "poll", "GET", "/api/v1/reservations/"+res.ID, token, nil, nil, time.Time{})
		if !ok || a.status != 200 {
			return ""
		}
		var cur reservation
		_ = json.Unmarshal(a.body, &cur)
		if cur.Status == "held" {
			continue
		}
		if cur.Status == "expired" {
			atomic.AddInt64(&r.res.Expired, 1)
		}
		return cur.Status
	}
	return ""
}

// Describe is a one-line summary of a config, for reports.
func (c Config) Describe() string {
	loop := fmt.Sprintf("closed loop, %d buyers in flight", c.Concurrency)
	if c.Rate > 0 {
		loop = fmt.Sprintf("open loop, %.0f buyers/s", c.Rate)
	}
	pay := "the targets' gateway (POST /pay)"
	if c.PaymentSecret != nil {
		pay = "signed webhooks from the generator"
	}
	if c.Stripe != nil {
		pay = "Stripe Checkout on the targets' gateway (POST /pay), Stripe's signed events from the generator"
	}
	return fmt.Sprintf("%d buyers on %d instance(s), %s; mix cancel %d%% abandon %d%% late %d%% retry %d%%; payments: %s",
		c.Buyers, len(c.Targets), loop, c.Mix.Cancel, c.Mix.Abandon, c.Mix.PayLate, c.Mix.Retry, pay)
}
