//go:build !linux

package rxstamp

import "syscall"

// control does nothing: this platform gives no receive timestamps here (Arrived says false).
func control(network, address string, c syscall.RawConn) error { return nil }
