//go:build unix

package testenv

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the CPU time (user and system) the process has used so far, for benchmarks
// whose wall time is mostly waiting (a SQLite commit's fsync): the difference of two readings
// is what the code between them cost, with the collector's work and any other goroutine's.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
