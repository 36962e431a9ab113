package redisinv

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
)

// A sale's state has a version that only grows (common.lua: ver, bump): every script call that
// changes the state raises it by one, every stream entry carries the version after its change,
// and every script's reply ends with the sale's version. The order store records the highest
// version it has stored (VersionSource). A Redis that answers with a version lower than one
// already seen — by this instance in an earlier reply, or by the database — went back in time
// (a failover to a replica that lagged, a restore from an old snapshot): its answer is not
// served, and the sale is rebuilt from the database (rebuild.go) as if its keys were missing.
// docs/MODEL.md "The state's version" is the contract.

// VersionSource is the optional part of a Source that records sales' versions: the order
// store's highest version stored (sqlstore.Store implements it). A rebuild from a Source that
// is not a VersionSource still works; an instance then compares only with the versions it has
// seen itself.
type VersionSource interface {
	// SaleVersion is the highest version of the sale the store has recorded, 0 if none.
	SaleVersion(ctx context.Context, saleID string) (uint64, error)
	// RaiseSaleVersion records v unless a higher version is recorded already.
	RaiseSaleVersion(ctx context.Context, saleID string, v uint64) error
}

// epoch is the step between the versions a rebuild starts from: a rebuild starts the sale at
// the next multiple of epoch above every version known (the database's, this instance's), and
// records that start in the database before it loads the sale, so that no instance can have
// seen a version at or above it, and so that the next rebuild starts higher still. A sale can
// make 2^32 changes between two rebuilds and be rebuilt 2^21 times before its version reaches
// 2^53, the largest integer the scripts hold exactly.
const epoch = 1 << 32

// nextEpoch is the version a rebuild starts from, given the highest version known.
func nextEpoch(known uint64) uint64 { return (known/epoch + 1) * epoch }

// maxVersionEntries bounds the sales a versionBook remembers. Entries are only made for sales
// Redis has (a reply with a version), which only an admin creates; past the bound the book
// starts again empty (each sale is then compared with the database once more).
const maxVersionEntries = 100_000

// dbRetry is how long an instance waits before asking the database again for a sale's version
// after it could not read it (the database is down: calls go on, compared with what this
// instance has seen only); dbTimeout bounds one such read, which the sale's calls arriving
// meanwhile wait for (so that none is served before the comparison), so that a database that
// hangs holds a fresh instance's calls of a sale at most that long every dbRetry.
const (
	dbRetry   = 5 * time.Second
	dbTimeout = 500 * time.Millisecond
)

// versionBook is what an instance knows of its sales' versions. The core asks it before and
// after every script call (mark, check); it sees of the engine only the rebuilder, which
// repairs what it finds (nil: no check), and the logger.
type versionBook struct {
	rb      *rebuilder
	log     *slog.Logger
	off     bool     // withoutVersionCheck: tests only (the negative control)
	m       sync.Map // sale id -> *saleVersion
	entries atomic.Int64
	stale   atomic.Int64 // replies refused as stale, for tests and logs
}

// saleVersion is one sale's highest version seen, and whether the database was asked.
type saleVersion struct {
	seen    atomic.Uint64
	db      atomic.Uint64 // the database's version, once read
	checked atomic.Bool   // the database's version was read and folded into seen
	retryAt atomic.Int64  // unix ns before which the database is not asked again
	mu      sync.Mutex    // one reader of the database per sale at a time
	// inc is the sale's incarnation (seckill.Sale.Incarnation) as Redis had it when the
	// database was first read (nil: not known): the versions in seen are that incarnation's.
	inc atomic.Pointer[string]
}

// withoutVersionCheck switches the detection off: replies are served whatever their version.
// It exists for the negative control of the tests, which must see the stale answer served.
func withoutVersionCheck() Option { return func(e *Engine) { e.versions.off = true } }

// versionMark is what an instance knew of a sale's version before it sent a call: the highest
// version seen, and the sale's entry (nil before the sale's first reply).
type versionMark struct {
	floor uint64
	sv    *saleVersion
}

// attach gives the book the engine's rebuilder and logger, once its options are applied.
func (b *versionBook) attach(rb *rebuilder, log *slog.Logger) { b.rb, b.log = rb, log }

// versionFloor is the highest version of the sale this instance has seen (versionBook.mark).
func (e *Engine) versionFloor(saleID string) versionMark { return e.versions.mark(saleID) }

// mark is the highest version of the sale this instance has seen, read before a call is
// sent: any reply to the call must carry at least it, since Redis produced it before the call
// was sent. Reading it before rather than after the reply is what makes concurrent replies
// safe: a reply that arrives late with a lower version than one stored meanwhile was produced
// earlier, not by a Redis that went back.
func (b *versionBook) mark(saleID string) versionMark {
	if v, ok := b.m.Load(saleID); ok {
		sv := v.(*saleVersion)
		return versionMark{floor: sv.seen.Load(), sv: sv}
	}
	return versionMark{}
}

// check compares a reply's version v with the mark taken before the call and, the first
// time this instance sees the sale, with the database's. It returns an unavailable error, after
// starting the rebuild, when Redis is behind; otherwise it raises the sale's highest version
// seen. v = 0 is a sale not loaded or loaded before versions existed: nothing to compare. On the
// hot path (the sale seen before) it costs a comparison, an atomic load and, when the version
// rose, a compare-and-swap.
func (b *versionBook) check(ctx context.Context, saleID string, m versionMark, v uint64) error {
	if v == 0 || !b.on() {
		return nil
	}
	if v < m.floor {
		if b.newIncarnation(ctx, saleID, m.sv) {
			return b.checkNew(ctx, saleID, v)
		}
		return b.refuse(saleID, m.floor, v)
	}
	sv := m.sv
	if sv == nil {
		sv = b.saleVersion(saleID)
	}
	if !sv.checked.Load() {
		if db, ok := b.dbVersion(ctx, saleID, sv); ok && v < db {
			return b.refuse(saleID, db, v)
		}
	}
	for {
		cur := sv.seen.Load()
		if cur >= v || sv.seen.CompareAndSwap(cur, v) {
			return nil
		}
	}
}

// saleVersion returns the sale's entry, made on first use.
func (b *versionBook) saleVersion(saleID string) *saleVersion {
	if v, ok := b.m.Load(saleID); ok {
		return v.(*saleVersion)
	}
	if b.entries.Load() >= maxVersionEntries {
		b.m.Clear()
		b.entries.Store(0)
	}
	v, loaded := b.m.LoadOrStore(saleID, &saleVersion{})
	if !loaded {
		b.entries.Add(1)
	}
	return v.(*saleVersion)
}

// dbVersion reads the database's version of the sale once (then folds it into sv.seen) and
// reports it; ok is false when there is no database to ask or it cannot be read now.
func (b *versionBook) dbVersion(ctx context.Context, saleID string, sv *saleVersion) (uint64, bool) {
	vs := b.source()
	if vs == nil {
		sv.checked.Store(true)
		return 0, false
	}
	if time.Now().UnixNano() < sv.retryAt.Load() {
		return 0, false
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.checked.Load() {
		// Not seen: it may already hold versions of replies produced after this one.
		return sv.db.Load(), true
	}
	if time.Now().UnixNano() < sv.retryAt.Load() {
		return 0, false // the read just failed for another call
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
	defer cancel()
	db, err := vs.SaleVersion(ctx, saleID)
	if err != nil {
		sv.retryAt.Store(time.Now().Add(dbRetry).UnixNano())
		b.log.Warn("redisinv: cannot read the sale's version from the database; comparing with this instance's only for now",
			"sale", saleID, "err", err)
		return 0, false
	}
	for {
		cur := sv.seen.Load()
		if cur >= db || sv.seen.CompareAndSwap(cur, db) {
			break
		}
	}
	sv.db.Store(db)
	b.learnIncarnation(ctx, saleID, sv)
	sv.checked.Store(true)
	return db, true
}

// learnIncarnation records the incarnation the sale's keys have in Redis now (hash field inc,
// load.lua), once, with the first read of the database's version: the versions seen from then
// on are that incarnation's. A Redis that cannot be read leaves it unknown (then a lower
// version is always a state gone back in time, as before incarnations).
func (b *versionBook) learnIncarnation(ctx context.Context, saleID string, sv *saleVersion) {
	if inc, ok := b.redisIncarnation(ctx, saleID); ok {
		sv.inc.CompareAndSwap(nil, &inc)
	}
}

// redisIncarnation is the incarnation of the sale's (or segment's) keys in Redis.
func (b *versionBook) redisIncarnation(ctx context.Context, saleID string) (string, bool) {
	return b.rb.e.incarnationOf(context.WithoutCancel(ctx), saleID)
}

// newIncarnation reports whether a reply below the version seen comes from another sale made
// since under the same id (deleted and created again: seckill.Sale.Incarnation), not from an
// older state of the one seen: the keys' incarnation in Redis is not the one the versions seen
// belong to, and it is the database's. It costs a Redis and a database read, on a reply that
// would otherwise be refused (rare). A Redis that holds the deleted sale's incarnation while the
// database has the new one (a restore of an old snapshot) is not a new incarnation: refused.
func (b *versionBook) newIncarnation(ctx context.Context, saleID string, sv *saleVersion) bool {
	if sv == nil || b.source() == nil {
		return false
	}
	seen := sv.inc.Load()
	if seen == nil {
		return false
	}
	inc, ok := b.redisIncarnation(ctx, saleID)
	if !ok || inc == *seen {
		return false
	}
	sale, _, _ := strings.Cut(saleID, "#")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
	defer cancel()
	def, _, err := b.rb.src.Sale(ctx, sale)
	if err != nil || def.Incarnation != inc {
		return false
	}
	if b.m.CompareAndDelete(saleID, sv) {
		b.entries.Add(-1)
		b.rb.e.newIncarnation(saleID) // the instance's other knowledge of the deleted sale
		b.log.Info("redisinv: the sale was made again under its id (a new incarnation); its versions are compared afresh",
			"sale", saleID, "incarnation", inc)
	}
	return true
}

// checkNew checks a reply of a new incarnation of the sale (newIncarnation) as the first reply
// of a sale this instance has not seen: with the database's version only.
func (b *versionBook) checkNew(ctx context.Context, saleID string, v uint64) error {
	sv := b.saleVersion(saleID)
	if !sv.checked.Load() {
		if db, ok := b.dbVersion(ctx, saleID, sv); ok && v < db {
			return b.refuse(saleID, db, v)
		}
	}
	for {
		cur := sv.seen.Load()
		if cur >= v || sv.seen.CompareAndSwap(cur, v) {
			return nil
		}
	}
}

// source is the rebuild's source as a VersionSource, or nil.
func (b *versionBook) source() VersionSource {
	if b.rb == nil {
		return nil
	}
	vs, _ := b.rb.src.(VersionSource)
	return vs
}

// refuse refuses a reply from a Redis that went back in time and starts the sale's rebuild.
// Without WithRebuild there is nothing to rebuild from: the check is then off (on).
func (b *versionBook) refuse(saleID string, want, got uint64) error {
	b.stale.Add(1)
	if sale, _, seg := strings.Cut(saleID, "#"); seg {
		// A segment's versions are its own (the database records segment 0's only): a
		// segment gone back in time rebuilds the whole sale, as a lost one does.
		if b.rb.startLost(sale) {
			b.log.Error("redisinv: Redis answered with an older state of a segment of the sale than already seen; rebuilding the sale from the database",
				"sale", sale, "segment", saleID, "version", got, "seen", want)
		}
		return seckill.Errorf(seckill.CodeUnavailable, "sale %q is being restored from the database; retry shortly", sale)
	}
	if b.rb.startStale(saleID, want) { // logged once per rebuild, not per refused call
		b.log.Error("redisinv: Redis answered with an older state of the sale than already seen (a failover to a replica that lagged?); rebuilding it from the database",
			"sale", saleID, "version", got, "seen", want)
	}
	return seckill.Errorf(seckill.CodeUnavailable, "sale %q is being restored from the database; retry shortly", saleID)
}

// on reports whether replies are checked: only with a rebuild to repair what the check
// finds (WithRebuild), and not in the negative control.
func (b *versionBook) on() bool { return b.rb != nil && !b.off }

// rebuildVersion is the version a rebuild of the sale starts from: the next epoch above the
// database's version, this instance's highest seen and stale (the version that showed Redis
// stale, 0 if none). The rebuild records it in the database (recordVersion) once load.lua has
// accepted it, not before: a rebuild that finds the sale fine after all (another instance
// rebuilt it, or a false alarm: a reply overtaken by the database) must not leave the database
// ahead of a healthy Redis.
func (rb *rebuilder) rebuildVersion(ctx context.Context, saleID string, stale uint64) (uint64, error) {
	known := max(stale, rb.e.versionFloor(saleID).floor)
	if vs, ok := rb.src.(VersionSource); ok {
		db, err := vs.SaleVersion(ctx, saleID)
		if err != nil {
			return 0, err
		}
		known = max(known, db)
	}
	v := nextEpoch(known)
	if v > maxExact {
		return 0, seckill.Errorf(seckill.CodeInternal, "sale %q: version %d past 2^53", saleID, v)
	}
	return v, nil
}

// recordVersion records the rebuilt sale's starting version in the database, so that the next
// rebuild starts above it even if no entry of this one reaches the database.
func (rb *rebuilder) recordVersion(ctx context.Context, saleID string, v uint64) error {
	if vs, ok := rb.src.(VersionSource); ok {
		return vs.RaiseSaleVersion(ctx, saleID, v)
	}
	return nil
}
