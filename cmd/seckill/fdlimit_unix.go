//go:build unix

package main

import "syscall"

// openFileLimit is the process's soft limit of open files (Go raises it to the hard limit at
// start).
func openFileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return uint64(r.Cur), true //nolint:unconvert // int64 on some systems
}
