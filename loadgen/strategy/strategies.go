package strategy

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/redisinv"
)

// counter is the stock as one Redis integer, where every write-up starts. no-lock, setnx and
// lock share it and differ only in what they wrap around checkThenDecr.
type counter struct {
	rdb   rueidis.Client
	key   string
	stock int
	work  time.Duration
}

func newCounter(ctx context.Context, e env) (counter, error) {
	c := counter{rdb: e.redis.Inventory, key: e.prefix + "stock", stock: e.cfg.Stock, work: e.cfg.Work}
	return c, c.rdb.Do(ctx, c.rdb.B().Set().Key(c.key).Value(strconv.Itoa(c.stock)).Build()).Error()
}

// checkThenDecr reads the stock and, if a unit is left, does the order's work and decrements.
// The read and the write are separate round trips: between them other buyers read the same
// value and sell the same last unit. Everything below exists to close that gap. DECR (rather
// than SET read−1) keeps the store's count honest, so an oversell shows as a negative stock.
func (c *counter) checkThenDecr(ctx context.Context) (bool, error) {
	n, err := c.rdb.Do(ctx, c.rdb.B().Get().Key(c.key).Build()).AsInt64()
	if err != nil || n <= 0 {
		return false, err
	}
	if c.work > 0 {
		time.Sleep(c.work)
	} else {
		runtime.Gosched()
	}
	return true, c.rdb.Do(ctx, c.rdb.B().Decr().Key(c.key).Build()).Error()
}

func (c *counter) gone(ctx context.Context) (int, error) {
	n, err := c.rdb.Do(ctx, c.rdb.B().Get().Key(c.key).Build()).AsInt64()
	return c.stock - int(n), err
}

func (c *counter) close() {}

// noLock is the negative control: check-then-act with nothing around it.
type noLock struct{ counter }

func openNoLock(ctx context.Context, e env) (store, error) {
	c, err := newCounter(ctx, e)
	return &noLock{c}, err
}

func (s *noLock) take(ctx context.Context, _ int, _ string) (bool, error) {
	return s.checkThenDecr(ctx)
}

// setNX is the lock of many write-ups: SET lock 1 NX PX lease, spin until it succeeds, work,
// DEL. It has two flaws that feed each other. The lease can run out while the holder still
// works (a GC pause, a slow call), and then a second buyer takes the lock: two holders. And
// DEL does not check the owner, so that first holder's DEL then frees the second one's lock,
// letting a third in. It sells exactly only while every hold is shorter than the lease, as at
// the default load with DefaultSetNXLease; TestSetNXOverlap shows it oversell when it is not.
// The fix is an owner token checked on release (a compare-and-delete script) and renewal, which
// is what package lock does.
type setNX struct {
	counter
	lockKey      string
	lease, retry time.Duration
}

// setNXRetry bounds the random pause between two tries of a spinning buyer. Much shorter and
// the spinners' SETs crowd out the holder's own GET and DECR (they share Redis, the client's
// pool and the machine's CPUs): on 2 cores, 1 ms made the default run 4 times slower than 5 ms.
const setNXRetry = 5 * time.Millisecond

func openSetNX(ctx context.Context, e env) (store, error) {
	c, err := newCounter(ctx, e)
	return &setNX{counter: c, lockKey: e.prefix + "lock", lease: e.cfg.SetNXLease, retry: setNXRetry}, err
}

func (s *setNX) take(ctx context.Context, _ int, _ string) (bool, error) {
	for {
		err := s.rdb.Do(ctx, s.rdb.B().Set().Key(s.lockKey).Value("1").Nx().Px(s.lease).Build()).Error()
		if err == nil {
			break
		}
		if !rueidis.IsRedisNil(err) { // nil: the key exists, the lock is taken
			return false, err
		}
		// Sleep a random part of retry: spinners that retried in step would hit Redis in bursts.
		if !wait.Sleep(ctx, rand.N(s.retry)+1) {
			return false, ctx.Err()
		}
	}
	ok, err := s.checkThenDecr(ctx)
	// The flaw: this DEL frees the lock whoever holds it now.
	if derr := s.rdb.Do(context.WithoutCancel(ctx), s.rdb.B().Del().Key(s.lockKey).Build()).Error(); err == nil {
		err = derr
	}
	return ok, err
}

// lockPkg wraps checkThenDecr in package lock: an owner-checked, watchdog-renewed, fair lock.
// It is exact, and it shows why the project keeps locks away from stock deduction (package
// lock, "When to use it"): every buyer queues for one lock, so throughput is one hold at a time.
type lockPkg struct {
	counter
	c   *lock.Client
	mus []*lock.Mutex // one handle per worker: a handle is one owner (lock.NewMutex)
}

func openLock(ctx context.Context, e env) (store, error) {
	c, err := newCounter(ctx, e)
	s := &lockPkg{counter: c, c: lock.New(e.redis.Locks, &lock.Options{Prefix: e.prefix})}
	for range e.cfg.Workers {
		s.mus = append(s.mus, s.c.NewMutex("stock"))
	}
	return s, err
}

func (s *lockPkg) take(ctx context.Context, worker int, _ string) (bool, error) {
	m := s.mus[worker]
	if _, err := m.Lock(ctx); err != nil {
		return false, err
	}
	ok, err := s.checkThenDecr(ctx)
	if uerr := m.Unlock(context.WithoutCancel(ctx)); err == nil {
		err = uerr
	}
	return ok, err
}

func (s *lockPkg) close() { _ = s.c.Close() }

// engine is one of the project's inventories: the check and the take are one atomic step (one
// Lua script in Redis, one critical section in memory), so there is no gap to race in. The
// sale has no queue (queue_limit 0) and holds that outlast the run, so a refused buyer is
// answered sold_out or queue_full and every hold counts as a unit sold.
type engine struct {
	inv     seckill.Inventory
	saleID  string
	closeFn func()
}

func openEngine(ctx context.Context, inv seckill.Inventory, stock int, closeFn func()) (*engine, error) {
	now := time.Now()
	def := seckill.Sale{ID: "bench-" + seckill.NewID()[:12], Name: "strategies", PriceCents: 1, Stock: stock,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PerUserLimit: 1, HoldSeconds: 3600}
	return &engine{inv: inv, saleID: def.ID, closeFn: closeFn}, inv.LoadSale(ctx, def, 0)
}

// openLua is the Redis engine, keys under the strategy's prefix. buy.lua is the atomic script.
func openLua(ctx context.Context, e env) (store, error) {
	inv := redisinv.New(e.redis.Inventory, redisinv.WithPrefix(e.prefix))
	return openEngine(ctx, inv, e.cfg.Stock, func() { _ = inv.Close() })
}

// openEmbedded is the memory engine, in this process.
func openEmbedded(ctx context.Context, e env) (store, error) {
	return openEngine(ctx, memory.New(seckill.SystemClock{}), e.cfg.Stock, func() {})
}

func (s *engine) take(ctx context.Context, _ int, user string) (bool, error) {
	res, err := s.inv.Buy(ctx, seckill.BuyRequest{SaleID: s.saleID, UserID: user, Quantity: 1})
	switch seckill.ErrorCode(err) {
	case "":
		return res.Reservation.Status == seckill.StatusHeld, nil
	case seckill.CodeSoldOut, seckill.CodeQueueFull:
		return false, nil
	}
	return false, err
}

// gone is what the engine itself reports: units held plus units paid.
func (s *engine) gone(ctx context.Context) (int, error) {
	_, st, err := s.inv.Sale(ctx, s.saleID)
	return st.Held + st.Sold, err
}

func (s *engine) close() { s.closeFn() }
