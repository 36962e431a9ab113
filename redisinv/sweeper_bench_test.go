package redisinv

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
)

// BenchmarkSweepIdle measures what sweeping costs Redis when nobody buys: three instances with
// the production settings (250 ms ticks, 5 s reconcile, 3 s lock lease) over 1 000 and 10 000
// sales of which 100 are selling and the rest start in an hour, on a private redis-server; the
// per-sale sweeper of before (a lock and a reclaim per sale per tick) and the due-time sweeper
// side by side, in one run. It reports Redis commands/s over 10 s after a warm-up of 6 s (the
// first reconcile pass reads every sale once). Run it once:
//
//	go test -run '^$' -bench BenchmarkSweepIdle -benchtime 1x ./redisinv/
func BenchmarkSweepIdle(b *testing.B) {
	testenv.Redis(b)
	const selling, warmup, window = 100, 6 * time.Second, 10 * time.Second
	for _, n := range []int{1000, 10000} {
		for _, old := range []bool{true, false} {
			name := map[bool]string{false: "due-time", true: "per-sale"}[old]
			b.Run(name+"/sales="+itoa(n), func(b *testing.B) {
				_, url := startPrivateRedis(b)
				c := dialT(b, url)
				e := New(c.Inventory)
				ids := idleSales(b, e, n, selling)
				list := func(context.Context) ([]string, error) { return ids, nil }
				ctx, cancel := context.WithCancel(context.Background())
				runner := background.NewRunner(nil)
				for range 3 {
					locks := lock.New(c.Locks, &lock.Options{Lease: 3 * time.Second})
					b.Cleanup(func() { _ = locks.Close() })
					inst := New(c.Inventory)
					if old {
						runner.Start(&perSaleSweeper{e: inst, interval: 250 * time.Millisecond, list: list, locks: locks})
					} else {
						runner.Start(inst.Sweeper(250*time.Millisecond, list, locks))
					}
				}
				time.Sleep(warmup)
				b.ResetTimer()
				before := commandsProcessed(b, c.Inventory)
				time.Sleep(window)
				cmds := commandsProcessed(b, c.Inventory) - before - 1
				b.StopTimer()
				cancel()
				_ = runner.Stop(ctx)
				b.ReportMetric(float64(cmds)/window.Seconds(), "redis-cmds/s")
			})
		}
	}
}
