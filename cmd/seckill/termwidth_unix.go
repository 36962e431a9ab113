//go:build linux || darwin

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// terminalWidth is f's terminal's width in columns (0 if unknown), asked of the terminal
// itself (TIOCGWINSZ), so that the progress line is never wrapped.
func terminalWidth(f *os.File) int {
	var ws struct{ rows, cols, xpixel, ypixel uint16 }
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws))); errno != 0 {
		return 0
	}
	return int(ws.cols)
}
