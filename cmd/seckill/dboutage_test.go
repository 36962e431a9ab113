package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/loadgen"
)

// The database outage test: three Redis-engine instances on a private Redis and a private
// MariaDB, a crowd from loadgen paying by signed webhooks, and the database killed mid-rush
// for outageFor, then started again on the same data. Buys go on meanwhile; webhooks are
// answered 503 and retried by the gateway. Afterwards every invariant holds (loadgen's checks,
// every instance's audit), and every payment whose webhook was first delivered before its
// hold's expires_at ends paid: the refunds owed are only those of the crowd's late payers.

// outageFor is how long the database is gone: several holds (2 s) long, as in the report
// this test comes from (16 s).
const outageFor = 12 * time.Second

// privateMariaDB is a MariaDB server of the test's own: its own data directory, loopback
// port and socket, no grant tables. The machine's shared MariaDB is never touched.
type privateMariaDB struct {
	t    *testing.T
	bin  string
	dir  string
	port string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// mariadbBinary finds a MariaDB program on the PATH or in /usr/sbin; a missing one skips the
// test, or fails it under CI=true.
func mariadbBinary(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/sbin", name); fileExists(p) {
		return p
	}
	if testenv.InCI() {
		t.Fatalf("%s not found: under CI=true the database outage test must run", name)
	}
	t.Skipf("%s not found; skipping the database outage test", name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startPrivateMariaDB initializes a data directory and starts the server on a free port.
func startPrivateMariaDB(t *testing.T) *privateMariaDB {
	t.Helper()
	install := mariadbBinary(t, "mariadb-install-db")
	m := &privateMariaDB{t: t, bin: mariadbBinary(t, "mariadbd"), dir: t.TempDir(), port: freePort(t)}
	out, err := exec.Command(install, "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"), "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	t.Cleanup(m.kill)
	if err := m.start(); err != nil {
		t.Fatal(err)
	}
	db := m.open("")
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE seckill"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return m
}

// url is the database's SECKILL_DB.
func (m *privateMariaDB) url() string { return "mysql://root@127.0.0.1:" + m.port + "/seckill" }

// open connects to the server (to database name, if not empty).
func (m *privateMariaDB) open(name string) *sql.DB {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", "127.0.0.1:"+m.port, name
	cfg.Timeout = 2 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		m.t.Fatal(err)
	}
	return db
}

// start runs mariadbd on the data directory and waits until it answers (up to 30 s).
func (m *privateMariaDB) start() error {
	log := filepath.Join(m.dir, "error.log")
	cmd := exec.Command(m.bin, "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"), "--port="+m.port,
		"--bind-address=127.0.0.1", "--socket="+filepath.Join(m.dir, "s"), "--pid-file="+filepath.Join(m.dir, "pid"),
		"--user=root", "--skip-grant-tables", "--skip-name-resolve", "--skip-log-bin", "--log-error="+log,
		"--innodb-buffer-pool-size=64M", "--max-connections=400")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mariadbd: %w", err)
	}
	m.mu.Lock()
	m.cmd = cmd
	m.mu.Unlock()
	db := m.open("")
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for db.Ping() != nil {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log)
			return fmt.Errorf("the private mariadbd never answered:\n%s", tail(string(b), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// kill ends the server with SIGKILL: no shutdown, connections cut.
func (m *privateMariaDB) kill() {
	m.mu.Lock()
	cmd := m.cmd
	m.cmd = nil
	m.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// startClusterOn starts n `seckill serve --engine redis` processes on a private Redis and the
// database db, as startCluster does on a fresh MariaDB database, and waits until each is ready.
func startClusterOn(t *testing.T, n int, db string) *cluster {
	t.Helper()
	redisURL, rdb := privateRedis(t)
	return launchCluster(t, n, rdb, redisURL, db)
}

// readiness is one /readyz answer.
type readiness struct {
	Code   int
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func (c *cluster) readiness(i int) (readiness, error) {
	st, _, b, err := c.do(c.insts[i], "GET", "/readyz", "", nil, nil)
	r := readiness{Code: st}
	if err == nil && st == 200 {
		err = json.Unmarshal(b, &r)
	}
	return r, err
}

// waitReadiness waits until instance i answers /readyz 200 with the given status.
func (c *cluster) waitReadiness(i int, status string, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := c.readiness(i)
		if err == nil && r.Code == 200 && r.Status == status {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("instance %d: /readyz never answered 200 %q (last %+v, %v):\n%s", i, status, r, err, tail(c.insts[i].log.String(), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// webhookRec is what the gateway's side saw of one payment's webhook.
type webhookRec struct {
	rid         string
	first       time.Time // the first delivery was sent
	firstAnswer time.Time // its answer (any status) came back, or it failed
	saw503      bool      // some delivery was answered 503
	answered    time.Time // the first 200
	delivered   int       // deliveries sent
}

// recorder is the crowd's HTTP transport: it passes every request on and notes, from what
// goes by, when each payment's webhook was first sent and what it was answered, and each
// hold's expires_at (from the buy and poll answers that show the reservation held).
type recorder struct {
	base     http.RoundTripper
	mu       sync.Mutex
	hooks    map[string]*webhookRec // by payment id
	expiries map[string]time.Time   // by reservation id
}

func newRecorder() *recorder {
	return &recorder{base: &http.Transport{MaxIdleConnsPerHost: 512},
		hooks: map[string]*webhookRec{}, expiries: map[string]time.Time{}}
}

func (rec *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var hook *webhookRec
	firstAttempt := false
	if req.Method == "POST" && strings.HasSuffix(req.URL.Path, "/payments/webhook") && req.GetBody != nil {
		var ev struct {
			PaymentID     string `json:"payment_id"`
			ReservationID string `json:"reservation_id"`
		}
		if body, err := req.GetBody(); err == nil {
			_ = json.NewDecoder(body).Decode(&ev)
		}
		rec.mu.Lock()
		if hook = rec.hooks[ev.PaymentID]; hook == nil {
			hook = &webhookRec{rid: ev.ReservationID, first: time.Now()}
			rec.hooks[ev.PaymentID] = hook
			firstAttempt = true
		}
		hook.delivered++
		rec.mu.Unlock()
	}
	resp, err := rec.base.RoundTrip(req)
	if firstAttempt {
		rec.mu.Lock()
		hook.firstAnswer = time.Now()
		rec.mu.Unlock()
	}
	if err != nil {
		return resp, err
	}
	if hook != nil {
		rec.mu.Lock()
		switch {
		case resp.StatusCode == 503:
			hook.saw503 = true
		case resp.StatusCode == 200 && hook.answered.IsZero():
			hook.answered = time.Now()
		}
		rec.mu.Unlock()
		return resp, nil
	}
	path := req.URL.Path
	if (resp.StatusCode == 200 || resp.StatusCode == 201) && (strings.Contains(path, "/buy/") || strings.HasPrefix(path, "/api/v1/reservations/")) {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		var r struct {
			ID        string     `json:"id"`
			Status    string     `json:"status"`
			ExpiresAt *time.Time `json:"expires_at"`
		}
		if json.Unmarshal(b, &r) == nil && r.Status == "held" && r.ExpiresAt != nil {
			rec.mu.Lock()
			rec.expiries[r.ID] = *r.ExpiresAt
			rec.mu.Unlock()
		}
	}
	return resp, nil
}

// paymentVerdict is the refund detector's count.
type paymentVerdict struct {
	inTime     int // the first delivery was answered before the hold's expires_at
	borderline int // the first delivery was sent before expires_at and answered after it
	late       int // the first delivery was sent at or after expires_at
	stranded   int // in time, answered 503, and answered 200 only after the hold expired
	refunds    int
	bad        []string
}

// judgePayments is the refund detector: every payment whose webhook was first delivered in
// time must end paid (applied or late_applied) in the database, and every payment delivered
// must be recorded there once. "In time" is exact from the gateway's side: the first
// delivery's answer (200 or 503 alike) came back before the hold's expires_at, so the server
// had the payment while the hold lasted. A delivery sent before expires_at and answered after
// it is borderline (the server may have taken it after the hold expired, and then a refund is
// right): it is counted, not judged. Refunds are then only for payments delivered late: the
// crowd's late payers (and the borderline).
func judgePayments(hooks map[string]*webhookRec, expiries map[string]time.Time, results map[string]string) paymentVerdict {
	var v paymentVerdict
	ids := make([]string, 0, len(hooks))
	for pid := range hooks {
		ids = append(ids, pid)
	}
	sort.Strings(ids)
	for _, pid := range ids {
		h := hooks[pid]
		result, recorded := results[pid]
		if result == string(seckill.PaymentRefundRequired) {
			v.refunds++
		}
		exp, held := expiries[h.rid]
		switch {
		case !recorded:
			v.bad = append(v.bad, fmt.Sprintf("payment %s was delivered %d times but the database has no record of it", pid, h.delivered))
			continue
		case !held:
			v.bad = append(v.bad, fmt.Sprintf("payment %s: the crowd never saw reservation %s held", pid, h.rid))
			continue
		case !h.first.Before(exp):
			v.late++
			continue
		case h.firstAnswer.IsZero() || !h.firstAnswer.Before(exp):
			v.borderline++
			continue
		}
		v.inTime++
		if h.saw503 && h.answered.After(exp) {
			v.stranded++
		}
		if !seckill.PaymentResult(result).Paid() {
			v.bad = append(v.bad, fmt.Sprintf("payment %s first delivered %v and answered %v before its hold expired (503 seen: %v, answered 200 %v after expiry) ended %s; want paid",
				pid, exp.Sub(h.first).Round(time.Millisecond), exp.Sub(h.firstAnswer).Round(time.Millisecond), h.saw503,
				h.answered.Sub(exp).Round(time.Millisecond), result))
		}
	}
	return v
}

// TestOutageDetectorCatchesRefunds is the refund detector's negative control: a payment
// delivered in time that ended refund_required, or that is not recorded, fails it; a late
// payer's refund does not, nor a borderline one's.
func TestOutageDetectorCatchesRefunds(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	exp := map[string]time.Time{"r1": ms(2000), "r2": ms(2000), "r3": t0, "r4": ms(2000)}
	hooks := map[string]*webhookRec{
		"p1": {rid: "r1", first: t0, firstAnswer: ms(5), saw503: true, answered: ms(10000)}, // in time, stranded by the outage
		"p2": {rid: "r2", first: ms(100), firstAnswer: ms(110), answered: ms(110)},          // in time
		"p3": {rid: "r3", first: ms(300), firstAnswer: ms(310), answered: ms(310)},          // a late payer
		"p4": {rid: "r4", first: ms(1990), firstAnswer: ms(2050), answered: ms(2050)},       // borderline
	}
	ok := map[string]string{"p1": "applied", "p2": "applied", "p3": "refund_required", "p4": "refund_required"}
	if v := judgePayments(hooks, exp, ok); len(v.bad) != 0 || v.inTime != 2 || v.late != 1 || v.borderline != 1 || v.stranded != 1 || v.refunds != 2 {
		t.Fatalf("a good run: %+v", v)
	}
	for name, results := range map[string]map[string]string{
		"in-time payment refunded (the defect)": {"p1": "refund_required", "p2": "applied", "p3": "refund_required", "p4": "applied"},
		"payment never recorded":                {"p2": "applied", "p3": "refund_required", "p4": "applied"},
	} {
		if v := judgePayments(hooks, exp, results); len(v.bad) != 1 {
			t.Errorf("%s: detector found %v; want one violation", name, v.bad)
		}
	}
}

// TestClusterRushDatabaseOutage: three Redis-engine instances, 1 200 buyers from loadgen over
// 10 s on a 100-unit sale (hold 2 s, a queue of 200), the private MariaDB killed once 25 units are sold and
// started again outageFor later. Meanwhile every instance answers /readyz 200 "degraded"
// (buys work), never 503. Afterwards: every instance's audit is ok and loadgen's invariants
// hold, and every payment delivered in time is paid (judgePayments).
// Before the fix, such payments were answered 503 without reaching the engine, their holds
// expired and passed to the queue, and the gateway's retries ended refund_required.
func TestClusterRushDatabaseOutage(t *testing.T) {
	skipShort(t)
	testenv.Redis(t) // the acceptance runs belong to the integration tests
	m := startPrivateMariaDB(t)
	c := startClusterOn(t, 3, m.url())
	const sale, buyers, seed = "outage", 1200, 7
	start := time.Now().UTC().Add(time.Second)
	c.admin("create the sale", func(a *client.Client) error {
		_, err := a.CreateSale(context.Background(), client.NewSale{ID: sale, Name: "Outage", PriceCents: 500,
			Stock: 100, StartsAt: start, EndsAt: start.Add(time.Hour), HoldSeconds: 2, QueueLimit: client.Ptr(200)})
		return err
	})

	rec := newRecorder()
	var urls []string
	for _, in := range c.insts {
		urls = append(urls, in.url)
	}
	cfg := loadgen.Config{Targets: urls, SaleID: sale, Buyers: buyers, Rate: 120, Mix: loadgen.DefaultMix, Seed: seed,
		Token: func(user string) (string, error) {
			return httpapi.MintToken([]byte(clusterAuth), user, time.Now(), time.Hour)
		},
		PaymentSecret: []byte(clusterPayment), Hold: 2 * time.Second, Deadline: 90 * time.Second,
		Client: &http.Client{Timeout: 10 * time.Second, Transport: rec}}

	// The outage, while the crowd runs.
	var before seckill.StockState
	var probes []readiness
	var restartErr error
	outage := make(chan struct{})
	go func() {
		defer close(outage)
		for {
			var v client.Sale
			c.admin("read the sale", func(a *client.Client) (err error) {
				v, err = a.Sale(context.Background(), sale)
				return err
			})
			if before = v.StockState; before.Sold >= 25 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		m.kill()
		until := time.Now().Add(outageFor)
		for time.Now().Before(until) {
			for i := range c.insts {
				if r, err := c.readiness(i); err == nil {
					probes = append(probes, r)
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
		restartErr = m.start()
	}()
	res, err := loadgen.Run(context.Background(), cfg)
	<-outage
	if err != nil || restartErr != nil {
		t.Fatal(err, restartErr)
	}
	t.Logf("database killed with %+v; crowd (%v): held %d, queued %d, hand-offs %d, sold_out %d, 503 retried %d, gave up %d, errors %d",
		before, res.Elapsed.Round(time.Millisecond), res.Held, res.Queued, res.Handoffs, res.SoldOut, res.Retried503, res.GaveUp, res.Errors)
	if before.Sold >= 100 || before.Available+before.Held == 0 {
		t.Fatalf("the outage came too late to test anything: %+v", before)
	}

	// Readiness: the database was reported, and no instance was pulled.
	degraded := 0
	for _, p := range probes {
		switch {
		case p.Code != 200:
			t.Errorf("/readyz answered %d during the outage; want 200 (buys still work)", p.Code)
		case p.Status == "degraded" && p.Checks["database"] == "unavailable" && p.Checks["redis"] == "ok":
			degraded++
		}
	}
	if degraded == 0 {
		t.Errorf("no /readyz answer reported the database unavailable during the outage: %+v", probes)
	}
	for i := range c.insts {
		c.waitReadiness(i, "ready", 30*time.Second)
	}

	// Every invariant: each instance's audit, loadgen's checks.
	r := &rush{c: c, sale: sale}
	settled := r.settle(t)
	var audits []loadgen.InstanceAudit
	for _, in := range c.insts {
		a, err := c.api(in, clusterAdmin).Audit(context.Background(), sale)
		if err != nil {
			t.Fatalf("audit: %v", err)
		}
		audits = append(audits, loadgen.InstanceAudit{Target: in.url, Audit: a})
	}
	verdict := loadgen.Check(res, loadgen.SaleFacts{Sellable: 100, PerUserLimit: 1, Sold: settled.Engine.Sold}, audits,
		loadgen.Payers(buyers, seed, loadgen.DefaultMix))
	for _, v := range append(verdict.Violations, verdict.Unverified...) {
		t.Errorf("invariant: %s", v)
	}
	if !verdict.OK {
		t.Errorf("loadgen's verdict: %s", verdict.Word())
	}

	// The refund detector, from the database's own record of each payment.
	db := m.open("seckill")
	defer db.Close()
	rows, err := db.Query("SELECT payment_id, result FROM payments WHERE sale_id = ?", sale)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]string{}
	for rows.Next() {
		var pid, result string
		if err := rows.Scan(&pid, &result); err != nil {
			t.Fatal(err)
		}
		results[pid] = result
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	rec.mu.Lock()
	v := judgePayments(rec.hooks, rec.expiries, results)
	rec.mu.Unlock()
	t.Logf("payments: %d delivered in time (%d of them answered 503 until after their hold expired), %d borderline, %d late; refunds owed %d; database %+v",
		v.inTime, v.stranded, v.borderline, v.late, v.refunds, settled.Database)
	for _, b := range v.bad[:min(len(v.bad), 10)] {
		t.Error(b)
	}
	if len(v.bad) > 10 {
		t.Errorf("… and %d more", len(v.bad)-10)
	}
	if v.stranded == 0 {
		t.Errorf("no payment delivered in time waited out its hold behind the outage: the run did not test the defect")
	}
	if settled.Database.Sold != 100 {
		t.Errorf("database sold %d; want every unit sold (%+v)", settled.Database.Sold, settled)
	}
}
