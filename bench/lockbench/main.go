// Command lockbench measures package lock side by side with go-redsync/redsync and
// bsm/redislock on the same Redis, in one run:
//
//   - uncontended: one goroutine, lock+unlock pairs per second on one name;
//   - contended: G goroutines (default 32) on one name, each holding it for a critical section
//     (default 1 ms): hand-offs per second, Redis commands per acquisition, and fairness
//     (fewest ÷ most acquisitions per goroutine).
//
// The peers wait by polling; they run with a poll interval of -poll (default 1 ms, the setting
// that gives them their best hand-off rate) and, for reference, with their default retry
// settings. Commands are counted two ways: commands the clients sent (go-redis hooks, plus the
// SUBSCRIBE/UNSUBSCRIBE of package lock's pub/sub connection), and commands Redis executed,
// including those run inside Lua scripts (INFO commandstats deltas). Use a Redis nobody else
// uses for clean counts: by default the tool starts its own redis-server on a free port.
//
// It lives in its own module so that redsync and redislock never enter the main module's
// dependencies.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill/lock"
	lockgoredis "github.com/seckill-go/seckill/lock/goredis"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

type config struct {
	url         string
	duration    time.Duration
	uncontended time.Duration
	goroutines  int
	hold        time.Duration
	poll        time.Duration
	rounds      int
	libs        []string
	holdMode    string
	redisCPUs   string
}

func run(args []string) error {
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	var cfg config
	var libs string
	fs.StringVar(&cfg.url, "redis", "", `Redis URL (e.g. redis://127.0.0.1:6379/0); "" starts a private redis-server`)
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "length of each contended run")
	fs.DurationVar(&cfg.uncontended, "uncontended", 3*time.Second, "length of each uncontended run")
	fs.IntVar(&cfg.goroutines, "goroutines", 32, "contending goroutines")
	fs.DurationVar(&cfg.hold, "hold", time.Millisecond, "critical section of each acquisition")
	fs.DurationVar(&cfg.poll, "poll", time.Millisecond, "poll interval of the polling peers")
	fs.StringVar(&cfg.holdMode, "holdmode", "precise", `how a holder spends -hold: "sleep" (time.Sleep, which overshoots by the timer latency of a loaded machine) or "precise" (spin, yielding, for the last 1.5 ms)`)
	fs.IntVar(&cfg.rounds, "rounds", 3, "repeat every measurement this many times (interleaved) and report the median")
	fs.StringVar(&cfg.redisCPUs, "redis-cpus", "", `pin the private redis-server to these CPUs (a taskset list, e.g. "1"); run the tool itself under "taskset -c 0" so that client and server do not compete for a core`)
	fs.StringVar(&libs, "libs", "lock,redsync,redislock,redsync-default,redislock-default", "what to measure")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.libs = strings.Split(libs, ",")

	url := cfg.url
	where := url
	if url == "" {
		addr, stop, err := startRedis(cfg.redisCPUs)
		if err != nil {
			return err
		}
		defer stop()
		url = "redis://" + addr + "/0"
		where = "private redis-server at " + addr
		if cfg.redisCPUs != "" {
			where += " on CPUs " + cfg.redisCPUs
		}
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	opt.PoolSize = 2 * cfg.goroutines
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	counter := &hookCounter{}
	rdb.AddHook(counter)
	ctx := context.Background()
	// every key of this run starts with runPrefix, and is deleted at the end (package lock's
	// fence counters never expire by design)
	runPrefix := fmt.Sprintf("lockbench:%d:", time.Now().UnixNano())
	defer func() {
		iter := rdb.Scan(ctx, 0, runPrefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	}()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	if cfg.holdMode != "sleep" && cfg.holdMode != "precise" {
		return fmt.Errorf("-holdmode must be sleep or precise")
	}
	fmt.Printf("# lockbench: %s; Redis %s; Go %s %s/%s, %d CPUs, GOMAXPROCS %d; %d goroutines, %v hold (%s), %v poll, median of %d rounds\n",
		where, field(info, "redis_version"), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0),
		cfg.goroutines, cfg.hold, cfg.holdMode, cfg.poll, cfg.rounds)

	impls := map[string]func() impl{
		"lock": func() impl { return newOurs(rdb, runPrefix) },
		"redsync": func() impl {
			return newRedsync(rdb, redsync.WithRetryDelay(cfg.poll), redsync.WithTries(math.MaxInt32))
		},
		"redsync-default": func() impl { return newRedsync(rdb, redsync.WithTries(math.MaxInt32)) },
		"redislock": func() impl {
			return newRedislock(rdb, &redislock.Options{RetryStrategy: redislock.LinearBackoff(cfg.poll)})
		},
		"redislock-default": func() impl {
			// redislock retries not at all by default; 100 ms is its documented example
			return newRedislock(rdb, &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)})
		},
	}
	results := map[string][]result{}
	made := map[string]impl{}
	for _, name := range cfg.libs {
		mk, ok := impls[name]
		if !ok {
			return fmt.Errorf("unknown lib %q", name)
		}
		made[name] = mk()
		defer made[name].close()
	}
	for r := 0; r < cfg.rounds; r++ {
		// Uncontended: the libraries take turns in slices of 200 pairs, so that the load of a
		// shared machine falls on all of them alike.
		var pollers []string
		for _, name := range cfg.libs {
			if !strings.HasSuffix(name, "-default") {
				pollers = append(pollers, name)
			}
		}
		pairs, err := uncontended(ctx, made, pollers, cfg, runPrefix, r)
		if err != nil {
			return err
		}
		for _, name := range cfg.libs {
			res := result{lib: name, pairs: pairs[name]}
			if err := contended(ctx, rdb, counter, made[name], cfg, fmt.Sprintf("%sc:%s:%d", runPrefix, name, r), &res); err != nil {
				return fmt.Errorf("%s contended: %w", name, err)
			}
			results[name] = append(results[name], res)
			fmt.Fprintf(os.Stderr, "round %d %-17s %s\n", r+1, name, res)
		}
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "library\tuncontended pairs/s\thandoffs/s\tfairness\tclient cmds/acq\tserver cmds/acq\tp50 wait\tp99 wait\t")
	for _, name := range cfg.libs {
		m := median(results[name])
		pairs := "-"
		if m.pairs > 0 {
			pairs = fmt.Sprintf("%.0f", m.pairs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%v\t%v\t\n", name, pairs, m.handoffs, m.fairness,
			m.clientCmds, m.serverCmds, m.p50.Round(time.Microsecond), m.p99.Round(time.Microsecond))
	}
	return tw.Flush()
}

type result struct {
	lib                    string
	pairs                  float64
	handoffs, fairness     float64
	clientCmds, serverCmds float64
	p50, p99               time.Duration
}

// String is one round's line of progress output.
func (r result) String() string {
	return fmt.Sprintf("pairs/s %.0f  handoffs/s %.0f  fairness %.2f  client cmds/acq %.2f  server cmds/acq %.2f  wait p50 %v p99 %v",
		r.pairs, r.handoffs, r.fairness, r.clientCmds, r.serverCmds, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond))
}

// median takes each figure's median over the rounds independently.
func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	return result{
		pairs:      pick(func(r result) float64 { return r.pairs }),
		handoffs:   pick(func(r result) float64 { return r.handoffs }),
		fairness:   pick(func(r result) float64 { return r.fairness }),
		clientCmds: pick(func(r result) float64 { return r.clientCmds }),
		serverCmds: pick(func(r result) float64 { return r.serverCmds }),
		p50:        time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99:        time.Duration(pick(func(r result) float64 { return float64(r.p99) })),
	}
}

// impl is one library under test; handle is one owner.
type impl interface {
	handle(name string) handle
	close()
}

type handle interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

func uncontended(ctx context.Context, made map[string]impl, names []string, cfg config, prefix string, round int) (map[string]float64, error) {
	const slice = 200
	hs := map[string]handle{}
	spent := map[string]time.Duration{}
	done := map[string]int{}
	for _, name := range names {
		hs[name] = made[name].handle(fmt.Sprintf("%su:%s:%d", prefix, name, round))
	}
	for total := time.Duration(0); total < cfg.uncontended*time.Duration(len(names)); {
		for _, name := range names {
			h := hs[name]
			start := time.Now()
			for i := 0; i < slice; i++ {
				if err := h.lock(ctx); err != nil {
					return nil, fmt.Errorf("%s uncontended: %w", name, err)
				}
				if err := h.unlock(ctx); err != nil {
					return nil, fmt.Errorf("%s uncontended: %w", name, err)
				}
			}
			d := time.Since(start)
			spent[name] += d
			done[name] += slice
			total += d
		}
	}
	out := map[string]float64{}
	for _, name := range names {
		out[name] = float64(done[name]) / spent[name].Seconds()
	}
	return out, nil
}

func contended(ctx context.Context, rdb *redis.Client, hooks *hookCounter, im impl, cfg config, name string, res *result) error {
	before, err := commandStats(ctx, rdb)
	if err != nil {
		return err
	}
	hooks.n.Store(0)
	counts := make([]int, cfg.goroutines)
	waits := make([][]time.Duration, cfg.goroutines)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, cfg.goroutines)
	start := time.Now()
	for g := 0; g < cfg.goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := im.handle(name)
			for !stop.Load() {
				t0 := time.Now()
				if err := h.lock(ctx); err != nil {
					errc <- err
					return
				}
				waits[g] = append(waits[g], time.Since(t0))
				hold(cfg)
				counts[g]++
				if err := h.unlock(ctx); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	time.Sleep(cfg.duration)
	stop.Store(true)
	elapsed := time.Since(start)
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	sent := hooks.n.Load()
	after, err := commandStats(ctx, rdb)
	if err != nil {
		return err
	}
	total, lo, hi := 0, math.MaxInt, 0
	for _, c := range counts {
		total += c
		lo, hi = min(lo, c), max(hi, c)
	}
	// the pub/sub connection bypasses the hooks: add its commands from the server's counts
	pubsub := after["subscribe"] - before["subscribe"] + after["unsubscribe"] - before["unsubscribe"]
	var server int64
	for cmd, n := range after {
		if cmd == "info" || strings.HasPrefix(cmd, "config") || strings.HasPrefix(cmd, "client") {
			continue
		}
		server += n - before[cmd]
	}
	server -= 0
	all := slices.Concat(waits...)
	slices.Sort(all)
	res.handoffs = float64(total) / elapsed.Seconds()
	res.fairness = float64(lo) / float64(max(hi, 1))
	res.clientCmds = float64(sent+pubsub) / float64(max(total, 1))
	res.serverCmds = float64(server) / float64(max(total, 1))
	if len(all) > 0 {
		res.p50 = all[len(all)/2]
		res.p99 = all[len(all)*99/100]
	}
	return nil
}

// hold spends the critical section. time.Sleep alone is not precise here: when the Go runtime
// sleeps in the network poller it waits in whole milliseconds, so time.Sleep(1ms) takes
// 1.1-2 ms (and more on a loaded machine), and the section would not be the -hold it claims.
// "precise" sleeps until 1.5 ms before the end (if there is that much) and then spins,
// yielding to other goroutines, until the end. The same holder code runs for every library.
func hold(cfg config) {
	if cfg.holdMode == "sleep" {
		time.Sleep(cfg.hold)
		return
	}
	end := time.Now().Add(cfg.hold)
	if d := cfg.hold - 1500*time.Microsecond; d > 0 {
		time.Sleep(d)
	}
	for time.Now().Before(end) {
		runtime.Gosched()
	}
}

// commandStats returns calls per command from INFO commandstats.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		name, rest, _ := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[name] = n
			}
		}
	}
	return out, nil
}

// hookCounter counts the commands a go-redis client sends (pipelined ones one by one). The
// INFO calls of this tool are made outside the measured windows.
type hookCounter struct{ n atomic.Int64 }

// DialHook counts nothing: dialing is not a command.
func (h *hookCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts one command.
func (h *hookCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts every command of a pipeline.
func (h *hookCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// --- package lock ---

type ours struct{ c *lock.Client }

// newOurs keys its locks as prefix+"{"+name+"}"...; names already carry the run prefix, so the
// lock prefix is that too (and SCAN of the run prefix finds every key). The lock runs over the
// peers' go-redis client (lock/goredis), so that the hooks count its commands like theirs;
// seckill itself runs it over rueidis (lock.Rueidis), which go test -bench ./lock/ measures.
func newOurs(rdb *redis.Client, prefix string) *ours {
	return &ours{c: lock.New(lockgoredis.New(rdb), &lock.Options{Prefix: prefix})}
}
func (o *ours) handle(name string) handle { return &oursHandle{m: o.c.NewMutex(name)} }
func (o *ours) close()                    { _ = o.c.Close() }

type oursHandle struct{ m *lock.Mutex }

func (h *oursHandle) lock(ctx context.Context) error {
	_, err := h.m.Lock(ctx)
	return err
}
func (h *oursHandle) unlock(ctx context.Context) error { return h.m.Unlock(ctx) }

// --- redsync ---

type rs struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func newRedsync(rdb *redis.Client, opts ...redsync.Option) *rs {
	return &rs{rs: redsync.New(goredis.NewPool(rdb)), opts: append([]redsync.Option{redsync.WithExpiry(8 * time.Second)}, opts...)}
}
func (r *rs) handle(name string) handle { return &rsHandle{m: r.rs.NewMutex(name, r.opts...)} }
func (r *rs) close()                    {}

type rsHandle struct{ m *redsync.Mutex }

func (h *rsHandle) lock(ctx context.Context) error { return h.m.LockContext(ctx) }
func (h *rsHandle) unlock(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		return errors.New("redsync: unlock refused")
	}
	return err
}

// --- redislock ---

type rl struct {
	c    *redislock.Client
	opts *redislock.Options
}

func newRedislock(rdb *redis.Client, opts *redislock.Options) *rl {
	return &rl{c: redislock.New(rdb), opts: opts}
}
func (r *rl) handle(name string) handle { return &rlHandle{r: r, name: name} }
func (r *rl) close()                    {}

type rlHandle struct {
	r    *rl
	name string
	l    *redislock.Lock
}

func (h *rlHandle) lock(ctx context.Context) error {
	// redislock gives up after the TTL when ctx has no deadline; give it a long one
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := h.r.c.Obtain(ctx, h.name, 8*time.Second, h.r.opts)
	h.l = l
	return err
}
func (h *rlHandle) unlock(ctx context.Context) error { return h.l.Release(ctx) }

// --- a private redis-server ---

// startRedis starts a private redis-server on a free port, pinned to cpus (via taskset) if
// cpus is not empty.
func startRedis(cpus string) (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("no redis-server on PATH (or pass -redis): %w", err)
	}
	var pre []string
	if cpus != "" {
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return "", nil, fmt.Errorf("-redis-cpus needs taskset on PATH: %w", err)
		}
		pre = []string{ts, "-c", cpus}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	argv := append(pre, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return addr, stop, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	return "", nil, errors.New("redis-server did not start")
}

func field(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return "?"
}
