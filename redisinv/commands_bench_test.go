package redisinv

// TestBuyCommands counts the Redis commands a rush of buys costs, per buy.lua call (docs/
// BENCHMARKS.md "Issue 31: commands per buy script and the Redis path's tail"). It resets and
// reads the server's INFO commandstats, so it runs only against a private server of its own:
//
//	SECKILL_BENCH_COMMANDS_REDIS=redis://127.0.0.1:6391/0 go test -run TestBuyCommands -v ./redisinv/
//
// bench/commands.sh runs it on two commits side by side. Skipped without the variable.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
)

func TestBuyCommands(t *testing.T) {
	url := os.Getenv("SECKILL_BENCH_COMMANDS_REDIS")
	if url == "" {
		t.Skip("SECKILL_BENCH_COMMANDS_REDIS (a private redis-server: the test resets its statistics) is not set")
	}
	buyers := 20000
	if s := os.Getenv("SECKILL_BENCH_COMMANDS_BUYERS"); s != "" {
		buyers, _ = strconv.Atoi(s)
	}
	stock := 100 // a rush: most buyers are told sold out
	if s := os.Getenv("SECKILL_BENCH_COMMANDS_STOCK"); s != "" {
		stock, _ = strconv.Atoi(s) // as many as the buyers: a flood of holds
	}
	c := dialT(t, url)
	limits := WithRateLimits(seckill.RateLimit{Rate: 10, Burst: 10}, seckill.RateLimit{Rate: 1000, Burst: 100})
	for _, v := range []struct {
		name string
		opts []Option
	}{
		{"grouped, no buy limits", nil},
		{"grouped, buy limits per user and address", []Option{limits}},
		{"one buyer per call, no buy limits", []Option{WithMaxBatch(1)}},
		{"one buyer per call, buy limits per user and address", []Option{WithMaxBatch(1), limits}},
	} {
		t.Run(v.name, func(t *testing.T) {
			e := newTestEngine(t, c.Inventory, nil, v.opts...) // nil: the server's clock (TIME), as in production
			ctx := context.Background()
			now := time.Now()
			def := seckill.Sale{ID: "rush", Name: "rush", PriceCents: 100, Stock: stock, StartsAt: now.Add(-time.Minute),
				EndsAt: now.Add(time.Hour), PerUserLimit: 1, HoldSeconds: 600, QueueLimit: 100, CreatedAt: now.Add(-time.Hour)}
			loadT(t, e, def)
			rdb := c.Inventory
			if err := rdb.Do(ctx, rdb.B().Arbitrary("CONFIG", "RESETSTAT").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			cpu := redistest.CPUSeconds(t, rdb)
			var next atomic.Int64
			outcomes := sync.Map{}
			var wg sync.WaitGroup
			start := time.Now()
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(buyers) {
							return
						}
						res, err := e.Buy(ctx, seckill.BuyRequest{SaleID: def.ID, UserID: fmt.Sprintf("u%d", i), Quantity: 1,
							IdempotencyKey: fmt.Sprintf("k%d", i), ClientAddr: fmt.Sprintf("10.0.%d.%d", i/250%250, i%250)})
						code := string(res.Reservation.Status)
						if err != nil {
							code = string(seckill.ErrorCode(err))
						}
						n, _ := outcomes.LoadOrStore(code, new(atomic.Int64))
						n.(*atomic.Int64).Add(1)
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			cpu = redistest.CPUSeconds(t, rdb) - cpu
			stats := redistest.CommandStats(t, rdb)
			var out []string
			outcomes.Range(func(k, v any) bool {
				out = append(out, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
				return true
			})
			sort.Strings(out)
			calls := stats["evalsha"] + stats["eval"]
			var total int64
			names := make([]string, 0, len(stats))
			for k, n := range stats {
				if k == "config|resetstat" || k == "info" {
					continue
				}
				total += n
				names = append(names, k)
			}
			sort.Slice(names, func(i, j int) bool { return stats[names[i]] > stats[names[j]] })
			var b strings.Builder
			fmt.Fprintf(&b, "%d buyers in %v (%s): %d script calls, %d commands, %.2f commands per script call (the call included), %.2f per buyer, %.1f µs of Redis CPU per buyer\n",
				buyers, elapsed.Round(time.Millisecond), strings.Join(out, ", "), calls, total, float64(total)/float64(calls),
				float64(total)/float64(buyers), cpu*1e6/float64(buyers))
			for _, k := range names {
				fmt.Fprintf(&b, "  %-18s %8d %7.2f per script call\n", k, stats[k], float64(stats[k])/float64(calls))
			}
			t.Log("\n" + b.String())
		})
	}
}
