package lock

import (
	"context"
	"fmt"
	"time"
)

// Lease is one acquisition of a lock. All acquisitions that make up one hold (the outermost
// one and its re-entries) share its token and its end: Done is closed, and Context cancelled,
// when the hold ends, that is after the last Unlock (cause ErrReleased) or when the hold is
// lost (cause wrapping ErrLost). Loss is detected within one renewal period (lease/3) of the
// key vanishing or changing owner, and at the latest when the lease runs out unrenewed.
type Lease struct {
	h *hold
}

// Token returns the hold's fencing token. Tokens of one lock name increase strictly from one
// hold to the next (a re-entry returns the token of the hold it joins). Pass it to every
// resource the lock protects and have the resource reject a token lower than the highest it
// has seen (see Fence); read the package documentation for when tokens can go backwards.
func (l *Lease) Token() uint64 { return l.h.token }

// Done returns a channel closed when the hold ends, released or lost.
func (l *Lease) Done() <-chan struct{} { return l.h.ctx.Done() }

// Context returns a context cancelled when the hold ends; context.Cause tells why (ErrReleased
// or an error wrapping ErrLost). Derive the work done under the lock from it so that the
// work stops when the lock is lost.
func (l *Lease) Context() context.Context { return l.h.ctx }

// Err returns nil while the hold lasts, then ErrReleased or an error wrapping ErrLost.
func (l *Lease) Err() error {
	if l.h.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.h.ctx)
}

// hold is the local view of one hold of a lock by one handle. Its monitor ticks (renewal or
// check, every lease/3) are run by the Client's watchdog; end removes it from there.
type hold struct {
	m     *Mutex
	token uint64
	count int // reentrancy depth, guarded by m.mu
	// pendingRelease is the id of an Unlock that failed with an unknown outcome, reused by
	// the next Unlock (guarded by m.mu)
	pendingRelease string
	// takenBy is the attempt id whose fast-path take started the hold, "" if it started
	// otherwise (hand-off, quorum); read-only
	takenBy  string
	lease    time.Duration
	watchdog bool
	ctx      context.Context
	cancel   context.CancelCauseFunc

	// guarded by the watchdog's mutex
	due        time.Time // next tick
	ticking    bool
	validUntil time.Time // written only by newHold and tick, which never overlap
}

func newHold(m *Mutex, token uint64, count int, lease time.Duration, watchdog bool, validUntil time.Time, takenBy string) *hold {
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &hold{
		m: m, token: token, count: count, lease: lease, watchdog: watchdog,
		ctx: ctx, cancel: cancel, validUntil: validUntil, takenBy: takenBy,
	}
	h.due = h.nextTick(time.Now(), h.lease/3)
	if !m.c.wd.add(h) {
		h.cancel(fmt.Errorf("%w: client closed", ErrLost))
	}
	return h
}

// end ends the hold locally with cause (the first cause wins) and stops its monitoring.
func (h *hold) end(cause error) {
	h.cancel(cause)
	h.m.c.wd.remove(h)
}

// nextTick is when the next tick is due: d after now, but never past the validity.
func (h *hold) nextTick(now time.Time, d time.Duration) time.Time {
	t := now.Add(d)
	if h.validUntil.Before(t) {
		return h.validUntil
	}
	return t
}

// tick renews the lease in watchdog mode; with an explicit lease it only checks that the key
// is still ours, and ends the hold when the lease runs out. A renewal or check that finds the
// lock gone ends the hold at once (so loss is noticed within one period, lease/3); one that
// fails on the network is retried sooner, and the hold ends when its validity passes without
// a success.
func (h *hold) tick() {
	if h.ctx.Err() != nil {
		return
	}
	if !time.Now().Before(h.validUntil) {
		h.end(fmt.Errorf("%w: lease of %v ran out unrenewed", ErrLost, h.lease))
		return
	}
	period := h.lease / 3
	renewTo := time.Duration(0)
	if h.watchdog {
		renewTo = h.lease
	}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(h.ctx, max(period, 10*time.Millisecond))
	ok, err := h.m.renew(ctx, h.token, renewTo)
	cancel()
	next := period
	switch {
	case err == nil && ok:
		if h.watchdog {
			h.validUntil = sent.Add(h.m.c.validity(h.lease))
		}
	case err == nil:
		h.end(fmt.Errorf("%w: the lock's key vanished or changed owner", ErrLost))
		return
	default:
		next = max(period/4, time.Millisecond)
	}
	h.m.c.wd.reschedule(h, h.nextTick(time.Now(), next))
}

// renew resets the TTL to lease (0: only checks). ok=false means surely not held.
func (m *Mutex) renew(ctx context.Context, token uint64, lease time.Duration) (bool, error) {
	leaseMs := int64(0)
	if lease > 0 {
		leaseMs = ms(lease)
	}
	if len(m.c.nodes) == 1 {
		n, err := scriptRenew.run(ctx, m.c.nodes[0].r, m.keys[:1], m.owner, token, leaseMs).Int64()
		if err != nil {
			return false, err
		}
		return n == 1, nil
	}
	return m.renewQuorum(ctx, token, leaseMs)
}
