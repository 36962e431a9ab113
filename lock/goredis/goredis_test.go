package goredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/lock/goredis"
	"github.com/seckill-go/seckill/lock/locktest"
)

// TestConformance runs the lock's conformance kit over the go-redis adapter, on the test Redis.
// (Package lock runs it, and the rest of its tests, over lock.Rueidis.)
func TestConformance(t *testing.T) {
	opt, err := redis.ParseURL(testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	const lease = 2 * time.Second
	prefix := fmt.Sprintf("locktest:goredis:%d:", time.Now().UnixNano())
	c := lock.New(goredis.New(rdb), &lock.Options{Prefix: prefix, Lease: lease})
	t.Cleanup(func() {
		_ = c.Close()
		ctx := context.Background()
		for iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator(); iter.Next(ctx); {
			rdb.Del(ctx, iter.Val())
		}
	})
	locktest.Run(t, locktest.Suite[*lock.Lease]{
		New:   func(t testing.TB, name string) locktest.Mutex[*lock.Lease] { return c.NewMutex(name) },
		Lease: lease,
		Fair:  true,
		Break: func(t testing.TB, name string) {
			if err := rdb.Del(context.Background(), prefix+"{"+name+"}").Err(); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	c := lock.New(goredis.New(rdb), nil)
	defer c.Close()
	m := c.NewMutex("jobs:preheat")
	if _, err := m.Lock(context.Background()); err != nil {
		return
	}
	defer m.Unlock(context.Background())
}
