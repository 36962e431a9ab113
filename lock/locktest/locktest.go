// Package locktest is a conformance kit for distributed locks with the contract of package
// lock: owner-only unlock, reentrancy, waiters that are woken instead of polling, leases with
// and without renewal, loss notification and strictly increasing fencing tokens.
//
// An implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		c := lock.New(lock.Rueidis(rdb), &lock.Options{Prefix: "test:", Lease: 900 * time.Millisecond})
//		locktest.Run(t, locktest.Suite[*lock.Lease]{
//			New:   func(t testing.TB, name string) locktest.Mutex[*lock.Lease] { return c.NewMutex(name) },
//			Lease: 900 * time.Millisecond,
//			Fair:  true,
//		})
//	}
//
// The kit is generic over the lease type, so any implementation whose methods have these
// shapes runs it without adapters; it expects the sentinel errors of package lock
// (ErrNotAcquired, ErrNotHeld, ErrLost). Every lock name it uses is fresh, so runs against a
// shared Redis do not collide. It asserts no throughput or fairness figures (those are
// benchmarks), only generous bounds where an upper bound is the point, such as waking a
// waiter well inside a polling interval.
package locktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill/lock"
)

// Lease is one acquisition, as the kit sees it.
type Lease interface {
	Token() uint64
	Done() <-chan struct{}
	Err() error
}

// Mutex is one owner's handle on a named lock, as the kit sees it.
type Mutex[L Lease] interface {
	Lock(ctx context.Context) (L, error)
	TryLock(ctx context.Context, wait, lease time.Duration) (L, error)
	Unlock(ctx context.Context) error
}

// Suite describes the implementation under test.
type Suite[L Lease] struct {
	// New returns a new owner handle on the lock called name.
	New func(t testing.TB, name string) Mutex[L]
	// Lease is the watchdog lease of handles made by New (their Lock). Keep it short (say
	// 0.5-2 s): the watchdog tests wait several leases.
	Lease time.Duration
	// Fair says waiters are served in arrival order; the FIFO test runs only then.
	Fair bool
	// Break, if set, makes the current hold of name vanish behind its holder's back (e.g. it
	// deletes the key); the loss-notification test runs only then.
	Break func(t testing.TB, name string)
	// WakeBound is the largest accepted median delay between an Unlock and the blocked
	// waiter holding the lock (the worst of five may take four times as long). Default 50ms:
	// generous for a pub/sub wake-up (a few ms here), and the lower end of the random 50-250
	// ms retry delay that redsync polls with by default.
	WakeBound time.Duration
	// Goroutines and Rounds size the mutual-exclusion test; defaults 8 and 25.
	Goroutines, Rounds int
}

// Run runs every test of the kit as a subtest of t.
func Run[L Lease](t *testing.T, s Suite[L]) {
	if s.New == nil || s.Lease <= 0 {
		t.Fatal("locktest: Suite needs New and Lease")
	}
	if s.WakeBound <= 0 {
		s.WakeBound = 50 * time.Millisecond
	}
	if s.Goroutines <= 0 {
		s.Goroutines = 8
	}
	if s.Rounds <= 0 {
		s.Rounds = 25
	}
	t.Run("LockUnlock", func(t *testing.T) { t.Parallel(); testLockUnlock(t, s) })
	t.Run("Exclusion", func(t *testing.T) { t.Parallel(); testExclusion(t, s) })
	t.Run("Reentrant", func(t *testing.T) { t.Parallel(); testReentrant(t, s) })
	t.Run("TokensIncrease", func(t *testing.T) { t.Parallel(); testTokens(t, s) })
	t.Run("ExpiryAndStaleUnlock", func(t *testing.T) { t.Parallel(); testExpiry(t, s) })
	t.Run("Watchdog", func(t *testing.T) { t.Parallel(); testWatchdog(t, s) })
	t.Run("WakeOnUnlock", func(t *testing.T) { t.Parallel(); testWake(t, s) })
	t.Run("CancelWhileWaiting", func(t *testing.T) { t.Parallel(); testCancel(t, s) })
	t.Run("TryLockWait", func(t *testing.T) { t.Parallel(); testTryWait(t, s) })
	t.Run("MutualExclusion", func(t *testing.T) { t.Parallel(); testMutualExclusion(t, s) })
	if s.Fair {
		t.Run("FIFO", func(t *testing.T) { t.Parallel(); testFIFO(t, s) })
	}
	if s.Break != nil {
		t.Run("LossNotified", func(t *testing.T) { t.Parallel(); testLoss(t, s) })
	}
}

// Name returns a lock name unique to this test and run.
func Name(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%s", t.Name(), hex.EncodeToString(b[:]))
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustLock[L Lease](t testing.TB, m Mutex[L]) L {
	t.Helper()
	l, err := m.Lock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	return l
}

func mustUnlock[L Lease](t testing.TB, m Mutex[L]) {
	t.Helper()
	if err := m.Unlock(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

func wantNotAcquired[L Lease](t testing.TB, m Mutex[L], wait time.Duration) {
	t.Helper()
	if _, err := m.TryLock(ctxFor(t, 5*time.Second), wait, 0); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryLock(wait=%v) on a held lock: got %v, want ErrNotAcquired", wait, err)
	}
}

func testLockUnlock[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	a := s.New(t, name)
	l := mustLock(t, a)
	if l.Token() == 0 {
		t.Error("token 0: tokens start at 1")
	}
	if l.Err() != nil {
		t.Errorf("Err while held = %v", l.Err())
	}
	mustUnlock(t, a)
	select {
	case <-l.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed after the final Unlock")
	}
	if l.Err() == nil || errors.Is(l.Err(), lock.ErrLost) {
		t.Errorf("Err after Unlock = %v, want the released cause", l.Err())
	}
	if err := a.Unlock(ctxFor(t, 5*time.Second)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	if err := s.New(t, name).Unlock(ctxFor(t, 5*time.Second)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Unlock by a handle that never locked: %v, want ErrNotHeld", err)
	}
}

func testExclusion[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	a, b := s.New(t, name), s.New(t, name)
	mustLock(t, a)
	wantNotAcquired(t, b, 0)
	if err := b.Unlock(ctxFor(t, 5*time.Second)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Unlock by a non-owner: %v, want ErrNotHeld", err)
	}
	wantNotAcquired(t, b, 0) // the non-owner's Unlock changed nothing
	mustUnlock(t, a)
	lb, err := b.TryLock(ctxFor(t, 5*time.Second), 0, 0)
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	_ = lb
	mustUnlock(t, b)
}

func testReentrant[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	a, b := s.New(t, name), s.New(t, name)
	l1 := mustLock(t, a)
	l2, err := a.TryLock(ctxFor(t, 5*time.Second), 0, 0)
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	l3 := mustLock(t, a)
	if l2.Token() != l1.Token() || l3.Token() != l1.Token() {
		t.Errorf("re-entry tokens %d, %d; want the hold's token %d", l2.Token(), l3.Token(), l1.Token())
	}
	for i := 0; i < 2; i++ {
		mustUnlock(t, a)
		wantNotAcquired(t, b, 0)
		select {
		case <-l1.Done():
			t.Fatalf("Done closed after %d of 3 unlocks", i+1)
		default:
		}
	}
	mustUnlock(t, a)
	if _, err := b.TryLock(ctxFor(t, 5*time.Second), time.Second, 0); err != nil {
		t.Fatalf("lock still held after 3 unlocks of 3 acquisitions: %v", err)
	}
	mustUnlock(t, b)
	if err := a.Unlock(ctxFor(t, 5*time.Second)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("fourth Unlock: %v, want ErrNotHeld", err)
	}
}

func testTokens[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	hs := []Mutex[L]{s.New(t, name), s.New(t, name), s.New(t, name)}
	var last uint64
	for i := 0; i < 12; i++ {
		m := hs[i%len(hs)]
		l := mustLock(t, m)
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d after %d; tokens must increase strictly", i, l.Token(), last)
		}
		last = l.Token()
		mustUnlock(t, m)
	}
}

func testExpiry[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	a, b, c := s.New(t, name), s.New(t, name), s.New(t, name)
	lease := 300 * time.Millisecond
	la, err := a.TryLock(ctxFor(t, 5*time.Second), 0, lease)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lb, err := b.TryLock(ctxFor(t, 10*time.Second), 5*time.Second, 0) // waits for the expiry
	if err != nil {
		t.Fatalf("waiter did not get an expired lock: %v", err)
	}
	if waited := time.Since(start); waited < lease/2 {
		t.Fatalf("got the lock after %v, before the %v lease could have run out", waited, lease)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token after expiry %d <= expired holder's %d", lb.Token(), la.Token())
	}
	select {
	case <-la.Done():
		if !errors.Is(la.Err(), lock.ErrLost) {
			t.Errorf("expired hold's Err = %v, want ErrLost", la.Err())
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the expired holder's Done was not closed")
	}
	// The expired holder unlocking must not touch the new holder.
	if err := a.Unlock(ctxFor(t, 5*time.Second)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Unlock after expiry: %v, want ErrNotHeld", err)
	}
	wantNotAcquired(t, c, 0)
	if lb.Err() != nil {
		t.Fatalf("new holder affected by the stale unlock: %v", lb.Err())
	}
	mustUnlock(t, b)
}

func testWatchdog[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	a, b := s.New(t, name), s.New(t, name)
	l := mustLock(t, a)
	time.Sleep(3 * s.Lease)
	wantNotAcquired(t, b, 0)
	if l.Err() != nil {
		t.Fatalf("hold ended under the watchdog: %v", l.Err())
	}
	mustUnlock(t, a)
	// After Unlock the watchdog must stop renewing: a new holder keeps it.
	lb, err := b.TryLock(ctxFor(t, 5*time.Second), time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(s.Lease / 2)
	if lb.Err() != nil {
		t.Fatalf("new holder disturbed: %v", lb.Err())
	}
	mustUnlock(t, b)
}

func testWake[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	a, b := s.New(t, name), s.New(t, name)
	// The median shows the mechanism (a waiter that polled or slept on its TTL would take the
	// poll interval or the lease); the worst case only has to stay clear of polling, since a
	// loaded CI machine can delay any single wake-up. A machine busy for a whole round can
	// delay five in a row, so a round that misses the bound is measured again, up to three
	// rounds: a poller misses every one (its delay is the mechanism, not the load).
	var median, worst time.Duration
	for round := 1; round <= 3; round++ {
		var ok bool
		if median, worst, ok = wakeRound(t, a, b); !ok {
			return
		}
		t.Logf("round %d: wake-up after Unlock: median %v, worst %v (bound %v)", round, median, worst, s.WakeBound)
		if median <= s.WakeBound && worst <= 4*s.WakeBound {
			return
		}
	}
	t.Fatalf("waiters took median %v, worst %v to get a released lock, in each of three rounds; bound %v (worst %v)",
		median, worst, s.WakeBound, 4*s.WakeBound)
}

// wakeRound measures five hand-overs from a to a waiting b: the median and the worst delay
// between a's Unlock and b holding the lock. ok is false if b failed (reported with t.Error).
func wakeRound[L Lease](t *testing.T, a, b Mutex[L]) (median, worst time.Duration, ok bool) {
	var lat []time.Duration
	for i := 0; i < 5; i++ {
		mustLock(t, a)
		got := make(chan time.Time, 1)
		go func() {
			if _, err := b.Lock(ctxFor(t, 10*time.Second)); err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- time.Now()
		}()
		time.Sleep(100 * time.Millisecond) // b is now asleep on the lock
		released := time.Now()
		mustUnlock(t, a)
		at, ok := <-got
		if !ok {
			return 0, 0, false
		}
		lat = append(lat, at.Sub(released))
		mustUnlock(t, b)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)-1], true
}

func testCancel[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	a, b, c := s.New(t, name), s.New(t, name), s.New(t, name)
	mustLock(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := b.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with an expiring ctx: %v, want DeadlineExceeded", err)
	}
	mustUnlock(t, a)
	// The waiter that gave up must not be handed the lock: c gets it at once.
	if _, err := c.TryLock(ctxFor(t, 5*time.Second), 500*time.Millisecond, 0); err != nil {
		t.Fatalf("lock stuck after a waiter gave up: %v", err)
	}
	mustUnlock(t, c)
	if err := b.Unlock(ctxFor(t, 5*time.Second)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Unlock by the waiter that gave up: %v, want ErrNotHeld", err)
	}
}

func testTryWait[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	a, b := s.New(t, name), s.New(t, name)
	// a holds by a fixed lease far longer than the test, not by the watchdog: on a starved
	// machine a watchdog's renewal can come late and the lease lapse, which is the lease's
	// contract, not what this test is about (a waiter woken by the holder's unlock).
	if _, err := a.TryLock(ctxFor(t, 10*time.Second), 0, time.Minute); err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	start := time.Now()
	wantNotAcquired(t, b, 200*time.Millisecond)
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("TryLock(wait=200ms) returned after %v", d)
	}
	unlocked := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		unlocked <- a.Unlock(ctxFor(t, 5*time.Second))
	}()
	_, err := b.TryLock(ctxFor(t, 30*time.Second), 20*time.Second, 0)
	if uerr := <-unlocked; uerr != nil {
		t.Fatalf("Unlock by the holder: %v", uerr)
	}
	if err != nil {
		t.Fatalf("TryLock with a wait longer than the hold: %v", err)
	}
	mustUnlock(t, b)
}

// testMutualExclusion has a detector that can fail: an occupancy counter that must read 1
// inside the critical section, and a non-atomic read-modify-write of a shared counter that
// loses updates if two holders overlap (its load and store are separately atomic only so that
// the race detector, which cannot see the lock's happens-before edge through Redis, stays
// quiet). Tokens seen inside must increase strictly.
func testMutualExclusion[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	var (
		occupancy, overlaps atomic.Int32
		counter             atomic.Int64 // loaded and stored separately: a non-atomic increment
		mu                  sync.Mutex
		lastToken           uint64
		backwards           int
		wg                  sync.WaitGroup
	)
	for g := 0; g < s.Goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := s.New(t, name)
			for i := 0; i < s.Rounds; i++ {
				// A long explicit lease: this test is about exclusion in the no-pause case,
				// and Suite.Lease is kept short for the watchdog tests, short enough that a
				// stalled CI machine could let it run out.
				l, err := m.TryLock(ctxFor(t, 30*time.Second), 25*time.Second, 20*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if occupancy.Add(1) != 1 {
					overlaps.Add(1)
				}
				mu.Lock()
				if l.Token() <= lastToken {
					backwards++
				}
				lastToken = l.Token()
				mu.Unlock()
				v := counter.Load()
				runtime.Gosched()
				time.Sleep(100 * time.Microsecond)
				counter.Store(v + 1)
				occupancy.Add(-1)
				if err := m.Unlock(ctxFor(t, 5*time.Second)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping critical sections", n)
	}
	if want := int64(s.Goroutines * s.Rounds); counter.Load() != want {
		t.Errorf("counter = %d after %d increments under the lock (lost updates)", counter.Load(), want)
	}
	if backwards != 0 {
		t.Errorf("%d acquisitions saw a token not above the previous one", backwards)
	}
}

func testFIFO[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	holder := s.New(t, name)
	mustLock(t, holder)
	const n = 4
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		m := s.New(t, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Lock(ctxFor(t, 10*time.Second)); err != nil {
				t.Error(err)
				return
			}
			order <- i
			mustUnlock(t, m)
		}()
		time.Sleep(150 * time.Millisecond) // arrive in order i
	}
	mustUnlock(t, holder)
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d got the lock in place %d: not FIFO", got, want)
		}
		want++
	}
}

func testLoss[L Lease](t *testing.T, s Suite[L]) {
	name := Name(t)
	a := s.New(t, name)
	l := mustLock(t, a)
	broken := time.Now()
	s.Break(t, name)
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), lock.ErrLost) {
			t.Fatalf("Err = %v, want ErrLost", l.Err())
		}
		// the renewal period is lease/3; allow scheduling slack
		if d := time.Since(broken); d > s.Lease/3+s.Lease/4 {
			t.Fatalf("loss noticed after %v, more than one renewal period (%v)", d, s.Lease/3)
		}
	case <-time.After(s.Lease):
		t.Fatal("holder not told that its lock vanished")
	}
	if err := a.Unlock(ctxFor(t, 5*time.Second)); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lock: %v, want ErrNotHeld", err)
	}
}
