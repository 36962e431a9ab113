package redisinv

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/pipeline"
	"github.com/seckill-go/seckill/sqlstore"
)

// BenchmarkRecovery measures the recovery after a loss (docs/BENCHMARKS.md "Recovery after a
// FLUSHALL"): recoverySales sales with held and paid reservations in SQLite and a private
// redis-server, the engine's sweeper running as in production, then FLUSHALL. It reports the
// time from a buyer's first try, a second after the loss, until the buyer, who retries every
// 20 ms, gets a hold in one sale (touched_ms), from the loss until every
// sale is loaded again (all_ms), the buyer's 503s, and the ERROR lines logged. It runs once
// whatever b.N (-benchtime 1x); bench/recovery/run.sh runs it on two commits side by side.
// It uses only what the engine had before recovery by demand, so that it runs on both.
func BenchmarkRecovery(b *testing.B) {
	const recoverySales = 1000
	ctx := b.Context()
	proc := redistest.StartMaster(b)
	c, err := Dial(ctx, "redis://"+proc.Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	store, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "orders.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	locks := lock.New(c.Locks, &lock.Options{Lease: 2 * time.Second})
	b.Cleanup(func() { _ = locks.Close() })
	var logs testenv.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	e := New(c.Inventory, WithRebuild(store, locks), WithLogger(logger))
	b.Cleanup(func() { _ = e.Close() })

	now := time.Now()
	ids := make([]string, recoverySales)
	ap := pipeline.Applier{Sink: store}
	for i := range ids {
		ids[i] = fmt.Sprintf("rec-%04d", i)
		def, err := seckill.NewSale(seckill.SaleInput{ID: ids[i], PriceCents: ptr(int64(100)), Stock: ptr(100),
			StartsAt: &now, HoldSeconds: ptr(3600), QueueLimit: ptr(100), Listed: ptr(false)}, now)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.CreateSale(ctx, def); err != nil {
			b.Fatal(err)
		}
		if err := e.LoadSale(ctx, def, 0); err != nil {
			b.Fatal(err)
		}
		for u := range 5 {
			if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: ids[i], UserID: fmt.Sprintf("u%d", u), Quantity: 1}); err != nil {
				b.Fatal(err)
			}
		}
		entries, err := c.Inventory.Do(ctx, c.Inventory.B().Xrange().Key(e.streamKey(ids[i])).Start("-").End("+").Build()).AsXRangeSlices()
		if err != nil {
			b.Fatal(err)
		}
		var evs []seckill.Event
		for _, en := range entries {
			for _, fv := range en.FieldValues {
				ev, err := decodeEvent(ids[i], fv)
				if err != nil {
					b.Fatal(err)
				}
				evs = append(evs, ev)
			}
		}
		if err := ap.Apply(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
	list := func(context.Context) ([]string, error) { return ids, nil }
	runner := background.NewRunner(logger) // as in production: its reports summarized
	runner.Start(e.Sweeper(250*time.Millisecond, list, locks))
	defer func() { _ = runner.Stop(context.Background()) }()
	time.Sleep(time.Second) // the sweeper has taken its locks and swept once
	errorsBefore := strings.Count(logs.String(), "level=ERROR")

	b.ResetTimer()
	if err := c.Inventory.Do(ctx, c.Inventory.B().Flushall().Build()).Error(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	touched := ids[recoverySales*3/4]
	var touchedAt atomic.Int64
	var unavailable atomic.Int64
	// The buyer comes a second after the loss, when the sweeper has found every sale missing.
	const buyerAfter = time.Second
	go func() {
		time.Sleep(buyerAfter)
		for u := 0; ctx.Err() == nil; u++ {
			_, err := e.Buy(ctx, seckill.BuyRequest{SaleID: touched, UserID: fmt.Sprintf("late%d", u), Quantity: 1})
			if err == nil {
				touchedAt.Store(int64(time.Since(start) - buyerAfter))
				return
			}
			unavailable.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	// loaded counts the sales whose keys are back and not loading, read with sale.lua without
	// the engine (which would start rebuilds).
	loaded := func() int {
		n := 0
		for _, id := range ids {
			msgs, err := e.run(ctx, e.scripts.sale, e.keys(id), []string{""})
			if err == nil && len(msgs) > 0 {
				if code, _ := msgs[0].ToString(); code == "ok" {
					n++
				}
			}
		}
		return n
	}
	const limit = 10 * time.Minute
	for loaded() < recoverySales || touchedAt.Load() == 0 {
		if time.Since(start) > limit {
			b.Fatalf("not recovered in %s: %d of %d sales back", limit, loaded(), recoverySales)
		}
		time.Sleep(100 * time.Millisecond)
	}
	all := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(time.Duration(touchedAt.Load()).Milliseconds()), "touched_ms")
	b.ReportMetric(float64(all.Milliseconds()), "all_ms")
	b.ReportMetric(float64(unavailable.Load()), "buyer_503s")
	b.ReportMetric(float64(strings.Count(logs.String(), "level=ERROR")-errorsBefore), "error_lines")
	b.ReportMetric(float64(strings.Count(logs.String(), "\n")), "log_lines")
}
