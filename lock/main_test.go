package lock_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill/lock"
)

// TestMain doubles as the worker of the multi-process test: re-executed with
// LOCK_HELPER_PROCESS=1, the test binary runs helperProcess instead of the tests.
func TestMain(m *testing.M) {
	// quorum tests kill nodes on purpose; go-redis would log every failed redial
	redis.SetLogger(quietLogger{})
	if os.Getenv("LOCK_HELPER_PROCESS") == "1" {
		os.Exit(helperProcess())
	}
	os.Exit(m.Run())
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// helperProcess takes the lock LOCK_NAME (keys under LOCK_PREFIX) LOCK_ROUNDS times from each of
// LOCK_GOROUTINES goroutines, and inside each hold runs the detector on Redis keys under
// LOCK_PREFIX: an occupancy counter (INCR must give 1), a non-atomic read-modify-write of a
// counter (GET, pause, SET), and an append of the hold's fencing token to a list.
func helperProcess() int {
	opt, err := redis.ParseURL(os.Getenv("SECKILL_TEST_REDIS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	rc, err := newRueidis(opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rc.Close()
	prefix, name := os.Getenv("LOCK_PREFIX"), os.Getenv("LOCK_NAME")
	rounds, _ := strconv.Atoi(os.Getenv("LOCK_ROUNDS"))
	gs, _ := strconv.Atoi(os.Getenv("LOCK_GOROUTINES"))
	c := lock.New(lock.Rueidis(rc), &lock.Options{Prefix: prefix, Lease: 10 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, gs)
	for g := 0; g < gs; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.NewMutex(name)
			for i := 0; i < rounds; i++ {
				if err := detectorRound(ctx, rdb, m, prefix); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func detectorRound(ctx context.Context, rdb *redis.Client, m *lock.Mutex, prefix string) error {
	l, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	if n, err := rdb.Incr(ctx, prefix+"occupancy").Result(); err != nil {
		return err
	} else if n != 1 {
		rdb.Incr(ctx, prefix+"overlaps")
	}
	v, err := rdb.Get(ctx, prefix+"counter").Int64()
	if err != nil && err != redis.Nil {
		return err
	}
	rdb.RPush(ctx, prefix+"tokens", l.Token())
	time.Sleep(200 * time.Microsecond)
	if err := rdb.Set(ctx, prefix+"counter", v+1, 0).Err(); err != nil {
		return err
	}
	if err := rdb.Decr(ctx, prefix+"occupancy").Err(); err != nil {
		return err
	}
	return m.Unlock(ctx)
}
