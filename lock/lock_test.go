package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/lock/locktest"
)

const testLease = 900 * time.Millisecond

func TestConformance(t *testing.T) {
	rdb := redisClient(t)
	prefix := uniquePrefix(t, rdb)
	c := lock.New(rdb, &lock.Options{Prefix: prefix, Lease: testLease})
	t.Cleanup(func() { _ = c.Close() })
	locktest.Run(t, locktest.Suite[*lock.Lease]{
		New:   func(t testing.TB, name string) locktest.Mutex[*lock.Lease] { return c.NewMutex(name) },
		Lease: testLease,
		Fair:  true,
		Break: func(t testing.TB, name string) {
			if err := rdb.Del(context.Background(), prefix+"{"+name+"}").Err(); err != nil {
				t.Fatal(err)
			}
		},
	})
}
