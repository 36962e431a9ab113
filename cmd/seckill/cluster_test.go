package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"iter"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/purchasetoken"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/loadgen"
	"github.com/seckill-go/seckill/payment"
)

// The tests in this file are the distributed deployment's acceptance runs, as a new user
// would set it up from the README: three `seckill serve --engine redis` processes on their
// own ports, one Redis (a private redis-server, so that FLUSHALL hits nobody else's keys) and
// a fresh MariaDB database. The test plays the crowd and the payment gateway: a gateway
// delivers its signed webhooks to any instance (behind a load balancer), retrying on 503 and
// transport errors, and the test records every payment an instance answered 200 for.

const (
	clusterAdmin   = "acceptance-admin-token-0123456789abcdef"
	clusterAuth    = "acceptance-auth-secret-0123456789abcdef"
	clusterPayment = "acceptance-payment-secret-0123456789abcdef"
	clusterExport  = "acceptance-export-secret-0123456789abcdef"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// seckillBinary builds the command once per test run, with -race when the tests run with it.
func seckillBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seckill-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "seckill")
		args := []string{"build", "-tags", "seckill_testhooks", "-o", builtBin} // testhooks.go
		if raceBuild {
			args = append(args, "-race") // the race detector sees the servers too (raceReport)
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// privateRedis starts a redis-server of the test's own and returns its URL and a client.
func privateRedis(t *testing.T) (string, rueidis.Client) {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var rdb rueidis.Client
	var err error
	for range 100 {
		if rdb, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:" + port}, DisableCache: true}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("connect to the private redis: %v", err)
	}
	t.Cleanup(rdb.Close)
	return "redis://127.0.0.1:" + port + "/0", rdb
}

// mysqlConfig turns mysql://user[:pass]@host:port/db into a driver config.
func mysqlConfig(t *testing.T, raw string) *mysql.Config {
	t.Helper()
	rest := strings.TrimPrefix(strings.TrimPrefix(raw, "mysql://"), "mariadb://")
	cred, hostPath, ok := strings.Cut(rest, "@")
	if !ok {
		t.Fatalf("%s: want mysql://user[:pass]@host:port/db", raw)
	}
	host, db, _ := strings.Cut(hostPath, "/")
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, _ = strings.Cut(cred, ":")
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", host, db
	return cfg
}

// freshMySQL creates an empty database on the test MariaDB and returns its URL.
func freshMySQL(t *testing.T) string {
	t.Helper()
	raw := testenv.MySQL(t)
	cfg := mysqlConfig(t, raw)
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	var b [5]byte
	_, _ = crand.Read(b[:])
	name := "seckill_acc_" + hex.EncodeToString(b[:])
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS " + name)
		_ = db.Close()
	})
	return strings.TrimSuffix(raw, "/"+mysqlConfig(t, raw).DBName) + "/" + name
}

// instance is one `seckill serve` process.
type instance struct {
	cmd   *exec.Cmd
	url   string
	log   *testenv.Buffer
	alive atomic.Bool
}

// cluster is the deployment under test.
type cluster struct {
	t      *testing.T
	bin    string
	env    []string
	db     string // the MariaDB URL
	rdb    rueidis.Client
	insts  []*instance
	client *http.Client
}

// startCluster starts n `seckill serve --engine redis` processes (with extra flags, if any) on
// one private Redis and a fresh MariaDB database, and waits until each is ready.
func startCluster(t *testing.T, n int, extra ...string) *cluster {
	t.Helper()
	testenv.Redis(t) // the acceptance runs belong to the integration tests
	redisURL, rdb := privateRedis(t)
	return launchCluster(t, n, rdb, redisURL, freshMySQL(t), extra...)
}

// oneAddressArgs switch the per-address bounds off: every instance a test starts takes its
// crowd from this one process, one client address (127.0.0.1), which the bounds would hold to a
// quarter of the instance (429 rate_limited). launchCluster passes them before the test's own
// flags, which may switch the bounds back on (perclient_test.go: "0", the defaults).
var oneAddressArgs = []string{"--max-conns-per-addr", "-1", "--max-inflight-per-addr", "-1", "--max-streams-per-addr", "-1"}

// launchCluster starts n `seckill serve --engine redis` processes (with oneAddressArgs, then the
// extra flags) on a Redis of the caller's (rdb, reached by the instances at redisURL: a private
// server, or a proxy in front of one) and the database db, and waits until each is ready.
func launchCluster(t *testing.T, n int, rdb rueidis.Client, redisURL, db string, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, rdb: rdb, bin: seckillBinary(t), client: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 128}}}
	c.db = db
	c.env = append(os.Environ(), "SECKILL_REDIS_URL="+redisURL, "SECKILL_DB="+c.db,
		"SECKILL_ADMIN_TOKEN="+clusterAdmin, "SECKILL_AUTH_SECRET="+clusterAuth,
		"SECKILL_PAYMENT_SECRET="+clusterPayment, "SECKILL_EXPORT_SECRET="+clusterExport, "SECKILL_DEV=")
	for i := range n {
		port := freePort(t)
		in := c.spawn(fmt.Sprintf("instance %d", i), slices.Concat([]string{"serve", "--engine", "redis", "--addr", "127.0.0.1:" + port}, oneAddressArgs, extra)...)
		in.url = "http://127.0.0.1:" + port
		c.insts = append(c.insts, in)
	}
	for i, in := range c.insts {
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, _, _, err := c.do(in, "GET", "/readyz", "", nil, nil)
			if err == nil && st == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %d never became ready (%d, %v):\n%s", i, st, err, in.log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// spawn starts the binary with args in the cluster's environment; it is stopped (SIGTERM, then
// SIGKILL after 20 s) when the test ends, and its log shown if the test failed.
func (c *cluster) spawn(name string, args ...string) *instance {
	t := c.t
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.env
	in := &instance{cmd: cmd, log: &testenv.Buffer{}}
	cmd.Stdout, cmd.Stderr = in.log, in.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	in.alive.Store(true)
	t.Cleanup(func() {
		if in.alive.Load() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
		if r := raceReport(in.log.String()); r != "" {
			t.Errorf("%s: the race detector reported a data race:\n%s", name, r)
		} else if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, tail(in.log.String(), 40))
		}
	})
	return in
}

// raceReport is the first data race a child's log reports (at most 200 lines of it), or "": the
// race detector of a -race binary prints its reports to stderr and goes on, so the test reads
// them there, whether the process ended, was killed, or still runs.
func raceReport(log string) string {
	i := strings.Index(log, "WARNING: DATA RACE")
	if i < 0 {
		return ""
	}
	lines := strings.SplitN(log[i:], "\n", 201)
	return strings.Join(lines[:min(len(lines), 200)], "\n")
}

// TestChildRaceIsReported is the negative control of the race check of spawn: a test binary
// told to race (SECKILL_TEST_DATA_RACE, testhooks.go) must be built with the race detector when
// the tests run with -race, and raceReport must find what the detector prints.
func TestChildRaceIsReported(t *testing.T) {
	if !raceBuild {
		t.Skip("the tests run without -race: so does the binary they build")
	}
	cmd := exec.Command(seckillBinary(t), "version")
	cmd.Env = append(os.Environ(), "SECKILL_TEST_DATA_RACE=1")
	out, err := cmd.CombinedOutput()
	if raceReport(string(out)) == "" {
		t.Fatalf("a racing seckill binary (exit %v) was not reported:\n%s", err, out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 66 {
		t.Errorf("the racing binary exited %v; want the race detector's 66", err)
	}
	cmd = exec.Command(seckillBinary(t), "version")
	if out, err := cmd.CombinedOutput(); err != nil || raceReport(string(out)) != "" {
		t.Errorf("seckill version without the race: exit %v\n%s", err, out)
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	return strings.Join(parts[max(0, len(parts)-lines):], "\n")
}

// kill ends an instance with SIGKILL: no shutdown, no drain.
func (c *cluster) kill(i int) {
	in := c.insts[i]
	in.alive.Store(false)
	_ = in.cmd.Process.Kill()
	_ = in.cmd.Wait()
}

// pick returns instance i if it is alive, else the next live one (a load balancer's health
// check).
func (c *cluster) pick(i int) *instance {
	for k := range len(c.insts) {
		if in := c.insts[(i+k)%len(c.insts)]; in.alive.Load() {
			return in
		}
	}
	c.t.Fatal("no live instance")
	return nil
}

// do sends one request and returns status, problem code and body.
func (c *cluster) do(in *instance, method, path, token string, body any, hdr map[string]string) (int, string, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, in.url+path, rd)
	if err != nil {
		return 0, "", nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", nil, err
	}
	var p struct{ Code string }
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(b, &p)
	}
	return resp.StatusCode, p.Code, b, nil
}

// admin makes an admin call with f on a live instance, retrying a 503 or a transport error on
// the next instance for up to 20 s; any other error fails the test.
func (c *cluster) admin(what string, f func(a *client.Client) error) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		err := f(c.api(c.pick(i), clusterAdmin))
		if err == nil {
			return
		}
		if time.Now().After(deadline) || statusOf(err) != http.StatusServiceUnavailable && statusOf(err) != http.StatusOK {
			c.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// api is a client of instance in, as token, over the cluster's HTTP client.
func (c *cluster) api(in *instance, token string) *client.Client {
	return client.New(in.url, client.WithHTTPClient(c.client), client.WithToken(token))
}

// behavior is what one simulated buyer does with its hold.
type behavior int

const (
	payNow behavior = iota
	cancelHold
	abandonHold
	payLate
	retryThenPay
)

func behaviorOf(user string, seed uint64) behavior {
	h := fnv.New64a()
	_, _ = h.Write([]byte(user + "/" + strconv.FormatUint(seed, 10)))
	switch p := h.Sum64() % 100; {
	case p < 10:
		return cancelHold
	case p < 30:
		return abandonHold
	case p < 40:
		return payLate
	case p < 50:
		return retryThenPay
	}
	return payNow
}

// A queued buyer is recorded as a loadgen.QueuedBuyer: its place in the arrival order, and
// when (by its hold's expiry minus hold_seconds) it was granted a unit, or that it was
// rejected. The arrival order is the reservation's sequence number, which the test reads from
// the id (ids are opaque to clients; this test knows their format, "<sale>-<16 hex seq><16 hex
// random>", so that it can check the order Redis saw across all instances, not an order skewed
// by the network).

// seqOf reads the arrival sequence out of a reservation id.
func seqOf(id string) uint64 {
	if len(id) < 32 {
		return 0
	}
	n, _ := strconv.ParseUint(id[len(id)-32:len(id)-16], 16, 64)
	return n
}

// rush is one acceptance run's crowd and payment gateway.
type rush struct {
	c       *cluster
	sale    string
	hold    time.Duration
	seed    uint64
	buyers  int
	started time.Time

	mu       sync.Mutex
	payments map[string]string // payment id → result, for every delivery answered 200
	queued   []*loadgen.QueuedBuyer
	stats    map[string]int
	problems []string
}

func (r *rush) count(k string) {
	r.mu.Lock()
	r.stats[k]++
	r.mu.Unlock()
}

func (r *rush) problem(format string, args ...any) {
	r.mu.Lock()
	if len(r.problems) < 20 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
	r.mu.Unlock()
}

// retry is how a client handles 503 unavailable (a sale being rebuilt, an instance going
// away): wait the Retry-After and try again, on another instance if the first one is gone.
const retryFor = 30 * time.Second

// request makes a buyer's call with f, following 503 and transport errors like a client
// behind a load balancer; giveUpOnError makes a transport error final (the buyer's instance
// died mid-way). It returns the call's error (nil, or an answer other than 503) and whether
// it was answered at all.
func (r *rush) request(i int, what, token string, giveUpOnError bool, f func(c *client.Client) error) (error, bool) {
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		err := f(r.c.api(r.c.pick(i+attempt), token))
		_, answered := errors.AsType[*client.Error](err)
		transport := err != nil && !answered
		switch {
		case transport && giveUpOnError:
			r.count("gave up: transport error")
			return nil, false
		case !transport && statusOf(err) != http.StatusServiceUnavailable:
			return err, true
		case time.Now().After(deadline):
			r.problem("%s: still failing after %v: %v", what, retryFor, err)
			return nil, false
		}
		if !transport {
			r.count("503 retried")
		}
		time.Sleep(time.Duration(100+rand.IntN(100)) * time.Millisecond)
	}
}

// deliver is the gateway: a succeeded payment's signed webhook to any live instance, retried
// until one answers 200 (or 30 s pass).
func (r *rush) deliver(i int, pid, rid string, amount int64) {
	ev := payment.Event{PaymentID: pid, ReservationID: rid, AmountCents: amount, Status: payment.StatusSucceeded}
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		result, err := r.c.api(r.c.pick(i+attempt+1), "").Webhook(context.Background(), []byte(clusterPayment), ev)
		if err == nil {
			r.mu.Lock()
			if prev, ok := r.payments[pid]; !ok || prev == "duplicate" {
				r.payments[pid] = string(result)
			}
			r.mu.Unlock()
			r.count("webhook " + string(result))
			return
		}
		if st := statusOf(err); st != http.StatusOK && st != http.StatusServiceUnavailable {
			r.problem("webhook %s: %v", pid, err)
			return
		}
		if time.Now().After(deadline) {
			r.problem("webhook %s never answered 200: %v", pid, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// buyer is one user's whole journey.
func (r *rush) buyer(i int) {
	user := fmt.Sprintf("buyer-%d", i)
	token, _ := httpapi.MintToken([]byte(clusterAuth), user, time.Now(), time.Hour)
	b := behaviorOf(user, r.seed)
	ctx := context.Background()
	var path client.PurchasePath
	for {
		err, ok := r.request(i, "path", token, false, func(c *client.Client) (err error) {
			path, err = c.Path(ctx, r.sale)
			return err
		})
		if !ok {
			return
		}
		if err == nil {
			break
		}
		if client.CodeOf(err) != seckill.CodeNotStarted {
			r.problem("%s: /path %v", user, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	key := "k-" + user
	for attempt := 0; ; attempt++ {
		var got client.Bought
		err, ok := r.request(i, "buy", token, true, func(c *client.Client) (err error) {
			got, err = c.Buy(ctx, path.Path, 1, key)
			return err
		})
		if !ok {
			return
		}
		res := got.Reservation
		code := client.CodeOf(err)
		switch {
		case err == nil && (got.Replayed || res.Status != seckill.StatusQueued):
		case err == nil:
			r.count("queued")
			q := &loadgen.QueuedBuyer{Seq: seqOf(res.ID)}
			r.mu.Lock()
			r.queued = append(r.queued, q)
			r.mu.Unlock()
			if !r.waitGrant(i, token, &res, q) {
				if res.Status == "lost" { // the reservation vanished with Redis' data: start over
					key = fmt.Sprintf("k-%s-%d", user, attempt+1)
					continue
				}
				return
			}
		case code == seckill.CodeQueueFull:
			time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
			continue
		case code == seckill.CodeSoldOut || code == seckill.CodeEnded:
			r.count(string(code))
			return
		default:
			r.problem("%s: buy %v", user, err)
			return
		}
		if res.Status != "held" {
			return
		}
		r.count("held")
		r.act(i, user, token, path.Path, key, b, res)
		return
	}
}

// waitGrant polls a queued reservation until it is held (true), rejected or lost.
func (r *rush) waitGrant(i int, token string, res *seckill.Reservation, q *loadgen.QueuedBuyer) bool {
	for {
		time.Sleep(50 * time.Millisecond)
		var cur seckill.Reservation
		err, ok := r.request(i, "poll", token, true, func(c *client.Client) (err error) {
			cur, err = c.Reservation(context.Background(), res.ID)
			return err
		})
		if !ok {
			return false
		}
		if statusOf(err) == http.StatusNotFound {
			res.Status = "lost"
			r.count("lost after a flush")
			return false
		}
		switch cur.Status {
		case "queued":
			continue
		case "held":
			q.Granted = cur.ExpiresAt.Add(-r.hold)
			*res = cur
			r.count("handed off")
			return true
		case "rejected":
			q.Rejected = true
			r.count("rejected")
		}
		return false
	}
}

// act does what the buyer does with its hold.
func (r *rush) act(i int, user, token, path, key string, b behavior, res seckill.Reservation) {
	pid := "pay-" + user + "-" + res.ID[len(res.ID)-8:]
	switch b {
	case cancelHold:
		if _, ok := r.request(i, "cancel", token, true, func(c *client.Client) error {
			_, err := c.Cancel(context.Background(), res.ID)
			return err
		}); !ok {
			r.count("gave up holding") // its instance died: the hold expires and passes on
			return
		}
		r.count("cancelled")
	case abandonHold:
		r.count("abandoned")
	case payLate:
		time.Sleep(time.Until(*res.ExpiresAt) + 300*time.Millisecond)
		r.deliver(i, pid, res.ID, res.AmountCents)
	case retryThenPay:
		var again client.Bought
		err, ok := r.request(i, "replay", token, true, func(c *client.Client) (err error) {
			again, err = c.Buy(context.Background(), path, 1, key)
			return err
		})
		if ok && err == nil && again.Replayed && again.ID != res.ID {
			r.problem("%s: replay returned %s, want %s", user, again.ID, res.ID)
		}
		r.deliver(i, pid, res.ID, res.AmountCents)
	default:
		time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond) // the buyer at the gateway
		r.deliver(i, pid, res.ID, res.AmountCents)
	}
}

// arrivalGap spaces the crowd's arrivals (3 000 buyers over about 6 s): a few hundred are
// waiting when the sale opens, and more keep coming while it sells, so that a failure in the
// middle of the rush meets buyers who still want the units.
const arrivalGap = 2 * time.Millisecond

// runRush creates a 100-unit sale (hold 2 s, limit 1) that starts in a second, and lets buyers
// rush it spread over every instance; during runs while it goes on.
func runRush(t *testing.T, c *cluster, buyers int, during func(r *rush)) *rush {
	r := &rush{c: c, sale: "acc", hold: 2 * time.Second, seed: 7, buyers: buyers,
		payments: map[string]string{}, stats: map[string]int{}}
	start := time.Now().UTC().Add(time.Second)
	c.admin("create the sale", func(a *client.Client) error {
		_, err := a.CreateSale(context.Background(), client.NewSale{ID: r.sale, Name: "Acceptance", PriceCents: 500,
			Stock: 100, StartsAt: start, EndsAt: start.Add(time.Hour), HoldSeconds: 2})
		return err
	})
	r.started = start
	var wg sync.WaitGroup
	sem := make(chan struct{}, 512)
	if during != nil {
		wg.Go(func() { during(r) })
	}
	first := time.Now()
	for i := range buyers {
		time.Sleep(time.Until(first.Add(time.Duration(i) * arrivalGap)))
		sem <- struct{}{}
		wg.Go(func() { defer func() { <-sem }(); r.buyer(i) })
	}
	wg.Wait()
	return r
}

// settle waits until every live instance's audit is ok, nothing is held or queued and the
// stream has nothing pending, and returns the last audit.
func (r *rush) settle(t *testing.T) client.Audit {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		sale := r.sale0()
		pending := r.pending(t)
		allOK := true
		var last client.Audit
		for i, in := range r.c.insts {
			if !in.alive.Load() {
				continue
			}
			a, err := r.c.api(in, clusterAdmin).Audit(context.Background(), r.sale)
			if err != nil {
				allOK = false
				continue
			}
			if !a.OK {
				allOK = false
			}
			if i == 0 || last.Engine.Sellable == 0 {
				last = a
			}
		}
		if allOK && pending == 0 && sale.StockState.Held == 0 && sale.StockState.Queued == 0 {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("did not settle: state %+v, pending %d, audit %+v", sale.StockState, pending, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pending is the number of stream entries read but not acknowledged, plus those not read.
func (r *rush) pending(t *testing.T) int64 {
	key := "seckill:{sale:" + r.sale + "}:events"
	ctx := context.Background()
	v, err := r.c.rdb.Do(ctx, r.c.rdb.B().XinfoGroups().Key(key).Build()).ToArray()
	if err != nil {
		return 1 // no stream yet
	}
	if len(v) == 0 { // no consumer ever read it: everything in it waits
		n, _ := r.c.rdb.Do(ctx, r.c.rdb.B().Xlen().Key(key).Build()).AsInt64()
		return n
	}
	var n int64
	for _, g := range v {
		m, _ := g.AsMap()
		p, lag := m["pending"], m["lag"]
		pn, _ := p.AsInt64()
		ln, _ := lag.AsInt64()
		n += pn + ln
	}
	return n
}

// checkPayments: every payment an instance answered 200 for is in the database exactly once,
// as a paid order or a refund owed (invariant 4).
func (r *rush) checkPayments(t *testing.T, a client.Audit) {
	t.Helper()
	if got := a.Database.PaidOrders + a.Database.Refunds; got != len(r.payments) {
		t.Errorf("the gateway got 200 for %d payments; the database records %d paid + %d refunds",
			len(r.payments), a.Database.PaidOrders, a.Database.Refunds)
	}
	if a.Database.Sold > 100 || a.Database.PaidUnits != a.Database.Sold {
		t.Errorf("database oversold or inconsistent: %+v", a.Database)
	}
}

// checkFIFO: freed units go to queued buyers in arrival order (invariant 6).
func (r *rush) checkFIFO(t *testing.T) {
	t.Helper()
	queued := make([]loadgen.QueuedBuyer, len(r.queued))
	for i, q := range r.queued {
		queued[i] = *q
	}
	seen, pairs, bad := loadgen.FIFOViolations(queued)
	for _, b := range bad[:min(len(bad), 5)] {
		t.Errorf("FIFO: %s", b)
	}
	t.Logf("FIFO: %d queued buyers seen to the end, %d ordered pairs checked, %d out of order", seen, pairs, len(bad))
	if pairs == 0 {
		t.Errorf("FIFO: no pair of queued buyers to check: the run did not test the queue")
	}
}

// midRush waits until n payments have been applied, and returns the sale's state then: the
// moment for a failure, with units sold and units still to sell.
func (r *rush) midRush(n int) seckill.StockState {
	for {
		r.mu.Lock()
		applied := r.stats["webhook applied"]
		r.mu.Unlock()
		if applied >= n {
			return r.sale0().StockState
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sale0 reads the rush's sale, as the admin, from a live instance.
func (r *rush) sale0() client.Sale {
	var sale client.Sale
	r.c.admin("read the sale", func(a *client.Client) (err error) {
		sale, err = a.Sale(context.Background(), r.sale)
		return err
	})
	return sale
}

func (r *rush) report(t *testing.T) {
	t.Logf("crowd of %d: %v", r.buyers, r.stats)
	for _, p := range r.problems {
		t.Error(p)
	}
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three server processes")
	}
}

// TestClusterRush: 3 000 users rush a 100-unit sale across three instances with pays,
// cancels, abandons and late payments: exactly 100 units are paid in MariaDB, nobody over the
// limit (the audit checks it from the database), every instance's audit is ok once the stream
// has drained, and queued buyers are served in arrival order across instances.
func TestClusterRush(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	r := runRush(t, c, 3000, nil)
	r.report(t)
	a := r.settle(t)
	if a.Database.Sold != 100 || a.Engine.Sold != 100 {
		t.Fatalf("sold: engine %d, database %d; want exactly 100 (%+v)", a.Engine.Sold, a.Database.Sold, a)
	}
	r.checkPayments(t, a)
	r.checkFIFO(t)
	if r.stats["handed off"] == 0 || r.stats["webhook refund_required"] == 0 {
		t.Errorf("the rush did not exercise hand-offs and late payments: %v", r.stats)
	}
}

// TestClusterRushRedisFlushed: the same rush with Redis flushed while buyers are active. The
// database records no oversell, every payment answered 200 is paid or refund_required, and
// the sale is rebuilt from the database and sells the rest.
func TestClusterRushRedisFlushed(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	var before seckill.StockState
	r := runRush(t, c, 3000, func(r *rush) {
		before = r.midRush(30)
		if err := c.rdb.Do(context.Background(), c.rdb.B().Flushall().Build()).Error(); err != nil {
			t.Errorf("FLUSHALL: %v", err)
		}
		r.count("FLUSHALL")
	})
	t.Logf("flushed with %+v", before)
	if before.Sold >= 100 || before.Available+before.Held == 0 {
		t.Fatalf("the flush came too late to test anything: %+v", before)
	}
	r.report(t)
	a := r.settle(t)
	r.checkPayments(t, a)
	if a.Database.Sold != 100 {
		t.Fatalf("database sold %d after the rebuild; want the rest sold, 100 (%+v)", a.Database.Sold, a)
	}
	// A buy that finds the sale missing waits for its rebuild (up to 1 s) instead of answering
	// 503 (docs/RELIABILITY.md), so 503s are not required; the rebuild's log line below is
	// what proves the flush was met.
	t.Logf("503s retried during the rebuild: %d", r.stats["503 retried"])
	rebuilt := 0
	for _, in := range c.insts {
		rebuilt += strings.Count(in.log.String(), "has been rebuilt from the database")
	}
	if rebuilt != 1 {
		t.Errorf("the sale was rebuilt %d times; want once, by one instance", rebuilt)
	}
}

// TestClusterRushInstanceKilled: the same rush with one instance killed with SIGKILL
// mid-rush. Its buyers' holds expire and pass on, no paid order is lost, and the other
// instances keep serving until everything is sold.
func TestClusterRushInstanceKilled(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	var before seckill.StockState
	r := runRush(t, c, 3000, func(r *rush) {
		before = r.midRush(30)
		c.kill(2)
		r.count("SIGKILL")
	})
	t.Logf("killed instance 2 with %+v", before)
	if before.Sold >= 100 || before.Held == 0 {
		t.Fatalf("the kill came too late to test anything: %+v", before)
	}
	r.report(t)
	a := r.settle(t)
	if a.Database.Sold != 100 || a.Engine.Sold != 100 {
		t.Fatalf("sold: engine %d, database %d; want exactly 100 (%+v)", a.Engine.Sold, a.Database.Sold, a)
	}
	r.checkPayments(t, a)
	r.checkFIFO(t)
}

// TestWorkerStoresTheStreams: with --consume=false on the API instance, reservation events
// wait in Redis until a `seckill worker` process stores them in the database.
func TestWorkerStoresTheStreams(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 1, "--consume=false")
	r := &rush{c: c, sale: "wk", hold: 60 * time.Second, payments: map[string]string{}, stats: map[string]int{}}
	ctx := context.Background()
	c.admin("create the sale", func(a *client.Client) error {
		_, err := a.CreateSale(ctx, client.NewSale{ID: r.sale, PriceCents: 1, Stock: 5, HoldSeconds: 60})
		return err
	})
	token, _ := httpapi.MintToken([]byte(clusterAuth), "alice", time.Now(), time.Hour)
	alice := c.api(c.insts[0], token)
	path, err := alice.Path(ctx, "wk")
	if err != nil {
		t.Fatalf("/path: %v", err)
	}
	res, err := alice.Buy(ctx, path.Path, 1, "")
	if err != nil || res.Status != seckill.StatusHeld {
		t.Fatalf("buy: %+v %v", res, err)
	}
	db, err := sql.Open("mysql", mysqlConfig(t, c.db).FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := func() string {
		var status string
		_ = db.QueryRow("SELECT status FROM reservations WHERE id = ?", res.ID).Scan(&status)
		return status
	}
	time.Sleep(1500 * time.Millisecond) // the instance would have stored it by now
	if got := stored(); got != "" {
		t.Fatalf("with --consume=false the reservation reached the database anyway (%q)", got)
	}
	if r.pending(t) == 0 {
		t.Fatal("the event is not waiting in the stream")
	}
	c.spawn("worker", "worker", "--engine", "redis")
	deadline := time.Now().Add(15 * time.Second)
	for stored() != "held" || r.pending(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not store the event: row %q, pending %d", stored(), r.pending(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBenchAgainstThreeInstances: `seckill bench` against three Redis-engine instances (paying
// through signed webhooks, spread over all three) sells exactly the stock and reports the
// invariants ok, audited on every instance.
func TestBenchAgainstThreeInstances(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	var urls []string
	for _, in := range c.insts {
		urls = append(urls, in.url)
	}
	env := map[string]string{"SECKILL_ADMIN_TOKEN": clusterAdmin, "SECKILL_AUTH_SECRET": clusterAuth, "SECKILL_PAYMENT_SECRET": clusterPayment}
	var out bytes.Buffer
	err := bench(context.Background(), []string{"--target", strings.Join(urls, ","), "--units", "100", "--buyers", "3000"},
		func(k string) string { return env[k] }, &out, &out)
	if err != nil || !strings.Contains(out.String(), "100 / 100 of 100") || !strings.Contains(out.String(), "invariants  ok") {
		t.Fatalf("bench against three instances: %v\n%s", err, out.String())
	}
	t.Log(out.String())
}

// TestEventsAcrossInstances: on the Redis engine, a buyer's stream on one instance follows
// buys, a payment and a grant made through the others, and every instance's stream ends at
// the same stock.
func TestEventsAcrossInstances(t *testing.T) {
	skipShort(t)
	c := startCluster(t, 3)
	start := time.Now().Add(-time.Second)
	c.admin("create the sale", func(a *client.Client) error {
		_, err := a.CreateSale(context.Background(), client.NewSale{ID: "live", PriceCents: 100, Stock: 2, HoldSeconds: 60,
			QueueLimit: client.Ptr(10), StartsAt: start, EndsAt: start.Add(time.Hour)})
		return err
	})
	key := purchasetoken.Key([]byte(clusterAuth))
	buy := func(in *instance, user string, want seckill.ReservationStatus) seckill.Reservation {
		tok, _ := httpapi.MintToken([]byte(clusterAuth), user, time.Now(), time.Hour)
		var sale client.Sale
		c.admin("read the sale", func(a *client.Client) (err error) {
			sale, err = a.Sale(context.Background(), "live")
			return err
		})
		r, err := c.api(in, tok).Buy(context.Background(), client.BuyPath("live", purchasetoken.New(key, "live", user, sale.StartsAt)), 1, "")
		if err != nil || r.Replayed || r.Status != want {
			t.Fatalf("buy by %s: %+v %v, want %s", user, r, err, want)
		}
		return r.Reservation
	}
	type stream struct {
		sales chan client.Sale
		res   chan seckill.Reservation
	}
	// open follows the sale's events on in (and, with a token, the reservations named).
	open := func(in *instance, token string, reservations ...string) stream {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		s := stream{sales: make(chan client.Sale, 256), res: make(chan seckill.Reservation, 256)}
		events := client.New(in.url, client.WithToken(token)).Events(ctx, "live", reservations...)
		next, stop := iter.Pull2(events)
		first, err, _ := next() // the sale, on connect: the stream is open
		if err != nil {
			stop()
			t.Fatalf("events on %s: %v", in.url, err)
		}
		go func() {
			defer stop()
			for ev, err, ok := first, error(nil), true; ok && err == nil; ev, err, ok = next() {
				switch ev.Type {
				case client.EventSale:
					s.sales <- *ev.Sale
				case client.EventReservation:
					s.res <- *ev.Reservation
				}
			}
		}()
		return s
	}
	waitFor := func(what string, ch <-chan client.Sale, ok func(seckill.StockState) bool) {
		deadline := time.After(15 * time.Second)
		for {
			select {
			case v := <-ch:
				if ok(v.StockState) {
					return
				}
			case <-deadline:
				t.Fatalf("no sale event with %s within 15 s", what)
			}
		}
	}
	watchers := []stream{open(c.insts[0], ""), open(c.insts[1], ""), open(c.insts[2], "")}

	alice := buy(c.insts[1], "alice", seckill.StatusHeld)
	buy(c.insts[2], "bob", seckill.StatusHeld)
	carol := buy(c.insts[0], "carol", seckill.StatusQueued)
	carolTok, _ := httpapi.MintToken([]byte(clusterAuth), "carol", time.Now(), time.Hour)
	cs := open(c.insts[2], carolTok, carol.ID)
	if r := <-cs.res; r.Status != seckill.StatusQueued || r.Position != 1 {
		t.Fatalf("carol's first event on instance 2: %+v", r)
	}
	// Alice cancels through instance 0: carol, on instance 2, is granted the unit.
	aliceTok, _ := httpapi.MintToken([]byte(clusterAuth), "alice", time.Now(), time.Hour)
	if _, err := c.api(c.insts[0], aliceTok).Cancel(context.Background(), alice.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	deadline := time.After(15 * time.Second)
	for granted := false; !granted; {
		select {
		case r := <-cs.res:
			granted = r.Status == seckill.StatusHeld && r.ExpiresAt != nil
		case <-deadline:
			t.Fatal("carol's stream on instance 2 never showed her grant")
		}
	}
	for i, w := range watchers {
		waitFor(fmt.Sprintf("held 2 queued 0 on instance %d", i), w.sales, func(st seckill.StockState) bool {
			return st.Held == 2 && st.Queued == 0 && st.Available == 0
		})
	}
}
