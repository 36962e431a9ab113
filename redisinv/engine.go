// Package redisinv is the Redis inventory engine: the seckill.Inventory that many stateless
// `seckill serve` instances share. A sale's stock, holds, FIFO queue, per-user counts and
// idempotency keys live in Redis, and every operation is one Lua script (lua/*.lua), so each is
// atomic however many instances call at once. All keys of a sale share the hash tag
// {sale:<id>}, so each script runs on one node of a Redis Cluster; time comes from Redis TIME
// inside the scripts, so every instance shares one clock.
//
// Each script that changes a reservation appends the change to the sale's stream in the same
// script (no dual write); Consumer moves the stream to the order store through a consumer
// group. Sweeper keeps counts fresh without traffic, one instance per sale at a time (elected
// with package lock). A sale whose keys are missing (Redis restarted empty, failover to a
// replica that lagged) is rebuilt from the order store by one instance, while every instance
// answers unavailable (503) rather than guess (WithRebuild).
//
// The engine follows docs/MODEL.md exactly, as the memory engine does; the shared conformance
// suite (seckilltest.TestInventory) is the judge. Where Redis forces a difference it is small
// and documented: times are kept in milliseconds, and a call expires at most 256 overdue holds
// before it acts (the sweeper expires the rest).
package redisinv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/lock"
)

var _ seckill.Inventory = (*Engine)(nil)

// Engine is the Redis inventory. It is safe for concurrent use; concurrent calls share round
// trips through rueidis' automatic pipelining.
type Engine struct {
	rdb          rueidis.Client
	prefix       string
	clock        seckill.Clock // nil: Redis TIME (production); set only by WithTestClock
	timeout      time.Duration
	log          *slog.Logger
	rebuild      *rebuilder // nil: a missing sale is simply not found
	scripts      *scriptSet
	batches      batcher // groups the buys of one sale that arrive together (batch.go)
	maxBatch     int
	stream       streamLimits // how the sales' streams are trimmed (events.go)
	acks         replicaAcks  // WAIT after state-changing scripts (replicas.go); off by default
	versions     versionBook  // the sales' highest versions seen (version.go)
	segs         sync.Map     // sale id -> *segInfo, the segmented sales seen (segment.go)
	streamCounts sync.Map     // sale id -> int, its event streams (stream.go saleStreams)
	tagSets      sync.Map     // sale id -> []string, its segments' tags (segment.go segTags)
	loadSegs     int          // withSegments: LoadSale splits every sale (tests)
	noLend       bool         // tests: a segment short of units collapses the sale at once

	local    *localAnswers // buys answered without Redis (localanswers.go); nil: off
	inflight inflightBound // the buys of each sale waiting for Redis (inflight.go)

	randMu  sync.Mutex
	randBuf []byte
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
// to 64 (default 64; see batch.go). 1 sends every buy alone, as a plain client would; it is
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
	return e
}

// Close waits for the engine's own goroutines: the senders of queued buys (batch.go; each ends
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
	// Locks elects the sweeper of each sale among the instances; required.
	Locks *lock.Client
	// Sink is where the stream consumer stores the events (the order store); nil runs no
	// consumer (this instance leaves the streams to `seckill worker` processes).
	Sink Sink
	// SweepEvery is the sweeper's period; default 250 ms (invariant 8 of docs/MODEL.md).
	SweepEvery time.Duration
	// Consumer tunes the consumer; its List is set from List.
	Consumer ConsumerConfig
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
	return append(out, e.Sweeper(cfg.SweepEvery, cfg.List, cfg.Locks))
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

// keyParts are the suffixes of a sale's keys, in the order of the scripts' KEYS.
var keyParts = [...]string{"sale", "res", "holds", "queue", "users", "idem", "events"}

// keys returns the seven keys of a sale (common.lua).
func (e *Engine) keys(saleID string) []string {
	base := e.prefix + "{sale:" + saleID + "}:"
	ks := make([]string, len(keyParts))
	for i, p := range keyParts {
		ks[i] = base + p
	}
	return ks
}

// streamKey is the sale's event stream.
func (e *Engine) streamKey(saleID string) string { return e.prefix + "{sale:" + saleID + "}:events" }

// clockArg is ARGV[1] of every script: empty for Redis TIME, or the test clock in ms.
func (e *Engine) clockArg() string {
	if e.clock == nil {
		return ""
	}
	return strconv.FormatInt(e.clock.Now().UnixMilli(), 10)
}

// reply is a script's answer: its first element is "ok" or a domain code.
type reply []rueidis.RedisMessage

func (r reply) code() string { return r.str(0) }

func (r reply) str(i int) string {
	if i >= len(r) {
		return ""
	}
	s, _ := r[i].ToString()
	return s
}

func (r reply) int(i int) int64 {
	if i >= len(r) {
		return 0
	}
	n, _ := r[i].AsInt64()
	return n
}

// errUnavailable is the client-facing error for a Redis that does not answer.
func errUnavailable(cause error) error {
	return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeUnavailable, "the inventory is unavailable; retry shortly"), cause)
}

// exec runs s for one sale with args after the clock. A sale that is missing is handed to the
// rebuilder (not_found, or unavailable while it is rebuilt); one being rebuilt is unavailable.
// Transport failures and timeouts are unavailable; a Redis error reply means a script refused
// its arguments, which is a bug on this side, and is internal.
func (e *Engine) exec(ctx context.Context, s *script, saleID string, args ...string) (reply, error) {
	r, err := e.execRaw(ctx, s, saleID, args...)
	if err != nil {
		return nil, err
	}
	switch r.code() {
	case "not_loaded":
		return nil, e.missing(ctx, saleID)
	case "loading":
		if e.rebuild != nil {
			// A rebuild may have stopped half way (its instance died, it lost its lock): if
			// nobody holds the lock any more, this instance takes over.
			e.rebuild.start(saleID)
		}
		return nil, seckill.Errorf(seckill.CodeUnavailable, "sale %q is being restored from the database; retry shortly", saleID)
	}
	return r, nil
}

// execRaw is exec without the handling of missing and loading sales.
func (e *Engine) execRaw(ctx context.Context, s *script, saleID string, args ...string) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	argv := make([]string, 0, 1+len(args))
	argv = append(argv, e.clockArg())
	argv = append(argv, args...)
	floor := e.versionFloor(saleID)                  // version.go
	msgs, err := e.run(ctx, s, e.keys(saleID), argv) // replicas.go
	if err != nil {
		wrapped := fmt.Errorf("redisinv: %s script for sale %s: %w", s.name, saleID, err)
		if transient(err) {
			return nil, errUnavailable(wrapped)
		}
		return nil, wrapped
	}
	r, v, err := splitVersion(msgs)
	if err != nil {
		return nil, fmt.Errorf("redisinv: %s script for sale %s: %w", s.name, saleID, err)
	}
	e.noteVersion(saleID, s.name, v) // localanswers.go: a view older than this call is stale
	if err := e.checkVersion(ctx, saleID, floor, v); err != nil {
		return nil, err
	}
	return r, nil
}

// transientReplies are the error replies of a Redis that cannot serve now but will: out of
// memory, busy with a long script, a replica or a node without its master, a cluster
// reconfiguring, a server loading its data set.
var transientReplies = []string{"OOM", "BUSY", "READONLY", "MASTERDOWN", "NOREPLICAS", "CLUSTERDOWN",
	"LOADING", "TRYAGAIN", "MOVED", "ASK"}

// transient reports whether err is worth a retry later (unavailable, 503): a failure to reach
// Redis or one of transientReplies. Other error replies mean a script refused its keys or
// arguments, or found a key of the wrong type: a bug or a corrupted key, internal.
func transient(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return true // transport, timeout
	}
	word, _, _ := strings.Cut(re.Error(), " ")
	return slices.Contains(transientReplies, word)
}

// missing decides what a call on a sale whose keys are missing answers.
func (e *Engine) missing(ctx context.Context, saleID string) error {
	if e.rebuild == nil {
		return seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	return e.rebuild.missing(ctx, saleID)
}

// random returns 16 lowercase hex digits from crypto/rand, the random half of a reservation
// id. It reads 4 KiB at a time, so a buy pays for one system call per 512 reservations.
func (e *Engine) random() string {
	e.randMu.Lock()
	defer e.randMu.Unlock()
	if len(e.randBuf) < 8 {
		e.randBuf = make([]byte, 4096)
		_, _ = rand.Read(e.randBuf)
	}
	s := hex.EncodeToString(e.randBuf[:8])
	e.randBuf = e.randBuf[8:]
	return s
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

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func itoa(n int) string { return strconv.Itoa(n) }

func i64toa(n int64) string { return strconv.FormatInt(n, 10) }

// errNotFound is the not_found error for a reservation id.
func errNotFound(id string) error {
	return seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
}

// isCode reports whether err is a domain error with code c.
func isCode(err error, c seckill.Code) bool {
	var de *seckill.Error
	return errors.As(err, &de) && de.Code == c
}
