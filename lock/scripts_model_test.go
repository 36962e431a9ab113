package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"
)

// TestScriptsModel drives the Lua scripts with random sequences of calls from a few owners
// (takes, queued waits, re-sent calls, releases on both paths, cancels, renewals) and two
// events that time would bring (a hold's lease runs out, a waiter dies), and requires after
// every step that each reply and the whole Redis state of the lock equal what a plain in-Go
// model of the documented semantics predicts. The example tests above pin one behaviour
// each; this one looks for the interleavings nobody wrote down. rapid shrinks a failure to
// a short list of steps, and each step logs its call and the raw reply. fence.lua and
// release_all.lua belong to quorum mode, where nobody queues: the example tests cover them.
func TestScriptsModel(t *testing.T) {
	rdb, base := scriptEnv(t)
	ctx := context.Background()
	// Hand-offs are only visible as PUBLISH messages: one pattern subscription, confirmed
	// before the first call, sees the channels of every iteration's lock.
	ps := rdb.PSubscribe(ctx, base.c.opts.Prefix+"*")
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		// a lock of its own per iteration: shrinking re-runs the function many times
		iteration++
		m := base.c.NewMutex(fmt.Sprintf("%s-%d", t.Name(), iteration))
		defer rdb.Del(ctx, m.keys...)
		mc := newScriptMachine(rdb, m)
		// two Repeats, about 60 steps: enough to build a queue, hand it on and re-send into it
		rt.Repeat(mc.actions())
		rt.Repeat(mc.actions())
		mc.checkPublished(rt, ps)
	})
}

const (
	// modelWaiterTimeout is the waiter timeout of every queued call. One value for all, as
	// one Client uses: the scripts set the queue's TTL from the latest caller's timeout.
	modelWaiterTimeout = 60000
	// modelRenewLease is the lease a renewal sets, distinct from every attempt's lease.
	modelRenewLease = 110000
	// ttlSlack is how much older than "just set" a TTL read from Redis may be: the TTL
	// checks tell the leases apart, so the leases differ by more than this.
	ttlSlack = 10000
)

var (
	modelOwners = []string{"o1", "o2", "o3"}
	modelLeases = []int64{20000, 50000, 80000}
)

// attempt is one acquire call as sent: the attempt id "<owner>|<nonce>|<lease>" and the
// waiter timeout (0: try once). A re-send repeats it exactly, as a client library would.
type attempt struct {
	owner, nonce string
	lease        int64
	wttl         int64
}

func (a attempt) id() string {
	return a.owner + "|" + a.nonce + "|" + strconv.FormatInt(a.lease, 10)
}

func (a attempt) args() []any {
	if a.wttl > 0 {
		return []any{a.id(), a.wttl}
	}
	return []any{a.id()}
}

// releaseCall is one release call as sent; expect is the fast path's value ("" for none).
type releaseCall struct {
	owner, nonce string
	token        int64
	expect       string
}

func (r releaseCall) args() []any {
	args := []any{r.owner + "|" + r.nonce, r.token}
	if r.expect != "" {
		args = append(args, r.expect)
	}
	return args
}

// modelHold is the hold the model expects in the lock key (see lua/common.lua).
type modelHold struct {
	owner, nonce, lease string // the attempt that counted last; nonce and lease "" after a cancel took its level back
	token               int64
	count               int
	q                   bool   // a waiter may have queued during the hold
	r                   string // nonce of the last release that left a level
	w                   string // nonce of the entry the hold was handed to, until a cancel takes it back
	ttl                 int64  // the lock key's TTL in ms as last set
}

func (h *modelHold) value() string {
	q := "0"
	if h.q {
		q = "1"
	}
	return fmt.Sprintf("%s|%s|%s|%d|%d|%s|%s|%s", h.owner, h.nonce, h.lease, h.token, h.count, q, h.r, h.w)
}

// modelEntry is a queued attempt; alive is false once its deadline has passed.
type modelEntry struct {
	attempt
	alive bool
}

// releaseReply is release.lua's decoded answer.
type releaseReply struct {
	n     int64
	entry string
	token int64
}

// scriptModel is the lock as the scripts' headers describe it, without Redis: one hold, the
// FIFO queue (dead entries stay in it until a script walks past them, as in Redis), the fence
// counter, and the hand-offs published so far ("<entry>|<token>").
type scriptModel struct {
	hold      *modelHold
	queue     []modelEntry
	fence     int64
	published []string
}

// take makes a the holder with a new token: the bare-token answer.
func (md *scriptModel) take(a attempt, q bool) acquireReply {
	md.fence++
	md.hold = &modelHold{owner: a.owner, nonce: a.nonce, lease: strconv.FormatInt(a.lease, 10),
		token: md.fence, count: 1, q: q, ttl: a.lease}
	return acquireReply{held: true, fresh: true, token: uint64(md.fence), count: 1}
}

// firstLive drops the dead entries in front of the queue and returns its live head.
func (md *scriptModel) firstLive() (modelEntry, bool) {
	for len(md.queue) > 0 && !md.queue[0].alive {
		md.queue = md.queue[1:]
	}
	if len(md.queue) == 0 {
		return modelEntry{}, false
	}
	return md.queue[0], true
}

// handOff gives the free lock to the first live waiter, if any, with a new token.
func (md *scriptModel) handOff() (string, int64, bool) {
	head, ok := md.firstLive()
	if !ok {
		return "", 0, false
	}
	md.queue = md.queue[1:]
	md.take(head.attempt, true)
	md.hold.w = head.nonce
	md.published = append(md.published, fmt.Sprintf("%s|%d", head.id(), md.fence))
	return head.id(), md.fence, true
}

func (md *scriptModel) find(id string) int {
	return slices.IndexFunc(md.queue, func(e modelEntry) bool { return e.id() == id })
}

// acquire predicts acquire.lua. For a busy answer, pttl is the lock key's TTL as last set:
// the upper bound of what PTTL may report.
func (md *scriptModel) acquire(a attempt) acquireReply {
	if md.hold == nil && len(md.queue) == 0 {
		return md.take(a, false) // the fast path
	}
	if h := md.hold; h != nil && h.owner == a.owner {
		if h.nonce != a.nonce && h.w != a.nonce { // a re-entry; the same attempt again changes nothing
			h.nonce, h.lease = a.nonce, strconv.FormatInt(a.lease, 10)
			h.count++
		}
		return acquireReply{held: true, token: uint64(h.token), count: h.count}
	}
	if md.hold == nil {
		head, ok := md.firstLive()
		if !ok {
			return md.take(a, false)
		}
		if a.wttl > 0 && head.id() == a.id() {
			md.queue = md.queue[1:]
			return md.take(a, true)
		}
		md.handOff() // fairness: the free lock goes to the live head, not to a newcomer
	}
	if a.wttl > 0 {
		if i := md.find(a.id()); i >= 0 {
			md.queue[i].alive = true // a refresh keeps the place
		} else {
			md.queue = append(md.queue, modelEntry{attempt: a, alive: true})
			md.hold.q = true
		}
	}
	return acquireReply{pttl: time.Duration(md.hold.ttl) * time.Millisecond}
}

// release predicts release.lua.
func (md *scriptModel) release(c releaseCall) releaseReply {
	h := md.hold
	if c.expect != "" && h != nil && h.value() == c.expect {
		md.hold = nil // the fast path: one level, nobody queued
		return releaseReply{}
	}
	if h == nil || h.owner != c.owner || (c.token != 0 && h.token != c.token) {
		return releaseReply{n: -1}
	}
	if h.r == c.nonce {
		return releaseReply{n: int64(h.count)} // this release left its level already
	}
	if h.count > 1 {
		h.count--
		h.r = c.nonce
		return releaseReply{n: int64(h.count)}
	}
	md.hold = nil
	if !h.q {
		return releaseReply{}
	}
	if entry, token, ok := md.handOff(); ok {
		return releaseReply{entry: entry, token: token}
	}
	return releaseReply{}
}

// cancel predicts cancel.lua.
func (md *scriptModel) cancel(a attempt, orphan bool) int64 {
	if i := md.find(a.id()); i >= 0 {
		md.queue = slices.Delete(md.queue, i, i+1)
	}
	h := md.hold
	if h == nil || h.owner != a.owner || (!orphan && h.nonce != a.nonce && h.w != a.nonce) {
		return 0
	}
	if orphan || h.count <= 1 {
		md.hold = nil
		md.handOff()
		return 1
	}
	if h.nonce == a.nonce {
		h.nonce, h.lease = "", ""
	}
	if h.w == a.nonce {
		h.w = ""
	}
	h.count--
	return 1
}

// renew predicts renew.lua.
func (md *scriptModel) renew(owner string, token, lease int64) int64 {
	h := md.hold
	if h == nil || h.owner != owner || (token != 0 && h.token != token) {
		return 0
	}
	if lease > 0 {
		h.ttl = lease
	}
	return 1
}

// freshTake is an acquire answered with a bare token: its holder may release on the fast path.
type freshTake struct {
	id    string
	token int64
}

// scriptMachine runs the same calls against Redis and the model.
type scriptMachine struct {
	rdb   *redis.Client
	m     *Mutex
	model scriptModel

	nonces      map[string]int
	calls       []attempt              // every acquire call sent, for re-sends and cancels
	lastRelease map[string]releaseCall // per owner
	fresh       map[string]freshTake   // per owner, its latest bare-token take
	fenceSeen   int64                  // the highest fence counter read from Redis so far
}

func newScriptMachine(rdb *redis.Client, m *Mutex) *scriptMachine {
	return &scriptMachine{rdb: rdb, m: m, nonces: map[string]int{},
		lastRelease: map[string]releaseCall{}, fresh: map[string]freshTake{}}
}

// actions are drawn uniformly by name: acquisitions and releases get several names so that
// most runs build up a hold with a queue behind it.
func (mc *scriptMachine) actions() map[string]func(*rapid.T) {
	queued := func(rt *rapid.T) { mc.acquire(rt, mc.newAttempt(rt, modelWaiterTimeout)) }
	return map[string]func(*rapid.T){
		"AcquireTry":     func(rt *rapid.T) { mc.acquire(rt, mc.newAttempt(rt, 0)) },
		"AcquireQueued1": queued,
		"AcquireQueued2": queued,
		"AcquireResend":  mc.resendAcquire,
		"Release1":       mc.releaseSlow,
		"Release2":       mc.releaseSlow,
		"ReleaseFast":    mc.releaseFast,
		"ReleaseResend":  mc.resendRelease,
		"Cancel":         func(rt *rapid.T) { mc.cancel(rt, false) },
		"CancelOrphan":   func(rt *rapid.T) { mc.cancel(rt, true) },
		"Renew":          mc.renew,
		"LeaseExpires":   mc.leaseExpires,
		"WaiterDies":     mc.waiterDies,
		"":               mc.check,
	}
}

func (mc *scriptMachine) nextNonce(owner, prefix string) string {
	mc.nonces[owner]++
	return prefix + strconv.Itoa(mc.nonces[owner])
}

func (mc *scriptMachine) newAttempt(rt *rapid.T, wttl int64) attempt {
	owner := rapid.SampledFrom(modelOwners).Draw(rt, "owner")
	lease := rapid.SampledFrom(modelLeases).Draw(rt, "lease")
	return attempt{owner: owner, nonce: mc.nextNonce(owner, "a"), lease: lease, wttl: wttl}
}

// run calls a script and fails the check on a Redis or script error: every call the
// machine makes is valid.
func (mc *scriptMachine) run(rt *rapid.T, s *Script, keys []string, args ...any) any {
	v, err := s.run(context.Background(), mc.m.redis(), keys, args...).Result()
	if err != nil {
		rt.Fatalf("script call %v: %v", args, err)
	}
	return v
}

func (mc *scriptMachine) acquire(rt *rapid.T, a attempt) {
	mc.calls = append(mc.calls, a)
	v := mc.run(rt, scriptAcquire, mc.m.keys, a.args()...)
	rt.Logf("acquire %v -> %v", a.args(), v)
	got, err := decodeAcquire(v)
	if err != nil {
		rt.Fatal(err)
	}
	want := mc.model.acquire(a)
	if want.held {
		if got != want {
			rt.Fatalf("acquire %v = %+v, model %+v", a.args(), got, want)
		}
		if want.fresh {
			mc.fresh[a.owner] = freshTake{id: a.id(), token: int64(want.token)}
		}
		return
	}
	if got.held || got.pttl > want.pttl || got.pttl <= want.pttl-ttlSlack*time.Millisecond {
		rt.Fatalf("acquire %v = %+v, model: busy with a PTTL just under %v", a.args(), got, want.pttl)
	}
}

func (mc *scriptMachine) resendAcquire(rt *rapid.T) {
	if len(mc.calls) == 0 {
		rt.Skip("no acquire call to re-send")
	}
	mc.acquire(rt, rapid.SampledFrom(mc.calls).Draw(rt, "resent"))
}

// drawToken picks the token of a release or renewal: any ("0"), mostly the hold's, or one
// that is probably stale.
func (mc *scriptMachine) drawToken(rt *rapid.T) int64 {
	switch rapid.IntRange(0, 3).Draw(rt, "token_kind") {
	case 0:
		return 0
	case 1, 2:
		if mc.model.hold != nil {
			return mc.model.hold.token
		}
	}
	return rapid.Int64Range(1, mc.model.fence+1).Draw(rt, "token")
}

func (mc *scriptMachine) release(rt *rapid.T, c releaseCall) {
	mc.lastRelease[c.owner] = c
	v := mc.run(rt, scriptRelease, mc.m.keys, c.args()...)
	rt.Logf("release %v -> %v", c.args(), v)
	var got releaseReply
	var err error
	got.n, got.entry, got.token, err = decodeRelease(v)
	if err != nil {
		rt.Fatal(err)
	}
	if want := mc.model.release(c); got != want {
		rt.Fatalf("release %v = %+v, model %+v", c.args(), got, want)
	}
}

// drawCaller picks the owner of a release or renewal: mostly the holder (a stranger's call
// is refused at once, and the interesting paths are the holder's).
func (mc *scriptMachine) drawCaller(rt *rapid.T) string {
	owners := modelOwners
	if h := mc.model.hold; h != nil {
		owners = append(slices.Clip(owners), h.owner, h.owner, h.owner)
	}
	return rapid.SampledFrom(owners).Draw(rt, "owner")
}

func (mc *scriptMachine) releaseSlow(rt *rapid.T) {
	owner := mc.drawCaller(rt)
	mc.release(rt, releaseCall{owner: owner, nonce: mc.nextNonce(owner, "r"), token: mc.drawToken(rt)})
}

// releaseFast releases with the value the owner's latest bare-token take predicts, as Unlock
// does; the value may be stale (re-entered, expired, handed on), and then the slow path runs.
func (mc *scriptMachine) releaseFast(rt *rapid.T) {
	owners := ownersWith(mc.fresh)
	if len(owners) == 0 {
		rt.Skip("no owner took the lock with a bare token")
	}
	owner := rapid.SampledFrom(owners).Draw(rt, "owner")
	f := mc.fresh[owner]
	expect := fmt.Sprintf("%s|%d|1|0||", f.id, f.token)
	mc.release(rt, releaseCall{owner: owner, nonce: mc.nextNonce(owner, "r"), token: f.token, expect: expect})
}

func (mc *scriptMachine) resendRelease(rt *rapid.T) {
	owners := ownersWith(mc.lastRelease)
	if len(owners) == 0 {
		rt.Skip("no release call to re-send")
	}
	mc.release(rt, mc.lastRelease[rapid.SampledFrom(owners).Draw(rt, "owner")])
}

// ownersWith lists the owners that have an entry in m, in a fixed order: rapid must draw from
// the same list on every replay, and map order is random.
func ownersWith[V any](m map[string]V) []string {
	var owners []string
	for _, o := range modelOwners {
		if _, ok := m[o]; ok {
			owners = append(owners, o)
		}
	}
	return owners
}

// cancel gives up an attempt: most often a queued one or the one the hold counted last
// (the interesting cases), else any attempt sent so far.
func (mc *scriptMachine) cancel(rt *rapid.T, orphan bool) {
	var cands []attempt
	for _, e := range mc.model.queue {
		cands = append(cands, e.attempt)
	}
	if h := mc.model.hold; h != nil {
		if i := slices.IndexFunc(mc.calls, func(a attempt) bool { return a.owner == h.owner && a.nonce == h.nonce }); i >= 0 {
			cands = append(cands, mc.calls[i])
		}
	}
	cands = append(cands, mc.calls...)
	if len(cands) == 0 {
		rt.Skip("no attempt to cancel")
	}
	a := rapid.SampledFrom(cands).Draw(rt, "cancelled")
	flag := "0"
	if orphan {
		flag = "1"
	}
	v := mc.run(rt, scriptCancel, mc.m.keys, a.id(), flag)
	rt.Logf("cancel %s %s -> %v", a.id(), flag, v)
	if want := mc.model.cancel(a, orphan); v != want {
		rt.Fatalf("cancel %s %s = %v, model %d", a.id(), flag, v, want)
	}
}

func (mc *scriptMachine) renew(rt *rapid.T) {
	owner := mc.drawCaller(rt)
	token := mc.drawToken(rt)
	lease := rapid.SampledFrom([]int64{0, modelRenewLease}).Draw(rt, "renew_lease")
	v := mc.run(rt, scriptRenew, mc.m.keys[:1], owner, token, lease)
	rt.Logf("renew %s %d %d -> %v", owner, token, lease, v)
	if want := mc.model.renew(owner, token, lease); v != want {
		rt.Fatalf("renew %s %d %d = %v, model %d", owner, token, lease, v, want)
	}
}

// leaseExpires stands for the holder's lease running out: Redis deletes the lock key.
func (mc *scriptMachine) leaseExpires(rt *rapid.T) {
	if mc.model.hold == nil {
		rt.Skip("nothing held")
	}
	rt.Logf("the lease of %s expires", mc.model.hold.value())
	mc.rdb.Del(context.Background(), mc.m.keys[0])
	mc.model.hold = nil
}

// waiterDies stands for a queued waiter that stopped refreshing its place: its deadline is
// set in the past, and the scripts must skip it (and drop it) from then on.
func (mc *scriptMachine) waiterDies(rt *rapid.T) {
	var alive []int
	for i, e := range mc.model.queue {
		if e.alive {
			alive = append(alive, i)
		}
	}
	if len(alive) == 0 {
		rt.Skip("no live waiter")
	}
	i := rapid.SampledFrom(alive).Draw(rt, "dying")
	id := mc.model.queue[i].id()
	rt.Logf("waiter %s dies", id)
	if err := mc.rdb.ZAddXX(context.Background(), mc.m.keys[3], redis.Z{Score: 1, Member: id}).Err(); err != nil {
		rt.Fatal(err)
	}
	mc.model.queue[i].alive = false
}

// redisState is everything Redis holds for the lock, read in one round trip.
type redisState struct {
	value            string
	held             bool
	lockTTL          int64
	fence            int64
	fenceTTL         int64
	queue            []string
	deadlines        []redis.Z
	queueTTL, zetTTL int64
	now              int64 // Redis time in ms, as the scripts compute it
}

func (mc *scriptMachine) read(rt *rapid.T) redisState {
	ctx := context.Background()
	k := mc.m.keys
	p := mc.rdb.Pipeline()
	val := p.Get(ctx, k[0])
	lttl := p.Do(ctx, "pttl", k[0])
	fence := p.Get(ctx, k[1])
	fttl := p.Do(ctx, "pttl", k[1])
	queue := p.LRange(ctx, k[2], 0, -1)
	zset := p.ZRangeWithScores(ctx, k[3], 0, -1)
	qttl := p.Do(ctx, "pttl", k[2])
	zttl := p.Do(ctx, "pttl", k[3])
	now := p.Time(ctx)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		rt.Fatal(err)
	}
	var s redisState
	s.value, s.held = val.Val(), val.Err() == nil
	if fence.Err() == nil {
		f, err := strconv.ParseInt(fence.Val(), 10, 64)
		if err != nil {
			rt.Fatalf("fence key %q: %v", fence.Val(), err)
		}
		s.fence = f
	}
	s.lockTTL, _ = lttl.Int64()
	s.fenceTTL, _ = fttl.Int64()
	s.queueTTL, _ = qttl.Int64()
	s.zetTTL, _ = zttl.Int64()
	s.queue, s.deadlines = queue.Val(), zset.Val()
	s.now = now.Val().UnixMilli()
	return s
}

// check runs after every step. First the invariants that need no model, from Redis alone,
// then equality with the model.
func (mc *scriptMachine) check(rt *rapid.T) {
	s := mc.read(rt)

	// the lock value parses and names one owner; its q field is "1" while a live entry waits
	var q string
	if s.held {
		f := strings.Split(s.value, "|")
		if len(f) != 8 || f[0] == "" || !digits(f[3]) || !digits(f[4]) || f[4] == "0" || (f[5] != "0" && f[5] != "1") {
			rt.Fatalf("lock value %q does not parse", s.value)
		}
		if tok, _ := strconv.ParseInt(f[3], 10, 64); tok > s.fence {
			rt.Fatalf("lock value %q: token above the fence counter %d", s.value, s.fence)
		}
		q = f[5]
	}
	// fencing tokens never go back: the counter only grows, and never expires
	if s.fence < mc.fenceSeen {
		rt.Fatalf("fence counter went from %d down to %d", mc.fenceSeen, s.fence)
	}
	mc.fenceSeen = s.fence
	if s.fence > 0 && s.fenceTTL != -1 {
		rt.Fatalf("fence key has a TTL (%d ms): tokens could repeat after it expires", s.fenceTTL)
	}
	// the queue list and the deadline zset hold the same entries
	score := map[string]float64{}
	for _, z := range s.deadlines {
		score[z.Member.(string)] = z.Score
	}
	if len(score) != len(s.queue) {
		rt.Fatalf("queue %v and deadlines %v differ", s.queue, s.deadlines)
	}
	for _, e := range s.queue {
		dl, ok := score[e]
		if !ok {
			rt.Fatalf("queued %s has no deadline (deadlines %v)", e, s.deadlines)
		}
		// q = "0" promises that the queue is empty (common.lua): the final release skips it
		if s.held && q == "0" {
			state := "dead"
			if dl >= float64(s.now) {
				state = "live: its final release would not hand off to it"
			}
			rt.Fatalf("lock value %q has q=0 while %s is queued (%s)", s.value, e, state)
		}
	}

	mc.compare(rt, s)
}

// compare requires the Redis state to be exactly the model's.
func (mc *scriptMachine) compare(rt *rapid.T, s redisState) {
	md := &mc.model
	if h := md.hold; h == nil {
		if s.held {
			rt.Fatalf("lock value %q, model: free", s.value)
		}
	} else {
		if !s.held || s.value != h.value() {
			rt.Fatalf("lock value %q (held %v), model %q", s.value, s.held, h.value())
		}
		if !ttlNear(s.lockTTL, h.ttl) {
			rt.Fatalf("lock TTL %d ms, model: just under %d", s.lockTTL, h.ttl)
		}
	}
	if s.fence != md.fence {
		rt.Fatalf("fence counter %d, model %d", s.fence, md.fence)
	}
	want := make([]string, len(md.queue))
	for i, e := range md.queue {
		want[i] = e.id()
	}
	if !slices.Equal(s.queue, want) {
		rt.Fatalf("queue %v, model %v", s.queue, want)
	}
	// (check found a deadline for every queued entry)
	for _, e := range md.queue {
		dl := int64(s.deadlines[slices.IndexFunc(s.deadlines, func(z redis.Z) bool { return z.Member == e.id() })].Score)
		if !e.alive && dl != 1 {
			rt.Fatalf("dead waiter %s has deadline %d", e.id(), dl)
		}
		if e.alive && (dl <= s.now || dl > s.now+modelWaiterTimeout) {
			rt.Fatalf("live waiter %s has deadline %d, now %d", e.id(), dl, s.now)
		}
	}
	if len(want) == 0 {
		if s.queueTTL != -2 || s.zetTTL != -2 {
			rt.Fatalf("empty queue, but its keys exist (PTTL %d, %d)", s.queueTTL, s.zetTTL)
		}
	} else if !ttlNear(s.queueTTL, modelWaiterTimeout) || !ttlNear(s.zetTTL, modelWaiterTimeout) {
		rt.Fatalf("queue keys' TTL %d, %d ms, want just under %d", s.queueTTL, s.zetTTL, modelWaiterTimeout)
	}
}

// ttlNear: a PTTL read now of a TTL set to want ms during this iteration.
func ttlNear(got, want int64) bool {
	return got <= want && got > want-ttlSlack
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// checkPublished requires the hand-off messages of this iteration's lock to be exactly the
// model's, in order. A sentinel published last marks the end: every earlier message of the
// channel has arrived when it does.
func (mc *scriptMachine) checkPublished(rt *rapid.T, ps *redis.PubSub) {
	const sentinel = "model:end"
	ctx := context.Background()
	if err := mc.rdb.Publish(ctx, mc.m.channel, sentinel).Err(); err != nil {
		rt.Fatal(err)
	}
	var got []string
	for {
		msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			rt.Fatalf("hand-off messages so far %q: %v", got, err)
		}
		m, ok := msg.(*redis.Message)
		if !ok || m.Channel != mc.m.channel {
			continue // an earlier iteration's, left unread when it failed
		}
		if m.Payload == sentinel {
			break
		}
		got = append(got, m.Payload)
	}
	if !slices.Equal(got, mc.model.published) {
		rt.Fatalf("hand-offs published %q, model %q", got, mc.model.published)
	}
}
