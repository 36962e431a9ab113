// Package strategy runs the evolution of stock deduction that flash-sale write-ups walk
// through, side by side on the same load, behind `seckill bench strategies`:
//
//	no-lock   GET, check, DECR: two round trips with a gap between them (oversells)
//	setnx     the same under SET NX PX, released with a plain DEL (the classic broken lock)
//	lock      the same under package lock (owner-checked, renewed, fair)
//	lua       the Redis engine's buy.lua: check and take in one atomic script
//	embedded  the memory engine: check and take in one in-process critical section
//
// Every strategy faces the same crowd: Buyers fresh users, each trying once to take one unit
// of Stock, sent by Workers goroutines that start together. The first must oversell (it is the
// negative control that shows the load is racy enough); every other must sell exactly Stock.
// Each result is checked twice: by counting the takes the buyers saw succeed, and by asking the
// store what it thinks is gone.
package strategy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/redisinv"
)

// Defaults used when the matching Config field is zero.
const (
	DefaultRedisURL = "redis://127.0.0.1:6379/0"
	DefaultStock    = 100
	DefaultBuyers   = 5000
	DefaultWorkers  = 64
	// DefaultWork is the order's "business work" (writing the order, say) between the check
	// and the decrement. It widens the check-then-act gap beyond one round trip, so that
	// no-lock oversells on every run rather than on most. Only buyers who saw a unit left do
	// it, so a lock around it costs about Stock × Work in all, not Buyers × Work.
	DefaultWork = time.Millisecond
	// DefaultSetNXLease is the SETNX lock's lease: far longer than one hold takes at the
	// default load, so the broken lock happens to sell exactly (see setnx).
	DefaultSetNXLease = time.Second
)

// Config describes one run of all the strategies.
type Config struct {
	RedisURL string // the Redis every Redis strategy uses (redisinv.ParseURL syntax)
	Stock    int    // units for sale
	Buyers   int    // fresh users, one attempt each; must exceed Stock so a sale can sell out
	Workers  int    // concurrent goroutines sending the attempts
	// Work is the pause between the check and the decrement in no-lock, setnx and lock
	// (negative: none, only a yield to the scheduler).
	Work time.Duration
	// SetNXLease is the PX of the SETNX lock.
	SetNXLease time.Duration
}

func (c Config) withDefaults() (Config, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Stock, DefaultStock)
	def(&c.Buyers, DefaultBuyers)
	def(&c.Workers, DefaultWorkers)
	if c.RedisURL == "" {
		c.RedisURL = DefaultRedisURL
	}
	if c.Work == 0 {
		c.Work = DefaultWork
	}
	if c.SetNXLease <= 0 {
		c.SetNXLease = DefaultSetNXLease
	}
	if c.Stock < 1 || c.Buyers <= c.Stock || c.Workers < 1 {
		return c, fmt.Errorf("strategy: need stock ≥ 1, buyers > stock and workers ≥ 1 (got %d, %d, %d)", c.Stock, c.Buyers, c.Workers)
	}
	c.Workers = min(c.Workers, c.Buyers)
	return c, nil
}

// Result is what one strategy did with the load.
type Result struct {
	Strategy  string
	Stock     int
	Attempts  int           // one per buyer
	Sold      int           // takes the buyers saw succeed
	Gone      int           // units gone by the store's own count after the run
	Oversold  int           // max(0, Sold − Stock)
	Elapsed   time.Duration // wall time from the start signal to the last answer
	OpsPerSec float64       // Attempts / Elapsed
	P99       time.Duration // of one attempt, lock waits included
	Exact     bool          // Verdict() == "exact"
}

// Verdict is "oversold" (the buyers or the store count more than Stock), "inconsistent" (the
// store disagrees with what the buyers were told), "undersold" (units left although every
// buyer tried) or "exact".
func (r Result) Verdict() string {
	switch {
	case r.Sold > r.Stock || r.Gone > r.Stock:
		return "oversold"
	case r.Gone != r.Sold:
		return "inconsistent"
	case r.Sold < r.Stock:
		return "undersold"
	}
	return "exact"
}

// store is one strategy over its own keys.
type store interface {
	// take tries to take one unit for user; worker (0 ≤ worker < Workers) is the goroutine
	// asking, for strategies that keep one lock handle per goroutine.
	take(ctx context.Context, worker int, user string) (bool, error)
	// gone counts the units gone by the store's own bookkeeping.
	gone(ctx context.Context) (int, error)
	close()
}

// env is what a strategy is built from: the run's config, its Redis clients, and a key prefix
// of its own.
type env struct {
	cfg    Config
	redis  *redisinv.Clients
	prefix string
}

// strategies in the order the write-ups tell them.
var strategies = []struct {
	name string
	open func(context.Context, env) (store, error)
}{
	{"no-lock", openNoLock},
	{"setnx", openSetNX},
	{"lock", openLock},
	{"lua", openLua},
	{"embedded", openEmbedded},
}

// Run runs every strategy on the same load, one after the other, against the Redis at
// cfg.RedisURL. Keys live under a prefix unique to the run and are deleted before it returns.
// It stops at the first error (a take that failed for a reason other than "none left").
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return run(ctx, cfg, "seckill:strategies:"+seckill.NewID()[:16]+":")
}

// run is Run with the keys under prefix, which tests choose so as to check that none are left.
func run(ctx context.Context, cfg Config, prefix string) (rs []Result, err error) {
	clients, err := redisinv.Dial(ctx, cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	defer clients.Close()
	defer func() { // also after a cancelled run, so a fresh context
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if derr := deletePrefix(cctx, clients.Inventory, prefix); derr != nil && err == nil {
			err = fmt.Errorf("strategy: deleting the keys under %s: %w", prefix, derr)
		}
	}()
	for _, s := range strategies {
		st, err := s.open(ctx, env{cfg, clients, prefix + s.name + ":"})
		if err != nil {
			if st != nil { // half open: a lock client or an engine to stop
				st.close()
			}
			return rs, fmt.Errorf("strategy %s: %w", s.name, err)
		}
		r, err := measure(ctx, cfg, s.name, st)
		st.close()
		if err != nil {
			return rs, fmt.Errorf("strategy %s: %w", s.name, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// maxMicros is the largest latency the histograms hold (one minute).
const maxMicros = int64(time.Minute / time.Microsecond)

// measure sends the load to st and collects the result.
func measure(ctx context.Context, cfg Config, name string, st store) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		start    = make(chan struct{})
		hists    = make([]*hdrhistogram.Histogram, cfg.Workers)
		sold     = make([]int, cfg.Workers)
	)
	for w := range cfg.Workers {
		hists[w] = hdrhistogram.New(0, maxMicros, 3) // one per worker: histograms are not safe for concurrent use
		wg.Go(func() {
			<-start // everyone starts together: a flash sale's crowd arrives at once
			for i := next.Add(1); i <= int64(cfg.Buyers); i = next.Add(1) {
				t := time.Now()
				ok, err := st.take(ctx, w, "u"+strconv.FormatInt(i, 10))
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				_ = hists[w].RecordValue(min(time.Since(t).Microseconds(), maxMicros))
				if ok {
					sold[w]++
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	if firstErr != nil {
		return Result{}, firstErr
	}
	gone, err := st.gone(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("reading the final stock: %w", err)
	}
	r := Result{Strategy: name, Stock: cfg.Stock, Attempts: cfg.Buyers, Gone: gone, Elapsed: elapsed,
		OpsPerSec: float64(cfg.Buyers) / elapsed.Seconds()}
	for w := range cfg.Workers {
		r.Sold += sold[w]
	}
	r.P99 = p99(hists)
	r.Oversold = max(0, r.Sold-r.Stock)
	r.Exact = r.Verdict() == "exact"
	return r, nil
}

// p99 is the 99th percentile of the workers' latencies together (microseconds recorded), in a
// histogram of its own: merging the others into worker 0's, as this once did from worker 0 on,
// counted worker 0's samples twice.
func p99(hists []*hdrhistogram.Histogram) time.Duration {
	all := hdrhistogram.New(0, maxMicros, 3)
	for _, h := range hists {
		all.Merge(h)
	}
	return time.Duration(all.ValueAtQuantile(99)) * time.Microsecond
}

// deletePrefix deletes every key under prefix. On a cluster it scans every node (replicas
// list their masters' keys again, which costs a redundant UNLINK) and unlinks each key through
// the client, which routes it to its slot's master: a cluster refuses multi-key commands
// across slots.
func deletePrefix(ctx context.Context, rdb rueidis.Client, prefix string) error {
	var errs []error
	for _, node := range rdb.Nodes() {
		for cursor := uint64(0); ; {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				errs = append(errs, err)
				break
			}
			for _, k := range e.Elements {
				errs = append(errs, rdb.Do(ctx, rdb.B().Unlink().Key(k).Build()).Error())
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return errors.Join(errs...)
}
