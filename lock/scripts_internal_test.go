package lock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// These tests drive the Lua scripts directly against a real Redis: bad arguments must be
// rejected before any write, missing keys must read as "not held", and every reply that Lua
// would treat as true although it means no (0 is true in Lua) must be compared explicitly.

func scriptEnv(t *testing.T) (*redis.Client, *Mutex) {
	t.Helper()
	opt, err := redis.ParseURL(testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{opt.Addr}, Username: opt.Username,
		Password: opt.Password, SelectDB: opt.DB, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	c := New(Rueidis(rc), &Options{Prefix: fmt.Sprintf("lockscript:%d:", time.Now().UnixNano())})
	t.Cleanup(func() { _ = c.Close() })
	m := c.NewMutex(t.Name())
	t.Cleanup(func() { rdb.Del(context.Background(), m.keys...) })
	return rdb, m
}

// redis is what the scripts run on: the rueidis client of scriptEnv (the one seckill uses);
// the tests look into Redis with go-redis.
func (m *Mutex) redis() Redis { return m.c.nodes[0].r }

func noKeys(t *testing.T, rdb *redis.Client, m *Mutex) {
	t.Helper()
	if n := rdb.Exists(context.Background(), m.keys...).Val(); n != 0 {
		t.Fatalf("%d of the lock's keys exist after a rejected call: a write happened before validation", n)
	}
}

// acquire runs acquire.lua with an attempt id (and a waiter timeout when wttl > 0, which
// makes the call queue while busy) and decodes the reply.
func acquire(t *testing.T, rdb *redis.Client, m *Mutex, entry string, wttl int) acquireReply {
	t.Helper()
	args := []any{entry}
	if wttl > 0 {
		args = append(args, wttl)
	}
	v, err := scriptAcquire.run(context.Background(), m.redis(), m.keys, args...).Result()
	if err != nil {
		t.Fatalf("acquire %s: %v", entry, err)
	}
	r, err := decodeAcquire(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// releaseWith runs release.lua (slow path: no expected value) with a release id and returns
// the levels left (-1 not held) and the waiter it handed the lock to, if any.
func releaseWith(t *testing.T, rdb *redis.Client, m *Mutex, rid string, token int64, expect ...string) (int64, string, int64) {
	t.Helper()
	args := []any{rid, token}
	for _, e := range expect {
		args = append(args, e)
	}
	v, err := scriptRelease.run(context.Background(), m.redis(), m.keys, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	n, entry, tok, err := decodeRelease(v)
	if err != nil {
		t.Fatal(err)
	}
	return n, entry, tok
}

// release runs release.lua with a fresh release id and returns the levels left.
func release(t *testing.T, rdb *redis.Client, m *Mutex, owner string, token int64) int64 {
	t.Helper()
	n, _, _ := releaseWith(t, rdb, m, owner+"|r"+fmt.Sprint(time.Now().UnixNano()), token)
	return n
}

// holdIn is the lock value split into its fields (see lua/common.lua).
type holdIn struct {
	owner, nonce, token, count, q, r, w string
}

func readHold(t *testing.T, rdb *redis.Client, m *Mutex) (holdIn, bool) {
	t.Helper()
	v, err := rdb.Get(context.Background(), m.keys[0]).Result()
	if err == redis.Nil {
		return holdIn{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(v, "|")
	if len(f) != 8 {
		t.Fatalf("lock value %q: want 8 fields", v)
	}
	return holdIn{owner: f[0], nonce: f[1], token: f[3], count: f[4], q: f[5], r: f[6], w: f[7]}, true
}

func TestScriptsValidateBeforeWriting(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	entry := m.owner + "|1|1000"
	k := m.keys
	cases := []struct {
		name string
		run  func() error
	}{
		{"acquire lease not a number", func() error { return scriptAcquire.run(ctx, m.redis(), k, m.owner+"|1|x", 1000).Err() }},
		{"acquire lease 0", func() error { return scriptAcquire.run(ctx, m.redis(), k, m.owner+"|1|0", 1000).Err() }},
		{"acquire fractional lease", func() error { return scriptAcquire.run(ctx, m.redis(), k, m.owner+"|1|1.5", 1000).Err() }},
		{"acquire huge lease", func() error {
			return scriptAcquire.run(ctx, m.redis(), k, m.owner+"|1|9999999999999999", 1000).Err()
		}},
		{"acquire empty owner", func() error { return scriptAcquire.run(ctx, m.redis(), k, "|1|1000").Err() }},
		{"acquire empty nonce", func() error { return scriptAcquire.run(ctx, m.redis(), k, m.owner+"||1000").Err() }},
		{"acquire extra field", func() error { return scriptAcquire.run(ctx, m.redis(), k, "a|b|1|1000").Err() }},
		{"acquire no attempt id", func() error { return scriptAcquire.run(ctx, m.redis(), k).Err() }},
		{"acquire waiter timeout 0", func() error { return scriptAcquire.run(ctx, m.redis(), k, entry, 0).Err() }},
		{"acquire waiter timeout not a number", func() error { return scriptAcquire.run(ctx, m.redis(), k, entry, "x").Err() }},
		{"acquire waiter timeout inf", func() error { return scriptAcquire.run(ctx, m.redis(), k, entry, "inf").Err() }},
		{"acquire waiter timeout 1e300", func() error { return scriptAcquire.run(ctx, m.redis(), k, entry, "1e300").Err() }},
		{"acquire fractional waiter timeout", func() error { return scriptAcquire.run(ctx, m.redis(), k, entry, "1.5").Err() }},
		{"acquire too many arguments", func() error { return scriptAcquire.run(ctx, m.redis(), k, entry, 1000, "x").Err() }},
		{"acquire too few keys", func() error { return scriptAcquire.run(ctx, m.redis(), k[:2], entry).Err() }},
		{"release bad token", func() error { return scriptRelease.run(ctx, m.redis(), k, m.owner+"|r1", "-1").Err() }},
		{"release missing token", func() error { return scriptRelease.run(ctx, m.redis(), k, m.owner+"|r1").Err() }},
		{"release bad id", func() error { return scriptRelease.run(ctx, m.redis(), k, "x", 0).Err() }},
		{"release too many arguments", func() error {
			return scriptRelease.run(ctx, m.redis(), k, m.owner+"|r1", 0, "v", "x").Err()
		}},
		{"cancel bad entry", func() error { return scriptCancel.run(ctx, m.redis(), k, "zzz", "0").Err() }},
		{"cancel bad orphan flag", func() error { return scriptCancel.run(ctx, m.redis(), k, entry, "x").Err() }},
		{"renew bad lease", func() error { return scriptRenew.run(ctx, m.redis(), k[:1], m.owner, 0, "-5").Err() }},
		{"fence token 0", func() error { return scriptFence.run(ctx, m.redis(), k[:2], m.owner, 0).Err() }},
		{"renew lease inf", func() error { return scriptRenew.run(ctx, m.redis(), k[:1], m.owner, 0, "inf").Err() }},
		{"renew token hex", func() error { return scriptRenew.run(ctx, m.redis(), k[:1], m.owner, "0x10", 0).Err() }},
		{"fence token 1e300", func() error { return scriptFence.run(ctx, m.redis(), k[:2], m.owner, "1e300").Err() }},
		{"release_all bad owner", func() error { return scriptReleaseAll.run(ctx, m.redis(), k[:1], "a|b").Err() }},
	}
	for _, tc := range cases {
		err := tc.run()
		if err == nil || !strings.Contains(err.Error(), "lock:") {
			t.Errorf("%s: got %v, want a validation error", tc.name, err)
		}
		noKeys(t, rdb, m)
	}
}

// A waiter timeout that is not a plain positive integer must be refused before the queue is
// touched, also when the lock is held (the queueing path writes): "inf" used to be queued
// with an endless deadline and a queue key without TTL.
func TestScriptsValidateWaiterTimeoutWhenBusy(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	if v := acquire(t, rdb, m, "holder|1|5000", 0); !v.held {
		t.Fatalf("holder: %+v", v)
	}
	for _, wttl := range []string{"inf", "1e300", "-5", "0", "1.5", "1234567890123456"} {
		if err := scriptAcquire.run(ctx, m.redis(), m.keys, m.attemptID(5000), wttl).Err(); err == nil || !strings.Contains(err.Error(), "lock:") {
			t.Errorf("waiter timeout %q: got %v, want a validation error", wttl, err)
		}
	}
	if n := rdb.Exists(ctx, m.keys[2], m.keys[3]).Val(); n != 0 {
		t.Fatalf("%d queue keys exist after refused calls", n)
	}
	if h, _ := readHold(t, rdb, m); h.q != "0" {
		t.Fatalf("q flag %q after refused calls, want 0", h.q)
	}
}

func TestScriptsMissingKeys(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	if n := release(t, rdb, m, m.owner, 0); n != -1 {
		t.Errorf("release of a missing lock = %d; want -1", n)
	}
	if n, _, _ := releaseWith(t, rdb, m, m.owner+"|r1", 0, m.owner+"|1|1000|1|1|0||"); n != -1 {
		t.Errorf("fast-path release of a missing lock = %d; want -1", n)
	}
	if v, err := scriptRenew.run(ctx, m.redis(), m.keys[:1], m.owner, 0, 1000).Int64(); err != nil || v != 0 {
		t.Errorf("renew of a missing lock = %d, %v; want 0", v, err)
	}
	if v, err := scriptCancel.run(ctx, m.redis(), m.keys, m.owner+"|1|1000", "1").Int64(); err != nil || v != 0 {
		t.Errorf("cancel with nothing queued = %d, %v; want 0", v, err)
	}
	if v, err := scriptFence.run(ctx, m.redis(), m.keys[:2], m.owner, 5).Int64(); err != nil || v != 0 {
		t.Errorf("fence of a missing lock = %d, %v; want 0", v, err)
	}
	if v, err := scriptReleaseAll.run(ctx, m.redis(), m.keys[:1], m.owner).Int64(); err != nil || v != -1 {
		t.Errorf("release_all of a missing lock = %d, %v; want -1", v, err)
	}
	noKeys(t, rdb, m)
}

func TestScriptsZeroIsNotTrue(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	other := "someoneelse"
	entry := m.attemptID(5000)
	v := acquire(t, rdb, m, entry, 0)
	if !v.held || !v.fresh {
		t.Fatalf("acquire = %+v", v)
	}
	token := int64(v.token)
	// A stranger's release, renew and re-entry all get "no", and change nothing.
	if r := release(t, rdb, m, other, 0); r != -1 {
		t.Errorf("stranger's release = %d, want -1", r)
	}
	if r, _, _ := releaseWith(t, rdb, m, other+"|r1", 0, other+"|1|5000|"+fmt.Sprint(token)+"|1|0||"); r != -1 {
		t.Errorf("stranger's fast-path release = %d, want -1", r)
	}
	if r, _ := scriptRenew.run(ctx, m.redis(), m.keys[:1], other, 0, 99999).Int64(); r != 0 {
		t.Errorf("stranger's renew = %d, want 0", r)
	}
	if r, _ := scriptRenew.run(ctx, m.redis(), m.keys[:1], m.owner, token+1, 99999).Int64(); r != 0 {
		t.Errorf("renew with the wrong token = %d, want 0", r)
	}
	if ttl := rdb.PTTL(ctx, m.keys[0]).Val(); ttl > 5*time.Second {
		t.Errorf("TTL %v: a refused renew extended the lease", ttl)
	}
	if r := release(t, rdb, m, m.owner, token+1); r != -1 {
		t.Errorf("release with the wrong token = %d, want -1", r)
	}
	if r, _ := scriptReleaseAll.run(ctx, m.redis(), m.keys[:1], other).Int64(); r != -1 {
		t.Errorf("stranger's release_all = %d, want -1", r)
	}
	if r := acquire(t, rdb, m, other+"|1|5000", 0); r.held {
		t.Errorf("stranger's acquire = %+v, want busy", r)
	}
	if h, _ := readHold(t, rdb, m); h.owner != m.owner {
		t.Fatalf("owner is %q after refused calls", h.owner)
	}
	// The holder's fast-path release matches the value the fast-path take wrote.
	if r, _, _ := releaseWith(t, rdb, m, m.releaseID(), token, entry+"|"+fmt.Sprint(token)+"|1|0||"); r != 0 {
		t.Fatalf("fast-path release = %d, want 0", r)
	}
	if _, ok := readHold(t, rdb, m); ok {
		t.Fatal("lock key left after the fast-path release")
	}
}

func TestScriptsReentrantCount(t *testing.T) {
	rdb, m := scriptEnv(t)
	var token uint64
	for want := 1; want <= 3; want++ {
		v := acquire(t, rdb, m, m.attemptID(5000), 0)
		if !v.held || v.count != want {
			t.Fatalf("acquire %d = %+v", want, v)
		}
		if want == 1 {
			token = v.token
		} else if v.token != token || v.fresh {
			t.Fatalf("re-entry = %+v, want token %d, not fresh", v, token)
		}
		if h, _ := readHold(t, rdb, m); h.count != fmt.Sprint(want) {
			t.Fatalf("count in Redis %q, want %d", h.count, want)
		}
	}
	for want := int64(2); want >= 0; want-- {
		if r := release(t, rdb, m, m.owner, int64(token)); r != want {
			t.Fatalf("release = %d, want %d", r, want)
		}
	}
	if rdb.Exists(context.Background(), m.keys[0]).Val() != 0 {
		t.Fatal("lock key left after the last release")
	}
	if f := rdb.Get(context.Background(), m.keys[1]).Val(); f != fmt.Sprint(token) {
		t.Fatalf("fence counter %q, want %d (it must outlive the hold)", f, token)
	}
}

// A client library may re-send a call after a timeout although Redis ran it: the same attempt
// or release id must not count twice (else a re-entry would leak or a release free the lock
// under its holder).
func TestScriptsIdempotent(t *testing.T) {
	rdb, m := scriptEnv(t)
	first, second := m.attemptID(5000), m.attemptID(5000)
	if v := acquire(t, rdb, m, first, 0); !v.held || v.count != 1 {
		t.Fatalf("take = %+v", v)
	}
	if v := acquire(t, rdb, m, first, 0); !v.held || v.count != 1 {
		t.Fatalf("the same take re-sent = %+v, want count 1", v)
	}
	if v := acquire(t, rdb, m, second, 0); v.count != 2 {
		t.Fatalf("re-entry = %+v, want count 2", v)
	}
	if v := acquire(t, rdb, m, second, 0); v.count != 2 {
		t.Fatalf("the same re-entry re-sent = %+v, want count 2", v)
	}
	rel := func(id string) int64 {
		n, _, _ := releaseWith(t, rdb, m, id, 0)
		return n
	}
	if r := rel(m.releaseID()); r != 1 {
		t.Fatalf("release = %d, want 1", r)
	}
	rid := m.releaseID()
	if r := rel(rid); r != 0 {
		t.Fatalf("last release = %d, want 0", r)
	}
	if r := rel(rid); r != -1 {
		t.Fatalf("the last release re-sent = %d, want -1 (already free)", r)
	}
	// partial release re-sent
	acquire(t, rdb, m, m.attemptID(5000), 0)
	acquire(t, rdb, m, m.attemptID(5000), 0)
	rid = m.releaseID()
	if r := rel(rid); r != 1 {
		t.Fatalf("partial release = %d", r)
	}
	if r := rel(rid); r != 1 {
		t.Fatalf("the same partial release re-sent = %d, want 1: it must not leave a second level", r)
	}
	if h, _ := readHold(t, rdb, m); h.owner != m.owner {
		t.Fatal("lock freed by a re-sent partial release")
	}
	// a fast-path release whose expected value is stale (the hold was re-entered and left
	// since) falls back to the slow path and still leaves exactly one level
	held, _ := readHold(t, rdb, m)
	stale := m.owner + "|1|5000|" + held.token + "|1|0||"
	tok, _ := strconv.ParseInt(held.token, 10, 64)
	if r, _, _ := releaseWith(t, rdb, m, m.releaseID(), tok, stale); r != 0 {
		t.Fatalf("release with a stale expected value = %d, want 0", r)
	}
}

func TestScriptsHandOffAndQueue(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	a, b, c := "aaaa", "bbbb", "cccc"
	ea, eb, ec := b+"|1|7000", c+"|1|7000", a+"|9|7000"
	n := 0
	run := func(owner string, wttl int, entry string) acquireReply {
		if entry == "" {
			n++
			entry = fmt.Sprintf("%s|x%d|5000", owner, n)
		}
		return acquire(t, rdb, m, entry, wttl)
	}
	if v := run(a, 0, ""); !v.held {
		t.Fatalf("a: %+v", v)
	}
	if v := run(b, 60000, ea); v.held { // b queues
		t.Fatalf("b: %+v", v)
	}
	if h, _ := readHold(t, rdb, m); h.q != "1" {
		t.Fatalf("queue flag %q after b queued, want 1: the final release must look at the queue", h.q)
	}
	if v := run(c, 60000, eb); v.held { // c queues behind b
		t.Fatalf("c: %+v", v)
	}
	if v := run(b, 60000, ea); v.held { // refreshing does not duplicate b's place
		t.Fatalf("b again: %+v", v)
	}
	if n := rdb.LLen(ctx, m.keys[2]).Val(); n != 2 {
		t.Fatalf("queue length %d, want 2", n)
	}
	sub := rdb.Subscribe(ctx, m.channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	left, entry, tok := releaseWith(t, rdb, m, a+"|r1", 0)
	if left != 0 || entry != ea {
		t.Fatalf("release = %d, %q; want 0 and a hand-off to %q", left, entry, ea)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := readHold(t, rdb, m)
	if h.owner != b || h.nonce != "1" || h.w != "1" || h.q != "1" || msg.Payload != ea+"|"+h.token || fmt.Sprint(tok) != h.token {
		t.Fatalf("after release: hold %+v, message %q; want b handed the lock", h, msg.Payload)
	}
	if ttl := rdb.PTTL(ctx, m.keys[0]).Val(); ttl <= 5*time.Second {
		t.Fatalf("hand-off TTL %v, want the waiter's 7s lease", ttl)
	}
	// b missed the message: its next try claims the hand-off without a second count.
	if v := run(b, 60000, ea); !v.held || v.count != 1 || v.fresh {
		t.Fatalf("claim = %+v, want held with count 1", v)
	}
	// a newcomer does not overtake c even when the lock is free.
	if r := release(t, rdb, m, b, 0); r != 0 {
		t.Fatalf("release b = %d", r)
	}
	if v := run(a, 0, ""); v.held {
		t.Fatalf("newcomer took the lock from the queue's head: %+v", v)
	}
	// c gives up while holding the hand-off: the lock is given back, and a may now take it.
	if r, _ := scriptCancel.run(ctx, m.redis(), m.keys, eb, "0").Int64(); r != 1 {
		t.Fatalf("cancel = %d, want 1 (hand-off given back)", r)
	}
	if v := run(a, 60000, ec); !v.held {
		t.Fatalf("after the head gave up: %+v", v)
	}
	// a failed call of a handle that held nothing gives back the hold it may have taken
	if r, _ := scriptCancel.run(ctx, m.redis(), m.keys, ec, "1").Int64(); r != 1 {
		t.Fatalf("orphan cancel = %d, want 1", r)
	}
	if rdb.Exists(ctx, m.keys[0]).Val() != 0 {
		t.Fatal("orphaned hold left in place")
	}
}

// A failed re-entry whose outcome is unknown is taken back by cancel: the level it may have
// counted goes, the hold stays.
func TestScriptsCancelTakesBackAReentry(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	acquire(t, rdb, m, m.attemptID(5000), 0)
	re := m.attemptID(5000)
	if v := acquire(t, rdb, m, re, 0); v.count != 2 {
		t.Fatalf("re-entry = %+v", v)
	}
	if r, _ := scriptCancel.run(ctx, m.redis(), m.keys, re, "0").Int64(); r != 1 {
		t.Fatalf("cancel of the re-entry = %d, want 1", r)
	}
	h, ok := readHold(t, rdb, m)
	if !ok || h.count != "1" || h.nonce != "" {
		t.Fatalf("after the cancel: %+v, %v; want the hold with count 1", h, ok)
	}
	if r, _ := scriptCancel.run(ctx, m.redis(), m.keys, re, "0").Int64(); r != 0 {
		t.Fatalf("the cancel re-sent = %d, want 0: it must not take a second level", r)
	}
	if r := release(t, rdb, m, m.owner, 0); r != 0 {
		t.Fatalf("release = %d, want 0", r)
	}
}

func TestScriptsDropDeadWaiters(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	// A crashed waiter's entry, past its deadline, and a malformed entry: both are skipped.
	rdb.RPush(ctx, m.keys[2], "dead|1|1000", "garbage")
	rdb.ZAdd(ctx, m.keys[3], redis.Z{Score: 1, Member: "dead|1|1000"}, redis.Z{Score: 1e15, Member: "garbage"})
	if v := acquire(t, rdb, m, m.attemptID(5000), 0); v.held {
		t.Fatalf("took the lock with a live-looking entry queued: %+v", v)
	}
	// "garbage" was live by deadline but malformed: the hand-off dropped it and found nobody.
	if h, ok := readHold(t, rdb, m); ok {
		t.Fatalf("lock handed to %+v", h)
	}
	if v := acquire(t, rdb, m, m.attemptID(5000), 0); !v.held {
		t.Fatalf("acquire with only dead entries queued = %+v", v)
	}
}

// A lock key holding something this package never writes is nobody's hold: calls fail or
// answer "not held", and never overwrite it.
func TestScriptsForeignValue(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	rdb.Set(ctx, m.keys[0], "not a hold", time.Minute)
	if err := scriptAcquire.run(ctx, m.redis(), m.keys, m.attemptID(5000), 1000).Err(); err == nil {
		t.Error("acquire over a foreign value succeeded")
	}
	if r := release(t, rdb, m, m.owner, 0); r != -1 {
		t.Errorf("release of a foreign value = %d, want -1", r)
	}
	if v := rdb.Get(ctx, m.keys[0]).Val(); v != "not a hold" {
		t.Fatalf("foreign value overwritten: %q", v)
	}
}

// hashTag is the part of a key Redis Cluster hashes: the text between the first "{" and the
// next "}", if not empty; else the whole key.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

func TestKeysShareOneSlot(t *testing.T) {
	c := New(nil, nil)
	for _, name := range []string{"jobs:preheat", "a{b}c", "{x}", "", "}{"} {
		m := c.NewMutex(name)
		tag := hashTag(m.keys[0])
		for _, k := range m.keys {
			if hashTag(k) != tag {
				t.Errorf("name %q: key %q hashes on %q, lock key on %q", name, k, hashTag(k), tag)
			}
		}
	}
	if a, b := c.NewMutex("x"), c.NewMutex("x"); a.owner == b.owner || len(a.owner) != 32 {
		t.Errorf("owner ids %q, %q: want distinct random 128-bit ids", a.owner, b.owner)
	}
}

// Tokens are written as exact decimals up to 2^53: Lua's own number formatting would store
// 1.7962274618961e+15, which no script could read back (found in review; a time-based floor
// for the fence counter, as the package docs suggest after a failover, is that large).
func TestScriptsLargeTokens(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	const floor = 1796227461896078 // microseconds since 1970, December 2026
	rdb.Set(ctx, m.keys[1], floor, 0)
	entry := m.attemptID(5000)
	v := acquire(t, rdb, m, entry, 0)
	if !v.held || v.token != floor+1 {
		t.Fatalf("take = %+v, want token %d", v, floor+1)
	}
	if h, _ := readHold(t, rdb, m); h.token != fmt.Sprint(floor+1) {
		t.Fatalf("token stored as %q", h.token)
	}
	if r, _ := scriptRenew.run(ctx, m.redis(), m.keys[:1], m.owner, floor+1, 9000).Int64(); r != 1 {
		t.Fatalf("renew with the exact token = %d, want 1", r)
	}
	// a waiter is handed the lock: the published token is exact too
	other := "waiter"
	we := other + "|1|5000"
	if r := acquire(t, rdb, m, we, 60000); r.held {
		t.Fatalf("waiter: %+v", r)
	}
	sub := rdb.Subscribe(ctx, m.channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if n, e, tok := releaseWith(t, rdb, m, m.releaseID(), floor+1, entry+"|"+fmt.Sprint(floor+1)+"|1|0||"); n != 0 || e != we || tok != floor+2 {
		t.Fatalf("release = %d, %q, %d; want a hand-off to %q with token %d", n, e, tok, we, floor+2)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s|%d", we, int64(floor+2)); msg.Payload != want {
		t.Fatalf("hand-off message %q, want %q", msg.Payload, want)
	}
	if r := release(t, rdb, m, other, floor+2); r != 0 {
		t.Fatalf("the waiter's release = %d, want 0", r)
	}
}

// A handle may be shared by goroutines: after the lock was handed to one goroutine's queued
// attempt, another goroutine of the same handle re-enters. The handed attempt must still be
// able to claim (without a second count) or give back its level (found in review: the
// hand-off used to be remembered only as the last counted attempt, which the re-entry
// overwrote).
func TestScriptsHandOffSurvivesReentry(t *testing.T) {
	for _, giveUp := range []bool{false, true} {
		rdb, m := scriptEnv(t)
		ctx := context.Background()
		if v := acquire(t, rdb, m, "holder|1|5000", 0); !v.held {
			t.Fatalf("holder: %+v", v)
		}
		handed := m.attemptID(5000)
		if v := acquire(t, rdb, m, handed, 60000); v.held {
			t.Fatalf("queued attempt: %+v", v)
		}
		if n, e, _ := releaseWith(t, rdb, m, "holder|r1", 0); n != 0 || e != handed {
			t.Fatalf("release = %d, %q; want a hand-off to %q", n, e, handed)
		}
		if v := acquire(t, rdb, m, m.attemptID(5000), 0); !v.held || v.count != 2 {
			t.Fatalf("re-entry by the same handle = %+v, want count 2", v)
		}
		if giveUp {
			if r, _ := scriptCancel.run(ctx, m.redis(), m.keys, handed, "0").Int64(); r != 1 {
				t.Fatalf("the handed attempt gives up: cancel = %d, want 1 (its level given back)", r)
			}
			if r := release(t, rdb, m, m.owner, 0); r != 0 {
				t.Fatalf("the re-entry's release = %d, want 0: the lock must be free", r)
			}
			continue
		}
		if v := acquire(t, rdb, m, handed, 60000); !v.held || v.count != 2 {
			t.Fatalf("the handed attempt claims = %+v, want held with count 2 (not counted again)", v)
		}
	}
}
