package redisinv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/time/rate"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/logsummary"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/pipeline"
)

// Source is where a sale whose keys are missing is rebuilt from: the order store, whose sold
// units come from the synchronous payment transaction and so are never behind Redis'.
// seckill.OrderStore satisfies it.
type Source interface {
	Sale(ctx context.Context, id string) (seckill.Sale, int, error)
	Reservations(ctx context.Context, saleID string, statuses ...seckill.ReservationStatus) ([]seckill.Reservation, error)
	// Reservation answers a reservation of a cold sale (cold.go).
	Reservation(ctx context.Context, id string) (seckill.Reservation, error)
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
			slots: make(chan struct{}, maxRebuilds), urgentSlots: make(chan struct{}, maxUrgentRebuilds),
			rate: rate.NewLimiter(defaultRecoveryRate, maxRebuilds)}
	}
}

// rebuildHost is all the rebuild sees of the engine: its core (script calls, keys, the clock
// argument, the client, the scripts), a token's random half, the logger, the versions seen
// (version.go), and the segments' tags and forgetting (segbook.go).
type rebuildHost interface {
	execRaw(ctx context.Context, s *script, saleID string, args ...string) (reply, error)
	run(ctx context.Context, s *script, keys, argv []string) ([]rueidis.RedisMessage, error)
	clockArg() string
	keys(saleID string) []string
	streamKey(tag string) string
	scriptSet() *scriptSet
	redis() rueidis.Client
	random() string
	logger() *slog.Logger
	summary() *logsummary.Summarizer
	versionFloor(saleID string) versionMark
	streamTags(saleID string, n int) []string
	segmentsRebuilt(saleID string)
	newIncarnation(saleID string)
	segmentCounts(saleID string) []int
	incarnationOf(ctx context.Context, id string) (string, bool)
	now() time.Time
	load(ctx context.Context, def seckill.Sale, sold int) error
	rebuildRoom(ctx context.Context, def seckill.Sale, token string) error
}

// errFenced means a newer rebuild took over the sale (its token no longer matches).
var errFenced = errors.New("redisinv: rebuild fenced off by a newer one")

// rebuilder runs at most one rebuild of each sale in this process, in the background; the
// lock makes it one across all processes.
type rebuilder struct {
	e      rebuildHost
	src    Source
	locks  *lock.Client
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	running map[string]*rebuildJob
	stale   map[string]uint64    // sales found stale (version.go): the version that showed it
	lost    map[string]bool      // segmented sales that lost a segment (segment.go segmentMissing)
	failing map[string]backoff   // sales whose last rebuild failed: when to try again
	known   map[string]time.Time // sales the database was seen to have, and when
	wg      sync.WaitGroup
	slots   chan struct{} // bounds the background's rebuilds that run at once
	// urgentSlots bounds the rebuilds that calls other than the background's want (urgency),
	// which never wait behind the background's.
	urgentSlots chan struct{}
	rate        *rate.Limiter // the background's rebuilds per second (WithRecoveryRate)
	cold        coldCache     // the cold sales read lately (cold.go)
	loads       atomic.Uint64 // rebuilds that were cold loads (coldLoad), not losses
	flat        bool          // withoutUrgency: every rebuild queues as the background's (tests)
}

// rebuildTimeout bounds one rebuild; a sale with very many reservations may need longer, and
// is then taken over by the next call that finds it still loading (exec). maxRebuilds bounds
// the rebuilds one process runs at once (a flushed Redis and a sale list that reads every
// sale would otherwise start one per sale ever created). knownFor is how long the database's
// word that a sale exists is trusted, so that the calls on a missing sale do not each ask it.
const (
	rebuildTimeout    = 2 * time.Minute
	maxRebuilds       = 4
	maxUrgentRebuilds = 8
	knownFor          = time.Second
)

// defaultRecoveryRate is how many rebuilds per second the background starts (WithRecoveryRate):
// after a loss of every sale, one rebuild reads the sale's row, its reservations and versions
// (a handful of indexed queries), so 200 a second is a light load for the database and puts
// 5 000 sales back in under 30 s. touchWait is how long a buyer's call on a missing sale waits
// for its rebuild (which it moves to the front) before it answers 503.
const (
	defaultRecoveryRate = 200
	touchWait           = time.Second
)

// WithRecoveryRate sets how many rebuilds per second the background starts after a loss (the
// sweeper's calls find the sales missing), to what the database can bear; the sales that calls
// want are rebuilt first and are not counted. perSecond ≤ 0 keeps the default, 200.
func WithRecoveryRate(perSecond float64) Option {
	return func(e *Engine) { e.recoveryRate = perSecond }
}

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
//
// A touch (urgencyOf) waits up to touchWait for the rebuild, which it moves before the
// background's, and answers errRebuilt when it has finished: the caller tries its call again.
//
// A call that a cold sale answers without its keys (coldAnswers: a read, or a buy, which a cold
// sale refuses by its window) is answered from the database when it shows the sale cold: the
// error is then a *coldSale for a read (cold.go), the window's error for a buy, and nothing is
// rebuilt.
func (rb *rebuilder) missing(ctx context.Context, saleID string, u urgency, c coldAnswer) error {
	if rb.flat {
		u = whenIdle
	}
	// exists: coldOf has just found the sale in the database (or in its cache of it), so the
	// check below need not ask the database again.
	exists := false
	if c != coldNone {
		cs, err := rb.coldOf(ctx, saleID)
		switch {
		case isCode(err, seckill.CodeNotFound):
			return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
		case err != nil:
			return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeUnavailable,
				"sale %q is not in Redis and the database cannot be read; retry shortly", saleID), err)
		case cs != nil && c == coldRead:
			return cs
		case cs != nil:
			if err := cs.sale.WindowError(rb.e.now()); err != nil {
				return err
			}
		}
		exists = true
	}
	rb.mu.Lock()
	seen, ok := rb.known[saleID]
	rb.mu.Unlock()
	if !ok || time.Since(seen) > knownFor {
		if !exists {
			if _, _, err := rb.src.Sale(ctx, saleID); err != nil {
				if isCode(err, seckill.CodeNotFound) {
					return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
				}
				return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeUnavailable,
					"sale %q is missing from Redis and the database cannot be read to restore it; retry shortly", saleID), err)
			}
		}
		rb.mu.Lock()
		if rb.known == nil || len(rb.known) > 10_000 {
			rb.known = map[string]time.Time{}
		}
		rb.known[saleID] = time.Now()
		rb.mu.Unlock()
	}
	j := rb.start(saleID, u)
	if u == touch && j != nil && rb.await(ctx, j) {
		return errRebuilt
	}
	return seckill.Errorf(seckill.CodeUnavailable, "sale %q is being restored from the database; retry shortly", saleID)
}

// withoutUrgency makes every rebuild queue as the background's, and no call wait for one: the
// engine before recovery by demand, for the negative control of the tests.
func withoutUrgency() Option {
	return func(e *Engine) {
		if e.rebuild != nil {
			e.rebuild.flat = true
		}
	}
}

// errRebuilt tells exec that the sale its call found missing has been rebuilt meanwhile.
var errRebuilt = errors.New("redisinv: rebuilt; call again")

// await waits up to touchWait (and ctx) for the rebuild, and reports whether it loaded the sale.
func (rb *rebuilder) await(ctx context.Context, j *rebuildJob) bool {
	t := time.NewTimer(touchWait)
	defer t.Stop()
	select {
	case <-j.done:
		return j.ok
	case <-t.C:
	case <-ctx.Done():
	}
	return false
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
	first = !had && rb.running[saleID] == nil
	rb.mu.Unlock()
	rb.start(saleID, read)
	return first
}

// startLost rebuilds a segmented sale one of whose segments is missing (or went back in time)
// while the sale is still split: the whole sale, as a one-segment sale (stopSegments).
// It reports whether the sale was not already waiting for such a rebuild (to log it once).
func (rb *rebuilder) startLost(saleID string) (first bool) {
	rb.mu.Lock()
	if rb.lost == nil || len(rb.lost) > 10_000 {
		rb.lost = map[string]bool{}
	}
	first = !rb.lost[saleID] && rb.running[saleID] == nil
	rb.lost[saleID] = true
	rb.mu.Unlock()
	rb.start(saleID, read)
	return first
}

// takeLost reports and forgets whether the sale lost a segment.
func (rb *rebuilder) takeLost(saleID string) bool {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	lost := rb.lost[saleID]
	delete(rb.lost, saleID)
	return lost
}

// takeStale returns and forgets the version that showed the sale stale, 0 if none.
func (rb *rebuilder) takeStale(saleID string) uint64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	v := rb.stale[saleID]
	delete(rb.stale, saleID)
	return v
}

// urgency is how soon a sale's rebuild is wanted, from what found the sale missing: the
// background's calls (the sweeper's reclaims) queue at the recovery rate; a read (a sale's
// page, a list) goes before them; a buyer's or an admin's change goes first too and waits for
// the rebuild up to touchWait instead of answering 503 at once.
type urgency int

const (
	whenIdle urgency = iota // rate-limited (WithRecoveryRate), after every urgent one
	read                    // urgent: its own slots, no rate limit
	touch                   // urgent, and the call waits for it (missing)
)

// urgencyOf is the urgency of a rebuild that a call of script s found needed.
func urgencyOf(s *script) urgency {
	if s.room && s.name != "room_join" { // a buyer joining is a touch; the room's others read
		return read
	}
	switch s.name {
	case "reclaim", "trim":
		return whenIdle
	case "sale", "segment":
		return read
	}
	return touch
}

// rebuildJob is one sale's rebuild in this process: queued, then running, then done.
type rebuildJob struct {
	promote  chan struct{} // closed when a read or a touch wants it while it waits as background
	promoted bool          // under rebuilder.mu
	done     chan struct{} // closed when it has finished (ok tells how)
	ok       bool          // the sale is loaded (set before done is closed)
}

// start rebuilds the sale in this process unless it is rebuilding it already, and returns the
// rebuild (nil when none starts: shutting down, or backing off after failures). A rebuild that
// waits behind the background's is moved to the urgent slots when an urgent call wants it.
func (rb *rebuilder) start(saleID string, u urgency) *rebuildJob {
	if rb.flat {
		u = whenIdle
	}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if j := rb.running[saleID]; j != nil {
		if u > whenIdle && !j.promoted {
			j.promoted = true
			close(j.promote)
		}
		return j
	}
	if rb.ctx.Err() != nil || time.Now().Before(rb.failing[saleID].next) {
		return nil
	}
	if rb.running == nil {
		rb.running = map[string]*rebuildJob{}
	}
	j := &rebuildJob{promote: make(chan struct{}), done: make(chan struct{}), promoted: u > whenIdle}
	if j.promoted {
		close(j.promote)
	}
	rb.running[saleID] = j
	rb.wg.Go(func() {
		defer func() {
			rb.mu.Lock()
			delete(rb.running, saleID)
			rb.mu.Unlock()
			close(j.done)
		}()
		release, ok := rb.slot(j)
		if !ok {
			return
		}
		defer release()
		ctx, cancel := context.WithTimeout(rb.ctx, rebuildTimeout)
		defer cancel()
		start := time.Now()
		stale, lost := rb.takeStale(saleID), rb.takeLost(saleID)
		n, cold, err := rb.rebuild(ctx, saleID, stale, lost)
		if err != nil && stale != 0 {
			rb.startStaleLater(saleID, stale)
		}
		j.ok = err == nil
		rb.report(saleID, n, cold, err, stale, lost, time.Since(start))
	})
	return j
}

// slot waits for the job's turn: an urgent slot at once for an urgent job (or one promoted while
// it waits), else a background slot and the recovery rate's permission. It returns the slot's
// release, and false when the rebuilder is closing.
func (rb *rebuilder) slot(j *rebuildJob) (release func(), ok bool) {
	urgent := func() (func(), bool) {
		select {
		case rb.urgentSlots <- struct{}{}:
			return func() { <-rb.urgentSlots }, true
		case <-rb.ctx.Done():
			return nil, false
		}
	}
	select {
	case <-j.promote:
		return urgent()
	default:
	}
	select {
	case <-j.promote:
		return urgent()
	case rb.slots <- struct{}{}:
	case <-rb.ctx.Done():
		return nil, false
	}
	ctx, cancel := context.WithCancel(rb.ctx)
	defer cancel()
	go func() {
		select {
		case <-j.promote:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := rb.rate.Wait(ctx); err != nil {
		<-rb.slots
		if rb.ctx.Err() != nil {
			return nil, false
		}
		return urgent() // promoted while it waited for the rate
	}
	return func() { <-rb.slots }, true
}

// report logs a rebuild's outcome. Failures are summarized (logsummary): a loss of thousands
// of sales that cannot be rebuilt yet costs a line per period, with the count, not a line per
// sale and attempt. A rebuild that succeeds is logged once per sale, as it happens: the record
// of what came back from the database (an operator, and the fault tests, count them), which a
// summary would fold into a count written only with the next success after its period.
func (rb *rebuilder) report(saleID string, n int, cold bool, err error, stale uint64, lost bool, took time.Duration) {
	ctx := context.Background()
	switch {
	case errors.Is(err, lock.ErrNotAcquired):
		// Another instance holds the lock and is rebuilding.
	case err != nil:
		if delay, first := rb.failed(saleID); first {
			rb.e.summary().Log(ctx, slog.LevelError, "rebuild failed", "redisinv: rebuild failed; retrying with backoff, and logging again only once it succeeds",
				"sale", saleID, "retry_in", delay, "max_retry", maxRetry, "err", err)
		}
	default:
		log := rb.e.logger()
		if rb.recovered(saleID) {
			log.Warn("redisinv: a rebuild that had failed has succeeded", "sale", saleID)
		}
		switch {
		case n >= 0 && lost:
			log.Warn("redisinv: a segment of the sale was missing from Redis; the sale has been rebuilt from the database as a one-segment sale",
				"sale", saleID, "reservations", n, "took", took)
		case n >= 0 && stale != 0:
			log.Warn("redisinv: sale was behind in Redis (it went back in time) and has been rebuilt from the database",
				"sale", saleID, "reservations", n, "took", took)
		case n >= 0 && cold:
			// Not a loss: a sale preheated, or a cold one changed again (docs/MODEL.md "Hot
			// and cold sales"). Counted, not logged: a day of sales does this thousands of times.
			rb.loads.Add(1)
		case n >= 0:
			log.Warn("redisinv: sale was missing from Redis and has been rebuilt from the database",
				"sale", saleID, "reservations", n, "took", took)
		}
	}
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
// load.lua then replaces them if they are still below it. lost says a segment of the sale is
// missing while it is split (segment.go): a segmented sale is rebuilt whole, as a one-segment
// sale (stopSegments).
//
// Its scripts: load.lua in mode 'rebuild' (loadArgs, then the starting version and the stale
// one), restore.lua per reservation (restoreArgs, with the token), then ready.lua: KEYS the
// sale's eight keys; ARGV [1] clock, [2] the rebuild's token. Reply {'ok'}, {'not_loaded'} or
// {'fenced'} (not being rebuilt, or by another token).
func (rb *rebuilder) rebuild(ctx context.Context, saleID string, stale uint64, lost bool) (n int, cold bool, err error) {
	m := rb.locks.NewMutex("seckill:rebuild:" + saleID)
	lease, err := m.TryLock(ctx, 0, 0)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = m.Unlock(context.WithoutCancel(ctx)) }()
	// Stop if the lock is lost (the token fences off whatever a late call would still do).
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(lease.Context(), stop)()
	token := fmt.Sprintf("%d-%s", lease.Token(), rb.e.random())

	streams, fine, err := rb.stopSegments(ctx, saleID, token, stale, lost)
	if err != nil {
		return 0, false, fmt.Errorf("stop the segments: %w", err)
	}
	if fine {
		return -1, false, nil
	}
	def, sold, err := rb.src.Sale(ctx, saleID)
	if err != nil {
		return 0, false, fmt.Errorf("read sale: %w", err)
	}
	rs, err := rb.src.Reservations(ctx, saleID)
	if err != nil {
		return 0, false, fmt.Errorf("read reservations: %w", err)
	}
	def.Segments = rb.createdSegments(ctx, saleID)
	if len(rs) == 0 && stale == 0 && !lost && def.Segments > 1 && rb.e.versionFloor(saleID).floor == 0 {
		// A segmented sale never loaded (created before its preheat: docs/MODEL.md "Hot and
		// cold sales") is loaded as it was defined, in segments; a rebuild would make it one.
		switch err := rb.e.load(ctx, def, sold); {
		case isCode(err, seckill.CodeConflict):
			return -1, false, nil
		case err != nil:
			return 0, false, err
		}
		return 0, coldLoad(def, rs, rb.e.now()), nil
	}
	ver, err := rb.rebuildVersion(ctx, saleID, stale) // version.go
	if err != nil {
		return 0, false, fmt.Errorf("sale version: %w", err)
	}
	args := withIncarnation(append(loadArgs(def, sold, "rebuild", token), strconv.FormatUint(ver, 10), strconv.FormatUint(stale, 10)), def)
	r, err := rb.e.execRaw(ctx, rb.e.scriptSet().load, saleID, args...)
	if err != nil {
		return 0, false, err
	}
	switch r.code() {
	case "conflict":
		return -1, false, nil
	case "fenced":
		return 0, false, errFenced
	}
	if err := rb.recordVersion(ctx, saleID, ver); err != nil { // version.go
		return 0, false, fmt.Errorf("record sale version: %w", err)
	}
	if streams > 1 { // the consumers and the export go on reading every segment's stream
		c := rb.e.redis().B().Hset().Key(rb.e.keys(saleID)[0]).FieldValue().FieldValue("streams", itoa(streams)).Build()
		if err := rb.e.redis().Do(ctx, c).Error(); err != nil {
			return 0, false, errUnavailable(fmt.Errorf("record the segments' streams: %w", err))
		}
	}
	if err := rb.restoreAll(ctx, saleID, rs, token); err != nil {
		return 0, false, err
	}
	// The room, from its journal, while the sale is still loading: no one joins an empty room
	// in between (roomrestore.go).
	if err := rb.e.rebuildRoom(ctx, def, token); err != nil {
		return 0, false, fmt.Errorf("restore the waiting room: %w", err)
	}
	r, err = rb.e.execRaw(ctx, rb.e.scriptSet().ready, saleID, token)
	if err != nil {
		return 0, false, err
	}
	if r.code() != "ok" {
		return 0, false, fmt.Errorf("finish rebuild: %s", r.code())
	}
	rb.e.segmentsRebuilt(saleID)
	return len(rs), coldLoad(def, rs, rb.e.now()), nil
}

// stopSegments prepares the rebuild of a sale that is or was segmented (docs/DECISIONS.md
// "Segmented stock", "A lost segment"): no segment may change while the rebuild reads the
// database, and every event the segments wrote must be in the database before it is read, so
// that the holds they made are restored. Segment 0, if split, is halted (segment.lua 'halt':
// loading under this rebuild's token, when a segment is lost or its version is below stale);
// the other segments' state is removed, so that they can never sell again (a call there finds
// them missing, then segment 0 loading, then a one-segment sale); then the entries left in
// every segment's stream are applied to the order store when the source is one (a Sink), as
// the consumer would store them. The streams stay, for the consumers and the events. It returns
// how many segments' streams the sale has (1 for a sale that never had segments), and fine when
// segment 0 is a segmented sale that is not to be rebuilt (neither lost nor stale).
func (rb *rebuilder) stopSegments(ctx context.Context, saleID, token string, stale uint64, lost bool) (streams int, fine bool, err error) {
	// Not execRaw: its version check would refuse the reply of the stale sale being rebuilt.
	msgs, err := rb.e.run(ctx, rb.e.scriptSet().segment, rb.e.keys(saleID),
		[]string{rb.e.clockArg(), "halt", token, strconv.FormatUint(stale, 10), boolArg(lost)})
	if err != nil {
		return 0, false, errUnavailable(fmt.Errorf("halt: %w", err))
	}
	r, _, err := splitVersion(msgs)
	if err != nil {
		return 0, false, fmt.Errorf("halt: %w", err)
	}
	switch r.code() {
	case "fine":
		return 0, true, nil
	case "single":
		return 1, false, nil // present and one segment (or collapsed): load.lua decides, as always
	case "ok", "not_loaded", "loading":
	default:
		return 0, false, unexpected("segment halt", r)
	}
	// A segment's tag depends on the sale's number of segments (segTag), which segment 0 may
	// have lost with its keys: look for segments 1 and up of each number the sale may have had
	// (segmentCounts).
	rdb := rb.e.redis()
	var probe rueidis.Commands
	var of []int // the number of segments each probe is for
	counts := rb.segmentCounts(ctx, saleID)
	if n := int(r.int(1)); r.code() == "ok" && n > 1 && n <= maxSegments && !slices.Contains(counts, n) {
		// Segment 0 halted knows its segments: the database may not (a sale loaded with
		// segments by the engine alone), nor this instance (it never served the sale).
		counts = append(counts, n)
	}
	for _, n := range counts {
		for _, tag := range segTagsFrom(saleID, n) {
			ks := rb.e.keys(tag)
			probe = append(probe, rdb.B().Exists().Key(ks[0], ks[6]).Build())
			of = append(of, n)
		}
	}
	streams = 1
	for i, res := range doMulti(ctx, rdb, probe) {
		found, err := res.AsInt64()
		if err != nil {
			return 0, false, errUnavailable(fmt.Errorf("look for the sale's segments: %w", err))
		}
		if found > 0 {
			streams = max(streams, of[i])
		}
	}
	if streams == 1 && r.code() != "ok" {
		return 1, false, nil // never segmented: the rebuild of a one-segment sale, as it always was
	}
	drop := make(rueidis.Commands, 0, streams-1)
	for _, tag := range rb.e.streamTags(saleID, streams)[1:] {
		drop = append(drop, rdb.B().Unlink().Key(rb.e.keys(tag)[:6]...).Build())
	}
	for _, res := range rdb.DoMulti(ctx, drop...) {
		if err := res.Error(); err != nil {
			return 0, false, errUnavailable(fmt.Errorf("remove the segments: %w", err))
		}
	}
	return streams, false, rb.drainStreams(ctx, saleID, streams)
}

// SegmentSource is the optional part of a Source that knows how many segments each sale was
// created with (sqlstore.Store implements it): a rebuild then looks for the segments a lost
// sale may have left behind among that number's only, not among every possible number's
// (about 2 000 keys and 10 ms of CRCs, which made a rebuild CPU-bound when thousands of sales
// were lost at once).
type SegmentSource interface {
	// SaleSegments is the number of segments the sale was created with, 0 if not known.
	SaleSegments(ctx context.Context, saleID string) (int, error)
}

// createdSegments is the number of segments the sale was created with, as far as the source
// knows (1 when it does not).
func (rb *rebuilder) createdSegments(ctx context.Context, saleID string) int {
	if ss, ok := rb.src.(SegmentSource); ok {
		if n, err := ss.SaleSegments(ctx, saleID); err == nil && n > 1 {
			return n
		}
	}
	return 1
}

// segmentCounts are the numbers of segments (2 and up) the sale may have had: the one the
// source recorded at its creation, the one this instance has seen, and the one the engine
// splits every sale into (WithSegments); every possible number when the source does not know.
func (rb *rebuilder) segmentCounts(ctx context.Context, saleID string) []int {
	all := func() []int {
		ns := make([]int, 0, maxSegments-1)
		for n := 2; n <= maxSegments; n++ {
			ns = append(ns, n)
		}
		return ns
	}
	ss, ok := rb.src.(SegmentSource)
	if !ok {
		return all()
	}
	created, err := ss.SaleSegments(ctx, saleID)
	if err != nil || created < 1 {
		return all() // not known: a sale created before the store kept it, or no answer now
	}
	var ns []int
	for _, n := range append(rb.e.segmentCounts(saleID), created) {
		if n > 1 && n <= maxSegments && !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	return ns
}

// doMulti is rdb.DoMulti, without a call for no commands.
func doMulti(ctx context.Context, rdb rueidis.Client, cmds rueidis.Commands) []rueidis.RedisResult {
	if len(cmds) == 0 {
		return nil
	}
	return rdb.DoMulti(ctx, cmds...)
}

// drainStreams applies every entry left in the sale's segments' streams to the order store (if
// the source is one), as the consumer stores them (segmentEvent). Entries the consumers stored
// already are stored again, which the store's forward-only merge makes harmless.
func (rb *rebuilder) drainStreams(ctx context.Context, saleID string, streams int) error {
	sink, ok := rb.src.(Sink)
	if !ok {
		return nil
	}
	ap := pipeline.Applier{Sink: sink}
	rdb := rb.e.redis()
	const page = 1000
	for i, tag := range rb.e.streamTags(saleID, streams) {
		key := rb.e.streamKey(tag)
		for from := "-"; ; {
			entries, err := rdb.Do(ctx, rdb.B().Xrange().Key(key).Start(from).End("+").Count(page).Build()).AsXRangeSlices()
			if err != nil {
				return errUnavailable(fmt.Errorf("read segment %d's stream: %w", i, err))
			}
			var events []seckill.Event
			for _, en := range entries {
				for _, fv := range en.FieldValues {
					if ev, err := segmentEvent(saleID, i, fv.Field, fv.Value); err == nil {
						events = append(events, ev)
					}
				}
			}
			if err := ap.Apply(ctx, events); err != nil {
				return err
			}
			if len(entries) < page {
				break
			}
			from = "(" + entries[len(entries)-1].ID
		}
	}
	return nil
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
				rb.e.logger().Error("redisinv: rebuild skips a reservation it cannot restore", "reservation", res.ID, "err", err)
				continue
			}
			execs = append(execs, rueidis.LuaExec{Keys: keys, Args: append([]string{rb.e.clockArg()}, args...)})
		}
		for i, res := range rb.e.scriptSet().restore.lua.ExecMulti(ctx, rb.e.redis(), execs...) {
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
