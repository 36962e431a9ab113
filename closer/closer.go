// Package closer closes at the gateway the payments whose hold ended unpaid — expired, or
// cancelled by the buyer — so that nobody can pay for a unit that has gone to the next buyer.
//
// Every payment started by POST /pay is recorded (seckill.OpenPaymentStore) before its payment
// page is handed out, due for closing at its hold's expiry (at once when the buyer cancels). A
// closer claims due payments of its gateway under a lease, as the refunder claims refunds, so
// one instance at a time works on each; asks the gateway to close each; and records the
// outcome. Closing is idempotent at every gateway, so a close interrupted anywhere is simply
// tried again when its lease ends, and retried with backoff until the gateway confirms. A
// payment that succeeded before the close could land (the gateway answers ErrAlreadyPaid) is
// left to its notification, which the late rule of docs/MODEL.md settles: paid if a unit is
// free and the buyer is under the limit, else refunded.
package closer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/backoff"
	"github.com/seckill-go/seckill/payment"
)

// Store is the part of seckill.OpenPaymentStore the closer uses (sqlstore.Store implements it).
type Store interface {
	ClaimOpenPayments(ctx context.Context, gateway, owner string, now time.Time, lease time.Duration, limit int) ([]seckill.OpenPayment, error)
	RecordClose(ctx context.Context, o seckill.CloseOutcome) error
}

// Gateway is the part of payment.Gateway the closer uses.
type Gateway interface {
	Name() string
	Close(ctx context.Context, paymentID string) error
}

// Config configures a Closer. Zero values take the defaults.
type Config struct {
	// Interval is the pause between two passes over the due closes (default 1 s): how late,
	// at most, a payment is closed after its hold ended.
	Interval time.Duration
	// Lease is how long a claimed payment is this closer's alone (default 30 s); a gateway
	// call is given half of it.
	Lease time.Duration
	// BackoffBase and BackoffMax bound the pause before a close is retried (defaults 1 s and
	// 1 min): short, because a payment left open is one a buyer may still pay for nothing.
	BackoffBase, BackoffMax time.Duration
	// Batch is how many payments one pass claims at most (default 64).
	Batch int
	// MaxAttempts is how many failed closes of one payment are tried before the closer gives
	// up on it (default 40: with the default backoff, about half an hour after its hold ended,
	// when a Stripe session has expired by itself). A payment given up is recorded closed with
	// the reason in its error, and a payment that still arrives follows the late rule: paid if
	// a unit is free, else refunded. Closing only makes late refunds rare; it never guards the
	// stock, so stopping is safe for money, and retrying a gateway that cannot answer (one that
	// lost the session, such as a bare stripe-mock) forever is not.
	MaxAttempts int
	// Owner names this closer in its leases (default a random id), unique per closer.
	Owner  string
	Logger *slog.Logger
	Clock  seckill.Clock
}

// Defaults of Config.
const (
	DefaultInterval    = time.Second
	DefaultLease       = 30 * time.Second
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = time.Minute
	DefaultBatch       = 64
	DefaultMaxAttempts = 40
)

// Closer closes the payments of ended holds. Build it with New; Run it in a goroutine.
type Closer struct {
	store Store
	gw    Gateway
	cfg   Config
}

// New returns a closer over store that closes through gw.
func New(store Store, gw Gateway, cfg Config) *Closer {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Owner == "" {
		cfg.Owner = "closer-" + seckill.NewID()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = seckill.SystemClock{}
	}
	return &Closer{store: store, gw: gw, cfg: cfg}
}

// Name names the closer in logs and metrics: "closer:" and its gateway's name.
func (c *Closer) Name() string { return "closer:" + c.gw.Name() }

// Run makes a pass every Interval until ctx is done, then returns nil (a background.Service;
// its exit is immediate: a close cut short by ctx is tried again when its lease ends). A pass
// that fails (the database is down) is reported (background.Report) and tried again at the
// next tick: the payments stay recorded as open.
func (c *Closer) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := c.RunOnce(ctx); err != nil && ctx.Err() == nil {
			background.Report(ctx, fmt.Errorf("payment closer pass: %w", err))
		}
	}
}

// RunOnce claims the closes due now (up to Batch) and tries each; it returns how many it
// claimed. As in the refunder, a close is only started while half its lease is left, so no
// other closer works on the same payment at the same time.
func (c *Closer) RunOnce(ctx context.Context) (int, error) {
	claimedAt := c.cfg.Clock.Now()
	due, err := c.store.ClaimOpenPayments(ctx, c.gw.Name(), c.cfg.Owner, claimedAt, c.cfg.Lease, c.cfg.Batch)
	for i, p := range due {
		if c.cfg.Clock.Now().Sub(claimedAt) > c.cfg.Lease/2 {
			c.cfg.Logger.Warn("payment closes left to their leases: the gateway is slow", "left", len(due)-i)
			break
		}
		c.close(ctx, p)
	}
	return len(due), err
}

// close asks the gateway to close one claimed payment and records what it answered.
func (c *Closer) close(ctx context.Context, p seckill.OpenPayment) {
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Lease/2)
	err := c.gw.Close(callCtx, p.PaymentID)
	cancel()
	now := c.cfg.Clock.Now()
	o := seckill.CloseOutcome{PaymentID: p.PaymentID, Owner: c.cfg.Owner, At: now}
	switch {
	case err == nil:
		o.Status = seckill.PaymentClosed
	case seckill.ErrorCode(err) == seckill.CodeNotFound:
		// The gateway does not know the payment (the mock forgets its payments when it
		// restarts): nothing can be paid through it.
		o.Status = seckill.PaymentClosed
	case errors.Is(err, payment.ErrAlreadyPaid):
		// Paid before the close landed: its notification is on the way and settles it.
		o.Status = seckill.PaymentPaid
	case p.Attempts >= c.cfg.MaxAttempts:
		// Given up (Config.MaxAttempts): closed as far as the closer goes, the gateway's last
		// answer kept as the reason; a payment that still comes follows the late rule.
		o.Status, o.Error = seckill.PaymentClosed, fmt.Sprintf("%s: gave up after %d attempts: %v", givenUp, p.Attempts, err)
	default:
		o.Status, o.Error = seckill.PaymentOpen, err.Error()
		o.NextAttemptAt = now.Add(backoff.Jittered(c.cfg.BackoffBase, c.cfg.BackoffMax, p.Attempts))
	}
	log := c.cfg.Logger.With("payment_id", p.PaymentID, "reservation_id", p.ReservationID, "attempt", p.Attempts)
	if rerr := c.store.RecordClose(ctx, o); rerr != nil {
		// Left open under this lease (or taken over): claimed and closed again later, which
		// is harmless, as closing is idempotent.
		log.Warn("payment close not recorded; tried again when the lease ends", "err", rerr)
		return
	}
	// A failing close is a warning once per payment, on its first failure and when it is given
	// up; the retries in between are at debug level, so that a gateway that keeps failing
	// for one payment does not fill the log.
	switch {
	case o.Status == seckill.PaymentOpen && p.Attempts <= 1:
		log.Warn("payment close failed; retried with backoff (further failures at debug level)",
			"next_attempt_at", o.NextAttemptAt, "max_attempts", c.cfg.MaxAttempts, "err", err)
	case o.Status == seckill.PaymentOpen:
		log.Debug("payment close failed; retried", "next_attempt_at", o.NextAttemptAt, "err", err)
	case err != nil && o.Error != "":
		log.Warn("payment close given up; a payment that still arrives follows the late rule (paid if a unit is free, else refunded)", "err", err)
	}
}

// givenUp starts the recorded error of a payment the closer gave up on, so that an operator
// reading gateway_payments.last_error tells it from one the gateway confirmed closed.
const givenUp = "close not confirmed"
