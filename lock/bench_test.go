package lock_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill/lock"
)

// BenchmarkUncontended: lock+unlock pairs by one owner on one name (ns/op is one pair).
func BenchmarkUncontended(b *testing.B) {
	rdb := redisClient(b)
	c := lock.New(lockRedis(b, rdb), &lock.Options{Prefix: uniquePrefix(b, rdb)})
	defer c.Close()
	m := c.NewMutex("uncontended")
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// spin spends d precisely: time.Sleep(1ms) takes 1.1-2 ms when the runtime sleeps in the
// network poller (whole milliseconds), which would make the critical section longer than it
// claims. It yields so that other goroutines can run meanwhile.
func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		runtime.Gosched()
	}
}

// BenchmarkContended: 32 owners on one name, each holding it 1 ms per acquisition. Reports
// hand-offs per second and fairness (fewest ÷ most acquisitions per goroutine). The figures
// compared with other libraries come from the separate module bench/lockbench.
func BenchmarkContended(b *testing.B) {
	rdb := redisClient(b)
	c := lock.New(lockRedis(b, rdb), &lock.Options{Prefix: uniquePrefix(b, rdb)})
	defer c.Close()
	const goroutines = 32
	ctx := context.Background()
	counts := make([]int, goroutines)
	var (
		mu   sync.Mutex
		left = b.N
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.NewMutex("contended")
			for {
				if _, err := m.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				done := left <= 0
				left--
				mu.Unlock()
				if !done {
					spin(time.Millisecond)
					counts[g]++
				}
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				if done {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	lo, hi := b.N, 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "handoffs/s")
	if b.N >= 10*goroutines {
		b.ReportMetric(float64(lo)/float64(max(hi, 1)), "fairness")
	}
}
