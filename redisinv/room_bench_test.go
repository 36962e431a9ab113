package redisinv

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// BenchmarkRoomJoin: joins of distinct entrants to one draw room before its start, from 16
// goroutines per CPU through one engine (one script call each, pipelined by rueidis).
func BenchmarkRoomJoin(b *testing.B) {
	c := dialT(b, testenv.Redis(b))
	clock := seckilltest.NewManualClock(t0.Add(6 * time.Minute))
	prefix := testPrefix()
	e := New(c.Inventory, WithTestClock(clock), WithPrefix(prefix))
	b.Cleanup(func() { _ = e.Close(); dropPrefix(b, c.Inventory, prefix) })
	s := roomSale("bjoin", 100, seckill.RoomPolicy{Order: seckill.RoomDraw, OpensSeconds: 600, AdmitPerSecond: 500, TokenSeconds: 60})
	ctx := context.Background()
	if err := e.LoadSale(ctx, s, 0); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := seckill.EntrantID(s.ID, fmt.Sprint("u", n.Add(1)))
			if _, err := e.Join(ctx, s, id, uint64(n.Load())); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRoomAdmit: one Admit call that admits seckill.RoomAdmitBatch entrants (the most one
// call admits) from a room of them. Its set-up joins them one by one: run it with a count
// (-benchtime 10x), not a duration.
func BenchmarkRoomAdmit(b *testing.B) {
	c := dialT(b, testenv.Redis(b))
	prefix := testPrefix()
	b.Cleanup(func() { dropPrefix(b, c.Inventory, prefix) })
	ctx := context.Background()
	for i := range b.N {
		b.StopTimer()
		clock := seckilltest.NewManualClock(t0.Add(6 * time.Minute))
		e := New(c.Inventory, WithTestClock(clock), WithPrefix(prefix))
		s := roomSale(fmt.Sprint("badmit", i), 100, seckill.RoomPolicy{Order: seckill.RoomFIFO, OpensSeconds: 600,
			MaxActive: seckill.RoomAdmitBatch, TokenSeconds: 60})
		if err := e.LoadSale(ctx, s, 0); err != nil {
			b.Fatal(err)
		}
		for j := range seckill.RoomAdmitBatch {
			if _, err := e.Join(ctx, s, seckill.EntrantID(s.ID, fmt.Sprint("u", j)), 0); err != nil {
				b.Fatal(err)
			}
		}
		clock.Set(s.StartsAt)
		b.StartTimer()
		st, err := e.Admit(ctx, s)
		if err != nil || st.Admitted != seckill.RoomAdmitBatch {
			b.Fatalf("Admit = %+v, %v", st, err)
		}
		b.StopTimer()
		_ = e.Close()
	}
}
