// Command enginebench measures the Redis engine side by side with its references, in one run
// on one machine (docs/BENCHMARKS.md):
//
//   - buys per second through redisinv.Engine (many goroutines on one sale, rueidis'
//     automatic pipelining) against redis-benchmark running EVALSHA of the same buy script
//     with 50 connections and no pipelining, and with -P 16 (the ceiling);
//   - Redis commands and Redis CPU time per buy, from INFO commandstats and INFO cpu;
//   - with -http: the HTTP buy path of `seckill serve --engine redis` (with -db, e.g. MariaDB)
//     against a bare net/http handler that answers a fixed body of the same size, driven by
//     the same client in the same run; with -http-engine memory, of `seckill serve --engine
//     memory` (the embedded engine, no Redis); with -soldout, also the sold-out path (a sale
//     of stock 0, every buy 409 sold_out) against a bare handler answering a 409 of the same
//     size.
//
// It starts a private redis-server on a free port, so that nothing else shares it (not with
// -skip-engine -http-engine memory, which needs no Redis). The server's environment passes
// through, so SECKILL_PPROF=127.0.0.1:6060 lets one profile it during the run.
//
//	go run ./bench/enginebench -rounds 3 -duration 5s
//	go run ./bench/enginebench -http -db mysql://root@127.0.0.1:3306/seckill_bench
//	go run ./bench/enginebench -http -http-engine memory -skip-engine -soldout
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/go-sql-driver/mysql"
	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/purchasetoken"
	"github.com/seckill-go/seckill/loadgen"
	"github.com/seckill-go/seckill/redisinv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "enginebench:", err)
		os.Exit(1)
	}
}

var (
	rounds     = flag.Int("rounds", 3, "rounds of each measurement (the table shows each and the median)")
	duration   = flag.Duration("duration", 5*time.Second, "length of each engine and HTTP measurement")
	requests   = flag.Int("requests", 200000, "requests of each redis-benchmark measurement")
	goroutines = flag.Int("goroutines", 64, "parallel buyers on the engine")
	doHTTP     = flag.Bool("http", false, "also measure the HTTP buy path against a bare net/http handler")
	db         = flag.String("db", "", "order store for the HTTP measurement (default: SQLite in a temp dir)")
	clients    = flag.Int("clients", 64, "HTTP client connections")
	bareAddr   = flag.String("bare-server", "", "internal: serve the bare handler on this address")
	skipEngine = flag.Bool("skip-engine", false, "skip the engine measurements (with -http: only the HTTP one)")
	redisCPUs  = flag.String("redis-cpus", "", "pin the private redis-server to these CPUs with taskset (e.g. 1)")
	httpEngine = flag.String("http-engine", "redis", "engine of the seckill serve that -http measures: redis or memory")
	soldOut    = flag.Bool("soldout", false, "with -http: also measure the sold-out path (stock 0, every buy 409 sold_out)")
)

func run() error {
	flag.Parse()
	if *bareAddr != "" {
		return serveBare(*bareAddr)
	}
	ctx := context.Background()
	switch *httpEngine {
	case "redis", "memory":
	default:
		return fmt.Errorf("-http-engine %q: want redis or memory", *httpEngine)
	}
	host, _ := os.Hostname()
	if *skipEngine && *doHTTP && *httpEngine == "memory" {
		// Nothing here needs Redis: no private redis-server.
		fmt.Printf("enginebench %s on %s: %d CPUs, %s\n\n", time.Now().UTC().Format(time.RFC3339), host, runtime.NumCPU(), runtime.Version())
		return benchmarkHTTP(ctx, "")
	}
	redisURL, rdb, stop, err := startRedis()
	if err != nil {
		return err
	}
	defer stop()
	cl, err := redisinv.Dial(ctx, redisURL)
	if err != nil {
		return err
	}
	defer cl.Close()
	eng := redisinv.New(cl.Inventory)
	single := redisinv.New(cl.Inventory, redisinv.WithMaxBatch(1)) // every buy its own script call
	fmt.Printf("enginebench %s on %s: %d CPUs, %s, %s\n\n", time.Now().UTC().Format(time.RFC3339), host, runtime.NumCPU(), runtime.Version(), redisVersion(ctx, rdb))

	if *skipEngine {
		if *doHTTP {
			return benchmarkHTTP(ctx, redisURL)
		}
		return nil
	}
	var plain, piped, engine, alone []float64
	var stats []perBuy
	for r := range *rounds {
		id := fmt.Sprintf("bench%d", r)
		v, err := benchmarkScript(ctx, eng, rdb, redisURL, id+"a", 1)
		if err != nil {
			return err
		}
		plain = append(plain, v)
		if v, err = benchmarkScript(ctx, eng, rdb, redisURL, id+"b", 16); err != nil {
			return err
		}
		piped = append(piped, v)
		e, st, err := benchmarkEngine(ctx, eng, rdb, id+"c")
		if err != nil {
			return err
		}
		engine, stats = append(engine, e), append(stats, st)
		a, _, err := benchmarkEngine(ctx, single, rdb, id+"d")
		if err != nil {
			return err
		}
		alone = append(alone, a)
		fmt.Printf("round %d: redis-benchmark -c 50: %.0f/s, -P 16: %.0f/s, engine (%d goroutines): %.0f/s = %.2f× the unpipelined rate (one buy per call: %.0f/s)\n",
			r+1, plain[r], piped[r], *goroutines, engine[r], engine[r]/plain[r], alone[r])
	}
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "buys/s\tround values\tmedian")
	fmt.Fprintf(tw, "redis-benchmark -c 50 EVALSHA buy.lua\t%s\t%.0f\n", list(plain), median(plain))
	fmt.Fprintf(tw, "redis-benchmark -c 50 -P 16 (ceiling)\t%s\t%.0f\n", list(piped), median(piped))
	fmt.Fprintf(tw, "redisinv.Engine.Buy, %d goroutines\t%s\t%.0f\n", *goroutines, list(engine), median(engine))
	fmt.Fprintf(tw, "  the same, one buy per script call (WithMaxBatch(1))\t%s\t%.0f\n", list(alone), median(alone))
	ratios := make([]float64, len(engine))
	for i := range engine {
		ratios[i] = engine[i] / plain[i]
	}
	fmt.Fprintf(tw, "engine ÷ unpipelined (goal ≥ 1.5)\t%s\t%.2f\n", listf(ratios, "%.2f"), median(ratios))
	_ = tw.Flush()
	fmt.Println()
	s := stats[len(stats)/2]
	fmt.Printf("per buy, inside Redis (round %d): %.1f commands in the script (%s), %.1f µs of script time (commandstats), %.1f µs of Redis CPU (used_cpu_user+sys); %.1f buys per script call\n\n",
		len(stats)/2+1, s.commands, s.detail, s.scriptUsec, s.cpuUsec, s.batch)

	if *doHTTP {
		return benchmarkHTTP(ctx, redisURL)
	}
	return nil
}

// startRedis starts a private redis-server on a free port.
func startRedis() (string, rueidis.Client, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	args := []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	name := "redis-server"
	if *redisCPUs != "" {
		args = append([]string{"-c", *redisCPUs, name}, args...)
		name = "taskset"
	}
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		return "", nil, nil, fmt.Errorf("start redis-server: %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	var rdb rueidis.Client
	for range 100 {
		if rdb, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:" + port}, DisableCache: true}); err == nil {
			return "redis://127.0.0.1:" + port + "/0", rdb, func() { rdb.Close(); stop() }, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	return "", nil, nil, fmt.Errorf("private redis-server did not answer: %w", err)
}

func redisVersion(ctx context.Context, rdb rueidis.Client) string {
	info, _ := rdb.Do(ctx, rdb.B().Info().Section("server").Build()).ToString()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return "Redis " + v
		}
	}
	return "Redis ?"
}

// newSale loads a sale that never sells out and never queues during a measurement.
func newSale(ctx context.Context, eng *redisinv.Engine, id string) error {
	now := time.Now().UTC()
	sale, err := seckill.NewSale(seckill.SaleInput{
		ID: id, PriceCents: ptr(int64(100)), Stock: ptr(seckill.MaxQuantity), StartsAt: &now,
		EndsAt: ptr(now.Add(24 * time.Hour)), HoldSeconds: ptr(3600), QueueLimit: ptr(0),
	}, now)
	if err != nil {
		return err
	}
	if err := eng.LoadSale(ctx, sale, 0); err != nil {
		return err
	}
	// One buy loads the script into Redis, for redis-benchmark's EVALSHA.
	_, err = eng.Buy(ctx, seckill.BuyRequest{SaleID: id, UserID: "warmup", Quantity: 1})
	return err
}

// dropSale removes a sale's keys so that memory does not pile up across measurements.
func dropSale(ctx context.Context, rdb rueidis.Client, id string) {
	for _, part := range []string{"sale", "res", "holds", "queue", "users", "idem", "events"} {
		_ = rdb.Do(ctx, rdb.B().Unlink().Key("seckill:{sale:"+id+"}:"+part).Build()).Error()
	}
}

// benchmarkScript runs redis-benchmark against the buy script: every request a new user
// (__rand_int__), 50 connections, pipeline depth p.
func benchmarkScript(ctx context.Context, eng *redisinv.Engine, rdb rueidis.Client, redisURL, id string, p int) (float64, error) {
	if err := newSale(ctx, eng, id); err != nil {
		return 0, err
	}
	defer dropSale(ctx, rdb, id)
	sha, keys, args := eng.BuyCommand(id, "u__rand_int__", 1, "0123456789abcdef")
	hostPort := strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")
	host, port, _ := net.SplitHostPort(hostPort)
	cmdArgs := []string{"-h", host, "-p", port, "-c", "50", "-n", strconv.Itoa(*requests), "-r", "1000000000",
		"-P", strconv.Itoa(p), "--csv", "EVALSHA", sha, strconv.Itoa(len(keys))}
	cmdArgs = append(append(cmdArgs, keys...), args...)
	out, err := exec.Command("redis-benchmark", cmdArgs...).Output()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %w", err)
	}
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil || len(recs) < 2 || len(recs[1]) < 2 {
		return 0, fmt.Errorf("redis-benchmark output %q: %v", out, err)
	}
	if v := sold(ctx, rdb, id); v < *requests*9/10 {
		return 0, fmt.Errorf("redis-benchmark made only %d holds of %d requests: the script refused them", v, *requests)
	}
	return strconv.ParseFloat(recs[1][1], 64)
}

// sold is the number of holds of a benchmark sale (nothing is paid).
func sold(ctx context.Context, rdb rueidis.Client, id string) int {
	// The state is packed (redisinv/lua/common.lua); held is its twelfth value.
	v, _ := rdb.Do(ctx, rdb.B().Eval().Script("return {cmsgpack.unpack(redis.call('HGET', KEYS[1], 'st'))}").
		Numkeys(1).Key("seckill:{sale:"+id+"}:sale").Build()).AsIntSlice()
	if len(v) < 12 {
		return 0
	}
	return int(v[11])
}

// perBuy is what one buy costs inside Redis.
type perBuy struct {
	commands, scriptUsec, cpuUsec, batch float64
	detail                               string
}

// benchmarkEngine runs Engine.Buy on many goroutines for -duration, every buy a new user.
func benchmarkEngine(ctx context.Context, eng *redisinv.Engine, rdb rueidis.Client, id string) (float64, perBuy, error) {
	if err := newSale(ctx, eng, id); err != nil {
		return 0, perBuy{}, err
	}
	defer dropSale(ctx, rdb, id)
	if err := rdb.Do(ctx, rdb.B().ConfigResetstat().Build()).Error(); err != nil {
		return 0, perBuy{}, err
	}
	cpu0 := redisCPU(ctx, rdb)
	var n, failed atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(*duration)
	start := time.Now()
	for g := range *goroutines {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				_, err := eng.Buy(ctx, seckill.BuyRequest{SaleID: id, UserID: fmt.Sprintf("g%d-%d", g, i), Quantity: 1})
				if err != nil {
					failed.Add(1)
					continue
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		return 0, perBuy{}, fmt.Errorf("%d engine buys failed", f)
	}
	buys := float64(n.Load())
	st := perBuy{cpuUsec: (redisCPU(ctx, rdb) - cpu0) * 1e6 / buys}
	info, _ := rdb.Do(ctx, rdb.B().Info().Section("commandstats").Build()).ToString()
	var parts []string
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		calls, usec := field(rest, "calls"), field(rest, "usec")
		switch name {
		case "evalsha", "eval":
			st.scriptUsec += usec / buys
			if calls > 0 {
				st.batch = buys / calls
			}
		case "config", "info":
		default:
			st.commands += calls / buys
			parts = append(parts, fmt.Sprintf("%s %.2f", name, calls/buys))
		}
	}
	slices.Sort(parts)
	st.detail = strings.Join(parts, ", ")
	return buys / elapsed.Seconds(), st, nil
}

func field(stat, name string) float64 {
	for _, kv := range strings.Split(stat, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func redisCPU(ctx context.Context, rdb rueidis.Client) float64 {
	info, _ := rdb.Do(ctx, rdb.B().Info().Section("cpu").Build()).ToString()
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return total
}

// buyBody is what the bare handler answers: the size of a real 201 buy answer.
var buyBody = []byte(`{"id":"httpbench-0000000000000001a3f0c6e2b2c94d1e","sale_id":"httpbench","user_id":"h-000001","quantity":1,"status":"held","expires_at":"2026-12-03T10:00:00.000Z","amount_cents":100,"created_at":"2026-12-03T09:00:00.000Z"}` + "\n")

// soldOutBody is what the bare handler answers for a sold-out sale: seckill's 409 problem.
var soldOutBody = []byte(`{"type":"about:blank","title":"Sold out","status":409,"detail":"sold out","code":"sold_out"}`)

// soldOutPrefix starts the id of the sold-out sales, so that the bare handler knows to answer 409.
const soldOutPrefix = "soldout"

// serveBare is the reference: net/http's mux and nothing else, answering every buy 201 with
// a fixed body (409 with a fixed problem for the sold-out sales).
func serveBare(addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sales/{id}/buy/{token}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(r.PathValue("id"), soldOutPrefix) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Content-Length", strconv.Itoa(len(soldOutBody)))
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write(soldOutBody)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(buyBody)))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(buyBody)
	})
	return http.ListenAndServe(addr, mux)
}

const (
	benchAdmin   = "bench-admin-token-0123456789abcdef"
	benchAuth    = "bench-auth-secret-0123456789abcdef"
	benchPayment = "bench-payment-secret-0123456789abcdef"
)

func freeAddr() string {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	defer l.Close()
	return l.Addr().String()
}

func waitHTTP(url string) error {
	for range 300 {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s never answered", url)
}

// benchmarkHTTP starts `seckill serve --engine <-http-engine>` and the bare handler as
// processes of their own, and drives both with the same client, alternating, -rounds times.
// redisURL is only used by the redis engine.
func benchmarkHTTP(ctx context.Context, redisURL string) error {
	dir, err := os.MkdirTemp("", "enginebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "seckill")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/seckill").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/seckill (run from the repository root): %v\n%s", err, out)
	}
	store := *db
	if store == "" {
		store = "sqlite://" + filepath.Join(dir, "bench.db")
	}
	if strings.HasPrefix(store, "mysql://") {
		// A database of its own: sales left by an earlier run would be missing from this run's
		// fresh Redis (or memory engine: rebuilt at start), and would weigh on the measurement.
		fresh, drop, err := freshMySQL(store)
		if err != nil {
			return err
		}
		defer drop()
		store = fresh
	}
	addr := freeAddr()
	srv := exec.Command(bin, "serve", "--engine", *httpEngine, "--addr", addr)
	srv.Env = append(os.Environ(), "SECKILL_DB="+store, "SECKILL_ADMIN_TOKEN="+benchAdmin,
		"SECKILL_AUTH_SECRET="+benchAuth, "SECKILL_PAYMENT_SECRET="+benchPayment, "SECKILL_DEV=")
	if *httpEngine == "redis" {
		srv.Env = append(srv.Env, "SECKILL_REDIS_URL="+redisURL)
	}
	srv.Stderr = benchLog()
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	self, _ := os.Executable()
	bareA := freeAddr()
	bare := exec.Command(self, "-bare-server", bareA)
	if err := bare.Start(); err != nil {
		return err
	}
	defer func() { _ = bare.Process.Kill(); _ = bare.Wait() }()
	if err := waitHTTP("http://" + addr + "/healthz"); err != nil {
		return err
	}
	if err := waitHTTP("http://" + bareA + "/"); err != nil {
		return err
	}
	goal := "0.4"
	if *httpEngine == "memory" {
		goal = "0.7"
	}
	fmt.Printf("HTTP buy path: seckill serve --engine %s --db %s against a bare net/http handler; %d client connections, every buy a new user, %v each\n",
		*httpEngine, redact(store), *clients, *duration)
	admin := client.New("http://"+addr, client.WithToken(benchAdmin))
	createSale := func(saleID string, stock int, startsAt time.Time) error {
		_, err := admin.CreateSale(ctx, client.NewSale{ID: saleID, PriceCents: 100, Stock: stock,
			HoldSeconds: 3600, QueueLimit: client.Ptr(0), StartsAt: startsAt, EndsAt: startsAt.Add(24 * time.Hour)})
		return err
	}
	type series struct {
		ours, refs, ratios []float64
		lastOurs, lastRef  *hdrhistogram.Histogram
	}
	var buys, sold series
	// measure drives our server and the bare one with the same buyers' shape, one after the other.
	measure := func(s *series, r int, prefix string, stock, want int) error {
		saleID := fmt.Sprintf("%s%d-%d", prefix, time.Now().Unix(), r)
		startsAt := time.Now().UTC().Truncate(time.Millisecond)
		if err := createSale(saleID, stock, startsAt); err != nil {
			return err
		}
		o, ho, err := drive(ctx, "http://"+addr, saleID, startsAt, fmt.Sprintf("%sr%d", prefix, r), want)
		if err != nil {
			return fmt.Errorf("seckill: %w", err)
		}
		b, hb, err := drive(ctx, "http://"+bareA, saleID, startsAt, fmt.Sprintf("%sb%d", prefix, r), want)
		if err != nil {
			return fmt.Errorf("bare: %w", err)
		}
		s.ours, s.refs, s.ratios = append(s.ours, o), append(s.refs, b), append(s.ratios, o/b)
		s.lastOurs, s.lastRef = ho, hb
		fmt.Printf("round %d %s: seckill %.0f/s (p50 %.2f ms, p99 %.2f ms), bare %.0f/s (p50 %.2f ms, p99 %.2f ms): %.2f×\n", r+1,
			map[int]string{201: "buy 201", 409: "sold-out 409"}[want], o, ms(ho, 50), ms(ho, 99), b, ms(hb, 50), ms(hb, 99), o/b)
		return nil
	}
	for r := range *rounds {
		if err := measure(&buys, r, "httpbench", seckill.MaxQuantity, 201); err != nil {
			return err
		}
		if *soldOut {
			if err := measure(&sold, r, soldOutPrefix, 0, 409); err != nil {
				return err
			}
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Println()
	table := func(s series, what, goal string) {
		fmt.Fprintf(tw, "HTTP %s/s\tround values\tmedian\n", what)
		fmt.Fprintf(tw, "seckill serve --engine %s\t%s\t%.0f\n", *httpEngine, list(s.ours), median(s.ours))
		fmt.Fprintf(tw, "bare net/http handler\t%s\t%.0f\n", list(s.refs), median(s.refs))
		fmt.Fprintf(tw, "ratio%s\t%s\t%.2f\n", goal, listf(s.ratios, "%.2f"), median(s.ratios))
	}
	table(buys, "buys", " (goal ≥ "+goal+")")
	if *soldOut {
		fmt.Fprintln(tw, "\t\t")
		table(sold, "sold-out answers", "")
	}
	_ = tw.Flush()
	fmt.Printf("last round latency: seckill p50 %.2f ms p99 %.2f ms; bare p50 %.2f ms p99 %.2f ms\n",
		ms(buys.lastOurs, 50), ms(buys.lastOurs, 99), ms(buys.lastRef, 50), ms(buys.lastRef, 99))
	if *soldOut {
		fmt.Printf("last round sold-out latency: seckill p50 %.2f ms p99 %.2f ms; bare p50 %.2f ms p99 %.2f ms\n",
			ms(sold.lastOurs, 50), ms(sold.lastOurs, 99), ms(sold.lastRef, 50), ms(sold.lastRef, 99))
	}
	return nil
}

// drive floods base's buy path for -duration on -clients connections with loadgen.Flood (the
// client `seckill bench --calibrate` uses), each buy by a new user with its own JWT and
// purchase token, and returns buys/s (answers with status want) and latencies.
func drive(ctx context.Context, base, saleID string, startsAt time.Time, tag string, want int) (float64, *hdrhistogram.Histogram, error) {
	key := purchasetoken.Key([]byte(benchAuth))
	res, err := loadgen.Flood(ctx, loadgen.FloodConfig{Target: base, SaleID: saleID, Clients: *clients, Duration: *duration, Want: want,
		Buyer: func(i int) (string, string) {
			user := fmt.Sprintf("%s-%d", tag, i)
			tok, _ := httpapi.MintToken([]byte(benchAuth), user, time.Now(), time.Hour)
			return client.BuyPath(saleID, purchasetoken.New(key, saleID, user, startsAt)), tok
		}})
	if err != nil {
		return 0, nil, err
	}
	return res.Rate, res.Latency, nil
}

func ms(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }

func redact(u string) string {
	if at := strings.LastIndex(u, "@"); at >= 0 {
		if i := strings.Index(u, "://"); i >= 0 && i < at {
			if c := strings.Index(u[i+3:at], ":"); c >= 0 {
				return u[:i+3+c] + ":****" + u[at:]
			}
		}
	}
	return u
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func list(v []float64) string { return listf(v, "%.0f") }

func listf(v []float64, f string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(f, x)
	}
	return strings.Join(parts, " / ")
}

func ptr[T any](v T) *T { return &v }

// benchLog is where the server's log goes: $ENGINEBENCH_SERVER_LOG if set, else nowhere.
func benchLog() io.Writer {
	if p := os.Getenv("ENGINEBENCH_SERVER_LOG"); p != "" {
		if f, err := os.Create(p); err == nil {
			return f
		}
	}
	return io.Discard
}

// freshMySQL creates an empty database on the server that url names (mysql://user[:pass]@host:port/db)
// and returns its URL and a function that drops it.
func freshMySQL(url string) (string, func(), error) {
	rest := strings.TrimPrefix(url, "mysql://")
	cred, hostPath, ok := strings.Cut(rest, "@")
	if !ok {
		return "", nil, fmt.Errorf("-db %s: want mysql://user[:pass]@host:port/db", redact(url))
	}
	host, _, _ := strings.Cut(hostPath, "/")
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, _ = strings.Cut(cred, ":")
	cfg.Net, cfg.Addr = "tcp", host
	sqldb, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("enginebench_%d", time.Now().UnixNano())
	if _, err := sqldb.Exec("CREATE DATABASE " + name); err != nil {
		sqldb.Close()
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	return "mysql://" + cred + "@" + host + "/" + name, func() {
		_, _ = sqldb.Exec("DROP DATABASE " + name)
		sqldb.Close()
	}, nil
}
