// Package lock is a distributed lock on Redis in the tradition of Redisson's RLock, with
// fencing tokens.
//
//	c := lock.New(lock.Rueidis(rdb), nil) // rdb: a rueidis.Client (go-redis: lock/goredis)
//	defer c.Close()
//	m := c.NewMutex("jobs:preheat")       // one handle = one owner
//	l, err := m.Lock(ctx)                 // blocks; the watchdog renews the lease until Unlock
//	if err != nil { ... }
//	defer m.Unlock(ctx)
//	err = store.Write(l.Context(), l.Token(), ...) // stops if the lock is lost; fenced
//
// # What it does
//
//   - Lock waits until held or ctx is done; TryLock waits at most a given time, with an
//     optional lease. Without a lease, a watchdog renews the lease (default 30 s) every lease/3
//     until Unlock; with a lease, nothing renews it.
//   - Owner-only unlock. Each handle (NewMutex) has a random 128-bit owner id from
//     crypto/rand; an Unlock by anyone else, or after the lease ran out and someone else took
//     the lock, changes nothing and returns ErrNotHeld. Unlock is safe to retry.
//   - Reentrancy: a handle that holds the lock acquires it again at once; each acquisition
//     needs its own Unlock. The count lives in Redis (in the lock's value), as in Redisson.
//   - Fair waiting without polling: a blocked waiter joins the lock's FIFO queue and listens
//     on the lock's pub/sub channel. Unlock hands the lock straight to the first live waiter
//     and publishes one message naming it, in the same round trip; the waiter wakes already
//     holding the lock. Waiters subscribe before their last try, so a wake-up cannot be lost,
//     and fall back to the lock's remaining TTL should a message be lost (a dropped connection).
//   - Fencing tokens: every acquisition returns a token (Lease.Token) that increases strictly
//     per lock name; see Fencing below.
//   - Loss notification: Lease.Done is closed and Lease.Context cancelled (cause ErrLost) when
//     a renewal or check finds the key gone or owned by someone else, within one renewal
//     period (lease/3), or when the lease runs out unrenewed.
//   - Quorum mode (NewQuorum): Redlock over N independent nodes; see below.
//
// Lua scripts, one per file in lua/, do every step atomically; all keys of one lock carry the
// hash tag {name}, so the package works on standalone Redis, Sentinel and Cluster alike. It
// needs Redis 6.0 or later.
//
// # Clients
//
// The package reaches Redis through Redis, a small interface of its own: run a script, open a
// pub/sub connection. Rueidis adapts a rueidis client (what seckill uses, sharing the engine's
// connections); package lock/goredis adapts a go-redis client.
//
// # When to use it
//
// Use it for coarse, infrequent mutual exclusion between processes: one cache warm-up or
// reconciliation job at a time, a leader for a periodic sweeper, a migration. Each
// acquisition costs a round trip to Redis and the lock is only as available as Redis.
//
// Do not use it for high-rate, fine-grained work such as decrementing stock: do that with one
// atomic operation (a Lua script, a conditional UPDATE) instead of lock, read, write, unlock.
// And do not rely on it alone for correctness where a violation is costly: see Fencing.
//
// # Fencing
//
// No lease-based lock can promise that two holders never overlap: a holder can be paused (GC,
// a stopped VM, swapping, a slow network) past its lease, after which the lock goes to
// someone else while the first still believes it holds it. Lease.Done tells the holder as
// soon as it notices, but a paused process notices nothing. Fencing closes the gap at the
// resource: pass Lease.Token with every request that the lock protects, and have the resource
// refuse a token lower than the highest it has seen (Fence shows the idea; in a database it is
// a "WHERE fence_token <= $token" guard, in Redis a compare in the same script). Check on reads
// too when you read-modify-write, and inside the resource's own atomicity.
//
// Tokens come from an INCR counter per lock name (key "<prefix>{<name>}:fence", which never
// expires). They increase strictly as long as Redis keeps that counter, and must stay below
// 2^53 (the scripts' numbers are doubles). They can go backwards
// when it does not:
//
//   - Redis restarts without persistence, or with RDB snapshots or appendfsync everysec, and
//     loses the last increments (up to the last snapshot, or about a second);
//   - failover to a replica that had not yet received the last increments (replication is
//     asynchronous; WAIT narrows the window but does not close it);
//   - someone deletes or rewrites the fence key (FLUSHDB, a key-eviction policy such as
//     allkeys-lru: use noeviction or volatile-* on the lock's Redis).
//
// What to do about it: run the lock's Redis with appendonly yes and appendfsync always if
// tokens must survive a crash; after a restart or failover, raise the counters above anything
// issued before (for example SET the fence key to a value taken from the resource's highest
// seen token, or to a time-based floor), before taking locks again; and let resources keep
// the highest token durably on their side, so they keep refusing old tokens even if Redis
// forgets. The same holds, per node, in quorum mode.
//
// # Quorum mode
//
// NewQuorum implements Redlock: a lock is held when a majority (N/2+1) of N independent
// Redis nodes granted it, within a validity of lease − elapsed − drift (drift = lease ×
// DriftFactor + 2 ms). It tolerates a minority of nodes being down or unreachable. Its
// assumptions are those of Redlock, and they are worth stating:
//
//   - The nodes are independent: not replicas of one another, no shared fate.
//   - Clocks advance at about the same rate on every node and client (bounded drift); they
//     need not agree on the time. Pauses longer than the validity break exclusion, as for any
//     lease.
//   - A node that restarts must not forget a granted lock before its lease would have ended:
//     run nodes with appendfsync always, or keep a restarted node out for at least one lease
//     (delayed restart), or a majority can be formed twice.
//
// Fencing tokens in quorum mode: the winner takes the highest token any node of its majority
// issued, then writes it back to that majority (a second round trip). Any two majorities
// share a node, so under the assumptions above tokens still increase strictly. Reentrancy is
// counted in the client in quorum mode, and waiters do not queue (queues on independent
// nodes could disagree): they are woken by any node's release message and retry with a small
// random jitter, so quorum mode is not fair. Prefer the single-deployment mode (New, with
// Sentinel or Cluster for availability) unless you need to survive the loss of nodes without
// a failover.
//
// # Conformance
//
// Package lock/locktest is a test kit that any implementation of this contract runs; this
// package runs it against standalone Redis and against quorum mode.
package lock
