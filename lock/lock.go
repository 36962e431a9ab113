package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by this package. Compare with errors.Is: they are often wrapped.
var (
	// ErrNotAcquired: the lock stayed busy for the whole wait time (TryLock), or in quorum mode
	// no majority of nodes could be won.
	ErrNotAcquired = errors.New("lock: not acquired")
	// ErrNotHeld: Unlock was called by a handle that does not hold the lock (never took it,
	// already released it, or lost it to expiry). Nothing was changed in Redis.
	ErrNotHeld = errors.New("lock: not held")
	// ErrLost is the cause of a Lease's context when the hold ended without Unlock: renewal
	// found the key gone or owned by someone else, or the lease ran out unrenewed.
	ErrLost = errors.New("lock: lost")
	// ErrReleased is the cause of a Lease's context after the final Unlock.
	ErrReleased = errors.New("lock: released")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("lock: client closed")
)

// Defaults used when the matching Options field is zero.
const (
	// DefaultLease is the lease of a hold renewed by the watchdog (Redisson's
	// lockWatchdogTimeout); the watchdog renews every DefaultLease/3.
	DefaultLease = 30 * time.Second
	// DefaultWaiterTimeout is how long a queued waiter keeps its place without refreshing it.
	DefaultWaiterTimeout = 10 * time.Second
	// DefaultNodeTimeout bounds one call to one node in quorum mode.
	DefaultNodeTimeout = 250 * time.Millisecond
	// DefaultDriftFactor is the share of a lease subtracted for clock drift (as in Redlock).
	DefaultDriftFactor = 0.01
)

// Options tune a Client. The zero value is valid and means the defaults.
type Options struct {
	// Prefix starts every key and channel name; default "lock:". Keys of the lock named N are
	// Prefix+"{"+N+"}" and that plus ":fence", ":queue", ":deadlines"; the channel is that plus
	// ":ch". The braces make N the Redis Cluster hash tag, so all keys of a lock share a slot
	// (a name that is empty or starts with "}" or a backslash gets a backslash in front). The
	// prefix must not contain "{": it would become the hash tag of every lock.
	Prefix string
	// Lease is the lease of holds taken without an explicit lease (Lock, or TryLock with lease
	// 0); the watchdog renews it every Lease/3 until Unlock. Default DefaultLease.
	Lease time.Duration
	// WaiterTimeout is how long a queued waiter keeps its place without refreshing it. Live
	// waiters refresh every WaiterTimeout/3; the place of a crashed one lapses after this long.
	// Default DefaultWaiterTimeout.
	WaiterTimeout time.Duration
	// NodeTimeout bounds each call to each node in quorum mode. Default DefaultNodeTimeout.
	NodeTimeout time.Duration
	// DriftFactor is the share of each lease held back for clock drift between this process
	// and Redis when computing how long a hold is surely valid. Default DefaultDriftFactor.
	DriftFactor float64
	// RetryJitter is the largest random delay a quorum-mode waiter adds before retrying, so
	// that contenders who split the vote do not collide again. Default 5 ms.
	RetryJitter time.Duration
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Prefix == "" {
		r.Prefix = "lock:"
	}
	if r.Lease <= 0 {
		r.Lease = DefaultLease
	}
	if r.WaiterTimeout <= 0 {
		r.WaiterTimeout = DefaultWaiterTimeout
	}
	if r.NodeTimeout <= 0 {
		r.NodeTimeout = DefaultNodeTimeout
	}
	if r.DriftFactor <= 0 {
		r.DriftFactor = DefaultDriftFactor
	}
	if r.RetryJitter <= 0 {
		r.RetryJitter = 5 * time.Millisecond
	}
	return r
}

// Client makes lock handles over one Redis deployment (New) or over N independent Redis nodes
// (NewQuorum). It is safe for concurrent use. It owns one pub/sub connection per node, opened
// when the first waiter has to wait; Close releases them. It does not close the Redis clients.
type Client struct {
	nodes  []*node
	quorum int
	opts   Options
	closed atomic.Bool
	done   chan struct{} // closed by Close: wakes blocked waiters
	once   sync.Once
	wd     *watchdog
}

type node struct {
	r   Redis
	sub *subscriber
}

// New returns a Client over one Redis deployment: a standalone server, a Sentinel-managed
// primary, or a Cluster, reached through r (Rueidis, or package lock/goredis). This is the
// fair, queue-based mode. opts may be nil.
func New(r Redis, opts *Options) *Client {
	return &Client{
		nodes:  []*node{{r: r, sub: newSubscriber(r)}},
		quorum: 1,
		opts:   opts.withDefaults(),
		done:   make(chan struct{}),
		wd:     newWatchdog(),
	}
}

// NewQuorum returns a Client in quorum mode (Redlock) over independent Redis nodes: a lock is
// held when a majority of the nodes granted it within its lease. See the package
// documentation for its assumptions. Use an odd number of nodes, at least 3; the nodes must
// be independent (not replicas of each other). opts may be nil.
func NewQuorum(nodes []Redis, opts *Options) (*Client, error) {
	if len(nodes) == 0 {
		return nil, errors.New("lock: NewQuorum needs at least one node")
	}
	c := &Client{quorum: len(nodes)/2 + 1, opts: opts.withDefaults(), done: make(chan struct{}), wd: newWatchdog()}
	for _, r := range nodes {
		if r == nil {
			return nil, errors.New("lock: NewQuorum: nil node")
		}
		c.nodes = append(c.nodes, &node{r: r, sub: newSubscriber(r)})
	}
	return c, nil
}

// Close stops the Client's goroutines (pub/sub dispatchers and watchdog) and its pub/sub
// connections. Waiters still blocked get ErrClosed. Holds are not released in Redis: Unlock
// them first. A hold still open is no longer renewed, so its Lease ends at once with a cause
// wrapping ErrLost, and its key expires after its lease. The Redis clients behind the Redis
// values stay open.
// Idempotent.
func (c *Client) Close() error {
	c.closed.Store(true)
	c.once.Do(func() { close(c.done) })
	c.wd.close(fmt.Errorf("%w: client closed", ErrLost))
	for _, n := range c.nodes {
		n.sub.close()
	}
	return nil
}

// NewMutex returns a new owner handle on the lock called name. Each handle has its own random
// owner id (from crypto/rand): two handles on the same name exclude each other, and one handle
// is one owner, so a handle that already holds the lock acquires it again at once (reentrancy)
// and needs one Unlock per acquisition. Use one handle per logical owner, typically per
// goroutine or job: goroutines sharing a handle do not exclude each other.
func (c *Client) NewMutex(name string) *Mutex {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("lock: crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	base := c.opts.Prefix + "{" + hashTagSafe(name) + "}"
	m := &Mutex{
		c:       c,
		name:    name,
		owner:   hex.EncodeToString(b[:]),
		keys:    []string{base, base + ":fence", base + ":queue", base + ":deadlines"},
		channel: base + ":ch", // the scripts derive it the same way from the lock key
	}
	return m
}

// hashTagSafe makes name usable between the braces of a Cluster hash tag: a tag must not be
// empty, so a name that is empty or starts with "}" gets a backslash in front (and so does
// one that starts with a backslash, which keeps the mapping one-to-one).
func hashTagSafe(name string) string {
	if name == "" || name[0] == '}' || name[0] == '\\' {
		return "\\" + name
	}
	return name
}

// Mutex is one owner's handle on a named distributed lock. Its methods are safe for
// concurrent use, but see NewMutex: the handle, not the goroutine, is the owner.
type Mutex struct {
	c       *Client
	name    string
	owner   string
	keys    []string // lock, fence, queue, deadlines
	channel string
	nonce   atomic.Uint64

	mu   sync.Mutex
	hold *hold // current hold, nil when not held
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Owner returns the handle's random owner id, as stored in Redis while it holds the lock.
func (m *Mutex) Owner() string { return m.owner }

// Lock blocks until the handle holds the lock or ctx is done. The hold's lease (Options.Lease)
// is renewed by a watchdog every lease/3 until Unlock. While it waits, the caller sits in the
// lock's FIFO queue and is woken by pub/sub when the lock is handed to it; it never polls.
// On ctx done it leaves the queue (handing the lock on if it was handed to it meanwhile) and
// returns ctx.Err().
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, -1, 0)
}

// TryLock tries to acquire the lock, waiting at most wait (0: a single try, no queueing).
// With lease > 0 the hold expires after lease and is never renewed (Unlock before it runs out,
// or watch the Lease's Done); with lease 0 the watchdog renews it as for Lock. It returns
// ErrNotAcquired when the wait time passes, ctx.Err() when ctx ends first.
func (m *Mutex) TryLock(ctx context.Context, wait, lease time.Duration) (*Lease, error) {
	if wait < 0 {
		wait = 0
	}
	if lease < 0 {
		return nil, fmt.Errorf("lock: negative lease %v", lease)
	}
	return m.acquire(ctx, wait, lease)
}

// Unlock releases one acquisition. After the last one the lock is free: it goes straight to
// the first waiter in the queue (who is woken by pub/sub), the watchdog stops and the Lease's
// context is cancelled with ErrReleased. Only the owner can unlock: ErrNotHeld means this
// handle does not hold the lock (released already, or lost to expiry) and that nothing in
// Redis was touched, so a holder that took over after an expiry is unaffected. After a
// network error the state is unknown and Unlock may simply be called again: the retry reuses
// the failed call's id, so a release that did reach Redis is not applied twice (if it was
// the last level, the retry finds the lock free and reports ErrNotHeld).
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	h := m.hold
	m.mu.Unlock()
	if h == nil {
		return ErrNotHeld
	}
	if len(m.c.nodes) > 1 {
		return m.unlockQuorum(ctx, h)
	}
	nd := m.c.nodes[0]
	// A retry of an Unlock that failed reuses its id: if the failed call did reach Redis, the
	// retry does not leave a second level.
	m.mu.Lock()
	rid := h.pendingRelease
	if rid == "" {
		rid = m.releaseID()
		h.pendingRelease = rid
	}
	count := h.count
	m.mu.Unlock()
	var args [3]any
	args[0], args[1] = rid, h.token
	n := 2
	if count == 1 && h.takenBy != "" {
		// the value acquire.lua's fast path wrote: if Redis still holds exactly that, the
		// release is a plain GET and DEL
		args[2] = h.takenBy + "|" + strconv.FormatUint(h.token, 10) + "|1|0||"
		n = 3
	}
	v, err := scriptRelease.run(ctx, nd.r, m.keys, args[:n]...).Result()
	var left, token int64
	var entry string
	if err == nil {
		left, entry, token, err = decodeRelease(v)
	}
	if err != nil {
		return fmt.Errorf("lock: unlock %q: %w", m.name, err)
	}
	m.mu.Lock()
	h.pendingRelease = ""
	m.mu.Unlock()
	switch {
	case left < 0:
		m.drop(h, fmt.Errorf("%w: found not held at unlock", ErrLost))
		return ErrNotHeld
	case left > 0:
		m.mu.Lock()
		h.count = int(left)
		m.mu.Unlock()
		return nil
	}
	if entry != "" {
		// Handed to a waiter. If it waits in this process, wake it now rather than after the
		// pub/sub message makes its way back (which it ignores if it is already awake).
		nd.sub.deliver(m.channel, entry, strconv.FormatInt(token, 10))
	}
	m.drop(h, ErrReleased)
	return nil
}

// attemptID returns a new id for one acquire call: "<owner>|<nonce>|<lease ms>". It is the
// call's queue entry and makes the call idempotent in Redis.
func (m *Mutex) attemptID(leaseMs int64) string {
	var buf [96]byte // one allocation (the string) on the uncontended path
	b := append(buf[:0], m.owner...)
	b = append(b, '|')
	b = strconv.AppendUint(b, m.nonce.Add(1), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, leaseMs, 10)
	return string(b)
}

// releaseID returns a new id for one release call, "<owner>|r<nonce>".
func (m *Mutex) releaseID() string {
	var buf [64]byte
	b := append(buf[:0], m.owner...)
	b = append(b, '|', 'r')
	b = strconv.AppendUint(b, m.nonce.Add(1), 10)
	return string(b)
}

// acquire is Lock (wait < 0) and TryLock (wait >= 0). lease 0 means the watchdog lease.
func (m *Mutex) acquire(ctx context.Context, wait, lease time.Duration) (*Lease, error) {
	if m.c.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	watchdog := lease == 0
	if watchdog {
		lease = m.c.opts.Lease
	}
	if lease < time.Millisecond {
		return nil, fmt.Errorf("lock: lease %v is shorter than 1ms", lease)
	}
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	if len(m.c.nodes) > 1 {
		return m.acquireQuorum(ctx, wait, deadline, lease, watchdog)
	}
	return m.acquireSingle(ctx, wait, deadline, lease, watchdog)
}

// held records a successful acquisition and returns its Lease. A result with the token of the
// current live hold is a re-entry into it; anything else starts a new hold (renewed or
// checked by the watchdog), whose validity is counted from sent, the time the winning request
// left. takenBy is the attempt id when acquire.lua's fast path took the lock, else "".
func (m *Mutex) held(token uint64, count int, lease time.Duration, watchdog bool, sent time.Time, takenBy string) *Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.hold; h != nil && h.token == token && h.ctx.Err() == nil {
		if count > 0 {
			h.count = count
		} else {
			h.count++
		}
		return &Lease{h: h}
	}
	if old := m.hold; old != nil {
		old.end(fmt.Errorf("%w: superseded by a newer hold of the same handle", ErrLost))
	}
	if count <= 0 {
		count = 1
	}
	h := newHold(m, token, count, lease, watchdog, sent.Add(m.c.validity(lease)), takenBy)
	m.hold = h
	return &Lease{h: h}
}

// drop ends hold h with cause and forgets it. A renewal the watchdog may have in flight is
// cancelled with the hold's context, and refused by Redis anyway once the hold is gone (owner
// and token no longer match), so there is nothing to wait for.
func (m *Mutex) drop(h *hold, cause error) {
	h.end(cause)
	m.mu.Lock()
	if m.hold == h {
		m.hold = nil
	}
	m.mu.Unlock()
}

// validity is how long after sending the winning request a hold with this lease is surely
// still valid, allowing for clock drift (Redlock's drift: lease*factor + 2ms).
func (c *Client) validity(lease time.Duration) time.Duration {
	return lease - time.Duration(float64(lease)*c.opts.DriftFactor) - 2*time.Millisecond
}

func ms(d time.Duration) int64 {
	v := d.Milliseconds()
	if v < 1 {
		v = 1
	}
	return v
}
