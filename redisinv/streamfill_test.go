package redisinv

import (
	"testing"
	"time"
)

// The fullest-stream gauge shows the largest count of the sales trimmed within the window,
// and forgets a sale no longer trimmed (ended, cooled).
func TestStreamFillFullestWithinWindow(t *testing.T) {
	var f streamFill
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := f.fullest(t0); got != 0 {
		t.Fatalf("fullest of nothing = %d; want 0", got)
	}
	f.note("a", 500, t0)
	f.note("b", 20, t0.Add(30*time.Second))
	if got := f.fullest(t0.Add(40 * time.Second)); got != 500 {
		t.Fatalf("fullest = %d; want 500 (a)", got)
	}
	f.note("b", 30, t0.Add(50*time.Second)) // a sale's newest count replaces its last
	if got := f.fullest(t0.Add(streamFillWindow + time.Second)); got != 30 {
		t.Fatalf("fullest after a's window = %d; want 30 (b)", got)
	}
	if len(f.left) != 1 {
		t.Fatalf("%d sales remembered; want 1: a sale out of the window is forgotten", len(f.left))
	}
}
