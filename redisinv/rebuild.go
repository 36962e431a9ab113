package redisinv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/lock"
)

// Source is where a sale whose keys are missing is rebuilt from: the order store, whose sold
// units come from the synchronous payment transaction and so are never behind Redis'.
// seckill.OrderStore satisfies it.
type Source interface {
	Sale(ctx context.Context, id string) (seckill.Sale, int, error)
	Reservations(ctx context.Context, saleID string, statuses ...seckill.ReservationStatus) ([]seckill.Reservation, error)
}

// WithRebuild makes the engine rebuild a sale from src when its keys are missing from Redis
// (Redis restarted empty, a failover to a replica that had not received them, an eviction):
// the definition, sold units = the database's sales.sold (so available = sellable − paid), and
// every reservation the database knows, held ones keeping their expiry and queued ones their
// place. One instance rebuilds at a time (a lock from locks, named "seckill:rebuild:<sale>");
// until it is done every instance answers unavailable, never a guess. Without this option a
// missing sale is not found.
func WithRebuild(src Source, locks *lock.Client) Option {
	return func(e *Engine) {
		ctx, cancel := context.WithCancel(context.Background())
		e.rebuild = &rebuilder{e: e, src: src, locks: locks, ctx: ctx, cancel: cancel,
			slots: make(chan struct{}, maxRebuilds)}
	}
}

// errFenced means a newer rebuild took over the sale (its token no longer matches).
var errFenced = errors.New("redisinv: rebuild fenced off by a newer one")

// rebuilder runs at most one rebuild of each sale in this process, in the background; the
// lock makes it one across all processes.
type rebuilder struct {
	e      *Engine
	src    Source
	locks  *lock.Client
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	running map[string]bool
	stale   map[string]uint64    // sales found stale (version.go): the version that showed it
	failing map[string]backoff   // sales whose last rebuild failed: when to try again
	known   map[string]time.Time // sales the database was seen to have, and when
	wg      sync.WaitGroup
	slots   chan struct{} // bounds the rebuilds that run at once
}

// rebuildTimeout bounds one rebuild; a sale with very many reservations may need longer, and
// is then taken over by the next call that finds it still loading (exec). maxRebuilds bounds
// the rebuilds one process runs at once (a flushed Redis and a sale list that reads every
// sale would otherwise start one per sale ever created). knownFor is how long the database's
// word that a sale exists is trusted, so that the calls on a missing sale do not each ask it.
const (
	rebuildTimeout = 2 * time.Minute
	maxRebuilds    = 4
	knownFor       = time.Second
)

// A rebuild that fails is tried again after firstRetry, then after twice as long each time, up
// to maxRetry: a failure that will not go away (a definition the scripts refuse) costs one
// attempt a minute rather than one per call, and is logged once, not on every attempt.
const (
	firstRetry = 250 * time.Millisecond
	maxRetry   = time.Minute
)

// backoff is a failing sale's retry schedule.
type backoff struct {
	next  time.Time     // no rebuild starts before this
	delay time.Duration // the wait after the next failure is twice this
}

// missing answers a call on a sale whose keys are missing: not_found when the database does
// not know it either, else unavailable while a rebuild (started here unless one is running) puts it
// back.
func (rb *rebuilder) missing(ctx context.Context, saleID string) error {
	rb.mu.Lock()
	seen, ok := rb.known[saleID]
	rb.mu.Unlock()
	if !ok || time.Since(seen) > knownFor {
		if _, _, err := rb.src.Sale(ctx, saleID); err != nil {
			if isCode(err, seckill.CodeNotFound) {
				return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
			}
			return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeUnavailable,
				"sale %q is missing from Redis and the database cannot be read to restore it; retry shortly", saleID), err)
		}
		rb.mu.Lock()
		if rb.known == nil || len(rb.known) > 10_000 {
			rb.known = map[string]time.Time{}
		}
		rb.known[saleID] = time.Now()
		rb.mu.Unlock()
	}
	rb.start(saleID)
	return seckill.Errorf(seckill.CodeUnavailable, "sale %q is being restored from the database; retry shortly", saleID)
}

// startStale rebuilds a sale that is present in Redis but behind version want (version.go):
// the rebuild replaces its keys, under the same lock and fence as a missing sale's.
// It reports whether the sale was not already waiting for such a rebuild (to log it once).
func (rb *rebuilder) startStale(saleID string, want uint64) (first bool) {
	rb.mu.Lock()
	if rb.stale == nil || len(rb.stale) > 10_000 {
		rb.stale = map[string]uint64{}
	}
	old, had := rb.stale[saleID]
	rb.stale[saleID] = max(old, want)
	first = !had && !rb.running[saleID]
	rb.mu.Unlock()
	rb.start(saleID)
	return first
}

// takeStale returns and forgets the version that showed the sale stale, 0 if none.
func (rb *rebuilder) takeStale(saleID string) uint64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	v := rb.stale[saleID]
	delete(rb.stale, saleID)
	return v
}

// start rebuilds the sale in the background unless this process is rebuilding it already.
func (rb *rebuilder) start(saleID string) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.running[saleID] || rb.ctx.Err() != nil || time.Now().Before(rb.failing[saleID].next) {
		return
	}
	if rb.running == nil {
		rb.running = map[string]bool{}
	}
	rb.running[saleID] = true
	rb.wg.Go(func() {
		defer func() {
			rb.mu.Lock()
			delete(rb.running, saleID)
			rb.mu.Unlock()
		}()
		select {
		case rb.slots <- struct{}{}:
			defer func() { <-rb.slots }()
		case <-rb.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(rb.ctx, rebuildTimeout)
		defer cancel()
		start := time.Now()
		stale := rb.takeStale(saleID)
		n, err := rb.rebuild(ctx, saleID, stale)
		if err != nil && stale != 0 {
			rb.startStaleLater(saleID, stale)
		}
		switch {
		case errors.Is(err, lock.ErrNotAcquired):
			// Another instance holds the lock and is rebuilding.
		case err != nil:
			if delay, first := rb.failed(saleID); first {
				rb.e.log.Error("redisinv: rebuild failed; retrying with backoff, and logging again only once it succeeds",
					"sale", saleID, "retry_in", delay, "max_retry", maxRetry, "err", err)
			}
		default:
			if rb.recovered(saleID) {
				rb.e.log.Warn("redisinv: a rebuild that had failed has succeeded", "sale", saleID)
			}
			switch {
			case n >= 0 && stale != 0:
				rb.e.log.Warn("redisinv: sale was behind in Redis (it went back in time) and has been rebuilt from the database",
					"sale", saleID, "reservations", n, "took", time.Since(start))
			case n >= 0:
				rb.e.log.Warn("redisinv: sale was missing from Redis and has been rebuilt from the database",
					"sale", saleID, "reservations", n, "took", time.Since(start))
			}
		}
	})
}

// failed schedules the sale's next rebuild after a failure; first is true for the first failure
// since the last success.
func (rb *rebuilder) failed(saleID string) (delay time.Duration, first bool) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.failing == nil {
		rb.failing = map[string]backoff{}
	}
	b, seen := rb.failing[saleID]
	delay = min(max(2*b.delay, firstRetry), maxRetry)
	rb.failing[saleID] = backoff{next: time.Now().Add(delay), delay: delay}
	return delay, !seen
}

// recovered forgets the sale's failures and reports whether it had any.
func (rb *rebuilder) recovered(saleID string) bool {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	_, had := rb.failing[saleID]
	delete(rb.failing, saleID)
	return had
}

func (rb *rebuilder) close() {
	rb.mu.Lock()
	rb.cancel() // under mu, so that start sees it and starts nothing after the Wait below
	rb.mu.Unlock()
	rb.wg.Wait()
}

// rebuild restores one sale under its lock and returns how many reservations it restored,
// or -1 if the sale turned out to be there already (another instance rebuilt it first). stale,
// when not 0, is the version that showed the sale's keys present but behind (version.go):
// load.lua then replaces them if they are still below it.
func (rb *rebuilder) rebuild(ctx context.Context, saleID string, stale uint64) (int, error) {
	m := rb.locks.NewMutex("seckill:rebuild:" + saleID)
	lease, err := m.TryLock(ctx, 0, 0)
	if err != nil {
		return 0, err
	}
	defer func() { _ = m.Unlock(context.WithoutCancel(ctx)) }()
	// Stop if the lock is lost (the token fences off whatever a late call would still do).
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(lease.Context(), stop)()
	token := fmt.Sprintf("%d-%s", lease.Token(), rb.e.random())

	def, sold, err := rb.src.Sale(ctx, saleID)
	if err != nil {
		return 0, fmt.Errorf("read sale: %w", err)
	}
	rs, err := rb.src.Reservations(ctx, saleID)
	if err != nil {
		return 0, fmt.Errorf("read reservations: %w", err)
	}
	ver, err := rb.rebuildVersion(ctx, saleID, stale) // version.go
	if err != nil {
		return 0, fmt.Errorf("sale version: %w", err)
	}
	args := append(loadArgs(def, sold, "rebuild", token), strconv.FormatUint(ver, 10), strconv.FormatUint(stale, 10))
	r, err := rb.e.execRaw(ctx, rb.e.scripts.load, saleID, args...)
	if err != nil {
		return 0, err
	}
	switch r.code() {
	case "conflict":
		return -1, nil
	case "fenced":
		return 0, errFenced
	}
	if err := rb.recordVersion(ctx, saleID, ver); err != nil { // version.go
		return 0, fmt.Errorf("record sale version: %w", err)
	}
	if err := rb.restoreAll(ctx, saleID, rs, token); err != nil {
		return 0, err
	}
	r, err = rb.e.execRaw(ctx, rb.e.scripts.ready, saleID, token)
	if err != nil {
		return 0, err
	}
	if r.code() != "ok" {
		return 0, fmt.Errorf("finish rebuild: %s", r.code())
	}
	return len(rs), nil
}

// restoreAll sends the restores in pipelined chunks, so a sale with many reservations comes
// back in a few round trips.
func (rb *rebuilder) restoreAll(ctx context.Context, saleID string, rs []seckill.Reservation, token string) error {
	const chunk = 512
	keys := rb.e.keys(saleID)
	for start := 0; start < len(rs); start += chunk {
		batch := rs[start:min(start+chunk, len(rs))]
		execs := make([]rueidis.LuaExec, 0, len(batch))
		for _, res := range batch {
			args, err := restoreArgs(res, token)
			if err != nil {
				rb.e.log.Error("redisinv: rebuild skips a reservation it cannot restore", "reservation", res.ID, "err", err)
				continue
			}
			execs = append(execs, rueidis.LuaExec{Keys: keys, Args: append([]string{rb.e.clockArg()}, args...)})
		}
		for i, res := range rb.e.scripts.restore.lua.ExecMulti(ctx, rb.e.rdb, execs...) {
			msgs, err := res.ToArray()
			if err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			r, _, err := splitVersion(msgs)
			if err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			switch err := restoreResult(execs[i].Args[3], r); {
			case errors.Is(err, errFenced):
				return err
			case isCode(err, seckill.CodeConflict):
				// The database listed one id twice; the first restore stands.
			case err != nil:
				return err
			}
		}
	}
	return nil
}

// startStaleLater keeps a stale sale's version for the next attempt of a rebuild that failed
// (the next call on the sale finds it stale again anyway; this keeps the sweeper's and the
// consumer's calls from needing to).
func (rb *rebuilder) startStaleLater(saleID string, stale uint64) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.stale == nil {
		rb.stale = map[string]uint64{}
	}
	rb.stale[saleID] = max(rb.stale[saleID], stale)
}
