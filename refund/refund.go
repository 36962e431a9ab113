// Package refund pays back the money of refund_required payments: a background refunder that
// claims due refunds from the database (seckill.RefundStore), asks the gateway that took the
// money to refund each, and records the outcome.
//
// Any number of refunders (one per instance) may run on one database. A claim leases a refund
// to one refunder, so only one works on it at a time. The gateway's idempotency key is the
// payment id, so a refund interrupted anywhere — the refunder killed after the gateway paid
// the money back but before the record, a record that failed, a lease that ran out — is
// claimed again when its lease ends and asked for again with the same key: the gateway answers
// with the refund it already made instead of paying twice. Nothing is lost either: a refund
// leaves refund_pending only by a record.
package refund

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

// Store is the part of seckill.RefundStore the refunder uses (sqlstore.Store implements it).
type Store interface {
	ClaimRefunds(ctx context.Context, gateway, owner string, now time.Time, lease time.Duration, limit int) ([]seckill.Refund, error)
	RecordRefund(ctx context.Context, o seckill.RefundOutcome) error
}

// Gateway is the part of payment.Gateway the refunder uses. The refunder claims only the
// refunds of payments its gateway took (by Name), so money goes back the way it came.
type Gateway interface {
	Name() string
	Refund(ctx context.Context, req payment.RefundRequest) (payment.RefundResult, error)
}

// Config configures a Refunder. Zero values take the defaults.
type Config struct {
	// Interval is the pause between two passes over the due refunds (default 1 s).
	Interval time.Duration
	// Lease is how long a claimed refund is this refunder's alone (default 1 min). A gateway
	// call is given half of it, so that the outcome is normally recorded while the lease lives.
	Lease time.Duration
	// MaxAttempts is the number of attempts that end in an error after which a refund is given
	// up as refund_failed, for an operator (default 16: with the default backoff, the last
	// attempt comes 16 to 21 hours after the first).
	MaxAttempts int
	// BackoffBase and BackoffMax bound the pause before a retry: BackoffBase·2^(attempt-1),
	// at most BackoffMax, of which a random half is taken off (defaults 2 s and 6 h).
	BackoffBase, BackoffMax time.Duration
	// Batch is how many refunds one pass claims at most (default 16).
	Batch int
	// Owner names this refunder in the leases it takes (default a random id): unique per
	// refunder, so that one refunder's record can never land on another's claim.
	Owner  string
	Logger *slog.Logger
	Clock  seckill.Clock
}

// Defaults of Config.
const (
	DefaultInterval    = time.Second
	DefaultLease       = time.Minute
	DefaultMaxAttempts = 16
	DefaultBackoffBase = 2 * time.Second
	DefaultBackoffMax  = 6 * time.Hour
	DefaultBatch       = 16
)

// Refunder pays back refunds owed. Build it with New; Run it in a goroutine.
type Refunder struct {
	store Store
	gw    Gateway
	cfg   Config
}

// New returns a refunder over store that refunds through gw.
func New(store Store, gw Gateway, cfg Config) *Refunder {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
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
	if cfg.Owner == "" {
		cfg.Owner = "refunder-" + seckill.NewID()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = seckill.SystemClock{}
	}
	return &Refunder{store: store, gw: gw, cfg: cfg}
}

// Name names the refunder in logs and metrics: "refunder:" and its gateway's name.
func (r *Refunder) Name() string { return "refunder:" + r.gw.Name() }

// Run makes a pass every Interval until ctx is done, then returns nil (a background.Service;
// its exit is immediate: a refund cut short by ctx is claimed again when its lease ends). A
// pass that fails (the database is down) is reported (background.Report) and tried again at
// the next tick: nothing is lost, the refunds stay in the database.
func (r *Refunder) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			background.Report(ctx, fmt.Errorf("refunder pass: %w", err))
		}
	}
}

// RunOnce claims the refunds due now (up to Batch) and works on each; it returns how many it
// claimed. Claiming a full batch means more may be due: Run's next tick takes them.
//
// A gateway call may take half the lease, so a refund is only started while at least half of
// its lease is left: then its call ends before the lease does, and no other instance can be
// working on it at the same time. The rest of a batch that a slow gateway held up is left to
// its leases, and claimed again when they end.
func (r *Refunder) RunOnce(ctx context.Context) (int, error) {
	claimedAt := r.cfg.Clock.Now()
	due, err := r.store.ClaimRefunds(ctx, r.gw.Name(), r.cfg.Owner, claimedAt, r.cfg.Lease, r.cfg.Batch)
	for i, f := range due {
		if left := r.cfg.Lease - r.cfg.Clock.Now().Sub(claimedAt); left < r.cfg.Lease/2 {
			r.cfg.Logger.Warn("refunds left to their leases: the gateway is slow", "left", len(due)-i)
			break
		}
		r.refund(ctx, f)
	}
	return len(due), err
}

// refund asks the gateway to pay back one claimed refund and records what it answered.
func (r *Refunder) refund(ctx context.Context, f seckill.Refund) {
	callCtx, cancel := context.WithTimeout(ctx, r.cfg.Lease/2)
	res, err := r.gw.Refund(callCtx, payment.RefundRequest{PaymentID: f.PaymentID, AmountCents: f.AmountCents})
	cancel()
	o := r.outcome(f, res, err)
	log := r.cfg.Logger.With("payment_id", f.PaymentID, "attempt", f.Attempts, "status", o.Status)
	if rerr := r.store.RecordRefund(ctx, o); rerr != nil {
		if seckill.ErrorCode(rerr) == seckill.CodeConflict {
			// The lease ran out and another refunder took the refund over: it is its to record.
			log.Info("refund taken over by another refunder", "err", rerr)
			return
		}
		// Left refund_pending under this lease: once the lease ends it is claimed again and
		// the gateway, asked again with the same key, answers with this same refund.
		log.Warn("refund outcome not recorded; retried when the lease ends", "err", rerr)
		return
	}
	switch o.Status {
	case seckill.Refunded:
		log.Info("refunded", "refund_id", o.RefundID, "amount_cents", f.AmountCents)
	case seckill.RefundFailed:
		log.Error("refund failed; an operator must act (GET /api/v1/refunds?status=refund_failed)", "reason", o.Error)
	default:
		log.Info("refund will be retried", "next_attempt_at", o.NextAttemptAt, "reason", o.Error)
	}
}

// outcome turns the gateway's answer into what is recorded: refunded; refund_failed when the
// gateway says the refund cannot succeed or after MaxAttempts errors; otherwise refund_pending,
// to be retried after a backoff. A pending answer from the gateway (the refund is on its way)
// is asked about again after the same backoff, but never given up on: the money is moving.
func (r *Refunder) outcome(f seckill.Refund, res payment.RefundResult, err error) seckill.RefundOutcome {
	now := r.cfg.Clock.Now()
	o := seckill.RefundOutcome{PaymentID: f.PaymentID, Owner: r.cfg.Owner, RefundID: res.RefundID, At: now}
	switch {
	case err == nil && res.Status == payment.RefundSucceeded:
		o.Status = seckill.Refunded
	case err == nil && res.Status == payment.RefundFailed:
		o.Status, o.Error = seckill.RefundFailed, "the gateway refused the refund"
	case err == nil && res.Status == payment.RefundPending:
		o.Status, o.Error = seckill.RefundPending, "the gateway accepted the refund; not yet paid back"
		o.NextAttemptAt = now.Add(r.backoff(f.Attempts))
	default:
		if err == nil {
			err = errors.New("the gateway answered an unknown refund status " + string(res.Status))
		}
		o.Status, o.Error = seckill.RefundPending, err.Error()
		o.NextAttemptAt = now.Add(r.backoff(f.Attempts))
		if f.Attempts >= r.cfg.MaxAttempts {
			o.Status = seckill.RefundFailed
		}
	}
	return o
}

// backoff is the pause before the attempt after the given one.
func (r *Refunder) backoff(attempt int) time.Duration {
	return backoff.Jittered(r.cfg.BackoffBase, r.cfg.BackoffMax, attempt)
}
