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
	"github.com/seckill-go/seckill/internal/wait"
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
	List       SaleLister
	Name       string        // consumer name in the group; default host-pid-random, unique per process
	Batch      int           // most entries read and stored at once (up to 64 events each); default 128
	Block      time.Duration // how long a read waits for new entries; default 1 s
	ClaimIdle  time.Duration // entries pending this long with another consumer are taken over; default 5 s
	ClaimEvery time.Duration // how often to look for such entries; default 2 s
	TrimEvery  time.Duration // how often to drop acknowledged entries; default 1 s
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
// stored. A Consumer is a background.Service.
type Consumer struct {
	e     streamHost
	apply pipeline.Applier
	cfg   ConsumerConfig

	dropped atomic.Uint64 // malformed entries; the applier counts the events the store refuses
	failed  atomic.Uint64 // failed reads and claims; the applier counts failed stores
	stale   atomic.Uint64 // batches that showed a stream gone back in time (checkVersions)
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
	if cfg.Block <= 0 {
		cfg.Block = time.Second
	}
	if cfg.ClaimIdle <= 0 {
		cfg.ClaimIdle = 5 * time.Second
	}
	if cfg.ClaimEvery <= 0 {
		cfg.ClaimEvery = 2 * time.Second
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

// Run consumes the streams of every sale that List returns (looked up again every second)
// until ctx is done, one goroutine per stream, and returns nil once they have all stopped. A
// segmented sale has a stream per segment (Engine.saleStreams), each consumed on its own. A
// sale that List no longer returns (it is over) has its goroutines stopped. Its exit: a batch being
// stored when a goroutine is stopped is finished and acknowledged (within 10 s, and within the
// runner's Stop deadline); entries read but not stored stay pending and are taken over by
// another consumer. Every failure (listing, reading, claiming, storing, acknowledging) is
// reported (background.Report) and retried.
func (c *Consumer) Run(ctx context.Context) error {
	list := c.cfg.List
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[string]context.CancelFunc{} // by stream: segTag
	defer func() {
		for _, stop := range running {
			stop()
		}
	}()
	pass := func(ctx context.Context) {
		if ids, err := list(ctx); err != nil {
			background.Report(ctx, fmt.Errorf("list sales: %w", err))
		} else {
			listed := make(map[string]bool, len(ids))
			for _, id := range ids {
				listed[id] = true
				n, err := c.e.saleStreams(ctx, id)
				if err != nil {
					background.Report(ctx, fmt.Errorf("sale %s: finding its segments: %w", id, err))
				}
				for seg, tag := range c.e.streamTags(id, n) {
					if running[tag] == nil {
						sctx, stop := context.WithCancel(ctx)
						running[tag] = stop
						wg.Go(func() { c.consume(sctx, id, seg, tag) })
					}
				}
			}
			for tag, stop := range running {
				if id, _, _ := strings.Cut(tag, "#"); !listed[id] {
					stop()
					delete(running, tag)
				}
			}
		}
	}
	pass(ctx)
	wait.Every(ctx, listEvery, pass)
	return nil
}

// consume is the loop for the stream of one segment of a sale (0 for a one-segment sale),
// whose tag is tag (segTag).
func (c *Consumer) consume(ctx context.Context, saleID string, seg int, tag string) {
	key := c.e.streamKey(tag)
	var lastClaim, lastTrim time.Time
	var highest uint64 // the highest version among the entries this consumer was delivered new
	delay := c.cfg.RetryDelay
	backoff := func(err error) {
		if ctx.Err() != nil {
			return
		}
		c.failed.Add(1)
		background.Report(ctx, fmt.Errorf("sale %s: reading events failed (retrying in %v): %w", tag, delay, err))
		wait.Sleep(ctx, delay)
		delay = min(2*delay, 2*time.Second)
	}
	for ctx.Err() == nil {
		if time.Since(lastClaim) >= c.cfg.ClaimEvery {
			if err := c.claim(ctx, saleID, seg, key); err != nil {
				backoff(err)
				continue
			}
			lastClaim = time.Now()
		}
		entries, err := c.read(ctx, key)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if isNoGroup(err) {
				err = c.createGroup(ctx, key)
			}
			if err != nil {
				backoff(err)
			}
			continue
		}
		delay = c.cfg.RetryDelay
		if len(entries) > 0 {
			c.checkVersions(ctx, saleID, seg, tag, &highest, entries)
			c.store(ctx, saleID, seg, key, entries)
			if len(entries) < c.cfg.Batch && c.cfg.Linger > 0 {
				wait.Sleep(ctx, c.cfg.Linger)
			}
		}
		if time.Since(lastTrim) >= c.cfg.TrimEvery {
			if err := c.e.trimStream(ctx, tag); err != nil {
				background.Report(ctx, fmt.Errorf("sale %s: trimming its stream: %w", tag, err))
			}
			lastTrim = time.Now()
		}
	}
}

// read returns new entries for this consumer, waiting up to Block for some.
func (c *Consumer) read(ctx context.Context, key string) ([]rueidis.XRangeSlice, error) {
	rdb := c.e.redis()
	cmd := rdb.B().Xreadgroup().Group(Group, c.cfg.Name).Count(int64(c.cfg.Batch)).
		Block(c.cfg.Block.Milliseconds()).Streams().Key(key).Id(">").Build()
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
func (c *Consumer) claim(ctx context.Context, saleID string, seg int, key string) error {
	rdb := c.e.redis()
	cursor := "0-0"
	for {
		cmd := rdb.B().Xautoclaim().Key(key).Group(Group).Consumer(c.cfg.Name).
			MinIdleTime(strconv.FormatInt(c.cfg.ClaimIdle.Milliseconds(), 10)).Start(cursor).
			Count(int64(c.cfg.Batch)).Build()
		v, err := rdb.Do(ctx, cmd).ToArray()
		if err != nil {
			if isNoGroup(err) {
				return c.createGroup(ctx, key)
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
			c.cfg.Logger.Info("redisinv: took over events another consumer left pending", "sale", saleID, "segment", seg, "entries", len(entries))
			c.store(ctx, saleID, seg, key, entries)
		}
		if next == "0-0" || next == "" || ctx.Err() != nil {
			return nil
		}
		cursor = next
	}
}

// createGroup creates the group at the start of the stream (creating the stream if needed),
// so that entries written before any consumer existed are stored too.
func (c *Consumer) createGroup(ctx context.Context, key string) error {
	rdb := c.e.redis()
	err := rdb.Do(ctx, rdb.B().XgroupCreate().Key(key).Group(Group).Id("0").Mkstream().Build()).Error()
	if e, ok := rueidis.IsRedisErr(err); ok && e.IsBusyGroup() {
		return nil
	}
	return err
}

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
	exported(saleID, id string, fvs []rueidis.XRangeFieldValue) []events.Event
	streamLastIDs(ctx context.Context, saleID string, n int) ([]string, error)
	versionBook() *versionBook
	logger() *slog.Logger
}

func (e *Engine) streamTags(saleID string, n int) []string { return e.segs.tagsOf(saleID, n) }
