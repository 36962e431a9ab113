package redisinv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
)

// Local answers (WithLocalAnswers): a buy whose answer is already known is answered by the
// instance, without Redis. Once a sale is sold out for good (no unit available and none held),
// ended or closed, or its queue is full, every buy of the rush would otherwise still cost a
// script call that changes nothing and answers what the previous thousand calls answered.
//
// Each instance keeps, per sale, a view: the sale's state (the st field of its hash), the
// per-user units (its users hash), the idempotency keys seen (its idem hash) and a sample of
// Redis TIME, all read in one read-only script, so they are one consistent snapshot. The view
// is kept exact by Redis' client-side caching (RESP3 CLIENT TRACKING, through rueidis): the
// watcher's connections read the st field with tracking on, and Redis pushes an invalidation
// to the instance as soon as any script writes it. Every script that changes anything of the
// sale (a hold, a payment, an expiry, a restock, a close, a rebuild) writes st, raising the
// sale's version, so one tracked key covers the whole snapshot; refused buys write nothing, so
// a sold-out sale's view stays valid for as long as nothing happens to it. The view is used
// only while no invalidation has arrived since the tracked read (a counter per key, compared
// when the view is installed and at every use), the watcher's connection has not dropped
// (rueidis reports a drop as an invalidation of everything), and it is younger than maxAge: a
// belt over the braces, re-reading a quiet sale once a second.
//
// A buy is answered from the view only if buy.lua, run now on that state, would answer a
// refusal that changes nothing: the view runs buy.lua's rules in the same order (decide) and
// gives up — the buy goes to Redis — on anything it cannot be sure of: a replayed idempotency
// key, a hold that may expire before the script runs (the script's reclaim would change the
// state first), a window edge within the clock's uncertainty, a sale being rebuilt, a
// segmented sale, more users than maxLocalEntries. Its errors are the engine's own
// (buyRefusal mirrors buyAnswer; a test compares them byte for byte over HTTP).
//
// Time: the scripts use max(Redis TIME, the sale's last time). The view samples TIME in its
// snapshot and bounds Redis' clock at a later instant by the local monotonic time elapsed
// since, widened by 1 ms and 0.1 % of the elapsed time for drift; a buy is answered ended only
// if the lower bound has reached ends_at, and sold out only if the upper bound is still before
// it. With WithTestClock the engine's test clock is used as the scripts use it.
//
// What a restock costs: AddStock's script writes st; Redis writes the invalidation to the
// watcher's connection in the same event loop iteration as AddStock's reply, so a buy that an
// instance receives after the invalidation has crossed the network goes to Redis. The bound is
// that delivery (microseconds on a LAN), or maxAge if an invalidation were ever lost.
const (
	// localMaxAge is how long a view is used without being re-read, invalidations or not.
	localMaxAge = time.Second
	// localRefreshGap is the least time between two reads of one sale's view by one instance:
	// while a sale is selling, every batch of buys invalidates the view, and re-reading it
	// after each would add a read per batch. A sale that sells out is answered locally
	// within about this gap.
	localRefreshGap = 20 * time.Millisecond
	// localRefreshDuty makes a costly read (many users) wait proportionally longer before the
	// next: at most one part in localRefreshDuty+1 of the time is spent reading.
	localRefreshDuty = 9
	// maxLocalEntries bounds what a view holds: users with units plus idempotency keys. A
	// sale with more answers only ended and not_started locally.
	maxLocalEntries = 32768
	// localWindowAge is how old a sale's definition may be when SaleWindow (the purchase
	// path) answers from this instance's copy. The exact view answers only while nothing
	// changed the sale's state, which during a rush is seldom (every batch of buys changes
	// it), and a segmented sale has none; the definition changes only by a close, a restock or
	// an edit, and this instance's own drop the copy at once.
	localWindowAge = 100 * time.Millisecond
)

// Watcher is the client-side-cached Redis client of the local answers and the invalidations
// it receives. One per instance; engines share it (NewWatcher, WithLocalAnswers).
type Watcher struct {
	client rueidis.Client
	epoch  atomic.Uint64 // raised when everything is invalidated (a dropped connection, FLUSHALL)
	gens   sync.Map      // tracked key → *atomic.Uint64, raised at each invalidation of the key
	drop   atomic.Bool   // tests: ignore invalidations (the negative control of the restock test)
}

// NewWatcher connects a client for local answers with opt (the engine's own option, as Dial
// builds it): client-side caching on, in OPTIN mode so that only the views' reads are tracked.
// It fails on a Redis that does not speak RESP3 (before 6.0).
func NewWatcher(opt rueidis.ClientOption) (*Watcher, error) {
	w := &Watcher{}
	opt.DisableCache = false
	opt.CacheSizeEachConn = 4 << 20 // a view's tracked value is one st field, tens of bytes
	opt.OnInvalidations = w.invalidated
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("redis client-side caching (local answers): %w", err)
	}
	w.client = c
	return w, nil
}

// NewWatcher connects a Watcher to the deployment c was dialled to.
func (c *Clients) NewWatcher() (*Watcher, error) { return NewWatcher(c.opt) }

// Close closes the watcher's client and returns nil. Close the engines that use it first.
func (w *Watcher) Close() error {
	w.client.Close()
	return nil
}

// invalidated is rueidis' OnInvalidations: nil means everything (the connection dropped, or
// the server flushed). It runs on the connection's reading goroutine, so it only counts.
func (w *Watcher) invalidated(keys []rueidis.RedisMessage) {
	if w.drop.Load() {
		return
	}
	if keys == nil {
		w.epoch.Add(1)
		return
	}
	for i := range keys {
		if k, err := keys[i].ToString(); err == nil {
			if g, ok := w.gens.Load(k); ok {
				g.(*atomic.Uint64).Add(1)
			}
		}
	}
}

// gen is the invalidation counter of key, created before the key's first tracked read.
func (w *Watcher) gen(key string) *atomic.Uint64 {
	if g, ok := w.gens.Load(key); ok {
		return g.(*atomic.Uint64)
	}
	g, _ := w.gens.LoadOrStore(key, new(atomic.Uint64))
	return g.(*atomic.Uint64)
}

// WithLocalAnswers answers locally the buys whose answer a view of the sale already tells
// (see above); w is the instance's Watcher, which the caller closes after the engine. nil: off.
func WithLocalAnswers(w *Watcher) Option {
	return func(e *Engine) {
		if w != nil {
			e.local = &localAnswers{w: w}
		}
	}
}

// localAnswers is an engine's side of the local answers: its views and counts. The engine
// holds it (nil: off) and calls it through its nil-safe methods (answer, saleState, window,
// windowRead, keepWindow, noteVersion); it sees of the engine only localHost.
type localAnswers struct {
	w     *Watcher
	host  localHost
	clock seckill.Clock // the engine's WithTestClock, if any
	// timeout bounds a view's read (the engine's); log reports failed reads.
	timeout time.Duration
	log     *slog.Logger
	sales   sync.Map // sale id → *saleLocal
	// counts of buys answered locally, by code (localCodes); reads of views.
	counts    [len(localCodes)]atomic.Uint64
	refreshes atomic.Uint64
	saleReads atomic.Uint64 // Sale answered from a view
	// testMaxAge, when not 0, replaces localMaxAge (ns; negative: every view is too old): a
	// test decides when views age out instead of racing the wall clock.
	testMaxAge atomic.Int64
}

// localHost is all the local answers see of the engine: a sale's keys, the highest version the
// engine has seen of it (version.go), and a goroutine the engine owns and waits for at Close.
type localHost interface {
	keys(saleID string) []string
	versionFloor(saleID string) versionMark
	goSend(f func())
}

// attach gives the local answers what they need of e, once its options are applied.
func (l *localAnswers) attach(e *Engine) {
	l.host, l.clock, l.timeout, l.log = e, e.clock, e.timeout, e.log
}

// maxAge is how long (ns) a view is used without being re-read: localMaxAge but in tests.
func (l *localAnswers) maxAge() int64 {
	if a := l.testMaxAge.Load(); a != 0 {
		return a
	}
	return int64(localMaxAge)
}

// localCodes are the answers a view can give, in the order of localAnswers.counts.
var localCodes = [...]seckill.Code{seckill.CodeSoldOut, seckill.CodeQueueFull, seckill.CodeEnded,
	seckill.CodeNotStarted, seckill.CodeLimitExceeded, seckill.CodeInvalidArgument}

// saleLocal is one sale's view and the state of its refresh.
type saleLocal struct {
	gen       *atomic.Uint64
	seen      atomic.Uint64 // the highest version in this engine's own replies for the sale
	own       atomic.Uint64 // raised by this engine's own calls that may not raise the version
	view      atomic.Pointer[saleView]
	busy      atomic.Bool  // a refresh is running
	notBefore atomic.Int64 // monotonic ns before which no refresh starts
	window    atomic.Pointer[windowCopy]
	windowGen atomic.Uint64 // raised by this engine's changes of the definition
}

// windowCopy is a sale's definition as sale.lua (segment 0's, when segmented) answered it to a
// call that started at read (monotonic ns), when the sale's windowGen was gen.
type windowCopy struct {
	s    seckill.Sale
	read int64
	gen  uint64
}

// window is a sale's definition, read at most localWindowAge ago and since this engine's
// last change of it, if this instance has one (local answers on): the purchase path then
// costs Redis one read per sale per instance every localWindowAge rather than one per buyer.
func (l *localAnswers) window(id string) (seckill.Sale, bool) {
	if l == nil {
		return seckill.Sale{}, false
	}
	sl := l.sale(id)
	w := sl.window.Load()
	if w == nil || w.gen != sl.windowGen.Load() || mono()-w.read > int64(localWindowAge) {
		return seckill.Sale{}, false
	}
	s := w.s
	s.Room = cloneRoom(s.Room) // the copy is shared: each caller gets its own policy
	return s, true
}

// windowRead starts a read of a sale's definition for keepWindow (nil without local answers).
func (l *localAnswers) windowRead(id string) *windowCopy {
	if l == nil {
		return nil
	}
	return &windowCopy{read: mono(), gen: l.sale(id).windowGen.Load()}
}

// keepWindow keeps the definition s that the read w started before reading it.
func (l *localAnswers) keepWindow(id string, w *windowCopy, s seckill.Sale) {
	if w != nil {
		w.s = s
		w.s.Room = cloneRoom(s.Room) // the caller keeps s's own
		l.sale(id).window.Store(w)
	}
}

// st is the decoded st field of a sale's hash (common.lua's header, in order).
type st struct {
	price, stock, holdback, starts, ends, limit, hold, qlimit, created, closed, avail, held,
	sold, qunits, seq, now, loading, qlen, nexp, ver int64
}

// saleView is one consistent snapshot of a sale, valid while its gen and epoch are current.
type saleView struct {
	gen, epoch, own uint64
	sent, recv      int64 // monotonic ns around the snapshot's call
	timeMs          int64 // Redis TIME during the script, in ms (as clock_arg computes it)
	s               st
	sets            bool             // users and idem were read (else only window answers)
	users           map[string]int64 // user → units held + queued + paid
	idem            map[string]bool  // user:key of every idempotency key seen
	testClock       seckill.Clock    // the engine's WithTestClock, if any
	// The sale hash's other fields, for Sale (sale_reply).
	name, currency string
	listed         bool
	preheat        int
	room           *seckill.RoomPolicy // nil without a waiting room; handed out as copies
}

var monoBase = time.Now()

// mono is monotonic nanoseconds since the process started.
func mono() int64 { return int64(time.Since(monoBase)) }

// scriptNow bounds, in ms, the time a buy script sent at monotonic time t would use.
func (v *saleView) scriptNow(t int64) (lo, hi int64) {
	if v.testClock != nil {
		n := max(v.testClock.Now().UnixMilli(), v.s.now)
		return n, n
	}
	sinceRecv, sinceSent := max(t-v.recv, 0), max(t-v.sent, 0)
	drift := int64(time.Millisecond) + sinceSent/1000
	lo = v.timeMs + (sinceRecv-drift)/int64(time.Millisecond) - 1
	hi = v.timeMs + (sinceSent+drift)/int64(time.Millisecond) + 1
	return max(lo, v.s.now), max(hi, v.s.now)
}

// decide runs buy.lua's rules (buy_one, after the call's reclaim) for one buyer on the view at
// monotonic time t. ok false: only Redis can tell (the buy would change the state, or the view
// cannot be sure). Otherwise code is the refusal and n its number (buyAnswer's r[2] or r[1]).
func (v *saleView) decide(user string, q int, key string, t int64) (code string, n int64, ok bool) {
	s := &v.s
	if q < 1 || s.loading == 1 {
		return "", 0, false
	}
	lo, hi := v.scriptNow(t)
	if s.closed == 1 || lo >= s.ends {
		return "ended", 0, true
	}
	if hi >= s.ends {
		return "", 0, false // it may have ended by the time the script runs
	}
	if hi < s.starts {
		return "not_started", 0, true
	}
	if lo < s.starts || !v.sets {
		return "", 0, false
	}
	if s.held > 0 && s.nexp != 0 && s.nexp <= hi {
		// The call's reclaim runs before the rules below and may expire a hold, which changes
		// the user's units and the stock. (With nothing held, a reclaim expires nothing.)
		return "", 0, false
	}
	if key != "" && v.idem[user+":"+key] {
		return "", 0, false // a replay: the stored reservation, as it is now
	}
	if int64(q) > s.limit {
		return "limit_exceeded", s.limit, true // 'quantity'
	}
	if v.users[user]+int64(q) > s.limit {
		return "limit_exceeded_user", s.limit, true
	}
	if float64(q)*float64(s.price) > maxExact { // as Lua computes it, in doubles
		return "invalid_argument", 0, true
	}
	switch {
	case s.qlen == 0 && s.avail >= int64(q):
		return "", 0, false // a hold
	case s.avail == 0 && s.held == 0:
		return "sold_out", 0, true
	case s.avail+s.held < int64(q):
		return "sold_out", s.avail + s.held, true
	case s.qlen >= s.qlimit:
		return "queue_full", 0, true
	}
	return "", 0, false // queued
}

// buyRefusal is the engine's error for a refusal that decide gave: buyAnswer's, word for word.
func buyRefusal(req seckill.BuyRequest, code string, n int64) (seckill.Code, error) {
	switch code {
	case "invalid_argument":
		return seckill.CodeInvalidArgument, seckill.Errorf(seckill.CodeInvalidArgument, "quantity %d × price is too large", req.Quantity)
	case "not_started":
		return seckill.CodeNotStarted, seckill.Errorf(seckill.CodeNotStarted, "sale %s has not started", req.SaleID)
	case "ended":
		return seckill.CodeEnded, seckill.Errorf(seckill.CodeEnded, "sale %s has ended", req.SaleID)
	case "limit_exceeded":
		return seckill.CodeLimitExceeded, seckill.Errorf(seckill.CodeLimitExceeded, "quantity %d is over the per-user limit %d", req.Quantity, n)
	case "limit_exceeded_user":
		return seckill.CodeLimitExceeded, seckill.Errorf(seckill.CodeLimitExceeded, "user %q would hold more than %s", req.UserID, seckill.Units(n))
	case "sold_out":
		if n > 0 {
			return seckill.CodeSoldOut, seckill.Errorf(seckill.CodeSoldOut, "only %s left unsold, fewer than the %d asked for", seckill.Units(n), req.Quantity)
		}
		return seckill.CodeSoldOut, seckill.Errorf(seckill.CodeSoldOut, "sold out")
	case "queue_full":
		return seckill.CodeQueueFull, seckill.Errorf(seckill.CodeQueueFull, "every unit is held and the queue is full; try again later")
	}
	panic("redisinv: buyRefusal: unknown code " + code)
}

// answer returns the local answer to a buy, or ok false to send it to Redis. A stale view
// starts a refresh (in an engine-owned goroutine) and sends the buy to Redis meanwhile.
func (l *localAnswers) answer(req seckill.BuyRequest, q int) (ok bool, err error) {
	if l == nil {
		return false, nil
	}
	sl := l.sale(req.SaleID)
	now := mono()
	v := l.current(req.SaleID, sl, now)
	if v == nil {
		return false, nil
	}
	code, n, ok := v.decide(req.UserID, q, req.IdempotencyKey, now)
	if !ok {
		return false, nil
	}
	c, err := buyRefusal(req, code, n)
	for i, lc := range localCodes {
		if lc == c {
			l.counts[i].Add(1)
		}
	}
	return true, err
}

// current is the sale's view if it is valid now, else nil, after starting a refresh.
func (l *localAnswers) current(saleID string, sl *saleLocal, now int64) *saleView {
	v := sl.view.Load()
	if v == nil || v.gen != sl.gen.Load() || v.epoch != l.w.epoch.Load() || v.own != sl.own.Load() || uint64(v.s.ver) < sl.seen.Load() ||
		now-v.recv > l.maxAge() {
		l.maybeRefresh(saleID, sl, now)
		return nil
	}
	return v
}

// saleState answers Sale from the view when sale.lua would answer exactly the view's state:
// no hold may have expired by the time the script runs (its reclaim would change the counts)
// and, with buyers queued, the sale is surely in its window (else the reclaim rejects them).
// This is what keeps a rush's purchase-path reads (one Sale per buyer) off Redis too.
func (l *localAnswers) saleState(id string) (seckill.Sale, seckill.StockState, bool) {
	if l == nil {
		return seckill.Sale{}, seckill.StockState{}, false
	}
	sl := l.sale(id)
	now := mono()
	v := l.current(id, sl, now)
	if v == nil || v.s.loading == 1 {
		return seckill.Sale{}, seckill.StockState{}, false
	}
	s := &v.s
	lo, hi := v.scriptNow(now)
	if s.held > 0 && s.nexp != 0 && s.nexp <= hi {
		return seckill.Sale{}, seckill.StockState{}, false
	}
	if s.qlen > 0 && (s.closed == 1 || lo < s.starts || hi >= s.ends) {
		return seckill.Sale{}, seckill.StockState{}, false
	}
	sale := seckill.Sale{
		ID: id, Name: v.name, PriceCents: s.price, Stock: int(s.stock), Holdback: int(s.holdback),
		StartsAt: fromMillis(s.starts), EndsAt: fromMillis(s.ends), PerUserLimit: int(s.limit),
		HoldSeconds: int(s.hold), QueueLimit: int(s.qlimit), CreatedAt: fromMillis(s.created),
		Currency: v.currency, Listed: v.listed, Segments: 1, // views are kept of one-segment sales only
		PreheatSeconds: v.preheat, Room: cloneRoom(v.room),
	}
	st := seckill.StockState{Sellable: sale.Sellable(), Available: int(s.avail), Held: int(s.held), Sold: int(s.sold),
		Queued: int(s.qunits)}
	l.saleReads.Add(1)
	return sale, st, true
}

// sale is the sale's view and refresh state, made on first use.
func (l *localAnswers) sale(saleID string) *saleLocal {
	if v, ok := l.sales.Load(saleID); ok {
		return v.(*saleLocal)
	}
	sl := &saleLocal{gen: l.w.gen(l.host.keys(saleID)[0])}
	v, _ := l.sales.LoadOrStore(saleID, sl)
	return v.(*saleLocal)
}

// forget drops the sale's view: the sale was deleted and made again (a new incarnation), whose
// versions start below the deleted one's.
func (l *localAnswers) forget(saleID string) {
	if l != nil {
		l.sales.Delete(saleID)
	}
}

// noteVersion records a reply's version: this engine's own change makes its view stale at
// once, without waiting for the invalidation that Redis pushes to the watcher's connection
// (which may arrive after the reply), so that a caller sees its own writes.
//
// Scripts that can change a sale without raising its version (load.lua loads a sale new at
// version 1, sale_admin.lua edits or drops it; restore.lua and those not named here, to be
// safe) end every view of the sale this engine has, and any read of one in progress.
func (l *localAnswers) noteVersion(saleID, script string, v uint64) {
	if l == nil {
		return
	}
	sl := l.sale(saleID)
	switch script {
	// segment.lua changes no definition, and its operations that change state run on split
	// sales only, which have no exact view (a one-segment sale answers it 'counts', read-only).
	case "buy", "cancel", "pay", "reclaim", "sale", "reservation", "segment":
	case "add_stock", "close": // they change a definition
		sl.windowGen.Add(1)
	default:
		sl.own.Add(1)
		sl.windowGen.Add(1)
	}
	for v != 0 {
		cur := sl.seen.Load()
		if cur >= v || sl.seen.CompareAndSwap(cur, v) {
			return
		}
	}
}

// maybeRefresh starts a refresh of the sale's view unless one is running or it is too soon.
func (l *localAnswers) maybeRefresh(saleID string, sl *saleLocal, now int64) {
	if now < sl.notBefore.Load() || !sl.busy.CompareAndSwap(false, true) {
		return
	}
	l.host.goSend(func() {
		defer sl.busy.Store(false)
		start := mono()
		v, err := l.read(saleID, sl)
		took := mono() - start
		sl.notBefore.Store(mono() + max(int64(localRefreshGap), localRefreshDuty*took))
		if err != nil {
			l.log.Debug("local answers: reading the sale's view", "sale", saleID, "err", err)
		}
		sl.view.Store(v) // nil on failure: every buy goes to Redis
	})
}

// viewScript reads a sale's snapshot: KEYS sale, users, idem; ARGV[1] the most users and keys
// to return (0: none). It returns {st, TIME seconds, TIME microseconds, {st's values}, {name,
// currency, listed, pre, room}, flag, users (field, value, …), idem fields}; flag 1 when the two hashes
// were read, 0 when they hold more entries than ARGV[1] or while the sale is selling: units
// free and nobody queued, so that a buy gets a hold unless it asks for more than is free
// (decide sends those to Redis whatever the hashes say; without them the view answers only
// what the window tells). Reading them then would be work for nothing or nearly, and no small
// work: the script holds Redis for as long as it reads them (15 ms for
// 30 000 users on the shared 2-core machine, every buy of the sale waiting behind it), and a
// selling sale's view goes stale with every batch of buys (docs/BENCHMARKS.md, issue 31).
// st is false for a sale not loaded.
var viewScript = rueidis.NewLuaScriptReadOnly(`
local st = redis.call('HGET', KEYS[1], 'st')
local t = redis.call('TIME')
if not st then
  return {false, t[1], t[2]}
end
local v = {cmsgpack.unpack(st)}
local n = #v
for i = 1, 20 do
  v[i] = v[i] or 0
end
v[21] = n
local meta = redis.call('HMGET', KEYS[1], 'name', 'currency', 'listed', 'pre', 'room')
if v[11] > 0 and v[18] == 0 then -- avail > 0, qlen 0: selling
  return {st, t[1], t[2], v, meta, 0}
end
local cap = tonumber(ARGV[1])
local nu, ni = redis.call('HLEN', KEYS[2]), redis.call('HLEN', KEYS[3])
if nu + ni > cap then
  return {st, t[1], t[2], v, meta, 0}
end
return {st, t[1], t[2], v, meta, 1, redis.call('HGETALL', KEYS[2]), redis.call('HKEYS', KEYS[3])}
`)

// read takes a snapshot of the sale: first the tracked read of st (so that any later write is
// pushed to us), then the script; the snapshot is good only if the script saw the same st
// (nothing changed in between) and no invalidation arrived meanwhile.
func (l *localAnswers) read(saleID string, sl *saleLocal) (*saleView, error) {
	l.refreshes.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	ks := l.host.keys(saleID)
	gen, epoch, own := sl.gen.Load(), l.w.epoch.Load(), sl.own.Load()
	c := l.w.client
	tracked, err := c.DoCache(ctx, c.B().Hget().Key(ks[0]).Field("st").Cache(), time.Minute).ToString()
	if rueidis.IsRedisNil(err) {
		return nil, nil // not loaded: Redis decides (rebuild)
	}
	if err != nil {
		return nil, err
	}
	sent := mono()
	msgs, err := viewScript.Exec(ctx, c, []string{ks[0], ks[4], ks[5]}, []string{strconv.Itoa(maxLocalEntries)}).ToArray()
	recv := mono()
	if err != nil {
		return nil, err
	}
	if len(msgs) < 6 {
		return nil, nil
	}
	raw, err := msgs[0].ToString()
	if err != nil || raw != tracked {
		return nil, err // changed in between: the next buy tries again
	}
	v := &saleView{gen: gen, epoch: epoch, own: own, sent: sent, recv: recv, testClock: l.clock}
	sec, err1 := msgs[1].AsInt64()
	usec, err2 := msgs[2].AsInt64()
	vals, err3 := msgs[3].AsIntSlice()
	if err := errors.Join(err1, err2, err3); err != nil || len(vals) != 21 {
		return nil, fmt.Errorf("view script: unexpected reply: %v", err)
	}
	if vals[20] != 20 {
		return nil, nil // a segmented sale (or a layout this code does not know): Redis decides
	}
	v.timeMs = sec*1000 + usec/1000
	v.s = st{vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], vals[6], vals[7], vals[8], vals[9],
		vals[10], vals[11], vals[12], vals[13], vals[14], vals[15], vals[16], vals[17], vals[18], vals[19]}
	if uint64(max(v.s.ver, 0)) < max(l.host.versionFloor(saleID).floor, sl.seen.Load()) {
		return nil, nil // Redis went back in time: the engine's calls find it and rebuild
	}
	if meta, err := msgs[4].ToArray(); err == nil && len(meta) == 5 {
		v.name, _ = meta[0].ToString()
		v.currency, _ = meta[1].ToString() // a sale loaded before currency existed: ''
		listed, err := meta[2].ToString()
		v.listed = err != nil || listed != "0" // and before listed: '1'
		pre, _ := meta[3].ToString()
		v.preheat, _ = strconv.Atoi(pre) // and before pre: 0
		room, _ := meta[4].ToString()
		v.room = parseRoom(room) // room.go; nil without a room
	}
	if flag, _ := msgs[5].AsInt64(); flag == 1 && len(msgs) == 8 {
		kv, err := msgs[6].AsStrSlice()
		if err != nil || len(kv)%2 != 0 {
			return nil, fmt.Errorf("view script: users: %v", err)
		}
		v.users = make(map[string]int64, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			n, err := strconv.ParseInt(kv[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("view script: units of a user: %w", err)
			}
			v.users[kv[i]] = n
		}
		keys, err := msgs[7].AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("view script: idem: %w", err)
		}
		v.idem = make(map[string]bool, len(keys))
		for _, k := range keys {
			v.idem[k] = true
		}
		v.sets = true
	}
	if sl.gen.Load() != gen || l.w.epoch.Load() != epoch || sl.own.Load() != own {
		return nil, nil // invalidated while we read
	}
	return v, nil
}

// LocalAnswerStats are the counts of the local answers, for metrics and tests.
type LocalAnswerStats struct {
	// Answered counts the buys answered locally, by code.
	Answered map[seckill.Code]uint64
	// Reads counts the snapshots read from Redis.
	Reads uint64
	// SaleReads counts the Sale calls answered from a view.
	SaleReads uint64
	// Shed counts the buys answered unavailable because too many were in flight (inflight.go).
	Shed uint64
}

// LocalAnswerStats returns the engine's counts.
func (e *Engine) LocalAnswerStats() LocalAnswerStats {
	st := LocalAnswerStats{Answered: map[seckill.Code]uint64{}, Shed: e.inflight.shed.Load()}
	if l := e.local; l != nil {
		for i, c := range localCodes {
			st.Answered[c] = l.counts[i].Load()
		}
		st.Reads = l.refreshes.Load()
		st.SaleReads = l.saleReads.Load()
	}
	return st
}

var (
	localAnswerDesc = prometheus.NewDesc("seckill_redis_local_answers_total",
		"Buys answered by this instance without Redis, from its view of the sale (sold out for good, ended, queue full…), by code.",
		[]string{"code"}, nil)
	localReadDesc = prometheus.NewDesc("seckill_redis_local_view_reads_total",
		"Snapshots of sales read from Redis for the local answers.", nil, nil)
	localSaleDesc = prometheus.NewDesc("seckill_redis_local_sale_reads_total",
		"Reads of a sale (the purchase path, the storefront) answered by this instance from its view, without Redis.", nil, nil)
	shedDesc = prometheus.NewDesc("seckill_redis_buys_shed_total",
		"Buys answered 503 because this instance already had --redis-max-inflight buys of the sale waiting for Redis.", nil, nil)
)

// LocalAnswerCollector exports LocalAnswerStats to Prometheus.
func (e *Engine) LocalAnswerCollector() prometheus.Collector { return localCollector{e} }

type localCollector struct{ e *Engine }

func (c localCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- localAnswerDesc
	ch <- localReadDesc
	ch <- localSaleDesc
	ch <- shedDesc
}

func (c localCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.e.LocalAnswerStats()
	for _, code := range localCodes {
		ch <- prometheus.MustNewConstMetric(localAnswerDesc, prometheus.CounterValue, float64(st.Answered[code]), string(code))
	}
	ch <- prometheus.MustNewConstMetric(localReadDesc, prometheus.CounterValue, float64(st.Reads))
	ch <- prometheus.MustNewConstMetric(localSaleDesc, prometheus.CounterValue, float64(st.SaleReads))
	ch <- prometheus.MustNewConstMetric(shedDesc, prometheus.CounterValue, float64(st.Shed))
}
