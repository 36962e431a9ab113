//go:build unix

package memory

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) the process has used. A benchmark reports it per op
// next to ns/op: on a shared machine the wall clock counts the time other processes had the
// core, the CPU time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
