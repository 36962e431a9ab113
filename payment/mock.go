package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/wait"
)

// Defaults of MockConfig. They imitate a real gateway at a small scale: a payment settles after a
// moment, and a webhook that is not acknowledged is retried with exponential backoff.
const (
	DefaultMockDelay       = 100 * time.Millisecond
	DefaultMaxAttempts     = 8
	DefaultBackoff         = 100 * time.Millisecond
	DefaultMaxBackoff      = 5 * time.Second
	DefaultAttemptTimeout  = 10 * time.Second
	maxResponseBytesToRead = 64 << 10
)

// MockConfig configures a MockGateway. The zero value of every field selects the default named in
// its comment; only Secret and one of WebhookURL or Deliver are needed.
type MockConfig struct {
	// WebhookURL is where webhooks are POSTed (with HTTPClient) when Deliver is nil, e.g.
	// "http://127.0.0.1:8080/api/v1/payments/webhook".
	WebhookURL string
	// Deliver, when set, is called instead of an HTTP POST, so that an in-process server can
	// receive webhooks without a socket (tests, the demo). It returns the HTTP status the
	// receiver answered; 2xx acknowledges the delivery, anything else or an error is retried.
	// It must return promptly once ctx is done: Shutdown waits for it.
	Deliver func(ctx context.Context, body []byte, header string) (status int, err error)
	// HTTPClient posts to WebhookURL. Default: a client of its own, whose idle connections are
	// closed by Shutdown and Close.
	HTTPClient *http.Client
	// Secret signs every webhook (SECKILL_PAYMENT_SECRET). Required: the receiver refuses
	// webhooks signed with an empty secret.
	Secret []byte
	// Delay is how long after CreatePayment the payment settles and its webhook is first sent.
	// Default: DefaultMockDelay for every reservation. A negative delay counts as zero.
	Delay func(seckill.Reservation) time.Duration
	// FailureRate is the probability, in [0, 1], that a payment ends "failed" rather than
	// "succeeded".
	FailureRate float64
	// DuplicateRate is the probability, in [0, 1], that a webhook acknowledged once is delivered
	// a second time, as real gateways occasionally do; the receiver must answer "duplicate".
	DuplicateRate float64
	// MaxAttempts bounds the attempts of one delivery, first one included. Default:
	// DefaultMaxAttempts.
	MaxAttempts int
	// Backoff is the wait before the first retry; it doubles on each further retry, up to
	// MaxBackoff, and each wait is drawn at random from its upper half (jitter), so that
	// deliveries failed by one outage do not all come back in the same instant.
	// Default: DefaultBackoff.
	Backoff time.Duration
	// MaxBackoff caps the wait between attempts. Default: DefaultMaxBackoff.
	MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt (one POST or one Deliver call). Default:
	// DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Clock gives the signature timestamps. It is not used for waiting: delays and backoff use
	// real timers. Default: seckill.SystemClock.
	Clock seckill.Clock
	// Logger receives one line per failed attempt and per abandoned delivery. Default: discard.
	Logger *slog.Logger
	// RedirectBase prefixes the RedirectURL of each PaymentIntent: RedirectBase + "/" + payment id.
	RedirectBase string
	// Rand decides each payment's outcome and whether its webhook is duplicated, in the order
	// CreatePayment is called, so a seeded source (rand.New(rand.NewPCG(1, 2))) makes those
	// decisions reproducible. The gateway serialises its use. Default: a randomly seeded source.
	// Backoff jitter does not use it, so that timing cannot disturb the reproducible sequence.
	Rand *rand.Rand
}

// MockStats counts what a MockGateway did. Every field only grows, except Pending.
type MockStats struct {
	Created           int64 // payments created
	PaymentsSucceeded int64 // payments settled "succeeded": money taken (a payment closed first is not)
	PaymentsFailed    int64 // payments settled "failed"
	Delivered         int64 // deliveries acknowledged with a 2xx answer, duplicates included
	DeliveryFailures  int64 // deliveries abandoned: attempts exhausted or shut down
	Retries           int64 // attempts after the first one of a delivery
	Duplicates        int64 // second deliveries of an already acknowledged webhook, started
	Pending           int64 // payments whose webhook work has not finished yet
	Closed            int64 // payments closed (Close) before their webhook was sent: none was sent
	Refunds           int64 // payments refunded (Refund), each once
}

// MockGateway is a payment gateway that lives in the process. CreatePayment answers at once and
// decides the payment's outcome; later, like a real gateway, it reports the outcome through a
// signed webhook, retried with backoff until acknowledged, and sometimes delivered twice.
//
// Goroutine ownership: every CreatePayment starts one goroutine, owned by the gateway, which
// exits when its webhook work is done (acknowledged, duplicated if chosen, or abandoned after
// MaxAttempts) or when the gateway is shut down. Shutdown and Close wait for all of them, so no
// goroutine outlives the gateway. The goroutines never use the caller's ctx, which usually ends
// with the HTTP request that asked for the payment.
//
// A MockGateway is safe for concurrent use.
type MockGateway struct {
	cfg        MockConfig
	ownsClient bool
	cfgErr     error // a configuration error, reported by every CreatePayment

	ctx    context.Context // cancelled when in-flight deliveries must stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // one count per delivery goroutine; Add only while !closed

	mu      sync.Mutex // guards closed, pending, idle, rnd and payments
	closed  bool
	pending int
	idle    chan struct{} // closed while pending == 0; replaced when work starts

	rnd *rand.Rand // guarded by mu, which also orders the draws as payments are accepted

	// payments is each payment's state as the provider sees it (Close, Refund, State): one
	// small entry per payment, kept for the gateway's life (a dev, demo or test process).
	payments map[string]*mockPayment

	startMu sync.Mutex                       // serialises Start, so one key starts one payment
	byKey   map[string]seckill.PaymentIntent // guarded by startMu: Start's idempotency keys

	created, succeeded, failed, delivered, deliveryFailures, retries, duplicates, closedUnsent, refunds atomic.Int64
}

// NewMockGateway returns a running gateway. A configuration without a webhook target or without
// a secret does not panic: it is logged, and every CreatePayment returns an internal error, so
// the mistake surfaces at the first payment, with a message.
func NewMockGateway(cfg MockConfig) *MockGateway {
	g := &MockGateway{cfg: cfg}
	if g.cfg.Delay == nil {
		g.cfg.Delay = func(seckill.Reservation) time.Duration { return DefaultMockDelay }
	}
	if g.cfg.MaxAttempts <= 0 {
		g.cfg.MaxAttempts = DefaultMaxAttempts
	}
	if g.cfg.Backoff <= 0 {
		g.cfg.Backoff = DefaultBackoff
	}
	if g.cfg.MaxBackoff <= 0 {
		g.cfg.MaxBackoff = DefaultMaxBackoff
	}
	if g.cfg.MaxBackoff < g.cfg.Backoff {
		g.cfg.MaxBackoff = g.cfg.Backoff
	}
	if g.cfg.AttemptTimeout <= 0 {
		g.cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	if g.cfg.Clock == nil {
		g.cfg.Clock = seckill.SystemClock{}
	}
	if g.cfg.Logger == nil {
		g.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g.cfg.FailureRate = clamp01(g.cfg.FailureRate)
	g.cfg.DuplicateRate = clamp01(g.cfg.DuplicateRate)
	g.cfg.RedirectBase = strings.TrimRight(g.cfg.RedirectBase, "/")
	g.rnd = g.cfg.Rand
	if g.rnd == nil {
		g.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if g.cfg.Deliver == nil && g.cfg.HTTPClient == nil {
		g.cfg.HTTPClient = &http.Client{}
		g.ownsClient = true
	}
	switch {
	case g.cfg.Deliver == nil && g.cfg.WebhookURL == "":
		g.cfgErr = seckill.Errorf(seckill.CodeInternal, "mock payment gateway: neither WebhookURL nor Deliver is set")
	case len(g.cfg.Secret) == 0:
		g.cfgErr = seckill.Errorf(seckill.CodeInternal, "mock payment gateway: no webhook secret")
	}
	if g.cfgErr != nil {
		g.cfg.Logger.Error("mock payment gateway misconfigured", "err", g.cfgErr)
	}
	g.payments = make(map[string]*mockPayment)
	g.byKey = make(map[string]seckill.PaymentIntent)
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.idle = make(chan struct{})
	close(g.idle)
	return g
}

func clamp01(p float64) float64 {
	if !(p > 0) { // also catches NaN
		return 0
	}
	return min(p, 1)
}

// CreatePayment starts a payment for r and returns at once. The outcome ("failed" with
// probability FailureRate) and the duplicate delivery (probability DuplicateRate) are decided
// now; the webhook follows after Delay(r) from a goroutine owned by the gateway. It fails with
// CodeUnavailable once the gateway is shutting down, and with CodeInvalidArgument for a
// reservation without an id or with a negative amount.
func (g *MockGateway) CreatePayment(ctx context.Context, r seckill.Reservation) (seckill.PaymentIntent, error) {
	if err := ctx.Err(); err != nil {
		return seckill.PaymentIntent{}, err
	}
	if g.cfgErr != nil {
		return seckill.PaymentIntent{}, g.cfgErr
	}
	if r.ID == "" {
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeInvalidArgument, "reservation has no id")
	}
	if r.AmountCents < 0 {
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeInvalidArgument, "reservation amount is negative")
	}
	delay := max(g.cfg.Delay(r), 0)
	id := "pay_" + seckill.NewID()
	ev := Event{PaymentID: id, ReservationID: r.ID, AmountCents: r.AmountCents, Status: StatusSucceeded}

	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeUnavailable, "payment gateway is shutting down")
	}
	// Both draws happen on every call, whatever the rates, so that one seed gives one sequence.
	if g.rnd.Float64() < g.cfg.FailureRate {
		ev.Status = StatusFailed
	}
	duplicate := g.rnd.Float64() < g.cfg.DuplicateRate
	g.payments[id] = &mockPayment{state: StateOpen, amountCents: r.AmountCents}
	g.wg.Add(1)
	if g.pending == 0 {
		g.idle = make(chan struct{})
	}
	g.pending++
	g.mu.Unlock()

	g.created.Add(1)
	go g.run(ev, delay, duplicate)
	return seckill.PaymentIntent{PaymentID: id, RedirectURL: g.cfg.RedirectBase + "/" + id}, nil
}

// run is the goroutine of one payment. It exits when the webhook is acknowledged (twice if
// duplicate), when its attempts are exhausted, or when g.ctx is cancelled.
func (g *MockGateway) run(ev Event, delay time.Duration, duplicate bool) {
	defer g.wg.Done()
	defer g.done()
	log := g.cfg.Logger.With("payment_id", ev.PaymentID, "reservation_id", ev.ReservationID)
	body, err := json.Marshal(ev)
	if err != nil { // cannot happen: Event has only strings and an integer
		g.deliveryFailures.Add(1)
		log.Error("mock payment gateway: encoding webhook", "err", err)
		return
	}
	if !wait.Sleep(g.ctx, delay) {
		g.deliveryFailures.Add(1)
		log.Warn("mock payment gateway: shut down before the webhook was sent")
		return
	}
	if !g.settle(ev.PaymentID, ev.Succeeded()) {
		g.closedUnsent.Add(1)
		log.Info("mock payment gateway: payment closed before it settled; no webhook sent")
		return
	}
	// Counted once settled: a payment closed first (its hold ended) never took money.
	if ev.Succeeded() {
		g.succeeded.Add(1)
	} else {
		g.failed.Add(1)
	}
	if !g.deliver(log, body) || !duplicate {
		return
	}
	g.duplicates.Add(1)
	g.deliver(log.With("duplicate", true), body)
}

// done marks one payment's work finished for WaitIdle and Pending.
func (g *MockGateway) done() {
	g.mu.Lock()
	g.pending--
	if g.pending == 0 {
		close(g.idle)
	}
	g.mu.Unlock()
}

// deliver sends body until it is acknowledged, up to MaxAttempts attempts. Each attempt is
// signed afresh, so that a delivery retried for minutes is not rejected as stale.
func (g *MockGateway) deliver(log *slog.Logger, body []byte) bool {
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			g.retries.Add(1)
		}
		status, err := g.send(body)
		if err == nil && status >= 200 && status < 300 {
			g.delivered.Add(1)
			return true
		}
		if err == nil {
			err = fmt.Errorf("receiver answered HTTP %d", status)
		}
		if g.ctx.Err() != nil {
			g.deliveryFailures.Add(1)
			log.Warn("mock payment gateway: shut down during delivery", "attempt", attempt, "err", err)
			return false
		}
		if attempt >= g.cfg.MaxAttempts {
			g.deliveryFailures.Add(1)
			log.Error("mock payment gateway: webhook abandoned", "attempts", attempt, "err", err)
			return false
		}
		pause := g.backoff(attempt)
		log.Warn("mock payment gateway: webhook attempt failed, retrying", "attempt", attempt, "retry_in", pause, "err", err)
		if !wait.Sleep(g.ctx, pause) {
			g.deliveryFailures.Add(1)
			log.Warn("mock payment gateway: shut down during delivery", "attempt", attempt)
			return false
		}
	}
}

// send makes one attempt and returns the receiver's HTTP status.
func (g *MockGateway) send(body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.AttemptTimeout)
	defer cancel()
	header := Sign(g.cfg.Secret, g.cfg.Clock.Now(), body)
	if g.cfg.Deliver != nil {
		return g.cfg.Deliver(ctx, body, header)
	}
	req, err := NewRequest(ctx, g.cfg.WebhookURL, SignedBody{Body: body, Header: SignatureHeader, Value: header})
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", mockUserAgent)
	resp, err := g.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, err
	}
	// Drain (bounded) so that the connection can be reused for the next webhook.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytesToRead))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// backoff is the wait after the given failed attempt (1-based): Backoff·2^(attempt-1), capped at
// MaxBackoff, then drawn uniformly from its upper half ("equal jitter"), so retries spread out
// but never come back sooner than half the nominal wait.
func (g *MockGateway) backoff(attempt int) time.Duration {
	d := g.cfg.Backoff
	for i := 1; i < attempt && d < g.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, g.cfg.MaxBackoff)
	half := d / 2
	return half + rand.N(d-half+1) // global source: safe for concurrent use
}

// Pending returns how many payments still have webhook work to do (waiting, sending, retrying
// or sending a duplicate).
func (g *MockGateway) Pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending
}

// WaitIdle blocks until no payment has webhook work left, or ctx is done (returning
// ctx.Err()). It does not stop the gateway: payments created meanwhile are waited for too.
// Tests and the demo use it to let every webhook land before they check the books.
func (g *MockGateway) WaitIdle(ctx context.Context) error {
	for {
		g.mu.Lock()
		idle, n := g.idle, g.pending
		g.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
			// Loop: a payment created right after idle was closed makes the gateway busy again.
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Shutdown stops accepting payments and waits for every in-flight delivery to finish (including
// retries and duplicates). If ctx is done first, it cancels the deliveries, still waits for
// their goroutines to exit, and returns ctx.Err(); abandoned deliveries count as
// DeliveryFailures. Calling it again is harmless.
func (g *MockGateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()

	finished := make(chan struct{})
	go func() { // exits when every delivery goroutine has, which the cancel below guarantees
		g.wg.Wait()
		close(finished)
	}()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		err = ctx.Err()
		g.cancel()
		<-finished
	}
	g.cancel()
	if g.ownsClient {
		g.cfg.HTTPClient.CloseIdleConnections()
	}
	return err
}

// Close stops accepting payments, cancels every in-flight delivery and waits for their
// goroutines to exit: it is Shutdown with no grace period. (ClosePayment is the Gateway method
// that closes one payment.)
func (g *MockGateway) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.Shutdown(ctx)
	return nil
}

// Stats returns the gateway's counters. Fields are read one by one, so a snapshot taken while
// deliveries run may be off by the deliveries in progress; after WaitIdle or Shutdown it is exact.
func (g *MockGateway) Stats() MockStats {
	return MockStats{
		Created:           g.created.Load(),
		PaymentsSucceeded: g.succeeded.Load(),
		PaymentsFailed:    g.failed.Load(),
		Delivered:         g.delivered.Load(),
		DeliveryFailures:  g.deliveryFailures.Load(),
		Retries:           g.retries.Load(),
		Duplicates:        g.duplicates.Load(),
		Pending:           int64(g.Pending()),
		Closed:            g.closedUnsent.Load(),
		Refunds:           g.refunds.Load(),
	}
}
