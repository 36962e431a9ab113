package lock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/lock/locktest"
)

// TestClusterConformance runs the kit on a real three-node Redis Cluster: every script touches
// only keys of one hash tag, and hand-off messages published on one node reach waiters
// subscribed through another.
func TestClusterConformance(t *testing.T) {
	rdb, lr := startCluster(t)
	c := lock.New(lr, &lock.Options{Lease: testLease})
	t.Cleanup(func() { _ = c.Close() })
	locktest.Run(t, locktest.Suite[*lock.Lease]{
		New:   func(t testing.TB, name string) locktest.Mutex[*lock.Lease] { return c.NewMutex(name) },
		Lease: testLease,
		Fair:  true,
		Break: func(t testing.TB, name string) {
			if err := rdb.Del(context.Background(), fmt.Sprintf("lock:{%s}", name)).Err(); err != nil {
				t.Fatal(err)
			}
		},
	})
}
