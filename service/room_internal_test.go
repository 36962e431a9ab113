package service

import (
	"math"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestRoomRateAndEstimate: the observed rate is the serving counter's rise over the window
// (at least a second of samples), forgotten once the room is not observed; the estimate uses
// it, else admit_per_second, else none; p90 is above p50.
func TestRoomRateAndEstimate(t *testing.T) {
	r := newRoomRates()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := r.rate("s", t0); got != 0 {
		t.Fatalf("rate of an unobserved room: %v", got)
	}
	r.observe("s", 0, t0)
	r.observe("s", 5, t0.Add(500*time.Millisecond))
	if got := r.rate("s", t0.Add(500*time.Millisecond)); got != 0 {
		t.Fatalf("rate from half a second of samples: %v, want none", got)
	}
	for i := 1; i <= 40; i++ { // 20 admissions a second for 10 s, sampled every 250 ms
		r.observe("s", int64(5*i), t0.Add(time.Duration(i)*250*time.Millisecond))
	}
	now := t0.Add(10 * time.Second)
	if got := r.rate("s", now); math.Abs(got-20) > 0.01 {
		t.Fatalf("rate %v, want 20/s", got)
	}
	s := &Service{rates: r}
	sale := seckill.Sale{ID: "s", Room: &seckill.RoomPolicy{AdmitPerSecond: 500}}
	p50, p90 := s.estimate(sale, now, 100, 0, 0)
	if p50 == nil || *p50 != 5 || *p90 <= *p50 {
		t.Fatalf("estimate for 100 at 20/s: %v %v, want p50 5 s and a larger p90", deref(p50), deref(p90))
	}
	// Not observed for a window: forgotten, and the policy's rate is the estimate's.
	later := now.Add(11 * time.Second)
	r.forget(later)
	if p50, _ := s.estimate(sale, later, 100, 0, 0); p50 == nil || *p50 != 0.2 {
		t.Fatalf("estimate from admit_per_second: %v, want 0.2", deref(p50))
	}
	none := seckill.Sale{ID: "x", Room: &seckill.RoomPolicy{MaxActive: 3}}
	if p50, p90 := s.estimate(none, later, 10, 0, 0); p50 != nil || p90 != nil {
		t.Fatal("an estimate without any rate")
	}
	// The pre-queue's: its lead (the time to the start) comes first.
	if p50, p90 := s.estimate(sale, later, 50, 90, 30); *p50 != 30.1 || *p90 <= 30.1 {
		t.Fatalf("pre-queue estimate %v %v", *p50, *p90)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
