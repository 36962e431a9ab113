package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/loadgen"
)

func noEnv(string) string { return "" }

func TestVersionAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version"}, noEnv, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "seckill ") {
		t.Fatalf("version: code %d, out %q", code, out.String())
	}
	if code := run(context.Background(), []string{"nope"}, noEnv, &out, &errb); code != 2 {
		t.Fatalf("unknown command: code %d, want 2", code)
	}
	if code := run(context.Background(), nil, noEnv, &out, &errb); code != 2 {
		t.Fatalf("no command: code %d, want 2", code)
	}
}

func TestServeWithoutSecretsRefusesToStart(t *testing.T) {
	var out, errb bytes.Buffer
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, noEnv, &out, &errb)
	if code != 1 {
		t.Fatalf("code %d, want 1", code)
	}
	for _, name := range []string{"SECKILL_AUTH_SECRET", "SECKILL_ADMIN_TOKEN", "SECKILL_PAYMENT_SECRET", "--dev"} {
		if !strings.Contains(errb.String(), name) {
			t.Errorf("error message %q does not mention %s", errb.String(), name)
		}
	}
}

// servedApp is `seckill serve` run in process by startServe.
type servedApp struct {
	url      string          // the API's base URL, from the "serving" log line
	out, log *testenv.Buffer // stdout and stderr
	cancel   func()
	done     chan int
}

// startServe runs `seckill serve --dev --addr 127.0.0.1:0 --db <temp SQLite> args...` and
// waits for it to serve.
func startServe(t *testing.T, args ...string) *servedApp {
	t.Helper()
	a := &servedApp{out: &testenv.Buffer{}, log: &testenv.Buffer{}, done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	t.Cleanup(cancel)
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	go func() {
		a.done <- run(ctx, append([]string{"serve", "--dev", "--addr", "127.0.0.1:0", "--db", db}, args...), noEnv, a.out, a.log)
	}()
	urlRe := regexp.MustCompile(`msg=serving url=(http://127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := urlRe.FindStringSubmatch(a.log.String()); m != nil {
			a.url = m[1]
			return a
		}
	}
	t.Fatalf("server did not start: %s", a.log.String())
	return nil
}

// stop cancels the server and fails unless it exits 0 within 20 s.
func (a *servedApp) stop(t *testing.T) {
	t.Helper()
	a.cancel()
	select {
	case code := <-a.done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, a.log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after cancellation")
	}
}

// TestServeDevAndGracefulShutdown starts `serve --dev`, checks it prints the generated
// secrets, masks them in the logged config, answers, and stops cleanly on cancellation.
func TestServeDevAndGracefulShutdown(t *testing.T) {
	a := startServe(t)
	ctx := context.Background()
	secret := regexp.MustCompile(`SECKILL_ADMIN_TOKEN=([0-9a-f]+)`).FindStringSubmatch(a.out.String())
	if secret == nil {
		t.Fatalf("generated secrets not printed: %q", a.out.String())
	}
	if strings.Contains(a.log.String(), secret[1]) {
		t.Fatal("the logged configuration shows a secret unmasked")
	}
	if !strings.Contains(a.log.String(), " gateway=mock ") {
		t.Fatalf("the logged configuration does not name the gateway in effect (--dev: mock):\n%s", a.log.String())
	}
	if strings.Contains(a.log.String(), "/debug/pprof/") {
		t.Fatal("without --pprof a profiling listener was started")
	}
	if err := client.New(a.url).Health(ctx); err != nil {
		t.Fatalf("healthz: %v", err)
	}
	if tok, err := client.New(a.url).DevToken(ctx, "alice"); err != nil || tok == "" {
		t.Fatalf("dev token: %v %v", tok, err)
	}
	a.stop(t)
}

func TestDemoSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"demo", "--units", "20", "--buyers", "400", "--hold", "1s", "--concurrency", "64"}, noEnv, &out, &errb)
	if code != 0 {
		t.Fatalf("demo exited %d:\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"units sold", "20 / 20 of 20", "oversold", "invariants", "ok (", "p99"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestAcceptanceRush is the acceptance run, over HTTP against the real server: 2 000
// users rush a 100-unit sale with 2 s holds; some pay, some cancel, some abandon, some pay late.
// In the end exactly 100 units are paid, nobody exceeds the limit, every user's /orders agrees
// with the audit, and after a restart on the same database nothing paid is lost.
func TestAcceptanceRush(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	ctx := context.Background()
	db := "sqlite://" + filepath.Join(t.TempDir(), "rush.db")
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: db, Dev: true, HTTP: httpLimits{}.withoutPerAddr()} // the crowd: one address
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	const seed = 7
	hold := 2 * time.Second
	delay := func(r seckill.Reservation) time.Duration {
		if loadgen.BehaviorOf(r.UserID, seed, loadgen.DefaultMix) == loadgen.PayLate {
			return hold + 300*time.Millisecond
		}
		return 50 * time.Millisecond
	}
	a, err := startApp(ctx, cfg, appOptions{gatewayDelay: delay, gatewayDup: 0.2, buyRate: -1}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer a.close(ctx)
	admin := client.New(a.url, client.WithToken(cfg.AdminToken))
	start := time.Now().UTC().Add(300 * time.Millisecond)
	if _, err := admin.CreateSale(ctx, client.NewSale{ID: "rush", PriceCents: 500, Stock: 100,
		StartsAt: start, EndsAt: start.Add(time.Hour), HoldSeconds: 2}); err != nil {
		t.Fatal(err)
	}
	secret := []byte(cfg.AuthSecret)
	token := func(u string) (string, error) { return httpapi.MintToken(secret, u, time.Now(), time.Hour) }
	res, err := loadgen.Run(ctx, loadgen.Config{Targets: []string{a.url}, SaleID: "rush", Buyers: 2000, Concurrency: 96, Hold: hold,
		Mix: loadgen.DefaultMix, Seed: seed, Token: token, Deadline: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// An error is an answer that is the server's fault (a 5xx other than 503), a refused
	// webhook, or a request still failing after the client's retries; a 503 (Retry-After) or a
	// dropped connection that a retry overcomes is what a loaded machine does, and the crowd
	// retries it like a client (loadgen).
	crowd := fmt.Sprintf("gave up %d, 503s retried %d, transport errors retried %d, elapsed %v",
		res.GaveUp, res.Retried503, res.RetriedTransport, res.Elapsed.Round(time.Millisecond))
	if res.Errors > 0 || res.ReplayMismatch > 0 {
		t.Fatalf("errors %d, replay mismatches %d (%s); the first errors:\n%s",
			res.Errors, res.ReplayMismatch, crowd, strings.Join(res.ErrorSample, "\n"))
	}
	if err := a.gateway.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var sale client.Sale
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if sale, err = admin.Sale(ctx, "rush"); err != nil {
			t.Fatal(err)
		}
		if sale.StockState.Held == 0 && sale.StockState.Queued == 0 && a.pipe.Backlog() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sale did not settle within a minute: %+v (%s)", sale.StockState, crowd)
		}
	}
	if sale.StockState.Sold != 100 {
		t.Fatalf("sold %d units, want exactly 100 (state %+v, %s)", sale.StockState.Sold, sale.StockState, crowd)
	}
	// The pipeline's last batch may still be on its way to the database: the audit is awaited.
	var audit client.Audit
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if audit, err = admin.Audit(ctx, "rush"); err != nil {
			t.Fatal(err)
		}
		if audit.OK && audit.Database.Sold == 100 && audit.Database.PaidUnits == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit: %+v", audit)
		}
	}
	gw := a.gateway.Stats()
	if int(gw.PaymentsSucceeded) != audit.Database.PaidOrders+audit.Database.Refunds {
		t.Fatalf("gateway succeeded %d payments; database has %d paid + %d refunds", gw.PaymentsSucceeded, audit.Database.PaidOrders, audit.Database.Refunds)
	}
	// Every user's /orders, summed, must agree with the audit; nobody over the limit of 1.
	paid, refunds := 0, 0
	for i := range 2000 {
		user := loadgen.UserName(i)
		tok, _ := token(user)
		orders, err := admin.WithToken(tok).Orders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		userPaid := 0
		for _, o := range orders {
			switch o.Status {
			case seckill.StatusPaid:
				userPaid += o.Quantity
			case seckill.StatusRefundRequired:
				refunds++
			default:
				t.Fatalf("order with status %s", o.Status)
			}
		}
		if userPaid > 1 {
			t.Fatalf("%s paid for %d units; limit 1", user, userPaid)
		}
		paid += userPaid
	}
	if paid != 100 || refunds != audit.Database.Refunds {
		t.Fatalf("/orders: %d paid, %d refunds; audit says 100 and %d", paid, refunds, audit.Database.Refunds)
	}
	t.Logf("crowd: held %d queued %d handoffs %d expired %d soldout %d; refunds %d", res.Held, res.Queued, res.Handoffs, res.Expired, res.SoldOut, refunds)

	// Restart on the same database: the engine is rebuilt and nothing paid is lost.
	if err := a.close(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := startApp(ctx, cfg, appOptions{}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer b.close(ctx)
	after := client.New(b.url, client.WithToken(cfg.AdminToken))
	if sale, err = after.Sale(ctx, "rush"); err != nil {
		t.Fatal(err)
	}
	if sale.StockState.Sold != 100 || sale.StockState.Available != 0 || sale.StockState.Held != 0 {
		t.Fatalf("after restart: %+v", sale.StockState)
	}
	if audit, err = after.Audit(ctx, "rush"); err != nil || !audit.OK {
		t.Fatalf("audit after restart: %+v %v", audit, err)
	}
}
