// Package redisinv is the Redis inventory engine: the seckill.Inventory that many stateless
// `seckill serve` instances share. A sale's stock, holds, FIFO queue, per-user counts and
// idempotency keys live in Redis, and every operation is one Lua script (lua/*.lua), so each is
// atomic however many instances call at once. All keys of a sale share the hash tag
// {sale:<id>}, so each script runs on one node of a Redis Cluster; time comes from Redis TIME
// inside the scripts, so every instance shares one clock.
//
// Each script that changes a reservation appends the change to the sale's stream in the same
// script (no dual write); Consumer moves the stream to the order store through a consumer
// group. Sweeper keeps counts fresh without traffic, sweeping each sale when something in it
// comes due (a due-time index; one instance, elected with package lock, looks for what no live
// instance knows of). A sale whose keys are missing (Redis restarted empty, failover to a
// replica that lagged) is rebuilt from the order store by one instance, while every instance
// answers unavailable (503) rather than guess (WithRebuild).
//
// The engine follows docs/MODEL.md exactly, as the memory engine does; the shared conformance
// suite (seckilltest.TestInventory) is the judge. Where Redis forces a difference it is small
// and documented: times are kept in milliseconds, and a call expires at most 256 overdue holds
// before it acts (the sweeper expires the rest).
//
// The package is in rooms, each a type that sees of the Engine only a small interface, so that
// a change to one needs no read of the others (docs/DECISIONS.md "The house: the Redis engine's
// rooms"): the core (call.go: one script call, keys and clock, the reply decoded; scripts.go
// and lua/, each script's KEYS/ARGV written next to its Go caller); one sale's operations
// (inventory.go, buy.go with the batching, saleadmin.go); the segmented sales (segments, behind
// segCore); the local answers (localAnswers, behind localHost); the versions (versionBook) and
// the rebuild (rebuilder, behind rebuildHost); the streams, their consumer and the export
// (Consumer, streamLog, EventReader, behind streamHost); the sweeper.
package redisinv

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"golang.org/x/time/rate"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/logsummary"
	"github.com/seckill-go/seckill/lock"
)

var _ seckill.Inventory = (*Engine)(nil)

// Engine is the Redis inventory. It is safe for concurrent use; concurrent calls share round
// trips through rueidis' automatic pipelining.
type Engine struct {
	roomSource   roomSourceBox // restores a rebuilt sale's room (roomrestore.go)
	rdb          rueidis.Client
	prefix       string
	clock        seckill.Clock // nil: Redis TIME (production); set only by WithTestClock
	timeout      time.Duration
	log          *slog.Logger
	rebuild      *rebuilder // nil: a missing sale is simply not found
	recoveryRate float64    // WithRecoveryRate; 0: the default
	troubles     *logsummary.Summarizer
	cooled       atomic.Uint64 // sales this instance cooled (cold.go)
	noted        notedSales    // sales whose streams were notified lately (notify.go)
	scripts      *scriptSet
	batches      batcher // groups the buys of one sale that arrive together (buy.go)
	maxBatch     int
	stream       streamLimits                    // how the sales' streams are trimmed (events.go)
	acks         replicaAcks                     // WAIT after state-changing scripts (replicas.go); off by default
	versions     versionBook                     // the sales' highest versions seen (version.go)
	segs         segments                        // the segmented sales (segbook.go, segment.go, seglend.go)
	streamCounts sync.Map                        // sale id -> int, its event streams (stream.go saleStreams)
	touched      touchedSales                    // the sales this instance changed, for the sweeper (sweeper.go)
	notes        notifier                        // the one subscription to the streams' notifications (notify.go)
	checked      atomic.Pointer[map[string]bool] // the stream keys a running Consumer checks (Consumer.Run)

	local *localAnswers // buys answered without Redis (localanswers.go); nil: off
	// rateBlock is buy.lua's gcra block (WithRateLimits, ratelimit.go); "": no buy limits.
	rateBlock string
	inflight  inflightBound // the buys of each sale waiting for Redis (inflight.go)

	randMu  sync.Mutex
	randBuf []byte

	roomScripts *roomScriptSet // nil: defaultRoomScripts (room.go); tests swap in broken ones
}

// Option configures an Engine.
type Option func(*Engine)

// WithPrefix sets the prefix of every key (default "seckill:"). Keys of sale S are
// prefix+"{sale:S}:"+part. Tests give each engine its own prefix to share one Redis. The
// prefix must not contain braces, which would change the keys' hash tag (New panics).
func WithPrefix(p string) Option {
	return func(e *Engine) {
		if strings.ContainsAny(p, "{}") {
			panic("redisinv: WithPrefix(" + strconv.Quote(p) + "): the prefix must not contain braces")
		}
		e.prefix = p
	}
}

// WithTimeout bounds each call to Redis (default 2 s), so that a Redis that stops answering
// turns into a quick unavailable error instead of a hung buyer.
func WithTimeout(d time.Duration) Option { return func(e *Engine) { e.timeout = d } }

// WithMaxBatch sets how many buys of one sale that arrive together go in one script call, 1
// to 64 (default 64; see buy.go). 1 sends every buy alone, as a plain client would; it is
// for comparisons.
func WithMaxBatch(n int) Option {
	return func(e *Engine) { e.maxBatch = min(max(n, 1), maxBatch) }
}

// WithLogger sets the logger for rebuilds and background work.
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// WithTestClock makes every script use c's time instead of Redis TIME. It exists for the
// conformance suite, which moves time by hand; production wiring never sets it, because
// instances with their own clocks would disagree about when holds expire. Even so, a sale's
// clock never goes back (common.lua).
func WithTestClock(c seckill.Clock) Option { return func(e *Engine) { e.clock = c } }

// New returns an engine over rdb, which may be a standalone, Sentinel or Cluster client.
func New(rdb rueidis.Client, opts ...Option) *Engine {
	e := &Engine{rdb: rdb, prefix: "seckill:", timeout: 2 * time.Second, log: slog.New(slog.DiscardHandler), scripts: defaultScripts, maxBatch: maxBatch}
	for _, o := range opts {
		o(e)
	}
	e.troubles = logsummary.New(e.log, 0)
	if e.rebuild != nil && e.recoveryRate > 0 {
		e.rebuild.rate.SetLimit(rate.Limit(e.recoveryRate))
	}
	e.versions.attach(e.rebuild, e.log)
	e.segs.attach(e)
	if e.local != nil {
		e.local.attach(e)
	}
	return e
}

// Close waits for the engine's own goroutines: the senders of queued buys (buy.go; each ends
// when its queue is empty, a buy after Close sends its batch itself) and the background
// rebuilds, which it stops. It does not close the Redis client, which the caller owns. Stop
// the engine's background services (Services) and whatever calls Buy first.
func (e *Engine) Close() error {
	e.batches.close()
	if e.rebuild != nil {
		e.rebuild.close()
	}
	return nil
}

// ServicesConfig says which background services of the engine to run, and with what.
type ServicesConfig struct {
	// List lists the sales to work on (service.Service.LiveSaleIDs); required.
	List SaleLister
	// Locks elects the instance that runs the sweeper's reconcile pass; required.
	Locks *lock.Client
	// Sink is where the stream consumer stores the events (the order store); nil runs no
	// consumer (this instance leaves the streams to `seckill worker` processes).
	Sink Sink
	// SweepEvery is the sweeper's period; default 250 ms (invariant 8 of docs/MODEL.md).
	SweepEvery time.Duration
	// Consumer tunes the consumer; its List is set from List.
	Consumer ConsumerConfig
	// All lists every sale (service.Service.SaleIDs), for the sweeper's look for leftover keys
	// of sales outside their hot window when it starts to reconcile (cooling.go); nil: none.
	All SaleLister
}

// Services returns the engine's background services in dependency order: the consumer of the
// sales' event streams into the order store (if cfg.Sink is set), then the sweeper, whose
// reclaims the consumer stores. Run them with a background.Runner, which stops them in reverse
// order; then Close the engine.
func (e *Engine) Services(cfg ServicesConfig) []background.Service {
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = 250 * time.Millisecond
	}
	var out []background.Service
	if cfg.Sink != nil {
		cc := cfg.Consumer
		cc.List = cfg.List
		out = append(out, e.NewConsumer(cfg.Sink, cc))
	}
	sw := e.Sweeper(cfg.SweepEvery, cfg.List, cfg.Locks).(*sweeper)
	sw.all = cfg.All
	return append(out, sw)
}

// Ping checks that every Redis node answers, for readiness probes.
func (e *Engine) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	for addr, node := range e.rdb.Nodes() {
		if err := node.Do(ctx, node.B().Ping().Build()).Error(); err != nil {
			return fmt.Errorf("redis %s: %w", addr, err)
		}
	}
	return nil
}

// splitID returns the sale id and the 32-hex suffix of a reservation id made by
// seckill.ReservationID, or ok false for an id no engine of this format could have made.
func splitID(id string) (saleID, suffix string, ok bool) {
	saleID, ok = seckill.SaleOfReservation(id)
	if !ok || !seckill.ValidID(saleID) {
		return "", "", false
	}
	suffix = id[len(saleID)+1:]
	for i := 0; i < len(suffix); i++ {
		if c := suffix[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", "", false
		}
	}
	return saleID, suffix, true
}

// The doors the rooms see of the engine, beyond its core (call.go) and its public methods.

// scriptSet is the engine's scripts (tests swap in broken ones after New).
func (e *Engine) scriptSet() *scriptSet { return e.scripts }

// redis is the engine's Redis client.
func (e *Engine) redis() rueidis.Client { return e.rdb }

// versionBook is the engine's record of its sales' versions (version.go).
func (e *Engine) versionBook() *versionBook { return &e.versions }

// logger is the engine's logger.
func (e *Engine) logger() *slog.Logger { return e.log }

// summary is the engine's summarized log (logsummary), for troubles that come by the thousand
// (a loss of every sale's keys).
func (e *Engine) summary() *logsummary.Summarizer { return e.troubles }

// rebuildLost starts the rebuild of a segmented sale that lost a segment and reports whether
// the engine rebuilds at all (WithRebuild).
func (e *Engine) rebuildLost(saleID string) bool {
	if e.rebuild == nil {
		return false
	}
	e.rebuild.startLost(saleID)
	return true
}

// segmentsRebuilt makes the engine take a rebuilt sale for a one-segment sale (segBook.forget).
func (e *Engine) segmentsRebuilt(saleID string) { e.segs.forget(saleID, true) }

// segmentCounts are the numbers of segments this engine knows the sale to have or to be loaded
// with (the rebuild's probe, rebuilder.segmentCounts).
func (e *Engine) segmentCounts(saleID string) []int {
	ns := []int{e.segs.loadN}
	if in := e.segs.of(saleID); in != nil {
		ns = append(ns, in.n)
	}
	return ns
}

// newIncarnation makes the engine forget what it knew of a deleted sale (its segments, its
// local view) once a new sale with its id is found in Redis (versionBook.newIncarnation).
func (e *Engine) newIncarnation(saleID string) {
	sale, _, _ := strings.Cut(saleID, "#")
	e.segs.forget(sale, true)
	e.local.forget(sale)
}

// LoadSaleSegments preheats a sale split into n segments (1 is LoadSale). The free units are
// shared evenly; sold units are counted in segment 0. LoadSale calls it for a sale whose
// definition asks for segments (the API's `segments` option; docs/DECISIONS.md "Segmented stock").
func (e *Engine) LoadSaleSegments(ctx context.Context, def seckill.Sale, sold, n int) error {
	return e.segs.loadSegments(ctx, def, sold, n)
}
