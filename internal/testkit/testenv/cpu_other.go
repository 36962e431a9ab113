//go:build !unix

package testenv

import (
	"testing"
	"time"
)

// ProcessCPU needs getrusage: elsewhere the benchmark that asks is skipped rather than
// reporting a CPU time it did not measure.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	tb.Skip("ProcessCPU: no getrusage on this platform")
	return 0
}
