package wait

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if !Sleep(t.Context(), time.Millisecond) {
		t.Fatal("Sleep with a live context reported it was cut short")
	}
	if !Sleep(t.Context(), 0) {
		t.Fatal("Sleep(0) with a live context reported it was cut short")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// An hour's sleep that ignored the cancel would end in the test's own timeout.
	if Sleep(ctx, time.Hour) || Sleep(ctx, 0) {
		t.Fatal("Sleep with a cancelled context reported the full wait")
	}
}

// Every calls fn once per interval, not at the start, and returns when its context ends.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func(context.Context) {
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	<-done // an Every that did not return after its context ended hangs until the test's timeout
	if n := calls.Load(); n != 3 {
		t.Fatalf("fn called %d times, want 3 (none after the cancel)", n)
	}

	calls.Store(0)
	Every(ctx, time.Millisecond, func(context.Context) { calls.Add(1) })
	if n := calls.Load(); n != 0 {
		t.Fatalf("Every with a cancelled context called fn %d times", n)
	}
}
