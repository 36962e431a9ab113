package main

import (
	"os/exec"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	m := median([]result{{handoffs: 3, p50: 3}, {handoffs: 1, p50: 1}, {handoffs: 2, p50: 2}})
	if m.handoffs != 2 || m.p50 != 2 {
		t.Fatalf("median = %+v", m)
	}
}

func TestHoldIsPrecise(t *testing.T) {
	start := time.Now()
	hold(config{hold: time.Millisecond, holdMode: "precise"})
	if d := time.Since(start); d < time.Millisecond || d > 50*time.Millisecond {
		t.Fatalf("hold took %v", d)
	}
}

// TestRunSmoke runs the whole tool briefly against a private redis-server.
func TestRunSmoke(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	err := run([]string{"-rounds", "1", "-duration", "200ms", "-uncontended", "100ms", "-goroutines", "4"})
	if err != nil {
		t.Fatal(err)
	}
}
