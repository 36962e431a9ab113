package memory

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// heapLive is the live heap after two collections (the second frees what the first's
// finalizers and sweeps left), so that a difference of two readings is what stayed reachable.
func heapLive() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkFootprint measures what the engine keeps per hold and per queued buyer, from the
// live heap (runtime.MemStats.HeapAlloc after a collection) before LoadSale and after the buys.
// Each op loads a fresh sale of stock 100 000 with a queue limit of 10× its stock, as the
// reported sale had:
//   - holds=N: N buyers get a hold; B/hold is the whole sale's heap (definition, maps, holds)
//     divided by N, so a fixed cost that does not follow use shows as a large figure at small N.
//   - queued=N: every unit is held (100 000 holds), then N buyers queue; B/queued is the heap
//     those N added, divided by N.
//
// sale-MB is the sale's whole heap in MiB after the buys.
func BenchmarkFootprint(b *testing.B) {
	const stock = 100_000
	for _, holds := range []int{10, 1_000, stock} {
		b.Run(fmt.Sprintf("holds=%d", holds), func(b *testing.B) {
			us := users(holds)
			var perHold, total float64
			for range b.N {
				e, clock := footprintEngine()
				before := heapLive()
				footprintSale(b, e, clock, stock)
				footprintBuys(b, e, us)
				after := heapLive()
				runtime.KeepAlive(e)
				total = float64(after - before)
				perHold = total / float64(holds)
			}
			b.ReportMetric(perHold, "B/hold")
			b.ReportMetric(total/(1<<20), "sale-MB")
		})
	}
	for _, queued := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			us := users(stock + queued)
			var perQueued, total float64
			for range b.N {
				e, clock := footprintEngine()
				before := heapLive()
				footprintSale(b, e, clock, stock)
				footprintBuys(b, e, us[:stock])
				held := heapLive()
				footprintBuys(b, e, us[stock:])
				after := heapLive()
				runtime.KeepAlive(e)
				total = float64(after - before)
				perQueued = float64(after-held) / float64(queued)
			}
			b.ReportMetric(perQueued, "B/queued")
			b.ReportMetric(total/(1<<20), "sale-MB")
		})
	}
}

func footprintEngine() (*Engine, *stepClock) {
	clock := &stepClock{}
	clock.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return New(clock), clock
}

func footprintSale(b *testing.B, e *Engine, clock *stepClock, stock int) {
	b.Helper()
	sale := benchSale("s", stock, clock.Now())
	sale.QueueLimit = 10 * stock
	if err := e.LoadSale(context.Background(), sale, 0); err != nil {
		b.Fatal(err)
	}
}

func footprintBuys(b *testing.B, e *Engine, us []string) {
	b.Helper()
	for _, u := range us {
		if _, err := e.Buy(context.Background(), seckill.BuyRequest{SaleID: "s", UserID: u, Quantity: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
