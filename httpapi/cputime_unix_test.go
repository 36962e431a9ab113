//go:build unix

package httpapi_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used (user and system, every thread): on a shared
// machine a benchmark's CPU per operation moves far less than its wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
