package seckilltest

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestModelInventory runs the suite against the reference model itself.
func TestModelInventory(t *testing.T) {
	TestInventory(t, func(t *testing.T, c seckill.Clock) seckill.Inventory { return NewModel(c) })
}

// TestStressCatchesBrokenEngines is the negative control of the concurrency checker: the same
// run that passes on Model must report violations on a Model with one deliberate bug.
func TestStressCatchesBrokenEngines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults modelFaults
		want   string // a violation that must be among those reported; "" for any
		tries  int    // the racy fault depends on the scheduler: allow a few runs
	}{
		// The mop-up after the drain sells the 101st unit of 100 whatever the scheduler did.
		{"OffByOne", modelFaults{offByOne: true}, "mop-up", 1},
		// Abandoned holds always exist, and their units never come back.
		{"ExpiryKeepsUnits", modelFaults{keepExpired: true}, "did not come back", 1},
		{"RacyCheckThenAct", modelFaults{racyBuy: true}, "", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultStressConfig()
			if testing.Short() {
				cfg.Buyers = 1000
			}
			for try := 1; try <= tc.tries; try++ {
				clock := NewManualClock(epoch)
				m := NewModel(clock)
				m.faults = tc.faults
				rep := runStress(m, clock, cfg)
				all := strings.Join(rep.Violations, "\n")
				if len(rep.Violations) > 0 && strings.Contains(all, tc.want) {
					t.Logf("caught on run %d (seed %d):\n%s", try, rep.Seed, all)
					return
				}
				t.Logf("run %d (seed %d) did not report %q: %v\n%s", try, rep.Seed, tc.want, rep.Stats, all)
			}
			t.Fatalf("the checker did not catch a broken engine (%s) in %d runs", tc.name, tc.tries)
		})
	}
}

// TestStressCheckerReportsNothingForModel guards the checker against false alarms on a smaller,
// slower-clock run than the suite's (different timing, same checks).
func TestStressCheckerReportsNothingForModel(t *testing.T) {
	cfg := defaultStressConfig()
	cfg.Buyers, cfg.Workers, cfg.Stock, cfg.Holdback, cfg.QueueLimit = 800, 16, 20, 0, 5
	cfg.Step = 50 * time.Millisecond
	clock := NewManualClock(epoch)
	rep := runStress(NewModel(clock), clock, cfg)
	if len(rep.Violations) > 0 {
		t.Fatalf("violations on the reference model:\n%s", strings.Join(rep.Violations, "\n"))
	}
	t.Logf("seed %d, %v", rep.Seed, rep.Stats)
}
