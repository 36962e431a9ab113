package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/loadgen"
)

// demo runs a whole flash sale in process: a real server on a loopback port with the memory
// engine, SQLite and the mock gateway, and a crowd of simulated buyers over HTTP. It prints a
// summary and fails (exit 1) if any invariant of DESIGN.md §1 does not hold.
func demo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	units := fs.Int("units", 100, "sellable units")
	perUser := fs.Int("per-user", 1, "per-user limit")
	hold := fs.Duration("hold", 2*time.Second, "hold duration (whole seconds)")
	buyers := fs.Int("buyers", 5000, "simulated buyers")
	conc := fs.Int("concurrency", 128, "buyers in flight at once")
	seed := fs.Uint64("seed", 1, "seed for the crowd's behaviour")
	db := fs.String("db", "", "order store URL (default: a fresh SQLite file in a temp dir)")
	verbose := fs.Bool("v", false, "log server warnings")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *hold < time.Second || *hold%time.Second != 0 {
		return fmt.Errorf("--hold must be a whole number of seconds, at least 1s")
	}
	if *units < 1 || *buyers < 1 || *perUser < 1 {
		return fmt.Errorf("--units, --buyers and --per-user must be at least 1")
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
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: dsn, Dev: true}
	if _, err := cfg.secrets(); err != nil {
		return err
	}
	level := slog.LevelError + 4
	if *verbose {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	mix := loadgen.DefaultMix
	holdFor := *hold
	// The gateway answers promptly, except for the crowd's late payers, whose webhook arrives
	// after their hold expired (the case that oversells a naive engine).
	delay := func(r seckill.Reservation) time.Duration {
		if loadgen.BehaviorOf(r.UserID, *seed, mix) == loadgen.PayLate {
			return holdFor + 500*time.Millisecond
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

	fmt.Fprintf(stdout, "seckill demo: %d units, %d per user, %s holds, %d buyers (%d at a time) against %s\n",
		*units, *perUser, *hold, *buyers, *conc, a.url)
	admin := func(method, path string, body any, out any) error {
		return call(ctx, method, a.url+path, cfg.AdminToken, body, out)
	}
	start := time.Now().UTC().Add(time.Second).Truncate(time.Millisecond)
	saleID := "demo"
	var sale seckill.SaleView
	if err := admin("POST", "/api/v1/sales", map[string]any{
		"id": saleID, "name": "Demo flash sale", "price_cents": 999, "stock": *units,
		"starts_at": start, "ends_at": start.Add(10 * time.Minute),
		"per_user_limit": *perUser, "hold_seconds": int(hold.Seconds()),
	}, &sale); err != nil {
		return fmt.Errorf("create sale: %w", err)
	}
	secret := []byte(cfg.AuthSecret)
	bar := newProgressBar(stderr)
	res, err := loadgen.Run(ctx, loadgen.Config{
		BaseURL: a.url, SaleID: saleID, Buyers: *buyers, Concurrency: *conc, Mix: mix, Seed: *seed,
		Token:    func(u string) (string, error) { return httpapi.MintToken(secret, u, time.Now(), time.Hour) },
		Progress: bar.update, Deadline: 3 * time.Minute,
	})
	bar.finish()
	if err != nil {
		return err
	}
	// Let the late webhooks land and the last holds expire, then let the pipeline drain.
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = a.gateway.Wait(waitCtx)
	for waitCtx.Err() == nil {
		if err := admin("GET", "/api/v1/sales/"+saleID, nil, &sale); err != nil {
			return err
		}
		if sale.StockState.Held == 0 && sale.StockState.Queued == 0 && a.pipe.Backlog() == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the pipeline's last batch
	var audit seckill.Audit
	if err := admin("GET", "/api/v1/sales/"+saleID+"/audit", nil, &audit); err != nil {
		return err
	}
	gw := a.gateway.Stats()
	st := sale.StockState
	var violations []string
	violations = append(violations, audit.Violations...)
	if st.Sold < st.Sellable && res.SoldOut > 0 {
		violations = append(violations, fmt.Sprintf("false sell-out: %d buyers were told sold_out but only %d of %d units sold", res.SoldOut, st.Sold, st.Sellable))
	}
	if succeeded := gw.PaymentsSucceeded; gw.DeliveryFailures == 0 && succeeded != int64(audit.Database.PaidOrders+audit.Database.Refunds) {
		violations = append(violations, fmt.Sprintf("payments: %d succeeded at the gateway but %d paid + %d refunds recorded", succeeded, audit.Database.PaidOrders, audit.Database.Refunds))
	}
	if res.ReplayMismatch > 0 {
		violations = append(violations, fmt.Sprintf("%d idempotent retries returned a different reservation", res.ReplayMismatch))
	}
	oversold := max(0, st.Sold-st.Sellable, audit.Database.Sold-st.Sellable)

	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(k string, v any) { fmt.Fprintf(w, "%s\t%v\t\n", k, v) }
	fmt.Fprintln(stdout)
	row("units sold", fmt.Sprintf("%d / %d", st.Sold, st.Sellable))
	row("oversold", oversold)
	row("refunds owed", audit.Database.Refunds)
	row("holds expired", res.Expired)
	row("queue hand-offs", res.Handoffs)
	row("queued / rejected", fmt.Sprintf("%d / %d", res.Queued, res.Rejected))
	row("cancelled / abandoned", fmt.Sprintf("%d / %d", res.Cancelled, res.Abandoned))
	row("told sold out / queue full", fmt.Sprintf("%d / %d", res.SoldOut, res.QueueFull))
	row("idempotent replays", res.Replays)
	row("payments (ok/failed/dup)", fmt.Sprintf("%d / %d / %d", gw.PaymentsSucceeded, gw.PaymentsFailed, gw.Duplicates))
	row("requests", res.Requests)
	row("requests/s", fmt.Sprintf("%.0f", float64(res.Requests)/res.Elapsed.Seconds()))
	row("p50 latency", time.Duration(res.Latency.ValueAtQuantile(50))*time.Microsecond)
	row("p99 latency", time.Duration(res.Latency.ValueAtQuantile(99))*time.Microsecond)
	row("errors (5xx/transport)", res.Errors)
	if len(violations) == 0 {
		row("invariants", "ok")
	} else {
		row("invariants", "FAILED")
	}
	_ = w.Flush()
	if len(violations) > 0 {
		for _, v := range violations {
			fmt.Fprintln(stdout, "  violation:", v)
		}
		return exitError("invariant check failed")
	}
	return nil
}

// call sends a JSON request and decodes a JSON answer; non-2xx answers are errors.
func call(ctx context.Context, method, url, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// progressBar draws "[#####.....] n/total" on one terminal line, or, when the output is not a
// terminal (CI logs), prints a line at every tenth.
type progressBar struct {
	w     io.Writer
	tty   bool
	last  int
	tenth int
}

func newProgressBar(w io.Writer) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressBar{w: w, tty: tty, last: -1}
}

func (p *progressBar) update(done, total int) {
	if done == p.last || total == 0 {
		return
	}
	p.last = done
	if !p.tty {
		if t := done * 10 / total; t > p.tenth {
			p.tenth = t
			fmt.Fprintf(p.w, "%d/%d buyers done\n", done, total)
		}
		return
	}
	const width = 40
	n := done * width / total
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d buyers", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
}

func (p *progressBar) finish() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
