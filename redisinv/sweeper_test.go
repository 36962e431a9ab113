package redisinv

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/lock"
)

// rawHeld reads the sale's held count without running a script (a read through Sale would
// reclaim by itself and hide whether the sweeper did).
func rawHeld(t *testing.T, e *Engine, saleID string) int {
	t.Helper()
	return int(rawState(t, e.rdb, e.keys(saleID)[0])["held"])
}

// startSweeper runs sw until the test ends or the returned stop is called.
func startSweeper(t *testing.T, sw background.Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sw.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// reclaimedWithoutTraffic buys a 1 s hold through buyer and waits, reading the raw state (no
// script), until a sweeper reclaims it; it fails after a generous minute (invariant 8 says how
// soon; the machine decides, so the test logs it rather than asserting it).
func reclaimedWithoutTraffic(t *testing.T, buyer, e *Engine, sale, user string) time.Duration {
	t.Helper()
	r, err := buyer.Buy(t.Context(), seckill.BuyRequest{SaleID: sale, UserID: user, Quantity: 1})
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

// TestSweepReclaimsWithoutTraffic: an instance sweeps the holds made through it when they come
// due, with no traffic at all and no reconcile pass (it never holds the sweep lock: a third
// party does), and a sale on which nothing is due is not swept.
func TestSweepReclaimsWithoutTraffic(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	sale := "sw" + prefix[len(prefix)-7:len(prefix)-1]
	locks := lock.New(c.Locks, &lock.Options{Lease: time.Second})
	t.Cleanup(func() { _ = locks.Close() })
	// The lock of the reconcile pass is the test's: only what this instance knows is swept.
	if _, err := locks.NewMutex(sweepLockName).TryLock(t.Context(), 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.NewMutex(sweepLockName).Unlock(context.Background()) })
	e := New(c.Inventory, WithPrefix(prefix))
	loadSweepSale(t, e, sale, time.Now())
	var sweeps atomic.Int64
	sw := e.Sweeper(20*time.Millisecond, func(context.Context) ([]string, error) { return []string{sale}, nil }, locks).(*sweeper)
	reclaim := sw.e
	sw.e = countingReclaim{reclaim, &sweeps}
	startSweeper(t, sw)
	t.Logf("reclaimed %v after expiry", reclaimedWithoutTraffic(t, e, e, sale, "u1"))
	// Nothing is due now: the sale is not swept again, however long we look.
	eventually(t, "the sweep after the expiry filed", func() bool { return sweeps.Load() >= 1 })
	before := sweeps.Load()
	time.Sleep(200 * time.Millisecond) // ten ticks
	if got := sweeps.Load() - before; got > 1 {
		t.Fatalf("%d sweeps of a sale with nothing due in ten ticks; want none (at most one in flight)", got)
	}
}

// countingReclaim counts a sweeper's reclaims.
type countingReclaim struct {
	sweepHost
	n *atomic.Int64
}

func (c countingReclaim) reclaimDue(ctx context.Context, saleID string) (int, sweepNext, error) {
	c.n.Add(1)
	return c.sweepHost.reclaimDue(ctx, saleID)
}

// loadSweepSale loads a sale of 10 units with 1 s holds, starting at starts.
func loadSweepSale(t testing.TB, e *Engine, sale string, starts time.Time) {
	t.Helper()
	now := time.Now().UTC()
	starts = starts.UTC()
	def, err := seckill.NewSale(seckill.SaleInput{ID: sale, PriceCents: ptr(int64(1)), Stock: ptr(10), HoldSeconds: ptr(1), StartsAt: &starts, PerUserLimit: ptr(10)}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSale(context.Background(), def, 0); err != nil {
		t.Fatal(err)
	}
}

// TestSweepFindsHoldsOfOtherInstances: holds made through an instance that sweeps nothing (one
// that died, say) are swept by the reconcile pass of the instance that holds the sweep lock;
// when that instance stops (and gives the lock back) or dies (its lock lapses unrenewed), the
// other takes the lock over and sweeps them in its turn.
func TestSweepFindsHoldsOfOtherInstances(t *testing.T) {
	for _, how := range []string{"stopped", "died"} {
		t.Run(how, func(t *testing.T) { sweepHandOff(t, how) })
	}
}

func sweepHandOff(t *testing.T, how string) {
	c := dialT(t, testenv.Redis(t))
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	sale := "so" + prefix[len(prefix)-7:len(prefix)-1]
	buyer := New(c.Inventory, WithPrefix(prefix)) // the instance that made the holds, and sweeps nothing
	loadSweepSale(t, buyer, sale, time.Now())
	list := func(context.Context) ([]string, error) { return []string{sale}, nil }
	type instance struct {
		stop               func()
		locks              *lock.Client
		passes, reconciled atomic.Int64
	}
	start := func() *instance {
		in := &instance{locks: lock.New(c.Locks, &lock.Options{Lease: time.Second})}
		t.Cleanup(func() { _ = in.locks.Close() })
		sw := New(c.Inventory, WithPrefix(prefix)).Sweeper(20*time.Millisecond, list, in.locks).(*sweeper)
		sw.reconcileEvery, sw.tryLeadEvery = 100*time.Millisecond, 50*time.Millisecond
		sw.passed = func(r bool) {
			in.passes.Add(1)
			if r {
				in.reconciled.Add(1)
			}
		}
		in.stop = startSweeper(t, sw)
		return in
	}
	first := start()
	eventually(t, "the first instance leads", func() bool { return first.reconciled.Load() > 0 })
	second := start()
	t.Logf("reclaimed %v after expiry by the leader's reconcile", reclaimedWithoutTraffic(t, buyer, buyer, sale, "u1"))
	if second.reconciled.Load() != 0 {
		t.Fatal("two instances ran the reconcile pass at once")
	}
	if how == "died" {
		// Its lock client stops renewing (as in a process that died): the sweeper loses its
		// lease at once and cannot give the lock back; the key lapses after its 1 s lease.
		_ = first.locks.Close()
		n := first.passes.Load()
		eventually(t, "the first instance's passes after its lock lapsed", func() bool { return first.passes.Load() >= n+2 })
	}
	first.stop()
	eventually(t, "the second instance leads", func() bool { return second.reconciled.Load() > 0 })
	t.Logf("reclaimed %v after expiry after the hand-off", reclaimedWithoutTraffic(t, buyer, buyer, sale, "u2"))
}

// perSaleSweeper is the sweeper as it was before the due-time index: every interval, for every
// listed sale, a lock of its own and a reclaim. It is the negative control of the idle test.
type perSaleSweeper struct {
	e        *Engine
	interval time.Duration
	list     SaleLister
	locks    *lock.Client
	passed   func()
}

func (s *perSaleSweeper) Name() string { return "sweeper" }

func (s *perSaleSweeper) Run(ctx context.Context) error {
	leaders := map[string]*sweepLeader{}
	defer func() {
		for _, l := range leaders {
			l.release()
		}
	}()
	wait.Every(ctx, s.interval, func(ctx context.Context) {
		ids, _ := s.list(ctx)
		for _, id := range ids {
			l := leaders[id]
			if l == nil {
				l = &sweepLeader{m: s.locks.NewMutex("seckill:sweep:" + id)}
				leaders[id] = l
			}
			if l.lead(ctx) {
				_, _ = s.e.Reclaim(ctx, id)
			}
		}
		if s.passed != nil {
			s.passed()
		}
	})
	return nil
}

// commandsProcessed is the private Redis' total_commands_processed.
func commandsProcessed(t testing.TB, rdb rueidis.Client) int64 {
	t.Helper()
	return redistest.InfoInt(t, rdb, "stats", "total_commands_processed")
}

// idleSales loads n sales on e, selling of them started and the rest starting in an hour, and
// returns their ids.
func idleSales(t testing.TB, e *Engine, n, selling int) []string {
	t.Helper()
	ids := make([]string, n)
	now := time.Now()
	for i := range ids {
		ids[i] = "idle" + strconv.Itoa(i)
		starts := now.Add(time.Hour)
		if i < selling {
			starts = now
		}
		loadSweepSale(t, e, ids[i], starts)
	}
	return ids
}

// TestSweepIdleSalesCostNothing: on a private Redis, 300 sales of which 10 are selling and
// nobody buys; three instances sweep. The detector counts the Redis commands over passes after
// the first reconcile pass, and fails a sweeper that spends a tenth of a command per sale per
// pass: the due-time sweeper spends a few per pass whatever the number of sales (the reconcile
// of the 10 selling sales, the lock's renewal); the per-sale sweeper (the negative control)
// spends one reclaim per sale per pass and more.
func TestSweepIdleSalesCostNothing(t *testing.T) {
	testenv.Redis(t)
	const n, selling, passes = 300, 10, 10
	for _, old := range []bool{false, true} {
		name := map[bool]string{false: "due-time index", true: "per-sale (negative control)"}[old]
		t.Run(name, func(t *testing.T) {
			_, url := startPrivateRedis(t)
			c := dialT(t, url)
			e := New(c.Inventory)
			ids := idleSales(t, e, n, selling)
			list := func(context.Context) ([]string, error) { return ids, nil }
			var done atomic.Int64
			for range 3 {
				locks := lock.New(c.Locks, &lock.Options{Lease: time.Second})
				t.Cleanup(func() { _ = locks.Close() })
				inst := New(c.Inventory)
				var sw background.Service
				if old {
					sw = &perSaleSweeper{e: inst, interval: 20 * time.Millisecond, list: list, locks: locks, passed: func() { done.Add(1) }}
				} else {
					s := inst.Sweeper(20*time.Millisecond, list, locks).(*sweeper)
					s.reconcileEvery = 100 * time.Millisecond
					s.passed = func(bool) { done.Add(1) }
					sw = s
				}
				startSweeper(t, sw)
			}
			eventually(t, "the first passes", func() bool { return done.Load() >= 3*3 })
			from, before := done.Load(), commandsProcessed(t, c.Inventory)
			eventually(t, "the measured passes", func() bool { return done.Load() >= from+3*passes })
			cmds, ran := commandsProcessed(t, c.Inventory)-before, done.Load()-from
			perPass := float64(cmds) / float64(ran)
			t.Logf("%s: %d commands in %d passes of 3 instances over %d idle sales: %.1f per pass", name, cmds, ran, n, perPass)
			if costly := perPass > n/10; costly != old {
				t.Fatalf("%s: %.1f commands per pass over %d idle sales; the bound is %d", name, perPass, n, n/10)
			}
		})
	}
}

// startPrivateRedis starts a redis-server of the test's own on a free port.
func startPrivateRedis(t testing.TB) (*exec.Cmd, string) {
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

// TestSweepProbe: the reconcile probe decodes a sale's state exactly as Redis' cmsgpack packed
// it (compared with Lua's own unpack, numbers of every width and sign included), and asks for
// a sweep exactly when something may be due: a hold, a missing sale; not for a selling sale
// with nothing held, which it leaves quiet until its start or for good after its end.
func TestSweepProbe(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	e := New(c.Inventory, WithPrefix(prefix))
	now := time.Now()
	loadSweepSale(t, e, "held", now)
	loadSweepSale(t, e, "idle", now)
	loadSweepSale(t, e, "soon", now.Add(time.Hour))
	if _, err := e.Buy(t.Context(), seckill.BuyRequest{SaleID: "held", UserID: "u", Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	for _, sale := range []string{"held", "idle", "soon"} {
		raw, err := c.Inventory.Do(t.Context(), c.Inventory.B().Hget().Key(e.keys(sale)[0]).Field("st").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		got, err := unpackInts(raw)
		if err != nil {
			t.Fatal(err)
		}
		want := rawState(t, c.Inventory, e.keys(sale)[0])
		for i, name := range stateFields {
			if got[i] != want[name] {
				t.Fatalf("sale %s: %s decoded %d; Lua unpacks %d", sale, name, got[i], want[name])
			}
		}
	}
	for _, tc := range []struct {
		packed string
		want   []int64
	}{
		{"\x00\x7f\xff\xe0", []int64{0, 127, -1, -32}},
		{"\xcc\xff\xcd\xff\xff\xce\xff\xff\xff\xff", []int64{255, 65535, 1<<32 - 1}},
		{"\xd0\x80\xd1\x80\x00\xd2\x80\x00\x00\x00\xd3\xff\xff\xff\xff\xff\xff\xff\xfe", []int64{-128, -32768, -1 << 31, -2}},
		{"\xcf\x00\x00\x01\x90\x00\x00\x00\x00\xcb\x42\x79\x00\x00\x00\x00\x00\x00\xca\x3f\x80\x00\x00", []int64{1717986918400, 1717986918400, 1}},
	} {
		got, err := unpackInts(tc.packed)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Fatalf("unpackInts(%q) = %v, %v; want %v", tc.packed, got, err, tc.want)
		}
	}
	if _, err := unpackInts("\xc0"); err == nil {
		t.Fatal("unpackInts of a nil: no error")
	}
	probes, err := e.probeSales(t.Context(), []string{"held", "idle", "soon", "gone"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !probes[0].sweep || probes[1].sweep || probes[1].quiet != 0 || probes[2].sweep || probes[2].quiet <= 0 || !probes[3].sweep {
		t.Fatalf("probes of a sale with a hold, an idle one, an upcoming one and a missing one: %+v", probes)
	}
	if p, _ := e.probeSales(t.Context(), []string{"idle"}, now.Add(48*time.Hour)); p[0].sweep || p[0].quiet >= 0 {
		t.Fatalf("probe of an idle sale after its end: %+v; want quiet for good", p[0])
	}
}

// TestSweepNoticesFlushedSaleWithoutTraffic: a selling sale whose keys vanish (a Redis restarted
// empty) while nobody calls it is rebuilt from the database through the reconcile pass: its probe
// finds the state missing and its sweep hands it to the rebuilder.
func TestSweepNoticesFlushedSaleWithoutTraffic(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	locks := lock.New(c.Locks, &lock.Options{Lease: time.Second})
	t.Cleanup(func() { _ = locks.Close() })
	sale := "sf" + prefix[len(prefix)-7:len(prefix)-1]
	now := time.Now().UTC()
	def, err := seckill.NewSale(seckill.SaleInput{ID: sale, PriceCents: ptr(int64(1)), Stock: ptr(10), StartsAt: &now}, now)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{sale: def}
	e := New(c.Inventory, WithPrefix(prefix), WithRebuild(src, locks))
	t.Cleanup(func() { _ = e.Close() })
	if err := e.LoadSale(t.Context(), def, 0); err != nil {
		t.Fatal(err)
	}
	sw := e.Sweeper(20*time.Millisecond, func(context.Context) ([]string, error) { return []string{sale}, nil }, locks).(*sweeper)
	sw.reconcileEvery = 50 * time.Millisecond
	var passes atomic.Int64
	sw.passed = func(bool) { passes.Add(1) }
	startSweeper(t, sw)
	eventually(t, "a pass", func() bool { return passes.Load() > 0 })
	dropPrefix(t, c.Inventory, prefix)
	eventually(t, "the flushed sale rebuilt without a call", func() bool {
		return src.reads.Load() > 0 && len(rawState(t, c.Inventory, e.keys(sale)[0])) > 0
	})
}
