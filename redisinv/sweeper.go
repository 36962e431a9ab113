package redisinv

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/lock"
)

// SaleLister lists the ids of the sales to work on (the order store's sales, through
// service.Service.LiveSaleIDs). The consumer calls it about once a second, the sweeper's
// reconcile pass every few seconds, on one instance.
type SaleLister func(ctx context.Context) ([]string, error)

// listEvery is how often the consumer looks for new sales.
const listEvery = time.Second

const (
	// sweepLockName is the lock of the sweeper's reconcile pass: one for the deployment.
	sweepLockName = "seckill:sweep"
	// reconcileEvery is how often the instance that holds sweepLockName sweeps every listed sale
	// that may hold something no instance alive knows of (see Sweeper).
	reconcileEvery = 5 * time.Second
	// tryLeadEvery is how often an instance that does not hold sweepLockName tries to take it.
	tryLeadEvery = time.Second
	// sweepRetry is how soon a sale whose sweep failed is swept again.
	sweepRetry = time.Second
	// sweepParallel bounds the reclaims of one pass in flight at once (rueidis pipelines them).
	sweepParallel = 16
)

// Sweeper returns the engine's sweeper, a background.Service named "sweeper": it reclaims
// expired holds when they come due, so that counts stay fresh without traffic (invariant 8 of
// docs/MODEL.md), at a cost that follows what buyers do, not how many sales exist
// (docs/DECISIONS.md "Sweeping by due time"). Correctness never depends on it: every script
// reclaims first.
//
// Each instance keeps a due-time index of sales, in memory: every reclaim's reply says when its
// sale next needs a sweep (its earliest hold's expiry, the end of its window while buyers queue,
// a transfer between segments left unfinished), and the sale is swept then, at most once per
// interval (250 ms). A sale this instance changed (a buy, a cancel, a payment, a restock, a
// rebuild: any script but the reads) is swept at the next tick, which puts it in the index. So
// the holds made through an instance are swept by that instance on time, and a sale with nothing
// due costs nothing.
//
// What no live instance knows of (the holds of an instance that died, or restarted) is found by
// the reconcile pass: the holder of the lock "seckill:sweep" from locks (one lock for the
// deployment, taken by another instance within its lease when the holder dies; instances that do
// not hold it try once a second) lists the live sales every reconcileEvery (5 s), reads the state
// of each one that can have holds (one plain read, sweepprobe.go) and sweeps those on which
// something may be due. A sale that has not started is skipped until its start, one that has
// ended with nothing due is skipped for good. A listed sale whose keys are missing, or whose
// version is below one this instance has seen, is swept, which hands it to the rebuilder (a
// flushed Redis is noticed without traffic). nil locks: this instance reconciles alone. Its exit: the lock is released, then Run
// returns nil. A failed listing, lock or reclaim is reported (background.Report); a failed
// reclaim is tried again a second later.
func (e *Engine) Sweeper(interval time.Duration, list SaleLister, locks *lock.Client) background.Service {
	return &sweeper{e: e, touched: e.touched.take, interval: interval, list: list, locks: locks,
		reconcileEvery: reconcileEvery, tryLeadEvery: tryLeadEvery}
}

// sweeper sees of the engine only its reclaim, its probe and the sales this instance changed.
type sweeper struct {
	e              sweepHost
	touched        func() []string
	interval       time.Duration
	list           SaleLister
	all            SaleLister // every sale, for the leftover look (cooling.go); nil: none
	locks          *lock.Client
	reconcileEvery time.Duration
	tryLeadEvery   time.Duration
	// passed, if set (tests), is called after each pass with whether it reconciled.
	passed func(reconciled bool)
}

func (s *sweeper) Name() string { return "sweeper" }

func (s *sweeper) Run(ctx context.Context) error {
	idx := newDueIndex()
	cool := newCooling()
	var leader *sweepLeader
	if s.locks != nil {
		leader = &sweepLeader{m: s.locks.NewMutex(sweepLockName)}
		defer leader.release()
	}
	var tried, reconciled, noted time.Time
	scanned := false // this leadership has looked for leftover keys (cooling.go leftovers)
	wait.Every(ctx, s.interval, func(ctx context.Context) {
		now := time.Now()
		if now.Sub(noted) >= s.reconcileEvery {
			noted = now
			cool.noted(s.e.notedSales(now), now)
		}
		for _, id := range s.touched() {
			idx.schedule(id, now)
		}
		leads := leader == nil
		if leader != nil && (leader.lease != nil || now.Sub(tried) >= s.tryLeadEvery) {
			tried = now
			leads = leader.lead(ctx)
		}
		reconcile := leads && (reconciled.IsZero() || now.Sub(reconciled) >= s.reconcileEvery)
		if reconcile {
			reconciled = now
			s.reconcile(ctx, idx, cool, now)
			s.e.evictCold(now)
			if !scanned {
				scanned = s.leftovers(ctx, cool, now)
			}
		}
		if !leads {
			scanned = false // the next leadership looks again: the holder before may have died mid-way
		}
		s.sweep(ctx, idx, cool, idx.due(now), now)
		s.cool(ctx, idx, cool, now)
		if s.passed != nil {
			s.passed(reconcile)
		}
	})
	return nil
}

// sweepHost is what the sweeper sees of the engine.
type sweepHost interface {
	reclaimDue(ctx context.Context, saleID string) (int, sweepNext, error)
	probeSales(ctx context.Context, ids []string, now time.Time) ([]saleProbe, error)
	cool(ctx context.Context, saleID string) (coolOutcome, time.Duration, error) // cold.go
	evictCold(now time.Time)
	existing(ctx context.Context, ids []string) ([]string, error) // cooling.go
	notedSales(now time.Time) map[string]time.Time                // notify.go
}

// reconcile probes every listed sale that can have holds (sweepprobe.go) and schedules a
// sweep now of those on which something may be due.
func (s *sweeper) reconcile(ctx context.Context, idx *dueIndex, cool *cooling, now time.Time) {
	ids, err := s.list(ctx)
	if err != nil {
		background.Report(ctx, fmt.Errorf("list sales: %w", err))
		return
	}
	idx.keepQuiet(ids)
	cool.left(ids, now)
	probe := make([]string, 0, len(ids))
	for _, id := range ids {
		if !idx.quiet(id, now) {
			probe = append(probe, id)
		}
	}
	got, err := s.e.probeSales(ctx, probe, now)
	if err != nil && ctx.Err() == nil {
		background.Report(ctx, fmt.Errorf("reconcile: %w", err))
	}
	if err != nil {
		return
	}
	for i, id := range probe {
		if got[i].sweep {
			idx.schedule(id, now)
		} else {
			idx.file(id, now, sweepNext{due: -1, quiet: got[i].quiet}, s.interval)
		}
	}
}

// sweep reclaims the sales ids, sweepParallel at a time, and files what each reply says.
func (s *sweeper) sweep(ctx context.Context, idx *dueIndex, cool *cooling, ids []string, now time.Time) {
	type result struct {
		next sweepNext
		err  error
	}
	results := make([]result, len(ids))
	sweepEach(len(ids), func(i int) { _, results[i].next, results[i].err = s.e.reclaimDue(ctx, ids[i]) })
	for i, id := range ids {
		switch err := results[i].err; {
		case err == nil:
			idx.file(id, now, results[i].next, s.interval)
			if next := results[i].next; next.quiet < 0 && next.due < 0 {
				cool.add(id, now) // ended with nothing due: cools once its window is over
			}
		case isCode(err, seckill.CodeNotFound):
			idx.drop(id) // gone from Redis and the database alike (deleted)
		case ctx.Err() != nil:
			return // stopping: the pass was cut short, not failed
		default:
			background.Report(ctx, fmt.Errorf("sweep sale %s: %w", id, err))
			idx.schedule(id, now.Add(sweepRetry))
		}
	}
}

// touchedSales are the sales whose state this instance's script calls may have changed since
// the sweeper last took them (Engine.touched): each gets a sweep at the next tick, whose reply
// tells when the sale next comes due.
type touchedSales struct {
	mu sync.Mutex
	m  map[string]struct{}
}

// note records a call of s on a sale (or a segment's tag) that answered code. The reads and
// the reclaim (whose reply the sweeper files itself) are not recorded, nor a sale not loaded.
func (t *touchedSales) note(saleID string, s *script, code string) {
	switch {
	case code == "not_loaded", s.name == "reclaim", s.name == "sale", s.name == "reservation", s.name == "trim", s.name == "cool":
		return
	}
	saleID, _, _ = strings.Cut(saleID, "#")
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]struct{}{}
	}
	t.m[saleID] = struct{}{}
	t.mu.Unlock()
}

// take returns the sales recorded since the last take and forgets them.
func (t *touchedSales) take() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) == 0 {
		return nil
	}
	ids := make([]string, 0, len(t.m))
	for id := range t.m {
		ids = append(ids, id)
	}
	clear(t.m)
	return ids
}

// dueIndex is an instance's due-time index: a min-heap of (time, sale) with one entry per
// sale, and the times until which the sales it has seen cannot get a new hold.
type dueIndex struct {
	h       dueHeap
	at      map[string]*dueEntry
	quietTo map[string]time.Time // zero time: quiet for good (ended)
}

type dueEntry struct {
	sale string
	at   time.Time
	i    int // index in the heap
}

func newDueIndex() *dueIndex {
	return &dueIndex{at: map[string]*dueEntry{}, quietTo: map[string]time.Time{}}
}

// schedule makes the sale due at t, or earlier if it already was.
func (x *dueIndex) schedule(sale string, t time.Time) {
	if e, ok := x.at[sale]; ok {
		if t.Before(e.at) {
			e.at = t
			heap.Fix(&x.h, e.i)
		}
		return
	}
	e := &dueEntry{sale: sale, at: t}
	x.at[sale] = e
	heap.Push(&x.h, e)
}

// drop takes the sale out of the index.
func (x *dueIndex) drop(sale string) {
	if e, ok := x.at[sale]; ok {
		heap.Remove(&x.h, e.i)
		delete(x.at, sale)
	}
	delete(x.quietTo, sale)
}

// due takes out of the heap and returns the sales due at now.
func (x *dueIndex) due(now time.Time) []string {
	var ids []string
	for len(x.h) > 0 && !x.h[0].at.After(now) {
		e := heap.Pop(&x.h).(*dueEntry)
		delete(x.at, e.sale)
		ids = append(ids, e.sale)
	}
	return ids
}

// file records a sweep's reply at now: the sale is due again at its due time, but not before
// one interval (the sweeper's rate per sale), or not at all; and when it can get holds.
func (x *dueIndex) file(sale string, now time.Time, next sweepNext, interval time.Duration) {
	if next.due >= 0 {
		x.schedule(sale, now.Add(max(next.due, interval)))
	}
	switch {
	case next.quiet > 0:
		x.quietTo[sale] = now.Add(next.quiet)
	case next.quiet < 0:
		x.quietTo[sale] = time.Time{}
	default:
		delete(x.quietTo, sale)
	}
}

// quiet reports whether the sale cannot have holds that no instance knows of: it has not
// started yet, or it has ended with nothing due (the holds it had then were in the index).
func (x *dueIndex) quiet(sale string, now time.Time) bool {
	t, ok := x.quietTo[sale]
	if !ok {
		return false
	}
	if t.IsZero() {
		_, due := x.at[sale]
		return !due
	}
	return now.Before(t)
}

// keepQuiet forgets what it knew of the quiet of sales not in ids (no longer listed).
func (x *dueIndex) keepQuiet(ids []string) {
	keep := make(map[string]bool, len(ids))
	for _, id := range ids {
		keep[id] = true
	}
	for id := range x.quietTo {
		if !keep[id] {
			delete(x.quietTo, id)
		}
	}
}

// dueHeap orders entries by time (container/heap).
type dueHeap []*dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *dueHeap) Push(x any) {
	e := x.(*dueEntry)
	e.i = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// sweepLeader is this instance's claim to the reconcile pass.
type sweepLeader struct {
	m     *lock.Mutex
	lease *lock.Lease
}

// lead reports whether this instance holds the lock now, taking it if it is free.
func (l *sweepLeader) lead(ctx context.Context) bool {
	if l.lease != nil {
		select {
		case <-l.lease.Done(): // lost: the lease ran out or the key vanished (a flushed Redis)
			l.lease = nil
		default:
			return true
		}
	}
	lease, err := l.m.TryLock(ctx, 0, 0)
	if err != nil {
		if !errors.Is(err, lock.ErrNotAcquired) { // another instance holds it: not an error
			background.Report(ctx, fmt.Errorf("take the sweep lock: %w", err))
		}
		return false
	}
	l.lease = lease
	return true
}

func (l *sweepLeader) release() {
	if l.lease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.m.Unlock(ctx)
	}
}

// sweepEach runs f(0) … f(n-1), sweepParallel at a time (rueidis pipelines their calls), and
// returns when all have.
func sweepEach(n int, f func(i int)) {
	sem := make(chan struct{}, sweepParallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}
