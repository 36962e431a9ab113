package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/internal/testkit/toxic"
	"github.com/seckill-go/seckill/loadgen"
	"github.com/seckill-go/seckill/redisinv"
)

// The fault suite (docs/RELIABILITY.md "Fault suite"): each scenario is a rush of `seckill
// bench` (3 000 buyers, 100 units, run in-process) against three `seckill serve --engine redis`
// processes on a private redis-server and a fresh MariaDB database, with a fault injected
// once 30 units are sold. A probe buyer buys a unit of a second, large sale every 100 ms
// throughout, and keeps every hold it was answered: it measures the time until buys succeed
// again after the fault, and which answered holds were lost. The suite asserts only what must
// hold whatever fails (nothing oversold, no payment answered 200 missing from the database,
// every instance's audit ok); the other figures are logged as one "fault row" per scenario,
// copied by hand into docs/RELIABILITY.md.

// faultRedis is a private redis-server that a scenario may kill, restart on its data
// directory, or pause: its own process on its own port, persisting to an AOF in a temporary
// directory.
type faultRedis struct {
	t    *testing.T
	port string
	dir  string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	rdb  rueidis.Client
}

// startFaultRedis starts redis-server with the AOF on and the given appendfsync policy
// ("always", "everysec").
func startFaultRedis(t *testing.T, appendfsync string) *faultRedis {
	t.Helper()
	r := &faultRedis{t: t, port: freePort(t), dir: t.TempDir()}
	r.args = []string{"--port", r.port, "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "yes", "--appendfsync", appendfsync, "--dir", r.dir}
	r.start()
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.cmd != nil {
			_ = r.cmd.Process.Signal(syscall.SIGCONT) // a paused server would not die of SIGKILL's wait
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	})
	var err error
	for range 100 {
		if r.rdb, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.addr()}, DisableCache: true}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("connect to the private redis: %v", err)
	}
	t.Cleanup(r.rdb.Close)
	return r
}

func (r *faultRedis) addr() string { return "127.0.0.1:" + r.port }
func (r *faultRedis) url() string  { return "redis://" + r.addr() + "/0" }

// start starts the server (again) on the same port and data directory.
func (r *faultRedis) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd := exec.Command("redis-server", r.args...)
	if err := cmd.Start(); err != nil {
		r.t.Errorf("redis-server: %v", err)
		return
	}
	r.cmd = cmd
}

// kill ends the server with SIGKILL: nothing is flushed beyond what its appendfsync wrote.
func (r *faultRedis) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

func (r *faultRedis) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(sig)
	}
}

// waitUp waits until the server answers PING (after loading its AOF) or within has passed.
func (r *faultRedis) waitUp(within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := r.rdb.Do(ctx, r.rdb.B().Ping().Build()).Error()
		cancel()
		if err == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// probeBuy is one of the probe's buys.
type probeBuy struct {
	user     string
	sent, at time.Time // sent, and answered (or failed)
	status   int
	id       string // the reservation answered 201 (held)
}

// probe is a buyer that buys one unit of its own sale every 100 ms, each time as a new user,
// without waiting for the previous buy's answer.
type probe struct {
	c    *cluster
	sale string
	mu   sync.Mutex
	buys []*probeBuy
	stop chan struct{}
	done sync.WaitGroup
}

const probeSale = "probe"

func startProbe(t *testing.T, c *cluster) *probe {
	start := time.Now().UTC().Add(-time.Second)
	c.admin("create the probe's sale", func(a *client.Client) error {
		_, err := a.CreateSale(context.Background(), client.NewSale{ID: probeSale, Name: "Probe", PriceCents: 1,
			Stock: 100000, StartsAt: start, EndsAt: start.Add(time.Hour), HoldSeconds: 2, Listed: client.Ptr(false)})
		return err
	})
	p := &probe{c: c, sale: probeSale, stop: make(chan struct{})}
	p.done.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			b := &probeBuy{user: fmt.Sprintf("probe-%d", n), sent: time.Now()}
			p.mu.Lock()
			p.buys = append(p.buys, b)
			p.mu.Unlock()
			p.done.Go(func() { p.buy(n, b) })
		}
	})
	return p
}

// buy fetches the purchase path and buys, on instance n mod 3 (the next live one).
func (p *probe) buy(n int, b *probeBuy) {
	defer func() {
		p.mu.Lock()
		b.at = time.Now()
		p.mu.Unlock()
	}()
	tok, _ := httpapi.MintToken([]byte(clusterAuth), b.user, time.Now(), time.Hour)
	buyer := p.c.api(p.c.pick(n), tok)
	path, err := buyer.Path(context.Background(), p.sale)
	if err != nil {
		p.mu.Lock()
		b.status = answered(err)
		p.mu.Unlock()
		return
	}
	res, err := buyer.Buy(context.Background(), path.Path, 1, "")
	st := answered(err)
	switch {
	case err != nil || res.Replayed:
	case res.Status == seckill.StatusQueued:
		st = http.StatusAccepted
	default:
		st = http.StatusCreated
	}
	p.mu.Lock()
	b.status = st
	if st == http.StatusCreated {
		b.id = res.ID
	}
	p.mu.Unlock()
}

// answered is the HTTP status of a call's answer: 200 for a success, 0 for none (a transport
// error).
func answered(err error) int {
	if _, ok := errors.AsType[*client.Error](err); err != nil && !ok {
		return 0
	}
	return statusOf(err)
}

func (p *probe) finish() {
	close(p.stop)
	p.done.Wait()
}

// recovery is the time from the fault's start until the first probe buy sent after it was
// answered 201; zero and false if none was.
func (p *probe) recovery(fault time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first time.Time
	for _, b := range p.buys {
		if b.status == 201 && !b.sent.Before(fault) && (first.IsZero() || b.at.Before(first)) {
			first = b.at
		}
	}
	return first.Sub(fault), !first.IsZero()
}

// lost returns the probe's answered holds and those lost: a hold answered 201 is lost if,
// once the sale has settled, the database has no row for it or its owner's GET answers 404.
func (p *probe) lost(t *testing.T) (held int, lost []string) {
	t.Helper()
	// Settle: the probe's holds expire after 2 s and the stream drains.
	r := &rush{c: p.c, sale: p.sale}
	deadline := time.Now().Add(30 * time.Second)
	for {
		sale, err := p.c.api(p.c.pick(0), clusterAdmin).Sale(context.Background(), p.sale)
		if err == nil && sale.StockState.Held == 0 && r.pending(t) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Logf("probe sale did not settle in 30 s (%+v %v); counting anyway", sale.StockState, err)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	db, err := sql.Open("mysql", mysqlConfig(t, p.c.db).FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := map[string]bool{}
	rows, err := db.Query("SELECT id FROM reservations WHERE sale_id = ?", p.sale)
	if err != nil {
		t.Fatalf("probe: read reservations: %v", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err == nil {
			stored[id] = true
		}
	}
	_ = rows.Close()
	p.mu.Lock()
	buys := append([]*probeBuy(nil), p.buys...)
	p.mu.Unlock()
	for i, b := range buys {
		if b.status != 201 || b.id == "" {
			continue
		}
		held++
		tok, _ := httpapi.MintToken([]byte(clusterAuth), b.user, time.Now(), time.Hour)
		_, err := p.c.api(p.c.pick(i), tok).Reservation(context.Background(), b.id)
		st := answered(err)
		switch {
		case !stored[b.id]:
			lost = append(lost, fmt.Sprintf("%s (answered %s): no row in the database", b.id, b.at.Format(time.StampMilli)))
		case st == http.StatusNotFound:
			lost = append(lost, fmt.Sprintf("%s (answered %s): the engine answers 404", b.id, b.at.Format(time.StampMilli)))
		}
	}
	return held, lost
}

// benchJSON is the part of `seckill bench --json` the suite reads.
type benchJSON struct {
	Sale struct {
		Sellable   int `json:"sellable"`
		EngineSold int `json:"engine_sold"`
	} `json:"sale"`
	Database struct {
		Sold       int `json:"sold"`
		PaidUnits  int `json:"paid_units"`
		Refunds    int `json:"refunds"`
		PaidOrders int `json:"paid_orders"`
	} `json:"database"`
	Counts    map[string]int64 `json:"counts"`
	Latency   map[string]map[string]int64
	Instances []struct {
		Target  string `json:"target"`
		AuditOK bool   `json:"audit_ok"`
		Error   string `json:"error"`
	} `json:"instances"`
	Verdict struct {
		OK         bool     `json:"ok"`
		Violations []string `json:"violations"`
		Unverified []string `json:"unverified"`
		Failed     []string `json:"failed"`
	} `json:"verdict"`
	Payments map[string]string `json:"payments"` // answered 200, by payment id
}

// faultRow is one scenario's figures (docs/RELIABILITY.md "Fault suite" defines each).
type faultRow struct {
	scenario                   string
	buys, held, retried503     int64
	probeHeld, probeLost       int
	payments200, paid, refunds int
	oversold, paidLost         int
	recovery                   time.Duration
	recovered                  bool
	auditOK                    bool // every live instance's audit ok
	live, audited              int  // instances alive at the end; audits ok
	faultLasted                time.Duration
	rebuilds                   int      // sales rebuilt from the database (the instances' logs)
	failedChecks               []string // the ids of the bench's checks that failed
}

func (f faultRow) String() string {
	rec := "never"
	if f.recovered {
		rec = f.recovery.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprintf("fault row | %s | buys answered %d | holds %d | 503 retried %d | probe holds %d | probe holds lost %d | payments 200 %d | paid %d | refunds %d | oversold %d | paid orders lost %d | fault lasted %s | buys succeed again after %s | sales rebuilt %d | audits ok %v (%d of %d live) |",
		f.scenario, f.buys, f.held, f.retried503, f.probeHeld, f.probeLost, f.payments200, f.paid, f.refunds,
		f.oversold, f.paidLost, f.faultLasted.Round(10*time.Millisecond), rec, f.rebuilds, f.auditOK, f.audited, f.live)
}

// runFaultScenario runs one scenario: the cluster on rs, the probe, a bench rush, and inject
// called once 30 units of the rush's sale are sold; inject returns when the fault is over
// (the server back, or resumed). It asserts nothing oversold, no paid order lost and every
// audit ok, logs the row and returns it.
func runFaultScenario(t *testing.T, name string, rs *faultRedis, inject func()) faultRow {
	t.Helper()
	return runFaultScenarioVia(t, name, rs, rs.url(), inject)
}

// runFaultScenarioVia is runFaultScenario with the instances reaching Redis at redisURL (a
// proxy in front of rs).
func runFaultScenarioVia(t *testing.T, name string, rs *faultRedis, redisURL string, inject func()) faultRow {
	t.Helper()
	return runFault(t, faultScenario{name: name, rs: rs, redisURL: redisURL, inject: func(*cluster) { inject() }})
}

// faultScenario is one row of the suite: what is deployed, and what breaks.
type faultScenario struct {
	name     string
	rs       *faultRedis
	redisURL string           // where the instances reach Redis: rs.url() if empty, or a proxy in front of rs
	db       string           // the instances' database: a fresh database on the test MariaDB if empty
	serve    []string         // more `seckill serve` flags
	setup    func(c *cluster) // once the instances are ready, before the rush (starts a worker)
	inject   func(c *cluster) // the fault, called once 30 units are sold; returns when it is over
}

// runFault runs one scenario: the cluster, the probe, a bench rush, and the fault injected
// once 30 units of the rush's sale are sold. It asserts nothing oversold, no paid order lost
// and every live instance's audit ok, logs the row and returns it.
func runFault(t *testing.T, sc faultScenario) faultRow {
	t.Helper()
	redisURL, db := sc.redisURL, sc.db
	if redisURL == "" {
		redisURL = sc.rs.url()
	}
	if db == "" {
		db = freshMySQL(t)
	}
	c := launchCluster(t, 3, sc.rs.rdb, redisURL, db, sc.serve...)
	if sc.setup != nil {
		sc.setup(c)
	}
	return runFaultOn(t, c, sc.name, sc.inject)
}

// runFaultOn is runFault on a cluster already started.
func runFaultOn(t *testing.T, c *cluster, name string, inject func(c *cluster)) faultRow {
	t.Helper()
	p := startProbe(t, c)
	var urls []string
	for _, in := range c.insts {
		urls = append(urls, in.url)
	}
	sale := "fault"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var faultAt, faultEnd time.Time
	var before string
	injected := make(chan struct{})
	// The moment comes from the database's sold units, not from GET /api/v1/sales/{id}: a read
	// that races the bench's creation of the sale finds it in the database but not yet in
	// Redis, starts a rebuild, and the creation is answered 503 (the bench does not retry it).
	db, err := sql.Open("mysql", mysqlConfig(t, c.db).FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	go func() {
		defer close(injected)
		for ctx.Err() == nil {
			var sold int
			if err := db.QueryRowContext(ctx, "SELECT sold FROM sales WHERE id = ?", sale).Scan(&sold); err == nil && sold >= 30 {
				if s, err := c.api(c.pick(0), clusterAdmin).Sale(context.Background(), sale); err == nil {
					before = fmt.Sprintf("%+v", s.StockState)
				}
				faultAt = time.Now()
				inject(c)
				faultEnd = time.Now()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	env := map[string]string{"SECKILL_ADMIN_TOKEN": clusterAdmin, "SECKILL_AUTH_SECRET": clusterAuth, "SECKILL_PAYMENT_SECRET": clusterPayment}
	var out strings.Builder
	benchErr := bench(ctx, []string{"--target", strings.Join(urls, ","), "--sale", sale, "--units", "100", "--buyers", "3000",
		"--json", "--deadline", "60s", "--audit-wait", "30s"}, func(k string) string { return env[k] }, &out, io.Discard)
	<-injected
	// The probe goes on until buys succeed again (or 20 s after the fault).
	for deadline := time.Now().Add(20 * time.Second); !faultAt.IsZero() && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, ok := p.recovery(faultAt); ok {
			break
		}
	}
	p.finish()
	if faultAt.IsZero() {
		t.Fatalf("the fault was never injected (the rush's sale never sold 30 units): bench %v\n%s", benchErr, out.String())
	}
	t.Logf("%s: fault injected with the rush's sale at %s; bench: %v", name, before, benchErr)

	var bj benchJSON
	if err := json.Unmarshal([]byte(out.String()), &bj); err != nil {
		t.Fatalf("bench output is not its JSON report (%v): %v\n%s", benchErr, err, out.String())
	}
	row := faultRow{scenario: name, buys: bj.Latency["buy"]["count"], held: bj.Counts["held"], retried503: bj.Counts["retried_503"],
		paid: bj.Database.PaidOrders, refunds: bj.Database.Refunds, faultLasted: faultEnd.Sub(faultAt)}
	row.payments200 = len(bj.Payments)
	// Every instance alive at the end must give an ok audit; one the scenario killed gives none.
	for _, in := range c.insts {
		if in.alive.Load() {
			row.live++
		}
	}
	for _, in := range bj.Instances {
		if in.AuditOK {
			row.audited++
		}
	}
	row.auditOK = row.live > 0 && row.audited == row.live && len(bj.Instances) == len(c.insts)
	row.oversold = max(0, bj.Database.Sold-bj.Sale.Sellable, bj.Sale.EngineSold-bj.Sale.Sellable)
	row.paidLost = len(unrecordedPayments(bj.Payments, recordedPayments(t, db, sale)))
	row.failedChecks = bj.Verdict.Failed
	row.recovery, row.recovered = p.recovery(faultAt)
	for _, in := range c.insts {
		row.rebuilds += strings.Count(in.log.String(), "has been rebuilt from the database")
	}
	var lost []string
	row.probeHeld, lost = p.lost(t)
	row.probeLost = len(lost)
	for _, l := range lost[:min(len(lost), 10)] {
		t.Logf("probe hold lost: %s", l)
	}
	for _, v := range append(bj.Verdict.Violations, bj.Verdict.Unverified...) {
		t.Logf("bench verdict: %s", v)
	}
	t.Logf("bench counts: %v", bj.Counts)
	t.Log(row.String())
	p.checkLostDetector(t)

	if bj.Database.PaidUnits != bj.Database.Sold {
		t.Errorf("database inconsistent: paid units %d, sold %d", bj.Database.PaidUnits, bj.Database.Sold)
	}
	for _, f := range row.failures() {
		t.Error(f)
	}
	if !row.auditOK {
		t.Logf("instances' audits: %+v", bj.Instances)
	}
	return row
}

// failures are what fails a row whatever the fault: anything oversold, a paid order lost, a
// live instance's audit not ok, and the bench's checks that no fault excuses (FIFO, false
// sell-outs, the per-user limit). TestFaultRowFailures breaks a row on purpose for each.
func (f faultRow) failures() []string {
	var out []string
	if f.oversold != 0 {
		out = append(out, fmt.Sprintf("oversold: %d units beyond the sellable", f.oversold))
	}
	if f.paidLost != 0 {
		out = append(out, fmt.Sprintf("paid orders lost: %d of %d payments answered 200 are not in the database", f.paidLost, f.payments200))
	}
	if !f.auditOK {
		out = append(out, fmt.Sprintf("not every live instance's audit is ok (%d ok of %d live)", f.audited, f.live))
	}
	for _, id := range f.failedChecks {
		switch id {
		case loadgen.CheckFIFO, loadgen.CheckSoldOutEarly, loadgen.CheckFalseSellOut, loadgen.CheckPerUser:
			out = append(out, fmt.Sprintf("the bench's check %q failed (its violations are logged above)", id))
		}
	}
	return out
}

// recordedPayments reads the ids of the sale's payments in the database.
func recordedPayments(t *testing.T, db *sql.DB, sale string) map[string]bool {
	t.Helper()
	rows, err := db.Query("SELECT payment_id FROM payments WHERE sale_id = ?", sale)
	if err != nil {
		t.Fatalf("reading the recorded payments: %v", err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// unrecordedPayments are the payments answered 200 that the database has no record of.
func unrecordedPayments(answered map[string]string, recorded map[string]bool) []string {
	var lost []string
	for id := range answered {
		if !recorded[id] {
			lost = append(lost, id)
		}
	}
	return lost
}

// faultSuite gates the scenarios like the other cluster runs.
func faultSuite(t *testing.T) {
	skipShort(t)
	testenv.Redis(t)
	testenv.Binary(t, "redis-server")
}

// TestFaultRedisKilledAOFAlways: Redis SIGKILLed mid-rush and restarted at once on its AOF
// with appendfsync always: it comes back with every write it answered.
func TestFaultRedisKilledAOFAlways(t *testing.T) {
	faultSuite(t)
	rs := startFaultRedis(t, "always")
	runFaultScenario(t, "Redis SIGKILL, restarted on its AOF (appendfsync always)", rs, killAndRestart(t, rs))
}

// checkLostDetector is the lost-hold count's negative control: a hold answered for a
// reservation that was never made counts as lost.
func (p *probe) checkLostDetector(t *testing.T) {
	t.Helper()
	held, lost := p.lost(t)
	p.mu.Lock()
	p.buys = append(p.buys, &probeBuy{user: "probe-ghost", status: 201, id: p.sale + "-00000000000000000000000000000000", at: time.Now()})
	p.mu.Unlock()
	held2, lost2 := p.lost(t)
	if held2 != held+1 || len(lost2) != len(lost)+1 {
		t.Errorf("negative control: a hold never made was not counted lost (%d/%d, then %d/%d)", len(lost), held, len(lost2), held2)
	}
}

// killAndRestart is the fault: SIGKILL, then the server started again at once on its data
// directory; it is over when the server answers PING (its AOF loaded).
func killAndRestart(t *testing.T, rs *faultRedis) func() {
	return func() {
		rs.kill()
		rs.start()
		if !rs.waitUp(20 * time.Second) {
			t.Errorf("redis-server did not come back")
		}
	}
}

// TestFaultRedisKilledAOFEverysec: the same with appendfsync everysec. Holds answered in the
// last second before the kill may be lost (the row reports them); nothing oversold and no
// paid order lost all the same, since a payment is answered only from the database.
func TestFaultRedisKilledAOFEverysec(t *testing.T) {
	faultSuite(t)
	rs := startFaultRedis(t, "everysec")
	runFaultScenario(t, "Redis SIGKILL, restarted on its AOF (appendfsync everysec)", rs, killAndRestart(t, rs))
}

// TestFaultRedisRestartedEmpty: Redis SIGKILLed and started again with its data directory
// emptied, as a Redis without persistence comes back: every sale is rebuilt from the database
// by one instance (503 meanwhile). What the database had not yet received from the streams is
// lost (the row reports the probe's holds lost); nothing oversold, no paid order lost.
func TestFaultRedisRestartedEmpty(t *testing.T) {
	faultSuite(t)
	rs := startFaultRedis(t, "everysec")
	row := runFaultScenario(t, "Redis SIGKILL, restarted empty", rs, func() {
		rs.kill()
		entries, _ := os.ReadDir(rs.dir)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(rs.dir, e.Name()))
		}
		rs.start()
		if !rs.waitUp(20 * time.Second) {
			t.Errorf("redis-server did not come back")
		}
	})
	if row.rebuilds < 2 {
		t.Errorf("%d sales rebuilt from the database; want both (the rush's and the probe's): the scenario did not empty Redis", row.rebuilds)
	}
}

// TestFaultRedisPaused: Redis stopped with SIGSTOP for 3 s, then SIGCONT: calls answer 503
// after their 2 s bound meanwhile, and nothing is lost.
func TestFaultRedisPaused(t *testing.T) {
	faultSuite(t)
	rs := startFaultRedis(t, "everysec")
	runFaultScenario(t, "Redis paused (SIGSTOP) for 3 s, then SIGCONT", rs, func() {
		rs.signal(syscall.SIGSTOP)
		time.Sleep(3 * time.Second)
		rs.signal(syscall.SIGCONT)
	})
}

// redisProxy is a toxiproxy proxy in front of a Redis server (internal/testkit/toxic: toxiproxy's
// own proxy and toxics, run in the test's process on loopback).
type redisProxy struct{ *toxic.Proxy }

// newRedisProxy starts a proxy to upstream (host:port) on a free loopback port, without toxics;
// it stops when t ends.
func newRedisProxy(t *testing.T, upstream string) redisProxy {
	t.Helper()
	return redisProxy{toxic.New(t, upstream)}
}

func (x redisProxy) redisURL() string { return "redis://" + x.Addr + "/0" }

// ping sends PING on a new connection through the proxy and returns how long the answer took
// (from the write), or the error.
func (x redisProxy) ping(within time.Duration) (time.Duration, error) {
	conn, err := net.DialTimeout("tcp", x.Addr, within)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(within))
	sent := time.Now()
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return 0, err
	}
	b := make([]byte, 7)
	if _, err := io.ReadFull(conn, b); err != nil {
		return 0, err
	}
	if string(b) != "+PONG\r\n" {
		return 0, fmt.Errorf("PING answered %q", b)
	}
	return time.Since(sent), nil
}

// TestFaultRedisPartitioned: the path between the three instances and Redis cut for 3 s (the
// toxiproxy proxy disabled: its connections closed, new ones refused), then restored. The
// test's own client reaches Redis directly.
func TestFaultRedisPartitioned(t *testing.T) {
	faultSuite(t)
	rs := startFaultRedis(t, "everysec")
	px := newRedisProxy(t, rs.addr())
	var cut, restored error
	runFaultScenarioVia(t, "instances cut from Redis for 3 s (toxiproxy proxy disabled)", rs, px.redisURL(), func() {
		px.Stop()
		_, cut = px.ping(time.Second)
		time.Sleep(3 * time.Second)
		if err := px.Start(); err != nil {
			t.Errorf("toxiproxy: enable the proxy again: %v", err)
		}
		_, restored = px.ping(2 * time.Second)
	})
	// The scenario's own check: the path was cut, and then open again.
	if cut == nil {
		t.Errorf("PING went through the proxy while it was disabled: the instances were not cut from Redis")
	}
	if restored != nil {
		t.Errorf("PING through the proxy after it was enabled again: %v", restored)
	}
}

// TestFaultRedisLatency: 100 ms added each way between the three instances and Redis for 5 s
// (toxiproxy's latency toxic on both directions; a 200 ms round trip on every call, and a buy
// makes several): calls slow down but stay within their bounds, nothing is lost.
func TestFaultRedisLatency(t *testing.T) {
	faultSuite(t)
	rs := startFaultRedis(t, "everysec")
	px := newRedisProxy(t, rs.addr())
	var rtt time.Duration
	var rttErr error
	runFaultScenarioVia(t, "100 ms latency each way between the instances and Redis for 5 s (toxiproxy latency)", rs, px.redisURL(), func() {
		start := time.Now()
		px.Add("latency_up", "latency", "upstream", 1, map[string]any{"latency": 100})
		px.Add("latency_down", "latency", "downstream", 1, map[string]any{"latency": 100})
		rtt, rttErr = px.ping(2 * time.Second)
		time.Sleep(5*time.Second - time.Since(start))
		px.Remove("latency_up")
		px.Remove("latency_down")
	})
	// The scenario's own check: the latency was in force (a lower bound the toxic guarantees,
	// not a measure of our speed).
	t.Logf("PING through the proxy during the fault: %v (%v)", rtt, rttErr)
	if rttErr != nil || rtt < 200*time.Millisecond {
		t.Errorf("PING through the proxy took %v (%v) during the fault; want at least the 200 ms round trip injected", rtt, rttErr)
	}
}

// TestFaultRedisDrops: packets dropped between the instances and Redis for 5 s. TCP never
// hands an application a stream with bytes missing: what it sees of dropped packets is a
// connection that stops carrying data and ends. toxiproxy's reset_peer toxic is that: the
// data a connection carries is dropped, and 1 s after the first dropped chunk the connection
// is closed (reset, for connections opened while it is on). It is on each direction of each
// connection with probability 1/2 (toxicity 0.5), for open connections and for those opened
// meanwhile, so some calls go through and others hang until their bound, or fail, and the
// clients reconnect into the same odds. A script whose answer was dropped may have run: the
// client cannot know.
func TestFaultRedisDrops(t *testing.T) {
	faultSuite(t)
	rs := startFaultRedis(t, "everysec")
	px := newRedisProxy(t, rs.addr())
	var answered atomic.Int64
	const pings = 8
	runFaultScenarioVia(t, "half the connection directions to Redis drop their data and are reset 1 s later, for 5 s (toxiproxy reset_peer, toxicity 0.5)", rs, px.redisURL(), func() {
		start := time.Now()
		px.Add("drop_up", "reset_peer", "upstream", 0.5, map[string]any{"timeout": 1000})
		px.Add("drop_down", "reset_peer", "downstream", 0.5, map[string]any{"timeout": 1000})
		var wg sync.WaitGroup
		for range pings {
			wg.Go(func() {
				if _, err := px.ping(2 * time.Second); err == nil {
					answered.Add(1)
				}
			})
		}
		wg.Wait()
		time.Sleep(5*time.Second - time.Since(start))
		px.Remove("drop_up")
		px.Remove("drop_down")
	})
	// The scenario's own check: the drops were in force. Each PING goes through with
	// probability 1/4; all 8 do with probability 1/65 536.
	t.Logf("PINGs through the proxy during the fault: %d of %d answered", answered.Load(), pings)
	if answered.Load() == pings {
		t.Errorf("every PING through the proxy was answered during the fault: nothing was dropped")
	}
}

// TestFaultDatabaseDown: the database (a private MariaDB, never the shared one) SIGKILLed
// mid-rush and started again on its data directory 15 s later. Buys go on from Redis; payment
// webhooks are answered 503 meanwhile and retried by the bench's gateway, and those that land
// after their hold expired are refunds (recorded refund_required): refunds are expected here,
// and every payment answered 200 must be in the database, paid or refunded.
func TestFaultDatabaseDown(t *testing.T) {
	faultSuite(t)
	m := startPrivateMariaDB(t)
	rs := startFaultRedis(t, "everysec")
	var unavailable atomic.Int64
	runFault(t, faultScenario{name: "MariaDB SIGKILLed, started again 15 s later", rs: rs, db: m.url(), inject: func(c *cluster) {
		m.kill()
		for until := time.Now().Add(15 * time.Second); time.Now().Before(until); time.Sleep(500 * time.Millisecond) {
			if r, err := c.readiness(0); err == nil && r.Checks["database"] == "unavailable" {
				unavailable.Add(1)
			}
		}
		if err := m.start(); err != nil {
			t.Errorf("restart the private MariaDB: %v", err)
		}
	}})
	// The scenario's own check: the instances did lose their database.
	if unavailable.Load() == 0 {
		t.Errorf("no /readyz answer reported the database unavailable during the outage: the fault did not happen")
	}
}

// TestFaultInstanceKilled: one of the three instances SIGKILLed mid-rush, not restarted. The
// bench's buyers and gateway go to the next target after a transport error, as behind a load
// balancer; the probe skips the dead instance. What the dead instance answered lives in Redis,
// and the entries its consumer held unacknowledged are taken over by the others' consumers.
// Its audit cannot be had: the other two must be ok.
func TestFaultInstanceKilled(t *testing.T) {
	faultSuite(t)
	rs := startFaultRedis(t, "everysec")
	var killed *instance
	runFault(t, faultScenario{name: "one of the three instances SIGKILLed, not restarted", rs: rs, inject: func(c *cluster) {
		killed = c.insts[0] // the bench's first target
		c.kill(0)
	}})
	// The scenario's own check: the instance died of the signal.
	if ws, ok := killed.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the instance was not killed: %v", killed.cmd.ProcessState)
	}
}

// startWorker starts a `seckill worker` process on the cluster's Redis and database and waits
// until it runs.
func startWorker(c *cluster) *instance {
	c.t.Helper()
	w := c.spawn("worker", "worker", "--engine", "redis")
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(w.log.String(), "worker running"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("the worker never started:\n%s", w.log.String())
		}
	}
	return w
}

// killProcess ends a spawned process with SIGKILL.
func killProcess(in *instance) {
	in.alive.Store(false)
	_ = in.cmd.Process.Kill()
	_ = in.cmd.Wait()
}

// streamPending is how many entries of sale's event stream are delivered to a consumer of the
// order-store group and not acknowledged; an error (no stream or group yet) counts as 0.
func streamPending(c *cluster, sale string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v, err := c.rdb.Do(ctx, c.rdb.B().Xpending().Key("seckill:{sale:"+sale+"}:events").Group(redisinv.Group).Build()).ToArray()
	if err != nil || len(v) == 0 {
		return 0
	}
	n, _ := v[0].AsInt64()
	return n
}

// TestFaultWorkerKilled: the instances run with --consume=false and a `seckill worker` stores
// the event streams; the worker is SIGKILLed while it holds a batch (entries read and not yet
// acknowledged: its only chance to lose them) and started again 2 s later. The new worker takes
// the dead one's entries over (XAUTOCLAIM, once they have been pending 5 s) and stores them;
// storing is idempotent, so a batch the dead worker had committed but not acknowledged is
// stored twice to no effect.
func TestFaultWorkerKilled(t *testing.T) {
	faultSuite(t)
	rs := startFaultRedis(t, "everysec")
	c := launchCluster(t, 3, rs.rdb, rs.url(), freshMySQL(t), "--consume=false")
	w := startWorker(c)
	var inHand int64
	tries := 0
	runFaultOn(t, c, "the seckill worker SIGKILLed with a batch in hand, started again 2 s later", func(c *cluster) {
		// Kill it when it holds entries; the count read after the kill (no consumer is left
		// to acknowledge them) says whether it did. If it had just acknowledged, start it again
		// and wait for its next batch.
		for tries = 1; tries <= 20; tries++ {
			for deadline := time.Now().Add(2 * time.Second); streamPending(c, "fault") == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			killProcess(w)
			if inHand = streamPending(c, "fault"); inHand > 0 {
				break
			}
			w = startWorker(c)
		}
		time.Sleep(2 * time.Second)
		w = startWorker(c)
	})
	t.Logf("the worker was killed with %d entries in hand (try %d); the new worker took over: %q",
		inHand, tries, grepLines(w.log.String(), "took over events"))
	// The scenario's own checks: the worker did die with entries in hand, and once the rush
	// is over none is left unacknowledged.
	if inHand == 0 {
		t.Errorf("the worker was never killed with a batch in hand (%d tries): the scenario did not test it", tries-1)
	}
	if n := streamPending(c, "fault"); n != 0 {
		t.Errorf("%d entries of the rush's stream still pending after the run: the dead worker's batch was not taken over", n)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) []string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// TestFaultRowFailures is the fault suite's control: a clean row passes, and each row broken
// on purpose (a unit oversold, a payment answered 200 but not recorded, an audit not ok, a
// FIFO, false sell-out or per-user violation found by the bench) fails it.
func TestFaultRowFailures(t *testing.T) {
	clean := faultRow{scenario: "clean", payments200: 3, auditOK: true, live: 3, audited: 3,
		failedChecks: []string{loadgen.CheckPayments}} // the payments check is measured here instead
	if f := clean.failures(); len(f) != 0 {
		t.Fatalf("a clean row fails: %q", f)
	}
	answered := map[string]string{"p1": "applied", "p2": "applied", "p3": "refund_required"}
	if lost := unrecordedPayments(answered, map[string]bool{"p1": true, "p2": true, "p3": true}); len(lost) != 0 {
		t.Fatalf("every payment recorded, yet %q lost", lost)
	}
	lost := unrecordedPayments(answered, map[string]bool{"p1": true, "p3": true, "other": true})
	for name, broken := range map[string]func(*faultRow){
		"oversold":     func(f *faultRow) { f.oversold = 1 },
		"paid lost":    func(f *faultRow) { f.paidLost = len(lost) },
		"audit not ok": func(f *faultRow) { f.auditOK, f.audited = false, 2 },
		"FIFO":         func(f *faultRow) { f.failedChecks = []string{loadgen.CheckFIFO} },
		"sold_out":     func(f *faultRow) { f.failedChecks = []string{loadgen.CheckSoldOutEarly} },
		"sell-out":     func(f *faultRow) { f.failedChecks = []string{loadgen.CheckFalseSellOut} },
		"per user":     func(f *faultRow) { f.failedChecks = []string{loadgen.CheckPerUser} },
	} {
		row := clean
		broken(&row)
		if f := row.failures(); len(f) != 1 {
			t.Errorf("%s: failures %q; want one", name, f)
		}
	}
}
