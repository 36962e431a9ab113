package lock

import (
	"errors"
	"sync"
)

// ErrStaleToken is returned by Fence.Admit for a token lower than one already admitted.
var ErrStaleToken = errors.New("lock: stale fencing token")

// Fence is the resource side of fencing, shown in its simplest form: it remembers the highest
// token it has admitted and rejects any lower one. A holder that was paused past its lease (a
// GC pause, a stopped VM, a slow network) still believes it holds the lock, but by then a newer
// holder with a higher token has touched the resource, so the stale holder's request is
// refused.
//
// Check the token on every access that matters, reads included, inside the resource's own
// atomicity (a database transaction, a compare-and-set, a Lua script): for a read-modify-write,
// admitting the read is what stops an older holder's write from landing after a newer holder
// has read. Equal tokens are admitted, so one hold can make many calls.
//
// A Fence is safe for concurrent use. Its zero value admits every token >= 0.
type Fence struct {
	mu  sync.Mutex
	max uint64
}

// Admit records token and returns nil if it is at least the highest admitted so far; otherwise
// it returns ErrStaleToken and changes nothing.
func (f *Fence) Admit(token uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token < f.max {
		return ErrStaleToken
	}
	f.max = token
	return nil
}

// Highest returns the highest token admitted so far.
func (f *Fence) Highest() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.max
}
