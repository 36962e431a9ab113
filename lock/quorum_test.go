package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/lock/locktest"
)

func quorumClient(t *testing.T, nodes []*redisNode, opts *lock.Options) *lock.Client {
	t.Helper()
	var rs []lock.Redis
	for _, n := range nodes {
		rs = append(rs, lockRedis(t, n.rdb))
	}
	c, err := lock.NewQuorum(rs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestQuorumConformance runs the kit over three independent nodes (quorum mode is not fair,
// so the FIFO test is left out).
func TestQuorumConformance(t *testing.T) {
	nodes := startNodes(t, 3)
	c := quorumClient(t, nodes, &lock.Options{Lease: testLease})
	locktest.Run(t, locktest.Suite[*lock.Lease]{
		New:   func(t testing.TB, name string) locktest.Mutex[*lock.Lease] { return c.NewMutex(name) },
		Lease: testLease,
		Break: func(t testing.TB, name string) {
			for _, n := range nodes[:2] { // a majority forgets the hold
				if err := n.rdb.Del(context.Background(), "lock:{"+name+"}").Err(); err != nil {
					t.Fatal(err)
				}
			}
		},
	})
}

func TestQuorumMinorityDown(t *testing.T) {
	nodes := startNodes(t, 5)
	c := quorumClient(t, nodes, &lock.Options{Lease: 2 * time.Second, NodeTimeout: 100 * time.Millisecond})
	nodes[0].stop()
	nodes[3].stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := c.NewMutex("minority"), c.NewMutex("minority")
	la, err := a.TryLock(ctx, time.Second, 0)
	if err != nil {
		t.Fatalf("2 of 5 nodes down: %v, want the lock", err)
	}
	if _, err := b.TryLock(ctx, 0, 0); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second owner with 3 of 5 nodes up: %v, want ErrNotAcquired", err)
	}
	// the watchdog keeps the hold alive on the remaining majority
	time.Sleep(3 * time.Second)
	if la.Err() != nil {
		t.Fatalf("hold lost with a majority up: %v", la.Err())
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryLock(ctx, time.Second, 0)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d after %d", lb.Token(), la.Token())
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestQuorumMajorityDown(t *testing.T) {
	nodes := startNodes(t, 5)
	c := quorumClient(t, nodes, &lock.Options{Lease: 2 * time.Second, NodeTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := c.NewMutex("majority")
	la, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:3] {
		n.stop()
	}
	// The holder learns that its hold cannot be renewed on a majority.
	select {
	case <-la.Done():
		if !errors.Is(la.Err(), lock.ErrLost) {
			t.Fatalf("Err = %v, want ErrLost", la.Err())
		}
	case <-time.After(4 * time.Second):
		t.Fatal("holder not told that a majority of nodes is gone")
	}
	_ = a.Unlock(ctx)
	b := c.NewMutex("majority")
	if _, err := b.TryLock(ctx, 300*time.Millisecond, 0); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("3 of 5 nodes down: %v, want ErrNotAcquired", err)
	}
}
