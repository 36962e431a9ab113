// Package closer closes at the gateway the payments whose hold ended unpaid — expired, or
// cancelled by the buyer — so that nobody can pay for a unit that has gone to the next buyer.
//
// Every payment started by POST /pay is recorded (seckill.OpenPaymentStore) before its payment
// page is handed out, due for closing at its hold's expiry (at once when the buyer cancels). A
// closer claims due payments of its gateway under a lease, as the refunder claims refunds (both
// are a leasedjob.Worker), so one instance at a time works on each; asks the gateway to close
// each; and records the outcome. Closing is idempotent at every gateway, so a close interrupted
// anywhere is simply tried again when its lease ends, and retried with backoff until the
// gateway confirms. A payment that succeeded before the close could land (the gateway answers
// ErrAlreadyPaid) is left to its notification, which the late rule of docs/MODEL.md settles:
// paid if a unit is free and the buyer is under the limit, else refunded.
package closer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/leasedjob"
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
	ClosePayment(ctx context.Context, paymentID string) error
}

// Config configures a Closer (the leased-job worker's configuration). Zero values take the
// defaults below.
type Config = leasedjob.Config

// Defaults of Config.
const (
	// DefaultInterval is the pause between two passes over the due closes: how late, at most,
	// a payment is closed after its hold ended.
	DefaultInterval = time.Second
	// DefaultLease is how long a claimed payment is this closer's alone; a gateway call is
	// given half of it.
	DefaultLease = 30 * time.Second
	// DefaultBackoffBase and DefaultBackoffMax bound the pause before a close is retried:
	// short, because a payment left open is one a buyer may still pay for nothing.
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = time.Minute
	// DefaultBatch is how many payments one pass claims at most.
	DefaultBatch = 64
	// DefaultMaxAttempts is how many failed closes of one payment are tried before the closer
	// gives up on it: with the default backoff, about half an hour after its hold ended, when a
	// Stripe session has expired by itself. A payment given up is recorded closed with the
	// reason in its error, and a payment that still arrives follows the late rule: paid if a
	// unit is free, else refunded. Closing only makes late refunds rare; it never guards the
	// stock, so stopping is safe for money, and retrying a gateway that cannot answer (one that
	// lost the session, such as a bare stripe-mock) forever is not.
	DefaultMaxAttempts = 40
)

// defaults are the Default constants as a Config.
var defaults = Config{Interval: DefaultInterval, Lease: DefaultLease, BackoffBase: DefaultBackoffBase,
	BackoffMax: DefaultBackoffMax, Batch: DefaultBatch, MaxAttempts: DefaultMaxAttempts}

// Closer closes the payments of ended holds. Build it with New; run it as a background.Service
// (Run), or pass by pass (RunOnce: it claims the closes due now, up to Batch, tries each, and
// returns how many it claimed).
type Closer struct {
	*leasedjob.Worker[seckill.OpenPayment, seckill.CloseOutcome]
	gw Gateway
}

// New returns a closer over store that closes through gw. Its name in logs and metrics is
// "closer:" and its gateway's name.
func New(store Store, gw Gateway, cfg Config) *Closer {
	c := &Closer{gw: gw}
	c.Worker = leasedjob.New("closer", gw.Name(), cfg, defaults, leasedjob.Job[seckill.OpenPayment, seckill.CloseOutcome]{
		Queue: leasedjob.Queue[seckill.OpenPayment, seckill.CloseOutcome]{Claim: store.ClaimOpenPayments, Record: store.RecordClose},
		Try:   c.close, Done: c.done, PassFailed: "payment closer pass",
		Slow: "payment closes left to their leases: the gateway is slow",
	})
	return c
}

// close asks the gateway to close one claimed payment and returns the outcome to record.
func (c *Closer) close(ctx context.Context, p seckill.OpenPayment) (seckill.CloseOutcome, error) {
	cfg := c.Config()
	err := c.gw.ClosePayment(ctx, p.PaymentID)
	now := cfg.Clock.Now()
	o := seckill.CloseOutcome{PaymentID: p.PaymentID, Owner: cfg.Owner, At: now}
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
	case p.Attempts >= cfg.MaxAttempts:
		// Given up (Config.MaxAttempts): closed as far as the closer goes, the gateway's last
		// answer kept as the reason; a payment that still comes follows the late rule.
		o.Status, o.Error = seckill.PaymentClosed, fmt.Sprintf("%s: gave up after %d attempts: %v", givenUp, p.Attempts, err)
	default:
		o.Status, o.Error = seckill.PaymentOpen, err.Error()
		o.NextAttemptAt = now.Add(cfg.Backoff(p.Attempts))
	}
	return o, err
}

// done logs what became of one close.
func (c *Closer) done(p seckill.OpenPayment, o seckill.CloseOutcome, err, rerr error) {
	cfg := c.Config()
	log := cfg.Logger.With("payment_id", p.PaymentID, "reservation_id", p.ReservationID, "attempt", p.Attempts)
	if rerr != nil {
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
			"next_attempt_at", o.NextAttemptAt, "max_attempts", cfg.MaxAttempts, "err", err)
	case o.Status == seckill.PaymentOpen:
		log.Debug("payment close failed; retried", "next_attempt_at", o.NextAttemptAt, "err", err)
	case err != nil && o.Error != "":
		log.Warn("payment close given up; a payment that still arrives follows the late rule (paid if a unit is free, else refunded)", "err", err)
	}
}

// givenUp starts the recorded error of a payment the closer gave up on, so that an operator
// reading gateway_payments.last_error tells it from one the gateway confirmed closed.
const givenUp = "close not confirmed"
