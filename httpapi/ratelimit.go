package httpapi

import (
	"context"
	"hash/maphash"
	"net/http"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/clientaddr"
)

// Request budgets (docs/API.md "Rate limits", docs/DECISIONS.md "Limits across instances"):
// each limited endpoint is a scope, and a request spends one of its user's budget and one of
// its client address's in that scope, each in a bucket of its own (GCRA: seckill.RateLimit).
// Every instance checks its own buckets first (in process: exact for one process, and it
// keeps a flood off Redis); with the Redis engine, the shared check then makes N instances
// allow what one would: the buy's inside the buy script (redisinv WithRateLimits), the other
// scopes' through Config.SharedLimiter, one Redis round trip. A new endpoint is one line:
// `addr, err := s.rates.spend(r, scopeX, user)`, and its noun in scopeNoun.

// Scopes of the request budgets.
const (
	scopePath = "path" // GET /api/v1/sales/{id}/path
	scopeBuy  = "buy"  // POST /api/v1/sales/{id}/buy/{token}; its shared check is the engine's
	scopePay  = "pay"  // POST /api/v1/reservations/{rid}/pay
	scopeJoin = "join" // POST /api/v1/sales/{id}/waiting-room/join
)

// Per-address budget defaults (Config.AddrRate, AddrBurst): generous, because a carrier-grade
// NAT, a campus or an office can put hundreds of buyers behind one IPv4 address, all arriving
// at a sale's start. A thousand requests at once let a thousand of them ask once; 500 a second
// still holds one address with many accounts to the rate of fifty users.
const (
	DefaultAddrRate  = 500
	DefaultAddrBurst = 1000
)

// SharedLimiter spends request budgets across instances (redisinv.Limiter): one request of
// user's budget (userLimit) and of addr's (addrLimit; addr "" for none) in scope, in one round
// trip. It answers 0 when both had room, else how long until the request would be allowed.
type SharedLimiter interface {
	Allow(ctx context.Context, scope, user, addr string, userLimit, addrLimit seckill.RateLimit) (time.Duration, error)
}

// rates is the server's request budgets.
type rates struct {
	user, addr seckill.RateLimit
	trusted    clientaddr.Trusted
	shared     SharedLimiter // nil: this instance's buckets only
	// local are the buckets by scope: each scope's users' and addresses', made in newRates
	// for every scope; read-only after it.
	local map[string]scopeBuckets
}

type scopeBuckets struct{ user, addr *rateLimiter }

func newRates(user, addr seckill.RateLimit, trusted clientaddr.Trusted, shared SharedLimiter) *rates {
	rs := &rates{user: user, addr: addr, trusted: trusted, shared: shared, local: map[string]scopeBuckets{}}
	for scope := range scopeNoun {
		rs.local[scope] = scopeBuckets{user: newRateLimiter(user), addr: newRateLimiter(addr)}
	}
	return rs
}

// spend spends one request of user's and of r's client address's budgets in scope, at now:
// this instance's buckets, then (not for buys, whose shared check is the engine's) the shared
// limiter's. It returns the client address as engines take it ("" for none) and, when a budget
// is spent, a rate_limited error that names the wait.
//
// The client address is internal/clientaddr's (an IPv4 address, an IPv6 /64; behind
// --trusted-proxies, the rightmost untrusted X-Forwarded-For hop). Loopback peers and trusted
// proxies themselves have no per-address budget: each carries many clients (a proxy on the
// same host that is not named in --trusted-proxies would otherwise make the whole crowd one
// address), and the benches run there.
func (rs *rates) spend(r *http.Request, scope, user string, now time.Time) (string, error) {
	addr := ""
	if rs.addr.On() {
		if k, ok := clientKey(rs.trusted, r); ok && !k.Addr().IsLoopback() && !rs.trusted.Contains(k.Addr()) {
			addr = k.Addr().String()
		}
	}
	b, ok := rs.local[scope]
	if !ok {
		panic("httpapi: rate limit scope " + scope + " is not in scopeNoun")
	}
	var wait time.Duration
	if rs.user.On() {
		wait = b.user.allow(user, now)
	}
	if addr != "" {
		wait = max(wait, b.addr.allow(addr, now))
	}
	if wait == 0 && rs.shared != nil && scope != scopeBuy {
		w, err := rs.shared.Allow(r.Context(), scope, user, addr, rs.user, rs.addr)
		if err != nil {
			return addr, err
		}
		wait = w
	}
	if wait > 0 {
		return addr, seckill.RateLimited(wait, "too many %s requests; slow down", scopeNoun[scope])
	}
	return addr, nil
}

// scopeNoun names a scope's requests in a refusal; every scope is here (newRates makes the
// buckets of these).
var scopeNoun = map[string]string{scopePath: "purchase path", scopeBuy: "buy", scopePay: "payment", scopeJoin: "waiting-room join"}

// rateLimiter is one scope's buckets of one kind (users, or addresses) in this process: GCRA
// (seckill.RateLimit.GCRA, in µs), a theoretical arrival time per key. The keys are spread
// over shards, each with its own lock and table, so that a buy waits for few others and a
// sweep holds one shard's lock over one shard's keys.
type rateLimiter struct {
	limit  seckill.RateLimit
	seed   maphash.Seed
	every  int64 // sweep period of a shard, µs (sweepPeriod)
	shards [rateShards]rateShard
}

// rateShards is the number of shards of a rateLimiter.
const rateShards = 16

type rateShard struct {
	mu     sync.Mutex
	tats   map[string]int64
	latest int64 // the latest now seen, µs: the limiter's clock never goes back
	swept  int64
	_      [64]byte // keeps neighbouring shards' locks off one cache line
}

func newRateLimiter(l seckill.RateLimit) *rateLimiter {
	rl := &rateLimiter{limit: l, seed: maphash.MakeSeed(), every: sweepPeriod(l)}
	for i := range rl.shards {
		rl.shards[i].tats = make(map[string]int64)
	}
	return rl
}

// sweepPeriod is how often a shard forgets the keys whose time has passed: as often as a key's
// time can be ahead of the clock (burst × interval: a key idle that long is forgotten), within
// a second and a minute. The table then holds about the keys of one such period, not of a whole
// minute of a rush (a map of a minute of new buyers was slower to grow and to sweep, under
// the lock), and a sweep costs at most one pass over them per second.
func sweepPeriod(l seckill.RateLimit) int64 {
	if !l.On() {
		return int64(time.Minute / time.Microsecond)
	}
	ahead := l.Interval() * l.BurstOrOne()
	return min(max(ahead, int64(time.Second/time.Microsecond)), int64(time.Minute/time.Microsecond))
}

// allow spends one request of key's budget at now and answers 0, or answers how long until it
// would be allowed (nothing spent).
func (l *rateLimiter) allow(key string, now time.Time) time.Duration {
	if !l.limit.On() {
		return 0
	}
	sh := &l.shards[maphash.String(l.seed, key)%rateShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := now.UnixMicro()
	// Only forward: a wall clock stepped back (NTP) must not put every active key's time
	// ahead of the clock, which would lock them out for as long as the step.
	at = max(at, sh.latest)
	sh.latest = at
	sh.sweep(at, l.every)
	ok, tat, wait := l.limit.GCRA(sh.tats[key], at)
	if !ok {
		return time.Duration(wait) * time.Microsecond
	}
	sh.tats[key] = tat
	return 0
}

// sweep forgets keys whose time has passed (the same as none), at most once per every µs, so
// memory follows the number of recently active keys rather than every key ever seen.
func (sh *rateShard) sweep(at, every int64) {
	if at-sh.swept < every {
		return
	}
	sh.swept = at
	for k, tat := range sh.tats {
		if tat <= at {
			delete(sh.tats, k)
		}
	}
}
