// Package leasedjob is the one shape of seckill's leased background jobs: the closer (payments
// to close at their gateway) and the refunder (money to pay back) are both a Worker that claims
// a batch of due jobs of its gateway under a lease, calls the gateway for each, and records what
// it answered, retrying with backoff what failed.
//
// Any number of workers (one per instance) may run on one database. A claim leases a job to
// one worker, so only one works on it at a time; a job whose worker died, or whose record
// failed, is claimed again when its lease ends. Every gateway call is idempotent (keyed by the
// payment id), so a job tried twice is done once. A job is only started while at least half
// its lease is left, and its call is given half the lease: the call ends before the lease does,
// and no other worker can be on the same job meanwhile.
package leasedjob

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/backoff"
	"github.com/seckill-go/seckill/internal/wait"
)

// Queue is the store contract of a leased job J with outcome O, the shape of both
// seckill.OpenPaymentStore's ClaimOpenPayments and RecordClose and seckill.RefundStore's
// ClaimRefunds and RecordRefund (sqlstore implements both pairs).
type Queue[J, O any] struct {
	// Claim atomically takes up to limit due jobs of the named gateway, leases them to owner
	// until now+lease, counts an attempt, and returns them. While a lease lives, no other claim
	// returns that job.
	Claim func(ctx context.Context, gateway, owner string, now time.Time, lease time.Duration, limit int) ([]J, error)
	// Record records the outcome of an attempt. Only the lease's owner may record, and only on a
	// job still to be done: anything else is a conflict and changes nothing.
	Record func(ctx context.Context, o O) error
}

// Config configures a Worker (closer.Config and refund.Config are this type). A zero field
// takes the default of the worker's kind (WithDefaults).
type Config struct {
	// Interval is the pause between two passes over the due jobs.
	Interval time.Duration
	// Lease is how long a claimed job is this worker's alone. A gateway call is given half of
	// it, so that the outcome is normally recorded while the lease lives.
	Lease time.Duration
	// BackoffBase and BackoffMax bound the pause before a retry: BackoffBase·2^(attempt-1), at
	// most BackoffMax, of which a random half is taken off (Backoff).
	BackoffBase, BackoffMax time.Duration
	// Batch is how many jobs one pass claims at most.
	Batch int
	// MaxAttempts is how many failed attempts of one job are made before the worker gives up on
	// it (what giving up means is the job's: a refund ends refund_failed, a close is recorded
	// closed with the reason).
	MaxAttempts int
	// Owner names this worker in the leases it takes (default its kind and a random id): unique
	// per worker, so that one worker's record can never land on another's claim.
	Owner  string
	Logger *slog.Logger
	Clock  seckill.Clock
}

// WithDefaults returns c with each zero duration and count taken from d, an empty Owner made
// of ownerPrefix and a random id, a nil Logger discarding, and a nil Clock the system's.
func (c Config) WithDefaults(d Config, ownerPrefix string) Config {
	if c.Interval <= 0 {
		c.Interval = d.Interval
	}
	if c.Lease <= 0 {
		c.Lease = d.Lease
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = d.BackoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = d.BackoffMax
	}
	if c.Batch <= 0 {
		c.Batch = d.Batch
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.Owner == "" {
		c.Owner = ownerPrefix + seckill.NewID()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = seckill.SystemClock{}
	}
	return c
}

// Backoff is the pause before the attempt after the given one (backoff.Jittered between
// BackoffBase and BackoffMax).
func (c Config) Backoff(attempt int) time.Duration {
	return backoff.Jittered(c.BackoffBase, c.BackoffMax, attempt)
}

// Job is what a Worker does with one kind of job J, whose outcome is O.
type Job[J, O any] struct {
	Queue Queue[J, O]
	// Try calls the gateway for one claimed job, under a context that ends with half the
	// lease, and returns the outcome to record and the gateway's error (nil if it answered).
	Try func(ctx context.Context, job J) (O, error)
	// Done logs what became of a job: its outcome, the gateway's error, and recordErr when the
	// outcome could not be recorded (the job is then tried again when its lease ends).
	Done func(job J, o O, callErr, recordErr error)
	// PassFailed names a failed pass in its background.Report, e.g. "refunder pass".
	PassFailed string
	// Slow is the warning logged when the rest of a batch is left to its leases behind a slow
	// gateway.
	Slow string
}

// Worker works one kind of leased job. Build it with New; run it as a background.Service.
type Worker[J, O any] struct {
	name    string // kind:gateway
	gateway string
	job     Job[J, O]
	cfg     Config
}

// New returns a worker of the given kind ("closer", "refunder") that claims and works the jobs
// of gateway with cfg, whose zero fields take the kind's defaults (Config.WithDefaults; an
// empty Owner is the kind and a random id). Its name in logs and metrics is kind:gateway.
func New[J, O any](kind, gateway string, cfg, defaults Config, job Job[J, O]) *Worker[J, O] {
	return &Worker[J, O]{name: kind + ":" + gateway, gateway: gateway, job: job, cfg: cfg.WithDefaults(defaults, kind+"-")}
}

// Config is the worker's configuration, its defaults filled in.
func (w *Worker[J, O]) Config() Config { return w.cfg }

// Name names the worker in logs and metrics (background.Service): its kind and its gateway,
// e.g. "closer:stripe".
func (w *Worker[J, O]) Name() string { return w.name }

// Run makes a pass every Interval until ctx is done, then returns nil (a background.Service;
// its exit is immediate: a job cut short by ctx is claimed again when its lease ends). A pass
// that fails (the database is down) is reported (background.Report) and tried again at the
// next tick: nothing is lost, the jobs stay in the database.
func (w *Worker[J, O]) Run(ctx context.Context) error {
	wait.Every(ctx, w.cfg.Interval, func(ctx context.Context) {
		if _, err := w.RunOnce(ctx); err != nil && ctx.Err() == nil {
			background.Report(ctx, fmt.Errorf("%s: %w", w.job.PassFailed, err))
		}
	})
	return nil
}

// RunOnce claims the jobs due now (up to Batch) and works on each; it returns how many it
// claimed. Claiming a full batch means more may be due: Run's next tick takes them.
//
// A gateway call may take half the lease, so a job is only started while at least half of its
// lease is left: then its call ends before the lease does, and no other instance can be working
// on it at the same time. The rest of a batch that a slow gateway held up is left to its
// leases, and claimed again when they end.
func (w *Worker[J, O]) RunOnce(ctx context.Context) (int, error) {
	claimedAt := w.cfg.Clock.Now()
	due, err := w.job.Queue.Claim(ctx, w.gateway, w.cfg.Owner, claimedAt, w.cfg.Lease, w.cfg.Batch)
	for i, j := range due {
		if left := w.cfg.Lease - w.cfg.Clock.Now().Sub(claimedAt); left < w.cfg.Lease/2 {
			w.cfg.Logger.Warn(w.job.Slow, "left", len(due)-i)
			break
		}
		w.work(ctx, j)
	}
	return len(due), err
}

// work calls the gateway for one claimed job and records what it answered.
func (w *Worker[J, O]) work(ctx context.Context, j J) {
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.Lease/2)
	o, err := w.job.Try(callCtx, j)
	cancel()
	w.job.Done(j, o, err, w.job.Queue.Record(ctx, o))
}
