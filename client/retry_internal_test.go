package client

import (
	"testing"
	"time"
)

// The wait before a retry is between half and all of what the server asked for, and never
// more than maxWait however long it asked (or DefaultRetryWait when it did not say).
func TestRetryWaitIsCapped(t *testing.T) {
	c := New("http://127.0.0.1:1", WithRetries(2, 200*time.Millisecond))
	for range 1000 {
		if w := c.retryWait(time.Second); w < 100*time.Millisecond || w > 200*time.Millisecond {
			t.Fatalf("Retry-After 1s, maxWait 200ms: waited %v, want 100–200 ms", w)
		}
		if w := c.retryWait(40 * time.Millisecond); w < 20*time.Millisecond || w > 40*time.Millisecond {
			t.Fatalf("Retry-After 40ms: waited %v, want 20–40 ms", w)
		}
		if w := c.retryWait(0); w > min(DefaultRetryWait, 200*time.Millisecond) {
			t.Fatalf("no Retry-After: waited %v, want at most %v", w, min(DefaultRetryWait, 200*time.Millisecond))
		}
	}
}
