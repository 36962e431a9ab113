package pipeline_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/pipeline"
	"github.com/seckill-go/seckill/sqlstore"
)

// discard is a sink that stores nothing: the pipeline's own cost.
type discard struct{}

func (discard) ApplyEvents(context.Context, []seckill.Event) error { return nil }

// BenchmarkPipelineRush sends a buy rush's hold events (each a new reservation, over four
// sales) into a channel as large as the server's, and measures until the pipeline has stored
// them all: in the embedded default's SQLite file (synchronous FULL), and in a sink that
// stores nothing (the fill loop's own cost). The events are built before the timer runs.
func BenchmarkPipelineRush(b *testing.B) {
	b.Run("SQLite", func(b *testing.B) {
		s, err := sqlstore.Open(b.Context(), "sqlite://"+filepath.Join(b.TempDir(), "rush.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		for i := range 4 {
			sale := seckill.Sale{ID: fmt.Sprintf("s%d", i), Name: "Sale", PriceCents: 1999, Stock: 1_000_000_000,
				StartsAt: t0, EndsAt: t0.Add(time.Hour), PerUserLimit: 5, HoldSeconds: 60, CreatedAt: t0}
			if err := s.CreateSale(b.Context(), sale); err != nil {
				b.Fatal(err)
			}
		}
		benchPipeline(b, s, t0)
	})
	b.Run("Discard", func(b *testing.B) { benchPipeline(b, discard{}, time.Now()) })
}

// benchPipeline runs a pipeline into sink and sends it b.N hold events.
func benchPipeline(b *testing.B, sink pipeline.Sink, t0 time.Time) {
	events := make([]seckill.Event, b.N)
	for k := range events {
		sale := fmt.Sprintf("s%d", k%4)
		at := t0.Add(time.Duration(k) * time.Microsecond)
		exp := at.Add(time.Minute)
		events[k] = seckill.Event{At: at, Reservation: seckill.Reservation{
			ID:     fmt.Sprintf("%s-%016x%016x", sale, k, uint64(k)*0x9e3779b97f4a7c15),
			SaleID: sale, UserID: fmt.Sprintf("u%d", k), Quantity: 1, Status: seckill.StatusHeld,
			ExpiresAt: &exp, AmountCents: 1999, CreatedAt: at, Seq: uint64(k + 1),
		}}
	}
	in := make(chan seckill.Event, 1<<16)
	p := pipeline.New(sink, in, pipeline.Config{})
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	b.ReportAllocs()
	cpu := testenv.ProcessCPU(b)
	b.ResetTimer()
	for _, e := range events {
		in <- e
	}
	for p.Applied() < uint64(b.N) {
		time.Sleep(50 * time.Microsecond)
	}
	b.StopTimer()
	b.ReportMetric(float64((testenv.ProcessCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/event")
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
