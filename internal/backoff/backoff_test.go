package backoff

import (
	"testing"
	"time"
)

func TestJitteredStaysInItsBand(t *testing.T) {
	base, max := 2*time.Second, time.Minute
	for attempt := -1; attempt < 70; attempt++ {
		want := base
		for i := 1; i < attempt; i++ {
			want = min(want*2, max)
		}
		for range 50 {
			if got := Jittered(base, max, attempt); got < want/2 || got > want {
				t.Fatalf("Jittered(%v, %v, %d) = %v; want within [%v, %v]", base, max, attempt, got, want/2, want)
			}
		}
	}
}

func TestJitteredExamples(t *testing.T) {
	for _, c := range []struct {
		attempt int
		lo, hi  time.Duration
	}{{0, time.Second, 2 * time.Second}, {1, time.Second, 2 * time.Second}, {3, 4 * time.Second, 8 * time.Second},
		{6, 30 * time.Second, time.Minute}, {1 << 30, 30 * time.Second, time.Minute}} {
		for range 50 {
			if got := Jittered(2*time.Second, time.Minute, c.attempt); got < c.lo || got > c.hi {
				t.Fatalf("attempt %d: %v; want within [%v, %v]", c.attempt, got, c.lo, c.hi)
			}
		}
	}
}
