package lock

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill/internal/testenv"
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
	c := New(rdb, &Options{Prefix: fmt.Sprintf("lockscript:%d:", time.Now().UnixNano())})
	t.Cleanup(func() { _ = c.Close() })
	m := c.NewMutex(t.Name())
	t.Cleanup(func() { rdb.Del(context.Background(), m.keys...) })
	return rdb, m
}

func noKeys(t *testing.T, rdb *redis.Client, m *Mutex) {
	t.Helper()
	if n := rdb.Exists(context.Background(), m.keys...).Val(); n != 0 {
		t.Fatalf("%d of the lock's keys exist after a rejected call: a write happened before validation", n)
	}
}

// release runs release.lua in fair mode and returns its first reply element.
func release(t *testing.T, rdb *redis.Client, m *Mutex, owner string, token int64) int64 {
	t.Helper()
	v, err := scriptRelease.Run(context.Background(), rdb, m.keys, owner, token, m.channel, "0", owner+"|r"+fmt.Sprint(time.Now().UnixNano())).Slice()
	if err != nil {
		t.Fatal(err)
	}
	return v[0].(int64)
}

func TestScriptsValidateBeforeWriting(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	entry := m.owner + "|1|1000"
	cases := []struct {
		name string
		run  func() error
	}{
		{"acquire lease not a number", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, m.owner, "x", "1", entry, 1000, m.channel).Err()
		}},
		{"acquire lease 0", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 0, "1", entry, 1000, m.channel).Err()
		}},
		{"acquire fractional lease", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, m.owner, "1.5", "1", entry, 1000, m.channel).Err()
		}},
		{"acquire empty owner", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, "", 1000, "0", "|1|1000", 1000, m.channel).Err()
		}},
		{"acquire owner with separator", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, "a|b", 1000, "0", "a|b|1|1000", 1000, m.channel).Err()
		}},
		{"acquire bad mode", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 1000, "2", entry, 1000, m.channel).Err()
		}},
		{"acquire mode 0 without attempt id", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 1000, "0", "", 1000, m.channel).Err()
		}},
		{"acquire entry of another owner", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 1000, "1", "other|1|1000", 1000, m.channel).Err()
		}},
		{"acquire missing waiter timeout", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 1000, "1", entry).Err()
		}},
		{"acquire missing channel", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 1000, "0", entry, 1000).Err()
		}},
		{"acquire too few keys", func() error {
			return scriptAcquire.Run(ctx, rdb, m.keys[:2], m.owner, 1000, "0", entry, 1000, m.channel).Err()
		}},
		{"release bad token", func() error {
			return scriptRelease.Run(ctx, rdb, m.keys, m.owner, "-1", m.channel, "0", m.owner+"|r1").Err()
		}},
		{"release bad mode", func() error {
			return scriptRelease.Run(ctx, rdb, m.keys, m.owner, 0, m.channel, "", m.owner+"|r1").Err()
		}},
		{"release id of another owner", func() error {
			return scriptRelease.Run(ctx, rdb, m.keys, m.owner, 0, m.channel, "0", "x|r1").Err()
		}},
		{"cancel bad entry", func() error {
			return scriptCancel.Run(ctx, rdb, m.keys, m.owner, "zzz", m.channel, "0").Err()
		}},
		{"cancel bad orphan flag", func() error {
			return scriptCancel.Run(ctx, rdb, m.keys, m.owner, m.owner+"|1|1000", m.channel, "x").Err()
		}},
		{"renew bad lease", func() error {
			return scriptRenew.Run(ctx, rdb, m.keys[:1], m.owner, 0, "-5").Err()
		}},
		{"fence token 0", func() error {
			return scriptFence.Run(ctx, rdb, m.keys[:2], m.owner, 0).Err()
		}},
	}
	for _, tc := range cases {
		err := tc.run()
		if err == nil || !strings.Contains(err.Error(), "lock:") {
			t.Errorf("%s: got %v, want a validation error", tc.name, err)
		}
		noKeys(t, rdb, m)
	}
}

func TestScriptsMissingKeys(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	if v, err := scriptRelease.Run(ctx, rdb, m.keys, m.owner, 0, m.channel, "0", m.owner+"|r1").Int64Slice(); err != nil || v[0] != -1 {
		t.Errorf("release of a missing lock = %v, %v; want {-1}", v, err)
	}
	if v, err := scriptRenew.Run(ctx, rdb, m.keys[:1], m.owner, 0, 1000).Int64(); err != nil || v != 0 {
		t.Errorf("renew of a missing lock = %d, %v; want 0", v, err)
	}
	if v, err := scriptCancel.Run(ctx, rdb, m.keys, m.owner, m.owner+"|1|1000", m.channel, "1").Int64(); err != nil || v != 0 {
		t.Errorf("cancel with nothing queued = %d, %v; want 0", v, err)
	}
	if v, err := scriptFence.Run(ctx, rdb, m.keys[:2], m.owner, 5).Int64(); err != nil || v != 0 {
		t.Errorf("fence of a missing lock = %d, %v; want 0", v, err)
	}
	noKeys(t, rdb, m)
}

func TestScriptsZeroIsNotTrue(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	other := "someoneelse"
	v, err := scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 5000, "0", m.attemptID(5000), 1000, m.channel).Int64Slice()
	if err != nil || v[0] != 1 {
		t.Fatalf("acquire = %v, %v", v, err)
	}
	token := v[1]
	// A stranger's release, renew and re-entry all get "no", and change nothing.
	if r := release(t, rdb, m, other, 0); r != -1 {
		t.Errorf("stranger's release = %d, want -1", r)
	}
	if r, _ := scriptRenew.Run(ctx, rdb, m.keys[:1], other, 0, 99999).Int64(); r != 0 {
		t.Errorf("stranger's renew = %d, want 0", r)
	}
	if r, _ := scriptRenew.Run(ctx, rdb, m.keys[:1], m.owner, token+1, 99999).Int64(); r != 0 {
		t.Errorf("renew with the wrong token = %d, want 0", r)
	}
	if ttl := rdb.PTTL(ctx, m.keys[0]).Val(); ttl > 5*time.Second {
		t.Errorf("TTL %v: a refused renew extended the lease", ttl)
	}
	if r := release(t, rdb, m, m.owner, token+1); r != -1 {
		t.Errorf("release with the wrong token = %d, want -1", r)
	}
	if r, _ := scriptAcquire.Run(ctx, rdb, m.keys, other, 5000, "0", other+"|1|5000", 1000, m.channel).Int64Slice(); r[0] != 0 {
		t.Errorf("stranger's acquire = %v, want busy", r)
	}
	if o := rdb.HGet(ctx, m.keys[0], "o").Val(); o != m.owner {
		t.Fatalf("owner is %q after refused calls", o)
	}
}

func TestScriptsReentrantCount(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	var token int64
	for want := int64(1); want <= 3; want++ {
		v, err := scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 5000, "0", m.attemptID(5000), 1000, m.channel).Int64Slice()
		if err != nil || v[0] != 1 || v[2] != want {
			t.Fatalf("acquire %d = %v, %v", want, v, err)
		}
		if want == 1 {
			token = v[1]
		} else if v[1] != token {
			t.Fatalf("re-entry token %d, want %d", v[1], token)
		}
		if c := rdb.HGet(ctx, m.keys[0], "c").Val(); c != fmt.Sprint(want) {
			t.Fatalf("count in Redis %q, want %d", c, want)
		}
	}
	for want := int64(2); want >= 0; want-- {
		if r := release(t, rdb, m, m.owner, token); r != want {
			t.Fatalf("release = %d, want %d", r, want)
		}
	}
	if rdb.Exists(ctx, m.keys[0]).Val() != 0 {
		t.Fatal("lock key left after the last release")
	}
	if f := rdb.Get(ctx, m.keys[1]).Val(); f != fmt.Sprint(token) {
		t.Fatalf("fence counter %q, want %d (it must outlive the hold)", f, token)
	}
}

// A client library may re-send a call after a timeout although Redis ran it: the same attempt
// or release id must not count twice (else a re-entry would leak or a release free the lock
// under its holder).
func TestScriptsIdempotent(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	first, second := m.attemptID(5000), m.attemptID(5000)
	acq := func(id string) []int64 {
		v, err := scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 5000, "0", id, 1000, m.channel).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := acq(first); v[0] != 1 || v[2] != 1 {
		t.Fatalf("take = %v", v)
	}
	if v := acq(first); v[0] != 1 || v[2] != 1 {
		t.Fatalf("the same take re-sent = %v, want count 1", v)
	}
	if v := acq(second); v[2] != 2 {
		t.Fatalf("re-entry = %v, want count 2", v)
	}
	if v := acq(second); v[2] != 2 {
		t.Fatalf("the same re-entry re-sent = %v, want count 2", v)
	}
	rel := func(id string) int64 {
		v, err := scriptRelease.Run(ctx, rdb, m.keys, m.owner, 0, m.channel, "0", id).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v[0]
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
	acq(m.attemptID(5000))
	acq(m.attemptID(5000))
	rid = m.releaseID()
	if r := rel(rid); r != 1 {
		t.Fatalf("partial release = %d", r)
	}
	if r := rel(rid); r != 1 {
		t.Fatalf("the same partial release re-sent = %d, want 1: it must not leave a second level", r)
	}
	if o := rdb.HGet(ctx, m.keys[0], "o").Val(); o != m.owner {
		t.Fatal("lock freed by a re-sent partial release")
	}
}

func TestScriptsHandOffAndQueue(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	a, b, c := "aaaa", "bbbb", "cccc"
	ea, eb, ec := b+"|1|7000", c+"|1|7000", a+"|9|7000"
	n := 0
	run := func(owner, mode, entry string) []int64 {
		if entry == "" {
			n++
			entry = fmt.Sprintf("%s|x%d|5000", owner, n)
		}
		v, err := scriptAcquire.Run(ctx, rdb, m.keys, owner, 5000, mode, entry, 60000, m.channel).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := run(a, "0", ""); v[0] != 1 {
		t.Fatalf("a: %v", v)
	}
	if v := run(b, "1", ea); v[0] != 0 { // b queues
		t.Fatalf("b: %v", v)
	}
	if v := run(c, "1", eb); v[0] != 0 { // c queues behind b
		t.Fatalf("c: %v", v)
	}
	if v := run(b, "1", ea); v[0] != 0 { // refreshing does not duplicate b's place
		t.Fatalf("b again: %v", v)
	}
	if n := rdb.LLen(ctx, m.keys[2]).Val(); n != 2 {
		t.Fatalf("queue length %d, want 2", n)
	}
	sub := rdb.Subscribe(ctx, m.channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	rel, err := scriptRelease.Run(ctx, rdb, m.keys, a, 0, m.channel, "0", a+"|r1").Slice()
	if err != nil || len(rel) != 3 || rel[0] != int64(0) || rel[1] != ea {
		t.Fatalf("release = %v, %v; want {0, %q, token}", rel, err, ea)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := rdb.HGetAll(ctx, m.keys[0]).Val()
	if h["o"] != b || h["w"] != ea || msg.Payload != ea+"|"+h["t"] || fmt.Sprint(rel[2]) != h["t"] {
		t.Fatalf("after release: hash %v, message %q; want b handed the lock", h, msg.Payload)
	}
	if ttl := rdb.PTTL(ctx, m.keys[0]).Val(); ttl <= 5*time.Second {
		t.Fatalf("hand-off TTL %v, want the waiter's 7s lease", ttl)
	}
	// b missed the message: its next try claims the hand-off without a second count.
	if v := run(b, "1", ea); v[0] != 1 || v[2] != 1 {
		t.Fatalf("claim = %v, want held with count 1", v)
	}
	// a newcomer does not overtake c even when the lock is free.
	if r := release(t, rdb, m, b, 0); r != 0 {
		t.Fatalf("release b = %d", r)
	}
	if v := run(a, "0", ""); v[0] != 0 {
		t.Fatalf("newcomer took the lock from the queue's head: %v", v)
	}
	// c gives up while holding the hand-off: the lock is given back, and a may now take it.
	if r, _ := scriptCancel.Run(ctx, rdb, m.keys, c, eb, m.channel, "0").Int64(); r != 1 {
		t.Fatalf("cancel = %d, want 1 (hand-off given back)", r)
	}
	if v := run(a, "1", ec); v[0] != 1 {
		t.Fatalf("after the head gave up: %v", v)
	}
	// a failed call of a handle that held nothing gives back the hold it may have taken
	if r, _ := scriptCancel.Run(ctx, rdb, m.keys, a, ec, m.channel, "1").Int64(); r != 1 {
		t.Fatalf("orphan cancel = %d, want 1", r)
	}
	if rdb.Exists(ctx, m.keys[0]).Val() != 0 {
		t.Fatal("orphaned hold left in place")
	}
}

func TestScriptsDropDeadWaiters(t *testing.T) {
	rdb, m := scriptEnv(t)
	ctx := context.Background()
	// A crashed waiter's entry, past its deadline, and a malformed entry: both are skipped.
	rdb.RPush(ctx, m.keys[2], "dead|1|1000", "garbage")
	rdb.ZAdd(ctx, m.keys[3], redis.Z{Score: 1, Member: "dead|1|1000"}, redis.Z{Score: 1e15, Member: "garbage"})
	v, err := scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 5000, "0", m.attemptID(5000), 1000, m.channel).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if v[0] == 1 {
		t.Fatalf("took the lock with a live-looking entry queued: %v", v)
	}
	// "garbage" was live by deadline but malformed: the hand-off dropped it and found nobody.
	if o := rdb.HGet(ctx, m.keys[0], "o").Val(); o != "" {
		t.Fatalf("lock handed to %q", o)
	}
	v, err = scriptAcquire.Run(ctx, rdb, m.keys, m.owner, 5000, "0", m.attemptID(5000), 1000, m.channel).Int64Slice()
	if err != nil || v[0] != 1 {
		t.Fatalf("acquire with only dead entries queued = %v, %v", v, err)
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
