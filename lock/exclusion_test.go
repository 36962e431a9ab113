package lock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
)

// TestMutualExclusionProcesses runs the detector from several processes (the test binary
// re-executed, see TestMain), each with several goroutines, on one lock.
func TestMutualExclusionProcesses(t *testing.T) {
	url := testenv.Redis(t)
	rdb := redisClient(t)
	prefix := uniquePrefix(t, rdb)
	const procs, goroutines, rounds = 3, 3, 15
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	t.Cleanup(func() {
		rdb.Del(context.Background(), prefix+"occupancy", prefix+"overlaps", prefix+"counter", prefix+"tokens")
	})
	var cmds []*exec.Cmd
	for p := 0; p < procs; p++ {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			"LOCK_HELPER_PROCESS=1",
			"SECKILL_TEST_REDIS="+url,
			"LOCK_PREFIX="+prefix,
			"LOCK_NAME=shared",
			"LOCK_ROUNDS="+strconv.Itoa(rounds),
			"LOCK_GOROUTINES="+strconv.Itoa(goroutines),
		)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	overlaps, _ := rdb.Get(ctx, prefix+"overlaps").Int()
	counter, _ := rdb.Get(ctx, prefix+"counter").Int()
	if overlaps != 0 {
		t.Errorf("%d overlapping critical sections across processes", overlaps)
	}
	if want := procs * goroutines * rounds; counter != want {
		t.Errorf("counter = %d, want %d: updates were lost", counter, want)
	}
	tokens, err := rdb.LRange(ctx, prefix+"tokens", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i, s := range tokens {
		tok, _ := strconv.ParseUint(s, 10, 64)
		if tok <= last {
			t.Fatalf("token %d at position %d after %d: not strictly increasing", tok, i, last)
		}
		last = tok
	}
}

// fencedCounter is a resource protected by fencing: every access presents the caller's token
// to a lock.Fence inside the resource's own critical section.
type fencedCounter struct {
	mu    sync.Mutex
	fence lock.Fence
	value int
}

func (r *fencedCounter) read(token uint64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fence.Admit(token); err != nil {
		return 0, err
	}
	return r.value, nil
}

func (r *fencedCounter) write(token uint64, v int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fence.Admit(token); err != nil {
		return err
	}
	r.value = v
	return nil
}

// TestNegativeControl shows that the detector does fail when exclusion is broken: the lease
// is shorter than the work and nothing renews it, so holders overlap. Fencing still keeps the
// resource right: every stale access is rejected and no admitted update is lost.
func TestNegativeControl(t *testing.T) {
	rdb := redisClient(t)
	c := lock.New(lockRedis(t, rdb), &lock.Options{Prefix: uniquePrefix(t, rdb)})
	t.Cleanup(func() { _ = c.Close() })
	const goroutines, rounds = 6, 6
	// every other hold outlives its lease; the others finish well inside it
	const lease, shortWork, longWork = 30 * time.Millisecond, 5 * time.Millisecond, 70 * time.Millisecond
	var (
		occupancy, overlaps atomic.Int32
		plain               atomic.Int64 // unfenced read-modify-write
		res                 fencedCounter
		admitted, rejected  atomic.Int32
		wg                  sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.NewMutex("negative-control")
			for i := 0; i < rounds; i++ {
				l, err := m.TryLock(ctx, 10*time.Second, lease) // explicit lease: no renewal
				if err != nil {
					t.Error(err)
					return
				}
				if occupancy.Add(1) != 1 {
					overlaps.Add(1)
				}
				p := plain.Load()
				v, rerr := res.read(l.Token())
				if i%2 == 1 {
					time.Sleep(longWork)
				} else {
					time.Sleep(shortWork)
				}
				plain.Store(p + 1)
				switch {
				case rerr != nil:
					rejected.Add(1)
				case res.write(l.Token(), v+1) != nil:
					rejected.Add(1)
				default:
					admitted.Add(1)
				}
				occupancy.Add(-1)
				if err := m.Unlock(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("overlaps %d, unfenced counter %d of %d, fenced: %d admitted, %d rejected, value %d",
		overlaps.Load(), plain.Load(), goroutines*rounds, admitted.Load(), rejected.Load(), res.value)
	if overlaps.Load() == 0 {
		t.Fatal("negative control: leases shorter than the work produced no overlap; the detector is blind")
	}
	if rejected.Load() == 0 {
		t.Error("overlapping holders but fencing rejected nothing")
	}
	if res.value != int(admitted.Load()) {
		t.Errorf("fenced value %d != %d admitted updates: a stale write got through", res.value, admitted.Load())
	}
}
