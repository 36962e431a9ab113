package main

import (
	"context"
	"os"
	"testing"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// The uncontended pair as a Go benchmark, per library: LOCKBENCH_REDIS=redis://... go test -bench .
func benchPairs(b *testing.B, mk func(*redis.Client) impl) {
	url := os.Getenv("LOCKBENCH_REDIS")
	if url == "" {
		b.Skip("LOCKBENCH_REDIS not set")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	im := mk(rdb)
	defer im.close()
	h := im.handle("lockbench:gotest:" + b.Name())
	defer rdb.Del(context.Background(), "lockbench:gotest:{lockbench:gotest:"+b.Name()+"}:fence")
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := h.lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := h.unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPairsLock(b *testing.B) {
	benchPairs(b, func(r *redis.Client) impl { return newOurs(r, "lockbench:gotest:") })
}

func BenchmarkPairsRedislock(b *testing.B) {
	benchPairs(b, func(r *redis.Client) impl { return newRedislock(r, &redislock.Options{}) })
}

func BenchmarkPairsRedsync(b *testing.B) {
	benchPairs(b, func(r *redis.Client) impl { return newRedsync(r) })
}
