package leasedjob

import (
	"strings"
	"testing"
	"time"
)

// A zero field takes the kind's default, a set one is kept, and an empty owner is the kind's
// prefix and a random id, another for each worker.
func TestWithDefaults(t *testing.T) {
	d := Config{Interval: time.Second, Lease: time.Minute, BackoffBase: 2 * time.Second, BackoffMax: time.Hour, Batch: 16, MaxAttempts: 5}
	got := Config{Lease: 10 * time.Second, Batch: 3}.WithDefaults(d, "kind-")
	if got.Interval != time.Second || got.Lease != 10*time.Second || got.BackoffBase != 2*time.Second ||
		got.BackoffMax != time.Hour || got.Batch != 3 || got.MaxAttempts != 5 || got.Logger == nil || got.Clock == nil {
		t.Fatalf("WithDefaults = %+v", got)
	}
	other := Config{}.WithDefaults(d, "kind-")
	if !strings.HasPrefix(got.Owner, "kind-") || len(got.Owner) <= len("kind-") || other.Owner == got.Owner {
		t.Fatalf("owners %q and %q; want kind- and a random id each", got.Owner, other.Owner)
	}
	if kept := (Config{Owner: "me"}).WithDefaults(d, "kind-"); kept.Owner != "me" {
		t.Fatalf("owner %q, want me", kept.Owner)
	}
}

// Backoff is the jittered pause of the configured bounds: within the upper half of
// BackoffBase·2^(attempt-1), at most BackoffMax.
func TestBackoff(t *testing.T) {
	c := Config{BackoffBase: time.Second, BackoffMax: 4 * time.Second}
	for attempt, ceiling := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: 4 * time.Second} {
		if b := c.Backoff(attempt); b < ceiling/2 || b > ceiling {
			t.Fatalf("Backoff(%d) = %v, want %v..%v", attempt, b, ceiling/2, ceiling)
		}
	}
}
