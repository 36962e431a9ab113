package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/loadgen"
	"github.com/seckill-go/seckill/payment"
)

// demo runs a whole flash sale in process: a real server on a loopback port with the memory
// engine, SQLite and the mock gateway, and `seckill bench`'s crowd against it over HTTP. It
// prints the bench report and fails (exit 1) if any invariant of docs/MODEL.md does not hold.
func demo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	units := fs.Int("units", 100, "sellable units")
	perUser := fs.Int("per-user", 1, "per-user limit")
	hold := fs.Duration("hold", 2*time.Second, "hold duration (whole seconds)")
	buyers := fs.Int("buyers", 5000, "simulated buyers")
	conc := fs.Int("concurrency", 128, "buyers in flight at once")
	seed := fs.Uint64("seed", 1, "seed for the crowd's behaviour")
	db := fs.String("db", "", "order store URL (default: a fresh SQLite file in a temp dir)")
	report := fs.String("report", "", "also write a Markdown report (and an SVG chart) to this file")
	verbose := fs.Bool("v", false, "log server warnings")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	dsn := *db
	if dsn == "" {
		dir, err := os.MkdirTemp("", "seckill-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dsn = "sqlite://" + filepath.Join(dir, "demo.db")
	}
	// The crowd is this process: one client address, which the per-address bounds would hold to
	// a quarter of the instance.
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: dsn, Dev: true, HTTP: httpLimits{}.withoutPerAddr()}
	if _, err := cfg.secrets(); err != nil {
		return err
	}
	level := slog.LevelError + 4
	if *verbose {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	o := benchOptions{
		adminToken: cfg.AdminToken, authSecret: cfg.AuthSecret, saleID: "demo", units: *units, perUser: *perUser,
		hold: *hold, buyers: *buyers, concurrency: *conc, mix: loadgen.DefaultMix, seed: *seed,
		deadline: 3 * time.Minute, report: *report,
	}
	if err := o.validate(); err != nil {
		return err
	}
	// The gateway answers promptly, except for the crowd's late payers, whose webhook arrives
	// after their hold expired (the case that oversells a naive engine).
	delay := func(r seckill.Reservation) time.Duration {
		if loadgen.BehaviorOf(r.UserID, o.seed, o.mix) == loadgen.PayLate {
			return o.hold + 500*time.Millisecond
		}
		return time.Duration(20+rand.IntN(180)) * time.Millisecond
	}
	a, err := startApp(ctx, cfg, appOptions{gatewayDelay: delay, gatewayDup: 0.1, gatewayFail: 0.02, buyRate: -1}, log)
	if err != nil {
		return err
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.close(c)
	}()
	o.targets = []string{a.url}
	o.title = fmt.Sprintf("seckill demo: %d units, %d per user, %s holds (memory engine, SQLite, mock gateway)", *units, *perUser, *hold)
	// Every payment the mock gateway reported as succeeded must be one paid order or one refund.
	o.settle = func() {
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = a.gateway.WaitIdle(waitCtx)
	}
	o.extraChecks = func(audit loadgen.Audit, v *loadgen.Verdict) {
		v.Add("gateway_payments", "every payment the gateway reports succeeded is one paid order or one refund", reconcileGateway(a.gateway.Stats(), audit, v))
	}
	return runBench(ctx, o, stdout, stderr)
}

// reconcileGateway compares the payments the mock gateway saw succeed with the database's paid
// orders and refunds. A gateway that failed to deliver some notifications has succeeded
// payments the database cannot know of, so the comparison would prove nothing: the verdict is
// then unverified (and the demo exits non-zero), never silently ok.
func reconcileGateway(gw payment.MockStats, audit loadgen.Audit, v *loadgen.Verdict) []string {
	if gw.DeliveryFailures > 0 {
		v.Unverify(fmt.Sprintf("payments: the gateway failed to deliver %d notifications, so its %d succeeded payments were not reconciled with the database",
			gw.DeliveryFailures, gw.PaymentsSucceeded))
		return nil
	}
	if recorded := int64(audit.Database.PaidOrders + audit.Database.Refunds); gw.PaymentsSucceeded != recorded {
		return []string{fmt.Sprintf("payments: %d succeeded at the gateway but %d paid + %d refunds recorded",
			gw.PaymentsSucceeded, audit.Database.PaidOrders, audit.Database.Refunds)}
	}
	return nil
}
