// Package refund pays back the money of refund_required payments: a background refunder (a
// leasedjob.Worker, as the closer is) that claims due refunds from the database
// (seckill.RefundStore), asks the gateway that took the money to refund each, and records the
// outcome.
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
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/leasedjob"
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

// Config configures a Refunder (the leased-job worker's configuration). Zero values take the
// defaults below.
type Config = leasedjob.Config

// Defaults of Config.
const (
	// DefaultInterval is the pause between two passes over the due refunds.
	DefaultInterval = time.Second
	// DefaultLease is how long a claimed refund is this refunder's alone. A gateway call is
	// given half of it, so that the outcome is normally recorded while the lease lives.
	DefaultLease = time.Minute
	// DefaultMaxAttempts is the number of attempts that end in an error after which a refund
	// is given up as refund_failed, for an operator: with the default backoff, the last
	// attempt comes 16 to 21 hours after the first.
	DefaultMaxAttempts = 16
	// DefaultBackoffBase and DefaultBackoffMax bound the pause before a retry.
	DefaultBackoffBase = 2 * time.Second
	DefaultBackoffMax  = 6 * time.Hour
	// DefaultBatch is how many refunds one pass claims at most.
	DefaultBatch = 16
)

// defaults are the Default constants as a Config.
var defaults = Config{Interval: DefaultInterval, Lease: DefaultLease, BackoffBase: DefaultBackoffBase,
	BackoffMax: DefaultBackoffMax, Batch: DefaultBatch, MaxAttempts: DefaultMaxAttempts}

// Refunder pays back refunds owed. Build it with New; run it as a background.Service (Run), or
// pass by pass (RunOnce: it claims the refunds due now, up to Batch, works on each, and returns
// how many it claimed).
type Refunder struct {
	*leasedjob.Worker[seckill.Refund, seckill.RefundOutcome]
	gw Gateway
}

// New returns a refunder over store that refunds through gw. Its name in logs and metrics is
// "refunder:" and its gateway's name.
func New(store Store, gw Gateway, cfg Config) *Refunder {
	r := &Refunder{gw: gw}
	r.Worker = leasedjob.New("refunder", gw.Name(), cfg, defaults, leasedjob.Job[seckill.Refund, seckill.RefundOutcome]{
		Queue: leasedjob.Queue[seckill.Refund, seckill.RefundOutcome]{Claim: store.ClaimRefunds, Record: store.RecordRefund},
		Try:   r.refund, Done: r.done, PassFailed: "refunder pass",
		Slow: "refunds left to their leases: the gateway is slow",
	})
	return r
}

// refund asks the gateway to pay back one claimed refund and returns the outcome to record.
func (r *Refunder) refund(ctx context.Context, f seckill.Refund) (seckill.RefundOutcome, error) {
	res, err := r.gw.Refund(ctx, payment.RefundRequest{PaymentID: f.PaymentID, AmountCents: f.AmountCents})
	return r.outcome(f, res, err), err
}

// done logs what became of one refund.
func (r *Refunder) done(f seckill.Refund, o seckill.RefundOutcome, _, rerr error) {
	log := r.Config().Logger.With("payment_id", f.PaymentID, "attempt", f.Attempts, "status", o.Status)
	if rerr != nil {
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
	cfg := r.Config()
	now := cfg.Clock.Now()
	o := seckill.RefundOutcome{PaymentID: f.PaymentID, Owner: cfg.Owner, RefundID: res.RefundID, At: now}
	switch {
	case err == nil && res.Status == payment.RefundSucceeded:
		o.Status = seckill.Refunded
	case err == nil && res.Status == payment.RefundFailed:
		o.Status, o.Error = seckill.RefundFailed, "the gateway refused the refund"
	case err == nil && res.Status == payment.RefundPending:
		o.Status, o.Error = seckill.RefundPending, "the gateway accepted the refund; not yet paid back"
		o.NextAttemptAt = now.Add(cfg.Backoff(f.Attempts))
	default:
		if err == nil {
			err = errors.New("the gateway answered an unknown refund status " + string(res.Status))
		}
		o.Status, o.Error = seckill.RefundPending, err.Error()
		o.NextAttemptAt = now.Add(cfg.Backoff(f.Attempts))
		if f.Attempts >= cfg.MaxAttempts {
			o.Status = seckill.RefundFailed
		}
	}
	return o
}
