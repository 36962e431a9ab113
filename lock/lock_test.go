package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/lock/locktest"
)

// testLease is the conformance suites' lease. A watchdog renews every lease/3 with a timeout of
// one period, so a hold survives a stall of about two periods; CI runs this package beside the
// heavy engine suites on two cores, where private Redis nodes were once starved for longer than
// 600 ms and a 900 ms lease ran out under a healthy watchdog. Two seconds leaves room for that.
const testLease = 2 * time.Second

func TestConformance(t *testing.T) {
	rdb := redisClient(t)
	prefix := uniquePrefix(t, rdb)
	c := lock.New(lockRedis(t, rdb), &lock.Options{Prefix: prefix, Lease: testLease})
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
