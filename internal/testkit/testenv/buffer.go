package testenv

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a server's goroutines (a log handler, a child's output) and
// the test may write and read at once: a test reading what a server logged.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
