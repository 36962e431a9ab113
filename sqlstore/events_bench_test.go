package sqlstore

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// benchRushSales is how many sales a rush's events are spread over.
const benchRushSales = 4

// rushEvents returns n hold events of a buy rush from reservation number *next on, round robin
// over benchRushSales sales: each a new reservation, created at the moment of its event, with
// an id shaped like the memory engine's ("<sale>-<16 hex seq><16 hex random>").
func rushEvents(n int, next *int) []seckill.Event {
	events := make([]seckill.Event, n)
	for i := range events {
		*next++
		k := *next
		sale := fmt.Sprintf("s%d", k%benchRushSales)
		at := testT0.Add(time.Duration(k) * time.Microsecond)
		exp := at.Add(time.Minute)
		events[i] = seckill.Event{At: at, Reservation: seckill.Reservation{
			ID:     fmt.Sprintf("%s-%016x%016x", sale, k, uint64(k)*0x9e3779b97f4a7c15),
			SaleID: sale, UserID: fmt.Sprintf("u%d", k), Quantity: 1, Status: seckill.StatusHeld,
			ExpiresAt: &exp, AmountCents: testPrice, CreatedAt: at, Seq: uint64(k),
		}}
	}
	return events
}

// openRushStore opens a SQLite file store (WAL, synchronous FULL: the embedded default) that
// knows the rush's sales.
func openRushStore(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.Context(), "sqlite://"+filepath.Join(b.TempDir(), "rush.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	for i := range benchRushSales {
		if err := s.CreateSale(b.Context(), testSale(fmt.Sprintf("s%d", i), 1_000_000_000, 0)); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkApplyEventsRush stores a buy rush's hold events on SQLite through ApplyEvents, in
// batches of the pipeline's default size (256), each event a new reservation: ns/event is the
// time to store one (mostly waiting for the commit's fsync), cpu-ns/event the CPU it costs.
func BenchmarkApplyEventsRush(b *testing.B) { benchRush(b, openRushStore(b)) }

// BenchmarkOutboxRush is BenchmarkApplyEventsRush with the export outbox on (EnableOutbox: the
// memory engine's events exported), every event also written to the outbox.
func BenchmarkOutboxRush(b *testing.B) {
	s := openRushStore(b)
	s.EnableOutbox()
	benchRush(b, s)
}

// benchRush stores b.N batches of a rush's hold events in s.
func benchRush(b *testing.B, s *Store) {
	const batch = 256
	next := 0
	var batches [][]seckill.Event // built 64 at a time, outside the timed loop
	b.ReportAllocs()
	cpu := testenv.ProcessCPU(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i == len(batches) {
			b.StopTimer()
			built := testenv.ProcessCPU(b)
			for range 64 {
				batches = append(batches, rushEvents(batch, &next))
			}
			cpu += testenv.ProcessCPU(b) - built // not the store's
			b.StartTimer()
		}
		if err := s.ApplyEvents(b.Context(), batches[i]); err != nil {
			b.Fatal(err)
		}
	}
	cpu = testenv.ProcessCPU(b) - cpu
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*batch), "cpu-ns/event")
}
