//go:build !unix

package testenv

import (
	"testing"
	"time"
)

// ProcessCPU is not measured without getrusage: it is 0, and so is every CPU figure a
// benchmark reports from it here.
func ProcessCPU(testing.TB) time.Duration { return 0 }
