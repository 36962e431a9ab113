package memory

import (
	"context"
	"fmt"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// stepClock is a benchmark clock that moves only when told, with no locking cost beyond an atomic.
type stepClock struct{ ns atomic.Int64 }

func (c *stepClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *stepClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func benchSale(id string, stock int, start time.Time) seckill.Sale {
	return seckill.Sale{
		ID: id, Name: id, PriceCents: 100, Stock: stock, StartsAt: start, EndsAt: start.Add(365 * 24 * time.Hour),
		PerUserLimit: 1, HoldSeconds: 3600, QueueLimit: 0,
	}
}

func users(n int) []string {
	u := make([]string, n)
	for i := range u {
		u[i] = "u" + strconv.Itoa(i)
	}
	return u
}

// BenchmarkBuy measures the hot path: one buy = one hold for a new user on a sale with stock to
// spare. "one-sale" is every goroutine on the same hot sale (one critical section);
// "sale-per-goroutine" shows how the engine scales across sales. cpu-ns/op is the process's CPU
// time per buy (the collector's included), which a busy shared machine inflates far less than
// the wall clock.
func BenchmarkBuy(b *testing.B) {
	ctx := context.Background()
	b.Run("one-sale", func(b *testing.B) {
		clock := &stepClock{}
		clock.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		e := New(clock)
		if err := e.LoadSale(ctx, benchSale("hot", b.N+1, clock.Now()), 0); err != nil {
			b.Fatal(err)
		}
		us := users(b.N)
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		cpu := testenv.ProcessCPU(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1) - 1
				if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "hot", UserID: us[i], Quantity: 1}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(testenv.ProcessCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
	})
	b.Run("sale-per-goroutine", func(b *testing.B) {
		clock := &stepClock{}
		clock.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		e := New(clock)
		us := users(b.N)
		var next, sales atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		cpu := testenv.ProcessCPU(b)
		b.RunParallel(func(pb *testing.PB) {
			id := "s" + strconv.FormatInt(sales.Add(1), 10)
			if err := e.LoadSale(ctx, benchSale(id, b.N+1, clock.Now()), 0); err != nil {
				b.Error(err)
				return
			}
			for pb.Next() {
				i := next.Add(1) - 1
				if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: id, UserID: us[i], Quantity: 1}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(testenv.ProcessCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
	})
}

// BenchmarkReclaim measures the cost of reclaiming one expired hold while n holds are
// outstanding. n holds are spaced evenly over one hold period; each op advances the clock by one
// spacing, so exactly one hold expires, and reclaims it. When all n have expired, n new holds
// are bought with the timer stopped. Flat ns/op across n shows that reclaim is ordered by expiry
// (O(log n)) and never scans the holders.
func BenchmarkReclaim(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{100, 10_000, 1_000_000} {
		b.Run(fmt.Sprintf("holds=%d", n), func(b *testing.B) {
			clock := &stepClock{}
			clock.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
			e := New(clock)
			sale := benchSale("s", n+b.N+1, clock.Now())
			sale.HoldSeconds = 1
			if err := e.LoadSale(ctx, sale, 0); err != nil {
				b.Fatal(err)
			}
			step := sale.HoldDuration() / time.Duration(n)
			us := users(n + b.N)
			next := 0
			fill := func() {
				for range n {
					clock.Advance(step)
					if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: us[next], Quantity: 1}); err != nil {
						b.Fatal(err)
					}
					next++
				}
			}
			fill()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%n == 0 {
					b.StopTimer()
					fill()
					b.StartTimer()
				}
				clock.Advance(step)
				if got, err := e.Reclaim(ctx, "s"); err != nil || got != 1 {
					b.Fatalf("op %d: reclaimed %d, %v; want exactly 1", i, got, err)
				}
			}
		})
	}
}
