package redisinv

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/lock"
)

// The event export reads each sale's stream as its outbox (docs/EVENTS.md): every change is
// in the stream as soon as the script that made it returns, so exporting from the stream is
// never a dual write. Each sink reads through a consumer group of its own, next to the order
// store's, and the stream is trimmed to the slowest group (trim.lua).

const (
	// DefaultStreamKeep is how long stream entries are kept after every reader has them: a
	// sink added while a sale runs (its group is created at the start of the stream) and
	// `seckill events replay` find them.
	DefaultStreamKeep = 30 * time.Second
	// DefaultStreamMost bounds a sale's stream, in entries (each one script call's changes, up
	// to 64 events). Past it the oldest entries are dropped even if an export sink has not read
	// them (never one the order store has not stored); the alarm fires at StreamAlarmShare of it.
	DefaultStreamMost = 1_000_000
	// StreamAlarmShare is the share of the maximum at which the engine warns, once a minute
	// per sale, that a reader is far behind.
	StreamAlarmShare = 0.8
	// exportConsumer is the one consumer name of every export group: one process at a time
	// reads a group (Lead), and the next leader finds the entries its predecessor read but did
	// not acknowledge as its own pending entries, and sends them first, in order.
	exportConsumer = "exporter"
)

// streamLimits is how a sale's stream is trimmed; zero fields take the defaults.
type streamLimits struct {
	keep time.Duration
	most int

	alarmMu sync.Mutex
	alarmed map[string]time.Time // sale -> last alarm

	fill streamFill // what the trims left, for /metrics (streamfill.go)
}

// WithStreamLimits sets how long stream entries are kept after every reader has them (keep;
// default DefaultStreamKeep, negative for not at all) and the most entries a sale's stream keeps
// (most; default DefaultStreamMost, negative for no bound).
func WithStreamLimits(keep time.Duration, most int) Option {
	return func(e *Engine) { e.stream.keep, e.stream.most = keep, most }
}

func (l *streamLimits) bounds() (keep time.Duration, most int) {
	keep, most = l.keep, l.most
	switch {
	case keep == 0:
		keep = DefaultStreamKeep
	case keep < 0:
		keep = 0
	}
	switch {
	case most == 0:
		most = DefaultStreamMost
	case most < 0:
		most = 0
	}
	return keep, most
}

// trimStream drops the entries of a sale's stream that every reader has acknowledged (trim.lua)
// and warns when the stream nears its maximum.
//
// trim.lua: KEYS the sale's eight keys (only the stream is used); ARGV [1] clock, [2] the order
// store's group (Group), [3] keep entries newer than this many ms, [4] most entries kept (0:
// no bound). Reply {'ok', removed, left}.
func (e *Engine) trimStream(ctx context.Context, saleID string) error {
	_, err := e.trimStreamLeft(ctx, saleID)
	return err
}

// trimStreamLeft is trimStream, and how many entries the stream keeps.
func (e *Engine) trimStreamLeft(ctx context.Context, saleID string) (int64, error) {
	keep, most := e.stream.bounds()
	r, err := e.execRaw(ctx, e.scripts.trim, saleID, Group, strconv.FormatInt(keep.Milliseconds(), 10), strconv.Itoa(most))
	if err != nil {
		return 0, err
	}
	if len(r) < 3 {
		return 0, nil
	}
	left := r.int(2)
	e.stream.fill.note(saleID, left, time.Now())
	if most > 0 && float64(left) >= StreamAlarmShare*float64(most) && e.stream.alarm(saleID) {
		e.log.Warn("redisinv: a sale's event stream nears its maximum: a reader (an export sink, or the order store) is far behind; past the maximum an export sink loses the oldest entries",
			"sale", saleID, "entries", left, "max", most)
	}
	return int64(left), nil
}

// alarm reports whether to warn about saleID now: at most once a minute per sale.
func (l *streamLimits) alarm(saleID string) bool {
	l.alarmMu.Lock()
	defer l.alarmMu.Unlock()
	if l.alarmed == nil {
		l.alarmed = make(map[string]time.Time)
	}
	if time.Since(l.alarmed[saleID]) < time.Minute {
		return false
	}
	l.alarmed[saleID] = time.Now()
	return true
}

// ExportGroup is the consumer group through which a sink reads the sales' streams: a short
// hash of the sink's name, so that every instance configured with the same sink shares it.
func ExportGroup(sink string) string {
	sum := sha256.Sum256([]byte(sink))
	return "seckill-export:" + hex.EncodeToString(sum[:8])
}

// ExportLog is a sale's stream as an events.Log, led through locks (one process per sale and
// sink at a time). A segmented sale's log is its segments' streams together (multiRead). It is
// an events.Quiet log: the exporter leads and reads it only while it has something new.
func (e *Engine) ExportLog(saleID string, locks *lock.Client) events.Log {
	l := &streamLog{e: e, sale: saleID, key: e.streamKey(saleID), locks: locks, woken: map[string]chan struct{}{}}
	l.known.Store(&map[string]bool{l.key: true})
	return l
}

type streamLog struct {
	e     streamHost
	sale  string
	key   string // segment 0's stream: the sale's own
	locks *lock.Client

	// What the notifications wake (AwaitWork): one watcher per log, kept while a pair waits.
	known   atomic.Pointer[map[string]bool] // the sale's stream keys, as keys last found them
	mu      sync.Mutex
	woken   map[string]chan struct{} // by sink whose pair runs: a token when the log may have something new
	watchMu sync.Mutex
	unwatch func() // while woken has a sink
}

var _ events.Quiet = (*streamLog)(nil)

// keys are the streams of the sale's segments, segment 0's first (Engine.saleStreams; only
// segment 0's when they cannot be told now).
func (l *streamLog) keys(ctx context.Context) []string {
	n, _ := l.e.saleStreams(ctx, l.sale)
	keys := make([]string, n)
	for i, tag := range l.e.streamTags(l.sale, n) {
		keys[i] = l.e.streamKey(tag)
	}
	if known := *l.known.Load(); len(known) != len(keys) {
		m := make(map[string]bool, len(keys))
		for _, k := range keys {
			m[k] = true
		}
		l.known.Store(&m)
	}
	return keys
}

// exportCheckEvery is how often a log waiting for work looks at its groups itself (one
// XINFO GROUPS per stream), for what a lost notification or a leader that died left, unless
// the engine's orders consumer checks the log's streams (every 10 s) and passes on what it
// finds (Consumer.check): this is for an instance that exports without consuming, and for
// sales exported after the consumer no longer lists them.
const exportCheckEvery = time.Minute

// wakeAll gives every sink waiting on the log a token.
func (l *streamLog) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.woken {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// AwaitWork returns at once on a sink's first call (a backlog from before is read), then when
// a notification names one of the sale's streams or the subscription starts again, or when a
// check every exportCheckEvery finds entries the sink's group has not read or acknowledged. A
// notification that comes while the sink's pair leads is kept for its next call, so an entry
// added as a leader gives the lead back is read by it, or by the next one.
func (l *streamLog) AwaitWork(ctx context.Context, sink string) error {
	l.mu.Lock()
	ch, seen := l.woken[sink]
	l.mu.Unlock()
	if !seen {
		l.watch(ctx, sink)
		return nil
	}
	t := time.NewTimer(exportCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
			return nil
		case <-t.C:
			if keys := l.keys(ctx); !l.e.checkedByConsumer(keys) && l.behind(ctx, keys, ExportGroup(sink)) {
				return nil
			}
			t.Reset(exportCheckEvery)
		}
	}
}

// behind reports whether the group has entries of one of the sale's streams not yet delivered
// or not acknowledged, or cannot tell (true: a read finds out).
func (l *streamLog) behind(ctx context.Context, keys []string, group string) bool {
	rdb := l.e.redis()
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = rdb.B().XinfoGroups().Key(k).Build()
	}
	for _, res := range rdb.DoMulti(ctx, cmds...) {
		groups, err := res.ToArray()
		if e, ok := rueidis.IsRedisErr(err); ok && strings.Contains(e.Error(), "no such key") {
			continue
		}
		if err != nil {
			return true
		}
		if unread, pending := groupBehind(groups, group); unread || pending {
			return true
		}
	}
	return false
}

// watch registers sink's pair, whose context is ctx, for the notifications of the log's
// streams: the log's one watcher (notify.go) is open while a pair of the log runs.
// Locks: watchMu, then the notifier's, then mu (the watcher's callbacks take mu only).
func (l *streamLog) watch(ctx context.Context, sink string) {
	l.watchMu.Lock()
	defer l.watchMu.Unlock()
	l.mu.Lock()
	l.woken[sink] = make(chan struct{}, 1)
	l.mu.Unlock()
	if l.unwatch == nil {
		l.unwatch = l.e.watchNotes(&noteWatcher{
			key: func(key string) {
				if (*l.known.Load())[key] {
					l.wakeAll()
				}
			},
			subscribed: l.wakeAll,
		})
	}
	context.AfterFunc(ctx, func() {
		l.watchMu.Lock()
		defer l.watchMu.Unlock()
		l.mu.Lock()
		delete(l.woken, sink)
		last := len(l.woken) == 0
		l.mu.Unlock()
		if last && l.unwatch != nil {
			l.unwatch()
			l.unwatch = nil
		}
	})
}

// TryLead takes the lead if no process has it, without waiting.
func (l *streamLog) TryLead(ctx context.Context, sink string) (context.Context, func(), bool) {
	lead, release, err := l.lead(ctx, sink, false)
	return lead, release, err == nil
}

func (l *streamLog) Name() string { return "sale " + l.sale }

// leadRetry is how often a process that does not lead a sale's export tries to take it.
const leadRetry = time.Second

func (l *streamLog) Lead(ctx context.Context, sink string) (context.Context, func(), error) {
	return l.lead(ctx, sink, true)
}

// lead takes the lead of the sale's export to sink, trying every leadRetry while another
// process has it if retry, else once (lock.ErrNotAcquired).
func (l *streamLog) lead(ctx context.Context, sink string, retry bool) (context.Context, func(), error) {
	m := l.locks.NewMutex("seckill:export:" + ExportGroup(sink)[len("seckill-export:"):] + ":" + l.sale)
	for {
		lease, err := m.TryLock(ctx, 0, 0)
		if err == nil {
			// The lead ends with the lease (lost or released) or with ctx (the exporter stops):
			// the lease's own context knows nothing of ctx.
			lead, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(lease.Context(), cancel)
			release := func() {
				stop()
				cancel()
				ctx, cancelUnlock := context.WithTimeout(context.Background(), time.Second)
				defer cancelUnlock()
				_ = m.Unlock(ctx)
			}
			return lead, release, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if !errors.Is(err, lock.ErrNotAcquired) {
			l.e.logger().Warn("redisinv: taking the export lead failed; retrying", "sale", l.sale, "err", err)
		}
		if !retry {
			return nil, nil, err
		}
		if !wait.Sleep(ctx, leadRetry) {
			return nil, nil, ctx.Err()
		}
	}
}

func (l *streamLog) Read(ctx context.Context, sink string, max int) (events.Batch, error) {
	group := ExportGroup(sink)
	if keys := l.keys(ctx); len(keys) > 1 {
		return l.multiRead(ctx, group, keys, max)
	}
	// The entries this group's consumer read and did not acknowledge come first: a
	// predecessor's (it crashed or lost the lead) or ours (an Ack that failed).
	entries, err := l.read(ctx, group, "0", max)
	if err == nil && len(entries) == 0 {
		entries, err = l.read(ctx, group, ">", max)
	}
	if err == nil && len(entries) == 0 { // idle only after two reads notifyQuiet apart (notify.go)
		if !wait.Sleep(ctx, notifyQuiet) {
			return events.Batch{}, ctx.Err()
		}
		entries, err = l.read(ctx, group, ">", max)
	}
	if err != nil {
		if !isNoGroup(err) {
			return events.Batch{}, err
		}
		exists, err := ensureGroup(ctx, l.e.redis(), l.key, group)
		if err != nil {
			return events.Batch{}, err
		}
		return events.Batch{Idle: !exists}, nil
	}
	if len(entries) == 0 {
		return events.Batch{Idle: true}, nil
	}
	b := events.Batch{Events: make([]events.Event, 0, len(entries))}
	ids := make([]string, len(entries))
	for i, en := range entries {
		ids[i] = en.ID
		b.Events = append(b.Events, l.e.exported(l.sale, en.ID, en.FieldValues)...)
	}
	b.Ack = func(ctx context.Context) error {
		rdb := l.e.redis()
		return rdb.Do(ctx, rdb.B().Xack().Key(l.key).Group(group).Id(ids...).Build()).Error()
	}
	return b, nil
}

// multiPoll is how often EventReader looks for new entries while it has none and may wait.
const multiPoll = 50 * time.Millisecond

// segEntry is a stream entry of segment seg.
type segEntry struct {
	seg int
	rueidis.XRangeSlice
}

// multiRead is Read for a segmented sale: the group's pending entries of every segment first,
// else the new ones (looking twice, notifyQuiet apart, before the log is idle), merged in stream-id
// order (the time Redis wrote them, so a reservation that a collapse moved to segment 0 has its
// earlier segment's events first as far as the nodes' clocks agree) and cut to max; entries
// read past max stay pending and come first in the next Read. The streams of a Cluster are on
// different nodes: they are read together in one pipelined round, never with a blocking read.
func (l *streamLog) multiRead(ctx context.Context, group string, keys []string, max int) (events.Batch, error) {
	entries, err := l.readEach(ctx, group, keys, "0", max)
	if err == nil && len(entries) == 0 {
		entries, err = l.readEach(ctx, group, keys, ">", max)
	}
	if err == nil && len(entries) == 0 { // idle only after two reads notifyQuiet apart (notify.go)
		if !wait.Sleep(ctx, notifyQuiet) {
			return events.Batch{}, ctx.Err()
		}
		entries, err = l.readEach(ctx, group, keys, ">", max)
	}
	if err != nil {
		return events.Batch{}, err
	}
	if len(entries) == 0 {
		return events.Batch{Idle: true}, nil
	}
	slices.SortStableFunc(entries, func(a, b segEntry) int { return compareStreamIDs(a.ID, b.ID) })
	entries = entries[:min(len(entries), max)]
	b := events.Batch{Events: make([]events.Event, 0, len(entries))}
	ids := make([][]string, len(keys))
	for _, en := range entries {
		ids[en.seg] = append(ids[en.seg], en.ID)
		b.Events = append(b.Events, l.e.exported(l.sale, en.ID, en.FieldValues)...)
	}
	b.Ack = func(ctx context.Context) error {
		rdb := l.e.redis()
		var cmds rueidis.Commands
		for seg, segIDs := range ids {
			if len(segIDs) > 0 {
				cmds = append(cmds, rdb.B().Xack().Key(keys[seg]).Group(group).Id(segIDs...).Build())
			}
		}
		for _, res := range rdb.DoMulti(ctx, cmds...) {
			if err := res.Error(); err != nil {
				return err
			}
		}
		return nil
	}
	return b, nil
}

// readEach reads up to max entries from id of every segment's stream through the group (no
// wait), creating the group where it is missing.
func (l *streamLog) readEach(ctx context.Context, group string, keys []string, id string, max int) ([]segEntry, error) {
	rdb := l.e.redis()
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = rdb.B().Xreadgroup().Group(group, exportConsumer).Count(int64(max)).Streams().Key(k).Id(id).Build()
	}
	var out []segEntry
	for i, res := range rdb.DoMulti(ctx, cmds...) {
		got, err := res.AsXReadSlices()
		switch {
		case rueidis.IsRedisNil(err):
		case isNoGroup(err):
			if _, err := ensureGroup(ctx, rdb, keys[i], group); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err
		}
		for _, en := range got[keys[i]] {
			out = append(out, segEntry{seg: i, XRangeSlice: en})
		}
	}
	return out, nil
}

// compareStreamIDs orders stream ids "<ms>-<seq>" by time, then sequence.
func compareStreamIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseUint(am, 10, 64)
	y, _ := strconv.ParseUint(bm, 10, 64)
	if c := cmp.Compare(x, y); c != 0 {
		return c
	}
	x, _ = strconv.ParseUint(as, 10, 64)
	y, _ = strconv.ParseUint(bs, 10, 64)
	return cmp.Compare(x, y)
}

// exported is the exported form of the events of a stream entry of the sale (malformed ones
// logged and left out): for the export and for EventReader alike.
func (e *Engine) exported(saleID, id string, fvs []rueidis.XRangeFieldValue) []events.Event {
	var out []events.Event
	for _, fv := range fvs {
		ev, err := decodeEvent(saleID, fv)
		if err != nil {
			e.log.Error("redisinv: a malformed stream entry is not exported", "sale", saleID, "entry", id, "err", err)
			continue
		}
		if x, ok := events.FromEngine(ev); ok {
			out = append(out, x)
		}
	}
	return out
}

// read is XREADGROUP for the export consumer, without waiting: from id "0" (its pending
// entries) or ">" (new ones).
func (l *streamLog) read(ctx context.Context, group, id string, count int) ([]rueidis.XRangeSlice, error) {
	rdb := l.e.redis()
	cmd := rdb.B().Xreadgroup().Group(group, exportConsumer).Count(int64(count)).Streams().Key(l.key).Id(id).Build()
	res, err := rdb.Do(ctx, cmd).AsXReadSlices()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return res[l.key], nil
}

// Lag counts stream entries, not events: an entry holds the changes of one script call (a
// grouped call of up to 64 buys makes one entry). The oldest is the first entry the group has
// not acknowledged: its oldest pending one, else the first not yet delivered. A segmented
// sale's lag is its segments' summed, its oldest the oldest of theirs.
func (l *streamLog) Lag(ctx context.Context, sink string) (int64, time.Time, error) {
	var total int64
	var oldest time.Time
	for _, key := range l.keys(ctx) {
		n, t, err := l.lag(ctx, key, ExportGroup(sink))
		if err != nil {
			return 0, time.Time{}, err
		}
		total += n
		if !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	return total, oldest, nil
}

// lag is Lag of one stream.
func (l *streamLog) lag(ctx context.Context, key, group string) (int64, time.Time, error) {
	rdb := l.e.redis()
	groups, err := rdb.Do(ctx, rdb.B().XinfoGroups().Key(key).Build()).ToArray()
	if err != nil {
		if e, ok := rueidis.IsRedisErr(err); ok && strings.Contains(e.Error(), "no such key") {
			return 0, time.Time{}, nil
		}
		return 0, time.Time{}, err
	}
	for _, g := range groups {
		f := fields(g)
		if f["name"] != group {
			continue
		}
		pending, _ := strconv.ParseInt(f["pending"], 10, 64)
		behind, known := int64(0), false
		if s, ok := f["lag"]; ok && s != "" {
			behind, err = strconv.ParseInt(s, 10, 64)
			known = err == nil
		}
		if !known { // Redis cannot tell (entries deleted mid-stream): count them
			n, err := rdb.Do(ctx, rdb.B().Xrange().Key(key).Start("("+f["last-delivered-id"]).End("+").Build()).ToArray()
			if err != nil {
				return 0, time.Time{}, err
			}
			behind = int64(len(n))
		}
		var first string
		if pending > 0 {
			p, err := rdb.Do(ctx, rdb.B().Xpending().Key(key).Group(group).Build()).ToArray()
			if err == nil && len(p) >= 2 {
				first, _ = p[1].ToString()
			}
		} else if behind > 0 {
			n, err := rdb.Do(ctx, rdb.B().Xrange().Key(key).Start("("+f["last-delivered-id"]).End("+").Count(1).Build()).AsXRange()
			if err == nil && len(n) > 0 {
				first = n[0].ID
			}
		}
		return pending + behind, streamIDTime(first), nil
	}
	// No group yet: the sink has read nothing of this stream.
	n, err := rdb.Do(ctx, rdb.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil || n == 0 {
		return 0, time.Time{}, err
	}
	x, err := rdb.Do(ctx, rdb.B().Xrange().Key(key).Start("-").End("+").Count(1).Build()).AsXRange()
	if err != nil || len(x) == 0 {
		return n, time.Time{}, err
	}
	return n, streamIDTime(x[0].ID), nil
}

// fields reads an XINFO reply's field/value pairs, integers and strings alike, as text (a
// missing value, such as an unknown lag, is left out).
func fields(m rueidis.RedisMessage) map[string]string {
	f := map[string]string{}
	if mm, err := m.ToMap(); err == nil { // RESP3
		for k, v := range mm {
			if s := text(v); s != "" {
				f[k] = s
			}
		}
		return f
	}
	kv, _ := m.ToArray()
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].ToString()
		if s := text(kv[i+1]); s != "" {
			f[k] = s
		}
	}
	return f
}

func text(v rueidis.RedisMessage) string {
	if s, err := v.ToString(); err == nil {
		return s
	}
	if n, err := v.AsInt64(); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// streamIDTime is the time in a stream id "<ms>-<seq>" (zero for "").
func streamIDTime(id string) time.Time {
	ms, _, ok := strings.Cut(id, "-")
	if !ok {
		return time.Time{}
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// EventReader reads a sale's event streams, one per segment (one for a one-segment sale), for
// `seckill events tail` and `replay`: their entries merged in stream-id order (the time Redis
// wrote them, as the export's multiRead merges them; entries of different streams written in
// the same millisecond come in segment order), each stream from a cursor of its own.
// Stream entries are kept only until every reader has them and DefaultStreamKeep (or
// WithStreamLimits) has passed: it reads what is left.
type EventReader struct {
	e        streamHost
	sale     string
	from     string   // where a stream not yet read starts (after this id)
	end      string   // the last id to read, "+" for the streams' ends
	tail     bool     // from the streams' newest entries at the first read
	cursor   []string // per stream: the id of the last entry read (nil before the first read)
	lastRead int      // entries the last Next read
}

// NewEventReader reads the sale's streams after the entry id after ("0-0" for the start; a time
// as "<ms>-<seq>"; "$" for the newest entries when it first reads, as a tail) and up to end
// ("+" for the ends of the streams).
func (e *Engine) NewEventReader(saleID, after, end string) *EventReader {
	return &EventReader{e: e, sale: saleID, from: after, end: end, tail: after == "$"}
}

// Next returns the exported form of the events in the next entries: up to count from each
// stream, merged in stream-id order and cut where one stream's page ends so that no later read
// can bring an entry that should have come before them. When block > 0 and there is nothing,
// it looks again every multiPoll for up to block (a Cluster's streams are on different nodes:
// one blocking read cannot wait on them all).
func (r *EventReader) Next(ctx context.Context, count int, block time.Duration) ([]events.Event, error) {
	n, err := r.e.saleStreams(ctx, r.sale)
	if err != nil {
		return nil, err
	}
	if r.tail && r.cursor == nil {
		// The streams' newest entries now; a stream found later (a sale not yet loaded
		// showed one) starts at this moment.
		r.from = strconv.FormatInt(time.Now().UnixMilli(), 10) + "-0"
		if r.cursor, err = r.e.streamLastIDs(ctx, r.sale, n); err != nil {
			return nil, err
		}
	}
	for len(r.cursor) < n {
		r.cursor = append(r.cursor, r.from)
	}
	entries, full, err := r.read(ctx, count)
	for start := time.Now(); err == nil && len(entries) == 0 && block > 0 && time.Since(start) < block; {
		if !wait.Sleep(ctx, multiPoll) {
			return nil, ctx.Err()
		}
		entries, full, err = r.read(ctx, count)
	}
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(entries, func(a, b segEntry) int { return compareStreamIDs(a.ID, b.ID) })
	// A stream that filled its page may have more entries before another stream's last one:
	// keep only what comes up to the earliest full page's end.
	cut := ""
	for _, last := range full {
		if last != "" && (cut == "" || compareStreamIDs(last, cut) < 0) {
			cut = last
		}
	}
	var out []events.Event
	r.lastRead = 0
	for _, en := range entries {
		if cut != "" && compareStreamIDs(en.ID, cut) > 0 {
			break
		}
		r.cursor[en.seg] = en.ID
		r.lastRead++
		out = append(out, r.e.exported(r.sale, en.ID, en.FieldValues)...)
	}
	return out, nil
}

// Done reports that the last Next read no entry: the streams had nothing more up to end.
func (r *EventReader) Done() bool { return r.lastRead == 0 }

// read reads up to count entries after each stream's cursor; full has, for each stream whose
// page was full, the id of its last entry ("" for the others).
func (r *EventReader) read(ctx context.Context, count int) ([]segEntry, []string, error) {
	rdb := r.e.redis()
	cmds := make(rueidis.Commands, len(r.cursor))
	tags := r.e.streamTags(r.sale, len(r.cursor))
	for seg, after := range r.cursor {
		cmds[seg] = rdb.B().Xrange().Key(r.e.streamKey(tags[seg])).Start("(" + after).End(r.end).Count(int64(count)).Build()
	}
	var out []segEntry
	full := make([]string, len(r.cursor))
	for seg, res := range rdb.DoMulti(ctx, cmds...) {
		got, err := res.AsXRangeSlices()
		if err != nil {
			return nil, nil, err
		}
		for _, en := range got {
			out = append(out, segEntry{seg: seg, XRangeSlice: en})
		}
		if len(got) == count {
			full[seg] = got[len(got)-1].ID
		}
	}
	return out, full, nil
}

// streamLastIDs is the id of the newest entry of each of the sale's n streams, "0-0" for one
// that has none.
func (e *Engine) streamLastIDs(ctx context.Context, saleID string, n int) ([]string, error) {
	rdb := e.rdb
	cmds := make(rueidis.Commands, n)
	for seg, tag := range e.segs.tagsOf(saleID, n) {
		cmds[seg] = rdb.B().Xrevrange().Key(e.streamKey(tag)).End("+").Start("-").Count(1).Build()
	}
	ids := make([]string, n)
	for seg, res := range rdb.DoMulti(ctx, cmds...) {
		x, err := res.AsXRange()
		if err != nil {
			return nil, err
		}
		ids[seg] = "0-0"
		if len(x) > 0 {
			ids[seg] = x[0].ID
		}
	}
	return ids, nil
}
