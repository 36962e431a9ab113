package redisinv

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
)

// rawHeld reads the sale's held count without running a script (a read through Sale would
// reclaim by itself and hide whether the sweeper did).
func rawHeld(t *testing.T, e *Engine, saleID string) int {
	t.Helper()
	return int(rawState(t, e.rdb, e.keys(saleID)[0])["held"])
}

// TestSweepOneLeaderReclaimsWithoutTraffic: two instances sweep one sale; one holds the
// sale's sweep lock at a time; expired holds are reclaimed with no traffic at all (invariant 8:
// the sweeper reclaims; how soon depends on its period and the machine, so the test waits for
// the reclaim, with a generous deadline, and logs how long it took), and when the sweeping
// instance stops the other one takes over.
func TestSweepOneLeaderReclaimsWithoutTraffic(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	sale := "sw" + prefix[len(prefix)-7:len(prefix)-1]
	newLocks := func() *lock.Client {
		l := lock.New(c.Locks, &lock.Options{Lease: time.Second})
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	e := New(c.Inventory, WithPrefix(prefix))
	now := time.Now().UTC()
	def, _ := seckill.NewSale(seckill.SaleInput{ID: sale, PriceCents: ptr(int64(1)), Stock: ptr(10), HoldSeconds: ptr(1), StartsAt: &now, PerUserLimit: ptr(10)}, now)
	if err := e.LoadSale(t.Context(), def, 0); err != nil {
		t.Fatal(err)
	}
	list := func(context.Context) ([]string, error) { return []string{sale}, nil }
	start := func() context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Sweeper(50*time.Millisecond, list, newLocks()).Run(ctx) }()
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return stop
	}
	stop1 := start()
	start()
	probe := newLocks().NewMutex(sweepLockName)

	reclaimed := func() time.Duration {
		t.Helper()
		r, err := e.Buy(t.Context(), seckill.BuyRequest{SaleID: sale, UserID: "u1", Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		expires := *r.Reservation.ExpiresAt
		for rawHeld(t, e, sale) != 0 {
			if time.Since(expires) > time.Minute {
				t.Fatal("the hold was never reclaimed without traffic")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(expires)
	}
	t.Logf("reclaimed %v after expiry", reclaimed())
	if _, err := probe.TryLock(t.Context(), 0, 0); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("a third party took the sweep lock while two sweepers run: %v; want it held by one of them", err)
	}
	stop1()
	// Whichever led, the sale is still swept (a take-over takes up to one lease).
	t.Logf("reclaimed %v after expiry with one sweeper stopped", reclaimed())
}

// startPrivateRedis starts a redis-server of the test's own on a free port.
func startPrivateRedis(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		if testenv.InCI() {
			t.Fatalf("redis-server: %v", err)
		}
		t.Skipf("redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for range 100 {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			_ = c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, "redis://127.0.0.1:" + port + "/0"
}

// TestRedisDownAnswersUnavailableQuickly: a Redis that dies, or stops answering, turns buys
// into unavailable errors within the engine's timeout; nothing hangs.
func TestRedisDownAnswersUnavailableQuickly(t *testing.T) {
	testenv.Redis(t) // runs with the integration tests
	for _, how := range []string{"stopped", "killed"} {
		t.Run(how, func(t *testing.T) {
			cmd, url := startPrivateRedis(t)
			c := dialT(t, url)
			e := New(c.Inventory, WithTimeout(500*time.Millisecond))
			now := time.Now().UTC()
			def, _ := seckill.NewSale(seckill.SaleInput{ID: "down", PriceCents: ptr(int64(1)), Stock: ptr(10), StartsAt: &now}, now)
			if err := e.LoadSale(t.Context(), def, 0); err != nil {
				t.Fatal(err)
			}
			if how == "stopped" {
				_ = cmd.Process.Signal(syscall.SIGSTOP)
			} else {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			for i := range 3 {
				start := time.Now()
				_, err := e.Buy(t.Context(), seckill.BuyRequest{SaleID: "down", UserID: "u" + strconv.Itoa(i), Quantity: 1})
				if seckill.ErrorCode(err) != seckill.CodeUnavailable {
					t.Fatalf("Buy with Redis %s = %v; want unavailable", how, err)
				}
				// A hang lasts as long as Redis is down (the whole test); the bound is far from
				// both it and the 500 ms timeout, so a busy machine does not reach it.
				if d := time.Since(start); d > 30*time.Second {
					t.Fatalf("Buy with Redis %s took %v; it must fail within its timeout, not hang", how, d)
				}
			}
			if err := e.Ping(t.Context()); err == nil {
				t.Fatalf("Ping with Redis %s = nil", how)
			}
		})
	}
}

// TestRedisRefusalIsUnavailable: a Redis that refuses writes for now (out of memory here;
// BUSY, READONLY, CLUSTERDOWN and the like are treated alike) is unavailable (503, retry),
// not an internal error.
func TestRedisRefusalIsUnavailable(t *testing.T) {
	testenv.Redis(t)
	_, url := startPrivateRedis(t)
	c := dialT(t, url)
	e := New(c.Inventory)
	now := time.Now().UTC()
	def, _ := seckill.NewSale(seckill.SaleInput{ID: "oom", PriceCents: ptr(int64(1)), Stock: ptr(10), StartsAt: &now}, now)
	if err := e.LoadSale(t.Context(), def, 0); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, {"CONFIG", "SET", "maxmemory", "1"}} {
		if err := c.Inventory.Do(t.Context(), c.Inventory.B().Arbitrary(cmd...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.Buy(t.Context(), seckill.BuyRequest{SaleID: "oom", UserID: "u1", Quantity: 1})
	if seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("Buy on a Redis out of memory = %v; want unavailable", err)
	}
}

// TestGivenUpBuysAreNotSent: buys queued behind a Redis that stalls are not sent once their
// buyers gave up (and are not sent at all after the engine's timeout): only the calls already
// in flight (at most 4 per sale, of up to 64 buys each) can still make holds nobody knows of.
func TestGivenUpBuysAreNotSent(t *testing.T) {
	testenv.Redis(t)
	_, url := startPrivateRedis(t)
	c := dialT(t, url)
	e := New(c.Inventory, WithTimeout(5*time.Second))
	now := time.Now().UTC()
	def, _ := seckill.NewSale(seckill.SaleInput{ID: "stall", PriceCents: ptr(int64(1)), Stock: ptr(10000), StartsAt: &now, QueueLimit: ptr(0)}, now)
	if err := e.LoadSale(t.Context(), def, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Inventory.Do(t.Context(), c.Inventory.B().ClientPause().Timeout(1500).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var answered atomic.Int64
	for i := range 1000 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "stall", UserID: "u" + strconv.Itoa(i), Quantity: 1}); err == nil {
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	time.Sleep(2500 * time.Millisecond) // the pause ends; what was in flight runs
	held := rawHeld(t, e, "stall")
	if max := int(answered.Load()) + maxInFlight*maxBatch; held > max {
		t.Fatalf("%d holds after 1 000 buyers gave up during a stall (%d answered); at most %d may come from calls in flight", held, answered.Load(), max)
	}
	t.Logf("%d holds, %d buys answered", held, answered.Load())
}
