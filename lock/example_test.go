package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/lock"
)

// The examples need a Redis at 127.0.0.1:6379, so they have no Output lines: they compile
// with the tests but do not run.

func Example() {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	c := lock.New(lock.Rueidis(rdb), nil)
	defer c.Close()

	ctx := context.Background()
	m := c.NewMutex("jobs:preheat")
	l, err := m.Lock(ctx) // waits; the lease is renewed until Unlock
	if err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	// Do the work under the lease's context: it is cancelled if the lock is lost.
	work := func(ctx context.Context, token uint64) error {
		fmt.Println("preheating with fencing token", token)
		return ctx.Err()
	}
	if err := work(l.Context(), l.Token()); err != nil {
		log.Print(err)
	}
}

func ExampleMutex_TryLock() {
	c, done := newLockClient() // as in Example
	defer done()

	ctx := context.Background()
	m := c.NewMutex("reports:daily")
	// Wait at most 2 s; hold for at most 10 s, with no renewal.
	l, err := m.TryLock(ctx, 2*time.Second, 10*time.Second)
	if errors.Is(err, lock.ErrNotAcquired) {
		fmt.Println("someone else is running the report")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	select {
	case <-l.Done(): // the lease ran out (or the lock vanished) before the work was done
		log.Print(l.Err())
	case <-time.After(time.Second): // the work
	}
}

func ExampleMutex_Lock_reentrant() {
	c, done := newLockClient() // as in Example
	defer done()

	ctx := context.Background()
	m := c.NewMutex("accounts:42")
	outer, _ := m.Lock(ctx)
	inner, _ := m.Lock(ctx) // the same handle: held at once, same token
	fmt.Println(outer.Token() == inner.Token())
	_ = m.Unlock(ctx) // still held
	_ = m.Unlock(ctx) // now released, and handed to the first waiter, if any
}

func ExampleLease_Context() {
	c, done := newLockClient() // as in Example
	defer done()

	ctx := context.Background()
	m := c.NewMutex("leader:sweeper")
	l, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Lead until the lock is lost or given up: the context says which.
	<-l.Context().Done()
	if errors.Is(context.Cause(l.Context()), lock.ErrLost) {
		log.Print("lost leadership: stop at once")
	}
}

func ExampleFence() {
	// The resource side of fencing: it refuses a token lower than one it has seen.
	var f lock.Fence
	fmt.Println(f.Admit(33)) // holder A, token 33
	fmt.Println(f.Admit(34)) // A's lease ran out; B holds with token 34
	fmt.Println(f.Admit(33)) // A wakes up from a pause and writes: refused
	// Output:
	// <nil>
	// <nil>
	// lock: stale fencing token
}

func ExampleNewQuorum() {
	var nodes []lock.Redis
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			log.Fatal(err)
		}
		defer rdb.Close()
		nodes = append(nodes, lock.Rueidis(rdb))
	}
	c, err := lock.NewQuorum(nodes, &lock.Options{NodeTimeout: 50 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	m := c.NewMutex("migrations")
	if _, err := m.Lock(ctx); err != nil { // held once 2 of the 3 nodes agree
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
}

// newLockClient is Example's set-up, for the examples that follow: a lock client over a rueidis
// client to the local Redis, and what closes both.
func newLockClient() (*lock.Client, func()) {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	c := lock.New(lock.Rueidis(rdb), nil)
	return c, func() {
		_ = c.Close()
		rdb.Close()
	}
}
