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
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/internal/wait"
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
	// FirstUser numbers the buyers: buyer i is UserName(FirstUser+i). Runs on several sales at
	// once give each a range of its own, so that no buyer pays in many sales at once (the
	// targets limit each user's payments, as a shop does).
	FirstUser int
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

type runner struct {
	cfg     Config
	clients []*client.Client // one per target, in the order of Targets
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
	r := &runner{cfg: cfg, clients: clientsOf(cfg), start: time.Now(), period: newHist(), stop: stop}
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

// clientsOf is one client per target, over cfg.Client; the buyers' tokens are set per call.
func clientsOf(cfg Config) []*client.Client {
	cs := make([]*client.Client, len(cfg.Targets))
	for i, t := range cfg.Targets {
		cs[i] = client.New(t, client.WithHTTPClient(cfg.Client))
	}
	return cs
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
		if d := time.Until(due); d > 0 && !wait.Sleep(ctx, d) {
			return
		}
		wg.Go(func() {
			r.buyer(ctx, i, due)
			r.done.Add(1)
		})
	}
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
