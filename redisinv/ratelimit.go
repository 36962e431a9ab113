// The limits across instances (docs/DECISIONS.md "Limits across instances"): GCRA in Redis, so
// that N instances allow a user (or a client address) what one would, not N times it. A buy
// pays for its check inside buy.lua, in the round trip it makes anyway (WithRateLimits: the
// gcra block of buy.lua's ARGV, state in the sale's rate key); other endpoints (the purchase
// path, payment starts) ask a Limiter, one script call per subject, all of a request's in one
// round trip.

package redisinv

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
)

// WithRateLimits makes every buy spend its user's budget and its client address's
// (seckill.BuyRequest.ClientAddr) in buy.lua, across every instance sharing the sale's keys:
// over either, the buy is answered rate_limited with how long to wait, before any of its other
// rules. A limit that is off (Rate <= 0) is not checked; both off is the default: every buy
// is the buy of a user with no budget. A limit outside seckill.RateLimit's bounds panics.
func WithRateLimits(user, addr seckill.RateLimit) Option {
	for _, l := range []seckill.RateLimit{user, addr} {
		if err := l.Check(); err != nil {
			panic("redisinv: WithRateLimits: " + err.Error())
		}
	}
	return func(e *Engine) {
		e.rateBlock = ""
		if user.On() || addr.On() {
			e.rateBlock = "gcra:" + gcraPart(user) + ":" + gcraPart(addr)
		}
	}
}

// gcraPart is one limit's interval and burst for buy.lua's gcra block ("0:1" when it is off).
func gcraPart(l seckill.RateLimit) string {
	if !l.On() {
		return "0:1"
	}
	return strconv.FormatInt(l.Interval(), 10) + ":" + strconv.FormatInt(l.BurstOrOne(), 10)
}

// rateLimited is the error of a buy that buy.lua refused for its budget ({'rate_limited', µs,
// 'user'|'address'}).
func rateLimited(r reply) error {
	wait := time.Duration(r.int(1)) * time.Microsecond
	if r.str(2) == "address" {
		return seckill.RateLimited(wait, "too many buys of this sale from this address; slow down")
	}
	return seckill.RateLimited(wait, "too many buys of this sale; slow down")
}

// Limiter enforces request budgets across every instance that shares its Redis: GCRA, one
// key per subject (prefix + "rate:" + scope + ":u:" + user, or ":a:" + address), each a
// string holding the subject's theoretical arrival time in µs, expiring when that time has
// passed (so Redis holds only the subjects seen within the last burst × interval). Keys are
// single-key script calls, so a Redis Cluster places each where its slot is.
type Limiter struct {
	rdb    rueidis.Client
	prefix string
	clock  seckill.Clock // nil: Redis TIME
	script *script       // gcraScript; tests: a broken one
}

// NewLimiter returns a Limiter over rdb (the engine's client) with the engine's key prefix
// and clock.
func (e *Engine) NewLimiter() *Limiter {
	return &Limiter{rdb: e.rdb, prefix: e.prefix, clock: e.clock, script: gcraScript}
}

// Allow spends one request of user's budget (userLimit) and of the client address addr's
// (addrLimit; "" for none) in scope (an endpoint: "path", "pay"), in one round trip, and
// answers 0 when both had room, else the longer wait. Each subject is decided on its own: a
// request refused for one still spends the other's budget if it had room (a refused request
// was still sent), so together they can only be stricter than each alone, never looser. A
// limit that is off is not checked. It has the shape of httpapi.SharedLimiter.
func (l *Limiter) Allow(ctx context.Context, scope, user, addr string, userLimit, addrLimit seckill.RateLimit) (time.Duration, error) {
	clock := ""
	if l.clock != nil {
		clock = strconv.FormatInt(l.clock.Now().UnixMilli(), 10)
	}
	var execs []rueidis.LuaExec
	add := func(key string, lim seckill.RateLimit) error {
		if !lim.On() || key == "" {
			return nil
		}
		if err := lim.Check(); err != nil {
			return err
		}
		execs = append(execs, rueidis.LuaExec{
			Keys: []string{l.prefix + "rate:" + scope + ":" + key},
			Args: []string{clock, strconv.FormatInt(lim.Interval(), 10), strconv.FormatInt(lim.BurstOrOne(), 10)},
		})
		return nil
	}
	// EVALSHA for each subject in one round trip, and EVAL (which caches the script) for those a
	// server has not seen: rueidis' ExecMulti would send SCRIPT LOAD to every node first, on
	// every call, a round trip more per request (docs/BENCHMARKS.md, issue 31).
	call := func(x rueidis.LuaExec, sha bool) rueidis.Completed {
		if sha {
			return l.rdb.B().Evalsha().Sha1(scriptSHA(l.script)).Numkeys(1).Key(x.Keys...).Arg(x.Args...).Build()
		}
		return l.rdb.B().Eval().Script(l.script.src).Numkeys(1).Key(x.Keys...).Arg(x.Args...).Build()
	}
	if err := add("u:"+user, userLimit); err != nil {
		return 0, err
	}
	if addr != "" {
		if err := add("a:"+addr, addrLimit); err != nil {
			return 0, err
		}
	}
	if len(execs) == 0 {
		return 0, nil
	}
	cmds := make(rueidis.Commands, len(execs))
	for i, x := range execs {
		cmds[i] = call(x, true)
	}
	results := l.rdb.DoMulti(ctx, cmds...)
	for i, res := range results {
		if re, ok := rueidis.IsRedisErr(res.Error()); ok && re.IsNoScript() {
			results[i] = l.rdb.Do(ctx, call(execs[i], false))
		}
	}
	var wait time.Duration
	for _, res := range results {
		v, err := res.AsIntSlice()
		if err != nil || len(v) != 2 {
			if err == nil {
				err = errors.New("redisinv: gcra: unexpected reply")
			}
			return 0, errUnavailable(err)
		}
		if v[0] == 0 {
			wait = max(wait, time.Duration(v[1])*time.Microsecond)
		}
	}
	return wait, nil
}

// gcraScript is one GCRA step for one subject: seckill.RateLimit.GCRA's arithmetic.
//
//	KEYS   [1] the subject's key: a string, its theoretical arrival time in µs
//	ARGV   [1] clock ('' for Redis TIME, else ms: WithTestClock), [2] interval µs, 1 to 10^9,
//	       [3] burst, 1 to 10^6
//	reply  {1, 0} allowed (the key now holds the new time, expiring when it has passed), or
//	       {0, µs until a request would be allowed} (nothing written)
//
// A test clock does not move with Redis' own expiry clock, so under one the key is kept an
// hour longer than its time: the tests' clocks stand still while real time passes.
var gcraScript = &script{name: "gcra", src: gcraSource, lua: rueidis.NewLuaScript(gcraSource)}

const gcraSource = `
local function int(v, name, lo, hi)
  local n = type(v) == 'string' and string.find(v, '^%d+$') and #v < 16 and tonumber(v)
  if not n or n < lo or n > hi then
    error({err = 'ERR seckill: ' .. name .. ' must be an integer from ' .. lo .. ' to ' .. hi})
  end
  return n
end
if #KEYS ~= 1 or #ARGV ~= 3 then
  error({err = 'ERR seckill: want 1 key and 3 arguments'})
end
local now, slack
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now, slack = tonumber(t[1]) * 1000000 + tonumber(t[2]), 0
else
  now, slack = int(ARGV[1], 'clock', 0, 9007199254740) * 1000, 3600000
end
local t = int(ARGV[2], 'interval', 1, 1000000000)
local b = int(ARGV[3], 'burst', 1, 1000000)
local tat = 0
local v = redis.call('GET', KEYS[1])
if v then
  tat = tonumber(v) or 0
end
local base = math.max(tat, now)
local tau = t * (b - 1)
if base - now > tau then
  return {0, base - now - tau}
end
local nt = base + t
redis.call('SET', KEYS[1], string.format('%d', nt), 'PX', string.format('%d', math.ceil((nt - now) / 1000) + slack))
return {1, 0}
`

// validAddr is buy.lua's addr_arg: "" or at most 39 of [0-9a-f.:] (netip's text form of an
// IPv4 address or of an IPv6 /64's first address).
func validAddr(a string) bool {
	if len(a) > 39 {
		return false
	}
	for i := range len(a) {
		c := a[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}
