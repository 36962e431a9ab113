package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-go/seckill/lock"
)

// TestNoGoroutineLeft: the watchdog (and the expiry monitor of a leased hold) stops on Unlock,
// and Close stops the pub/sub dispatcher; nothing is left running.
func TestNoGoroutineLeft(t *testing.T) {
	rdb := redisClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lr := lockRedis(t, rdb)
	base := goleak.IgnoreCurrent() // the Redis clients' own goroutines, and the test runner's

	c := lock.New(lr, &lock.Options{Prefix: uniquePrefix(t, rdb), Lease: 300 * time.Millisecond})
	a, b := c.NewMutex("leak"), c.NewMutex("leak")
	la, err := a.Lock(ctx) // watchdog
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond) // at least two renewals
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	<-la.Done()
	if _, err := a.TryLock(ctx, 0, time.Second); err != nil { // expiry monitor
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The watchdog goroutine outlives the last hold by a short idle period, then exits; no
	// waiter ever subscribed, so no pub/sub goroutine was started.
	noneWithin(t, 2*time.Second, base)

	// A waiter starts the pub/sub dispatcher; Close stops it.
	if _, err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := b.Lock(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	goleak.VerifyNone(t, base)
}

// noneWithin fails unless every goroutine not in base has exited within d.
func noneWithin(t *testing.T, d time.Duration, base goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := goleak.Find(base)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left %v after the last Unlock: %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCloseEndsHolds: Close does not wait for a renewal period; a hold still open ends with a
// cause wrapping ErrLost, and a blocked waiter returns ErrClosed. The hold and the waiter
// renew every 20 minutes here (an hour's lease and waiter timeout), so a Close that waited for
// a renewal would miss the minute the test gives it by far, on any machine.
func TestCloseEndsHolds(t *testing.T) {
	rdb := redisClient(t)
	prefix := uniquePrefix(t, rdb)
	c := lock.New(lockRedis(t, rdb), &lock.Options{Prefix: prefix, Lease: time.Hour, WaiterTimeout: time.Hour})
	prefixOf := func(*lock.Client) string { return prefix }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := c.NewMutex("close"), c.NewMutex("close")
	la, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := b.Lock(ctx)
		waiting <- err
	}()
	time.Sleep(50 * time.Millisecond)
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return within a minute: it waits for a renewal (every 20 minutes here)")
	}
	if !errors.Is(la.Err(), lock.ErrLost) {
		t.Fatalf("open hold after Close: Err = %v, want ErrLost", la.Err())
	}
	if err := <-waiting; !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("waiter after Close: %v, want ErrClosed", err)
	}
	if _, err := a.Lock(ctx); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Lock after Close: %v, want ErrClosed", err)
	}
	if err := a.Unlock(ctx); err != nil { // still releases the key in Redis
		t.Fatalf("Unlock after Close: %v", err)
	}
	if n := rdb.Exists(ctx, prefixOf(c)+"{close}").Val(); n != 0 {
		t.Fatal("lock key left after Unlock")
	}
}
