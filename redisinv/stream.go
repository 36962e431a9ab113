package redisinv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/pipeline"
)

// Group is the consumer group that moves reservation events to the order store. Every
// instance (serve or worker) joins it, so each event is stored by one of them.
const Group = "seckill-orders"

// Sink is where events go: the order store (seckill.OrderStore satisfies it). It is the memory
// engine's pipeline.Sink, and events are stored through the same pipeline.Applier. ApplyEvents
// must be idempotent and forward-only, because events of one reservation may be stored by
// different consumers in any order, and an event may be stored twice (a consumer that crashed
// after its commit and before its acknowledgement).
type Sink = pipeline.Sink

// ConsumerConfig tunes a Consumer. Zero values mean the defaults.
type ConsumerConfig struct {
	// List lists the sales whose streams to consume (service.Service.LiveSaleIDs), looked up
	// again every second; required.
	List    SaleLister
	Name    string // consumer name in the group; default host-pid-random, unique per process
	Batch   int    // most entries read and stored at once (up to 64 events each); default 128
	Workers int    // most streams read and stored at once; default 8
	// CheckEvery is how often every stream is checked (one pipelined XINFO GROUPS per stream):
	// for entries a lost notification left unread, entries another consumer left pending
	// (taken over after ClaimIdle) and acknowledged entries still to trim; default 10 s (a
	// stream idle for coldAfter: every coldCheckEvery).
	CheckEvery time.Duration
	ClaimIdle  time.Duration // entries pending this long with another consumer are taken over; default 5 s
	TrimEvery  time.Duration // how often a stream being read has its acknowledged entries dropped; default 1 s
	RetryDelay time.Duration // first delay after a failure, doubling to 2 s; default 50 ms
	// Linger is how long to wait after storing a batch that was not full before reading the
	// next, so that a rush's events are stored in fewer, larger batches (one transaction, one
	// acknowledgement and a few INSERTs each); default 20 ms, negative for none. A full batch
	// is followed at once.
	Linger time.Duration
	Logger *slog.Logger
}

// Consumer moves every sale's event stream into the order store: it reads with XREADGROUP,
// stores each batch in one ApplyEvents, and acknowledges the entries only after that
// committed. Entries left pending by a consumer that died are taken over with XAUTOCLAIM;
// acknowledged entries are trimmed, so the streams' memory stays bounded by what is not yet
// stored. A stream is read when a notification names it (notify.go), never polled: an idle
// sale costs no command. A Consumer is a background.Service.
type Consumer struct {
	e     streamHost
	apply pipeline.Applier
	cfg   ConsumerConfig

	dropped atomic.Uint64 // malformed entries; the applier counts the events the store refuses
	failed  atomic.Uint64 // failed reads and claims; the applier counts failed stores
	stale   atomic.Uint64 // batches that showed a stream gone back in time (checkVersions)
	reads   atomic.Uint64 // XREADGROUP calls (tests and the stream bench count them)
}

var _ background.Service = (*Consumer)(nil)

// NewConsumer returns a consumer of this engine's streams into sink.
func (e *Engine) NewConsumer(sink Sink, cfg ConsumerConfig) *Consumer {
	if cfg.Name == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.Name = host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 128
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = 10 * time.Second
	}
	if cfg.ClaimIdle <= 0 {
		cfg.ClaimIdle = 5 * time.Second
	}
	if cfg.TrimEvery <= 0 {
		cfg.TrimEvery = time.Second
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 50 * time.Millisecond
	}
	if cfg.Linger == 0 {
		cfg.Linger = 20 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = e.log
	}
	if cfg.List == nil {
		cfg.List = func(context.Context) ([]string, error) {
			return nil, errors.New("redisinv: consumer without a sale list")
		}
	}
	return &Consumer{e: e, apply: pipeline.Applier{Sink: sink, RetryDelay: cfg.RetryDelay}, cfg: cfg}
}

// Name is the consumer's name in logs and metrics.
func (c *Consumer) Name() string { return "orders-consumer" }

// Stored is the number of events stored so far; Dropped those the store refused as invalid
// or that could not be decoded (reported and acknowledged, so that one poison event cannot
// block the stream); Failures the reads, claims and batch attempts that failed and were retried.
func (c *Consumer) Stored() uint64   { return c.apply.Applied() }
func (c *Consumer) Dropped() uint64  { return c.dropped.Load() + c.apply.Dropped() }
func (c *Consumer) Failures() uint64 { return c.failed.Load() + c.apply.Failures() }

// consumerStream is the consumer's state of one stream: the stream of one segment of a sale
// (0 for a one-segment sale), whose tag is tag (segTag).
type consumerStream struct {
	sale, tag, key string
	seg            int

	// Touched by the worker that holds the stream only (wakeSet: one at a time).
	highest    uint64    // the highest version among the entries this consumer was delivered new
	quietSince time.Time // when a read first found nothing since the last entries; zero while reading
	delay      time.Duration

	// Set by the checks, read by the worker.
	claim    atomic.Bool  // the group has pending entries: look for some to take over
	trimDue  atomic.Bool  // entries were stored and may be trimmed once every reader has them
	lastTrim atomic.Int64 // unix ns of the last trim (TrimEvery apart at most)
	// coldUntil (unix ns): a stream nothing was delivered from for coldAfter is checked only
	// every coldCheckEvery, until a notification names it.
	coldUntil atomic.Int64
}

// A stream that no group was delivered anything from for coldAfter, with nothing unread or
// pending, is checked every coldCheckEvery instead of every CheckEvery: what a check finds on
// it (a lost notification) is rarer than on a stream in use (a consumer that died with entries
// in hand), and most listed sales are idle.
const (
	coldAfter      = time.Minute
	coldCheckEvery = time.Minute
)

// Run consumes the streams of every sale that List returns (looked up again every second)
// until ctx is done, and returns nil once its workers have all stopped. A segmented sale has
// a stream per segment (Engine.saleStreams), each consumed on its own. A stream is read when a
// notification names it (notify.go), until two reads notifyQuiet apart find nothing; every
// stream is checked every CheckEvery and after each (re)subscription to the notifications,
// for what they missed. Cfg.Workers workers read and store, one stream each at a time: no
// goroutine, timer or command per idle sale. A sale that List no longer returns (it is over)
// is forgotten. Its exit: a batch being stored when ctx ends is finished and acknowledged
// (within 10 s, and within the runner's Stop deadline); entries read but not stored stay
// pending and are taken over by another consumer. Every failure (listing, reading, claiming,
// storing, acknowledging) is reported (background.Report) and retried.
func (c *Consumer) Run(ctx context.Context) error {
	var mu sync.Mutex
	streams := map[string]*consumerStream{} // by stream key
	lookup := func(key string) *consumerStream {
		mu.Lock()
		defer mu.Unlock()
		return streams[key]
	}
	all := func() []*consumerStream {
		mu.Lock()
		defer mu.Unlock()
		out := make([]*consumerStream, 0, len(streams))
		for _, s := range streams {
			out = append(out, s)
		}
		return out
	}
	work := newWakeSet()
	checkNow := make(chan struct{}, 1)
	watcher := &noteWatcher{
		key: func(key string) {
			if s := lookup(key); s != nil {
				s.coldUntil.Store(0)
				work.wake(key)
			}
		},
		subscribed: func() {
			select {
			case checkNow <- struct{}{}:
			default:
			}
		},
	}
	unwatch := c.e.watchNotes(watcher)
	defer unwatch()
	defer c.e.setChecked(nil)

	var wg sync.WaitGroup
	defer wg.Wait()
	for range c.cfg.Workers {
		wg.Go(func() {
			for {
				key, ok := work.take(ctx)
				if !ok {
					return
				}
				if s := lookup(key); s != nil {
					if again := c.step(ctx, s); again >= 0 {
						work.wakeAfter(ctx, key, again)
					}
				}
				work.done(key)
			}
		})
	}

	list := func(ctx context.Context) {
		ids, err := c.cfg.List(ctx)
		if err != nil {
			background.Report(ctx, fmt.Errorf("list sales: %w", err))
			return
		}
		ids = WithNoted(ids, c.e.NotedSaleIDs()) // a cold sale changed again (notify.go notedSales)
		listed := make(map[string]bool, len(ids))
		var added []*consumerStream
		for _, id := range ids {
			n, err := c.e.saleStreams(ctx, id)
			if err != nil {
				background.Report(ctx, fmt.Errorf("sale %s: finding its segments: %w", id, err))
			}
			for seg, tag := range c.e.streamTags(id, n) {
				key := c.e.streamKey(tag)
				listed[key] = true
				if lookup(key) == nil {
					s := &consumerStream{sale: id, seg: seg, tag: tag, key: key, delay: c.cfg.RetryDelay}
					s.claim.Store(true) // a consumer that died may have left some
					s.trimDue.Store(true)
					mu.Lock()
					streams[key] = s
					mu.Unlock()
					added = append(added, s)
				}
			}
		}
		mu.Lock()
		for key := range streams {
			if !listed[key] {
				delete(streams, key)
			}
		}
		mu.Unlock()
		c.e.setChecked(listed)
		for _, s := range added { // read once: a new stream may have entries from before
			work.wake(s.key)
		}
	}
	list(ctx)
	listTick, checkTick := time.NewTicker(listEvery), time.NewTicker(c.cfg.CheckEvery)
	defer listTick.Stop()
	defer checkTick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-listTick.C:
			list(ctx)
		case <-checkTick.C:
			c.check(ctx, all(), work, watcher, false)
		case <-checkNow:
			c.check(ctx, all(), work, watcher, true)
		}
	}
}

// checkBatch is how many streams one pipelined round trip of a check covers.
const checkBatch = 256

// check looks at every stream's group (XINFO GROUPS, pipelined) and wakes those with entries
// not yet delivered to the group (a lost notification) or pending (marked to be looked at for
// entries to take over), and those with acknowledged entries left to trim. A stream on which
// another group (an export sink's) is behind is passed to this engine's other watchers as if
// notified (notifyLocal), so that the export's logs here need not check it themselves.
func (c *Consumer) check(ctx context.Context, streams []*consumerStream, work *wakeSet, watcher *noteWatcher, all bool) {
	rdb := c.e.redis()
	now := time.Now()
	if !all { // cold streams only when due
		due := streams[:0:0]
		for _, s := range streams {
			if s.coldUntil.Load() <= now.UnixNano() {
				due = append(due, s)
			}
		}
		streams = due
	}
	var trims []*consumerStream // read to the end, with acknowledged entries still kept
	defer func() {
		for _, s := range trims {
			c.trim(ctx, s)
		}
	}()
	for len(streams) > 0 && ctx.Err() == nil {
		part := streams[:min(len(streams), checkBatch)]
		streams = streams[len(part):]
		cmds := make(rueidis.Commands, len(part))
		for i, s := range part {
			cmds[i] = rdb.B().XinfoGroups().Key(s.key).Build()
		}
		for i, res := range rdb.DoMulti(ctx, cmds...) {
			s := part[i]
			groups, err := res.ToArray()
			if err != nil {
				if e, ok := rueidis.IsRedisErr(err); ok && strings.Contains(e.Error(), "no such key") {
					s.trimDue.Store(false)
					s.coldUntil.Store(now.Add(coldCheckEvery).UnixNano())
					continue // no stream yet: its first entry will notify
				}
				if ctx.Err() == nil {
					c.failed.Add(1)
					background.Report(ctx, fmt.Errorf("sale %s: checking its stream: %w", s.tag, err))
				}
				continue
			}
			others := othersBehind(groups, Group)
			if others { // an export sink's: its readers here need not look themselves
				c.e.notifyLocal(s.key, watcher)
			}
			unread, pending := groupBehind(groups, Group)
			if !others && !unread && !pending && !s.trimDue.Load() && now.Sub(lastDelivered(groups)) >= coldAfter {
				s.coldUntil.Store(now.Add(coldCheckEvery).UnixNano())
			}
			switch {
			case unread || pending:
				s.claim.Store(s.claim.Load() || pending)
				work.wake(s.key)
			case s.trimDue.Load():
				trims = append(trims, s)
			}
		}
	}
}

// lastDelivered is the time of the latest entry delivered to any group of an XINFO GROUPS
// reply (zero if none).
func lastDelivered(groups []rueidis.RedisMessage) time.Time {
	var last time.Time
	for _, g := range groups {
		if t := streamIDTime(fields(g)["last-delivered-id"]); t.After(last) {
			last = t
		}
	}
	return last
}

// othersBehind reports whether a group other than except has entries not yet delivered to it
// (or Redis cannot tell) or not acknowledged, in an XINFO GROUPS reply.
func othersBehind(groups []rueidis.RedisMessage, except string) bool {
	for _, g := range groups {
		f := fields(g)
		if f["name"] == except {
			continue
		}
		lag, err := strconv.ParseInt(f["lag"], 10, 64)
		if err != nil || lag > 0 || (f["pending"] != "" && f["pending"] != "0") {
			return true
		}
	}
	return false
}

// groupBehind reads an XINFO GROUPS reply for group: unread when it has entries not yet
// delivered to it (or Redis cannot tell, or the group is missing), pending when some were
// delivered and not acknowledged.
func groupBehind(groups []rueidis.RedisMessage, group string) (unread, pending bool) {
	for _, g := range groups {
		f := fields(g)
		if f["name"] != group {
			continue
		}
		lag, err := strconv.ParseInt(f["lag"], 10, 64)
		return err != nil || lag > 0, f["pending"] != "" && f["pending"] != "0"
	}
	return true, false
}

// step does one round of work on a stream for a worker: takes over entries left pending when
// marked to, reads what is new and stores it. It returns when to be woken again: at once after
// a full batch, after Linger after a smaller one, after notifyQuiet after the first read that
// found nothing; -1 (not until notified) after a read that found nothing notifyQuiet after
// that, when the stream's acknowledged entries are trimmed.
func (c *Consumer) step(ctx context.Context, s *consumerStream) time.Duration {
	fail := func(err error) time.Duration {
		if ctx.Err() != nil {
			return -1
		}
		c.failed.Add(1)
		background.Report(ctx, fmt.Errorf("sale %s: reading events failed (retrying in %v): %w", s.tag, s.delay, err))
		d := s.delay
		s.delay = min(2*s.delay, 2*time.Second)
		return d
	}
	if s.claim.Load() {
		if err := c.claim(ctx, s); err != nil {
			return fail(err)
		}
		s.claim.Store(false)
	}
	entries, err := c.read(ctx, s.key)
	if err != nil {
		if isNoGroup(err) {
			var exists bool
			if exists, err = ensureGroup(ctx, c.e.redis(), s.key, Group); err == nil {
				if exists {
					return 0
				}
				return -1 // no stream yet: its first entry's notification wakes it
			}
		}
		return fail(err)
	}
	s.delay = c.cfg.RetryDelay
	if len(entries) > 0 {
		s.quietSince = time.Time{}
		c.checkVersions(ctx, s.sale, s.seg, s.tag, &s.highest, entries)
		c.store(ctx, s.sale, s.seg, s.key, entries)
		s.trimDue.Store(true)
		c.trim(ctx, s)
		if len(entries) < c.cfg.Batch {
			return max(c.cfg.Linger, 0)
		}
		return 0
	}
	if s.quietSince.IsZero() {
		s.quietSince = time.Now()
		return notifyQuiet
	}
	if left := notifyQuiet - time.Since(s.quietSince); left > 0 {
		return left
	}
	s.quietSince = time.Time{}
	if s.trimDue.Load() {
		c.trim(ctx, s)
	}
	return -1
}

// trim drops the stream's acknowledged entries (Engine.trimStream), unless it did less than
// TrimEvery ago; a stream that keeps some (DefaultStreamKeep, a reader behind) is trimmed
// again at a later check.
func (c *Consumer) trim(ctx context.Context, s *consumerStream) {
	now := time.Now()
	if last := s.lastTrim.Load(); last != 0 && now.Sub(time.Unix(0, last)) < c.cfg.TrimEvery {
		return
	}
	s.lastTrim.Store(now.UnixNano())
	left, err := c.e.trimStreamLeft(ctx, s.tag)
	if err != nil {
		if ctx.Err() == nil {
			background.Report(ctx, fmt.Errorf("sale %s: trimming its stream: %w", s.tag, err))
		}
		return
	}
	s.trimDue.Store(left > 0)
}

// read returns new entries for this consumer, without waiting.
func (c *Consumer) read(ctx context.Context, key string) ([]rueidis.XRangeSlice, error) {
	rdb := c.e.redis()
	c.reads.Add(1)
	cmd := rdb.B().Xreadgroup().Group(Group, c.cfg.Name).Count(int64(c.cfg.Batch)).Streams().Key(key).Id(">").Build()
	res, err := rdb.Do(ctx, cmd).AsXReadSlices()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return res[key], nil
}

// claim takes over entries that another consumer read but did not acknowledge within
// ClaimIdle (it crashed, or is stuck), and stores them.
func (c *Consumer) claim(ctx context.Context, s *consumerStream) error {
	rdb := c.e.redis()
	cursor := "0-0"
	for {
		cmd := rdb.B().Xautoclaim().Key(s.key).Group(Group).Consumer(c.cfg.Name).
			MinIdleTime(strconv.FormatInt(c.cfg.ClaimIdle.Milliseconds(), 10)).Start(cursor).
			Count(int64(c.cfg.Batch)).Build()
		v, err := rdb.Do(ctx, cmd).ToArray()
		if err != nil {
			if isNoGroup(err) {
				_, err := ensureGroup(ctx, rdb, s.key, Group)
				return err
			}
			return err
		}
		if len(v) < 2 {
			return nil
		}
		next, _ := v[0].ToString()
		entries, err := v[1].AsXRangeSlices()
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			c.cfg.Logger.Info("redisinv: took over events another consumer left pending", "sale", s.sale, "segment", s.seg, "entries", len(entries))
			c.store(ctx, s.sale, s.seg, s.key, entries)
			s.trimDue.Store(true)
		}
		if next == "0-0" || next == "" || ctx.Err() != nil {
			return nil
		}
		cursor = next
	}
}

// ensureGroup creates group at the start of the stream key, so that its reader gets every entry
// still kept, including those written before it existed, and the trim waits for it; a group
// that exists is fine. The stream is created for it (MKSTREAM) only while the sale's hash (of
// the same tag) exists: a reader that comes to a cooled sale's stream a moment after the cool
// must not give it a key again (docs/MODEL.md "Hot and cold sales"). Then exists is false: there
// is nothing to read, and the sale's first entry, should it be loaded again, notifies.
func ensureGroup(ctx context.Context, rdb rueidis.Client, key, group string) (exists bool, err error) {
	saleKey := strings.TrimSuffix(key, "events") + "sale"
	n, err := groupScript.Exec(ctx, rdb, []string{saleKey, key}, []string{group}).AsInt64()
	return n == 1, err
}

// groupScript is ensureGroup's: KEYS the sale's hash and its stream, ARGV the group. Reply 1
// (the group exists) or 0 (neither key exists: nothing is created).
var groupScript = rueidis.NewLuaScript(`
if redis.call('EXISTS', KEYS[2]) == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local r = redis.pcall('XGROUP', 'CREATE', KEYS[2], ARGV[1], '0', 'MKSTREAM')
if type(r) == 'table' and r.err and not string.find(r.err, '^BUSYGROUP') then
  return r
end
return 1
`)

func isNoGroup(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	return ok && len(e.Error()) >= 7 && e.Error()[:7] == "NOGROUP"
}

// store writes entries to the sink, retrying until it succeeds, and then acknowledges them.
// A batch the store refuses as invalid is split, and an event it refuses on its own is
// dropped with a log line (and acknowledged). When ctx ends, the batch in hand still gets up
// to 10 s to be stored and acknowledged.
func (c *Consumer) store(ctx context.Context, saleID string, seg int, key string, entries []rueidis.XRangeSlice) {
	events := make([]seckill.Event, 0, len(entries))
	ids := make([]string, 0, len(entries))
	for _, en := range entries {
		ids = append(ids, en.ID)
		if len(en.FieldValues) == 0 {
			c.dropped.Add(1)
			background.Report(ctx, fmt.Errorf("sale %s: dropping stream entry %s: it has no events", saleID, en.ID))
		}
		for _, fv := range en.FieldValues {
			ev, err := segmentEvent(saleID, seg, fv.Field, fv.Value)
			if err != nil {
				c.dropped.Add(1)
				background.Report(ctx, fmt.Errorf("sale %s: dropping a malformed event of stream entry %s: %w", saleID, en.ID, err))
				continue
			}
			events = append(events, ev)
		}
	}
	// The batch in hand is finished even when ctx ends, but not forever: 10 s after it ends, or
	// at the runner's Stop deadline if that comes first.
	sctx, cancel := background.Finish(ctx, 10*time.Second)
	defer cancel()
	if err := c.apply.Apply(sctx, events); err != nil {
		return // not stored: the entries stay pending and are claimed again later
	}
	rdb := c.e.redis()
	if err := rdb.Do(sctx, rdb.B().Xack().Key(key).Group(Group).Id(ids...).Build()).Error(); err != nil {
		background.Report(ctx, fmt.Errorf("sale %s: acknowledging %d stored entries failed; they will be stored again (idempotent): %w", saleID, len(ids), err))
	}
}

// checkVersions compares the versions of entries newly delivered to this consumer (XREADGROUP
// ">", never claims) with the highest it was delivered before, *highest, and raises it. The
// group delivers a stream's entries once each, in order, to all its consumers together, and a
// sale's versions grow with its entries, so in a Redis that keeps its history every new entry
// a consumer is delivered has a version at least its highest so far — across a rebuild too,
// whose entries start above every earlier version while the older ones stay in the stream. An
// entry below it means the stream went back in time with the sale (a failover to a replica
// that lagged: its group had not seen the later deliveries, or the sale's state made changes
// anew from an older version): the sale is treated as stale like a reply below a version seen
// (version.go), and rebuilt from the database, its keys replaced only if they are still below
// the higher of *highest and the database's recorded version. The batch is stored all the
// same: the store is idempotent and forward-only, so entries of an older state change nothing
// it has. A consumer that has read nothing yet of the sale (a process just started) cannot
// tell and compares nothing; the instances' own first call compares with the database.
// Each segment of a segmented sale has its own stream and its own versions: the check is the
// same on each, and a segment found gone back rebuilds the whole sale (Engine.stale), without
// the database's version (which is segment 0's: segmentEvent).
func (c *Consumer) checkVersions(ctx context.Context, saleID string, seg int, tag string, highest *uint64, entries []rueidis.XRangeSlice) {
	if !c.e.versionBook().on() {
		return
	}
	var low, top uint64 = 0, *highest
	for _, en := range entries {
		for _, fv := range en.FieldValues {
			v := entryVersion(fv.Value)
			if v == 0 {
				continue
			}
			if v < *highest && (low == 0 || v < low) {
				low = v
			}
			top = max(top, v)
		}
	}
	want := *highest
	*highest = top
	if low == 0 {
		return
	}
	c.stale.Add(1)
	if seg > 0 {
		_ = c.e.versionBook().refuse(tag, want, low)
		return
	}
	if vs := c.e.versionBook().source(); vs != nil {
		dctx, cancel := context.WithTimeout(ctx, dbTimeout)
		if db, err := vs.SaleVersion(dctx, saleID); err == nil {
			want = max(want, db)
		}
		cancel()
	}
	_ = c.e.versionBook().refuse(saleID, want, low) // logs once per rebuild, and starts it
}

// Stale is the number of batches whose entries showed a stream gone back in time.
func (c *Consumer) Stale() uint64 { return c.stale.Load() }

// entryVersion is the version an entry's event carries ("v<version>|" before it), 0 if none
// or malformed (decodeEvent reports those).
func entryVersion(e string) uint64 {
	if !strings.HasPrefix(e, "v") {
		return 0
	}
	vs, _, ok := strings.Cut(e[1:], "|")
	n, err := strconv.ParseUint(vs, 10, 64)
	if !ok || err != nil {
		return 0
	}
	return n
}

// segmentEvent is the event of a field of segment seg's stream entry, as the order store and the
// export get it: of the sale (a segment's events name the sale, as a one-segment sale's do),
// with segment 0's version only. The database records one version per sale (the highest it
// stored) and a fresh instance compares segment 0's replies with it; each segment's versions
// count its own changes, so another segment's would make segment 0 look behind (a false
// rebuild). A segment's versions are checked by the instances that saw them and by the
// consumer of its stream (checkVersions).
func segmentEvent(saleID string, seg int, field, value string) (seckill.Event, error) {
	ev, err := decodeEvent(saleID, rueidis.XRangeFieldValue{Field: field, Value: value})
	if seg > 0 {
		ev.Version = 0
	}
	return ev, err
}

// saleStreams is how many event streams the sale has: one per segment (1 for a one-segment
// sale), and as many after a rebuild made a segmented sale one segment (load.lua's 'streams'
// field: their entries are read to the end). It is for the consumers and the export, never the
// buy path: a sale this instance knows to be segmented costs nothing, another one read of
// segment 0 (segment.lua 'counts') until the sale is loaded, then nothing (kept).
func (e *Engine) saleStreams(ctx context.Context, saleID string) (int, error) {
	n := 1
	if in := e.segs.of(saleID); in != nil {
		n = in.n
	}
	if v, ok := e.streamCounts.Load(saleID); ok {
		return max(n, v.(int)), nil
	}
	r, err := e.execRaw(ctx, e.scripts.segment, saleID, "counts")
	if err != nil {
		return n, err
	}
	if r.code() != "ok" { // not loaded yet, or being rebuilt: ask again next time
		return n, nil
	}
	k := int(min(max(r.int(10), 1), maxSegments))
	e.streamCounts.Store(saleID, k)
	return max(n, k), nil
}

// decodeEvent turns a field of a stream entry written by emit (common.lua) into an Event,
// with the sale's version after the change when the entry carries one.
func decodeEvent(saleID string, fv rueidis.XRangeFieldValue) (seckill.Event, error) {
	if fv.Field != "e" {
		return seckill.Event{}, fmt.Errorf("field %q, want e", fv.Field)
	}
	e := fv.Value
	var version uint64 // "v<version>|" before the event; absent in entries older than versions
	if strings.HasPrefix(e, "v") {
		vs, rest, ok := strings.Cut(e[1:], "|")
		n, err := strconv.ParseUint(vs, 10, 64)
		if !ok || err != nil {
			return seckill.Event{}, fmt.Errorf("bad version %q", vs)
		}
		version, e = n, rest
	}
	f := strings.SplitN(e, "|", 11)
	if len(f) != 11 {
		return seckill.Event{}, errors.New("too few fields")
	}
	var nums [7]int64 // quantity, seq, amount, created, at, expires, payment id length
	for i := range nums {
		n, err := strconv.ParseInt(f[3+i], 10, 64)
		if err != nil {
			return seckill.Event{}, fmt.Errorf("field %d: %w", 3+i, err)
		}
		nums[i] = n
	}
	pidLen, rest := nums[6], f[10]
	if pidLen < 0 || pidLen > int64(len(rest)) {
		return seckill.Event{}, errors.New("payment id length out of range")
	}
	status, typ := seckill.ReservationStatus(f[1]), ""
	switch f[1] { // a change its status does not name (emit in common.lua)
	case seckill.EventGranted:
		status, typ = seckill.StatusHeld, seckill.EventGranted
	case seckill.EventLatePaid:
		status, typ = seckill.StatusPaid, seckill.EventLatePaid
	}
	r := seckill.Reservation{
		ID: saleID + "-" + f[0], SaleID: saleID, Status: status, UserID: f[2],
		Quantity: int(nums[0]), Seq: uint64(nums[1]), AmountCents: nums[2], CreatedAt: fromMillis(nums[3]),
		PaymentID: rest[:pidLen], IdempotencyKey: rest[pidLen:],
	}
	if r.Status == seckill.StatusHeld {
		t := fromMillis(nums[5])
		r.ExpiresAt = &t
	}
	if len(f[0]) != 32 || !r.Status.Valid() {
		return seckill.Event{}, errors.New("bad id or status")
	}
	return seckill.Event{Reservation: r, At: fromMillis(nums[4]), Type: typ, Version: version}, nil
}

// streamHost is all the streams' readers (Consumer, the export's streamLog, EventReader) see of
// the engine: the client, the sale's streams and their keys, the trimming, the decoding for the
// export, and the versions (a stream gone back in time starts the sale's rebuild).
type streamHost interface {
	redis() rueidis.Client
	streamKey(tag string) string
	saleStreams(ctx context.Context, saleID string) (int, error)
	streamTags(saleID string, n int) []string
	trimStream(ctx context.Context, saleID string) error
	trimStreamLeft(ctx context.Context, saleID string) (int64, error)
	watchNotes(w *noteWatcher) (unwatch func())
	notifyLocal(key string, except *noteWatcher)
	checkedByConsumer(keys []string) bool
	setChecked(keys map[string]bool)
	NotedSaleIDs() []string
	exported(saleID, id string, fvs []rueidis.XRangeFieldValue) []events.Event
	streamLastIDs(ctx context.Context, saleID string, n int) ([]string, error)
	versionBook() *versionBook
	logger() *slog.Logger
}

func (e *Engine) streamTags(saleID string, n int) []string { return e.segs.tagsOf(saleID, n) }
