package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// acquireSingle is acquire on one Redis deployment: fair, queue-based, woken by hand-off.
//
// The order of steps is what makes lost wake-ups impossible: the waiter registers with the
// subscriber and waits until its channel is confirmed subscribed BEFORE the try whose "busy"
// answer it then sleeps on. Any release after that try publishes a hand-off the waiter
// receives; a hand-off it missed anyway (reconnect) is claimed by its next try, which comes
// at the latest after min(remaining TTL, WaiterTimeout/3).
func (m *Mutex) acquireSingle(ctx context.Context, wait time.Duration, deadline time.Time, lease time.Duration, watchdog bool) (*Lease, error) {
	nd := m.c.nodes[0]
	entry := m.attemptID(ms(lease))
	wttl := m.c.opts.WaiterTimeout
	args := []any{entry} // try once, never queue
	if wait != 0 {
		args = append(args, ms(wttl)) // join the queue while busy
	}

	w := waitState{sub: nd.sub, ch: m.channel, entry: entry}
	defer w.leave()
	// If this process already listens on the lock's channel, join first: then the first try is
	// also the last one before sleeping, and contended acquisitions cost a single round trip.
	if wait != 0 && nd.sub.isReady(m.channel) {
		if err := w.join(); err != nil {
			return nil, err
		}
	}

	for {
		sent := time.Now()
		v, err := scriptAcquire.run(ctx, nd.r, m.keys, args...).Result()
		var res acquireReply
		if err == nil {
			res, err = decodeAcquire(v)
		}
		if err != nil {
			// The script may have run (a timeout after sending): undo whatever it did.
			m.abandon(ctx, entry)
			return nil, fmt.Errorf("lock: acquire %q: %w", m.name, err)
		}
		if res.held {
			takenBy := ""
			if res.fresh {
				takenBy = entry
			}
			return m.held(res.token, res.count, lease, watchdog, sent, takenBy), nil
		}
		if wait == 0 {
			return nil, ErrNotAcquired
		}
		if !w.joined {
			if err := w.join(); err != nil {
				m.giveUp(ctx, entry)
				return nil, err
			}
		}
		if !w.subscribed {
			// Wait for the subscription, then try once more: that try is the final one.
			if err := m.sleep(ctx, deadline, w.ready, nil, wttl/3, entry); err != nil {
				return nil, err
			}
			w.subscribed = true
			continue
		}
		// Busy: sleep until handed the lock, nudged, or the fallback timer fires (the
		// lock's remaining TTL, or a third of the waiter timeout to keep our place).
		pttl := res.pttl
		if pttl <= 0 || pttl > wttl/3 {
			pttl = wttl / 3
		}
		var token string
		if err := m.sleep(ctx, deadline, nil, w.mbox, pttl, entry, &token); err != nil {
			return nil, err
		}
		if token != "" {
			tok, perr := strconv.ParseUint(token, 10, 64)
			if perr == nil {
				return m.held(tok, 1, lease, watchdog, time.Now(), ""), nil
			}
		}
	}
}

// waitState is one attempt's registration with the subscriber.
type waitState struct {
	sub        *subscriber
	ch, entry  string
	mbox       chan string
	ready      <-chan struct{}
	joined     bool
	subscribed bool // the subscription was confirmed before the last try was sent
}

func (w *waitState) join() error {
	w.mbox = make(chan string, 2)
	ready, err := w.sub.join(w.ch, w.entry, w.mbox)
	if err != nil {
		return err
	}
	w.ready, w.joined = ready, true
	select {
	case <-ready:
		w.subscribed = true
	default:
	}
	return nil
}

func (w *waitState) leave() {
	if w.joined {
		w.sub.leave(w.ch, w.entry)
	}
}

// sleep waits for ready to close, a mailbox message, or d to pass; it returns an error (after
// leaving the queue) when ctx ends or the deadline passes. A hand-off token is stored in *tok.
func (m *Mutex) sleep(ctx context.Context, deadline time.Time, ready <-chan struct{}, mbox chan string, d time.Duration, entry string, tok ...*string) error {
	if !deadline.IsZero() {
		left := time.Until(deadline)
		if left <= 0 {
			m.giveUp(ctx, entry)
			return ErrNotAcquired
		}
		if left < d {
			d = left
		}
	}
	t := time.NewTimer(max(d, time.Millisecond))
	defer t.Stop()
	select {
	case <-ready:
	case v := <-mbox:
		if len(tok) > 0 {
			*tok[0] = v
		}
	case <-t.C:
	case <-m.c.done:
		m.giveUp(ctx, entry)
		return ErrClosed
	case <-ctx.Done():
		m.giveUp(ctx, entry)
		return ctx.Err()
	}
	return nil
}

// giveUp leaves the queue. If the lock was handed to this attempt meanwhile, the script gives
// it on to the next waiter. Best effort: if Redis cannot be reached, the entry lapses after
// WaiterTimeout (and a hand-off to it after its lease).
func (m *Mutex) giveUp(ctx context.Context, entry string) {
	m.cancelScript(ctx, entry, "0")
}

// abandon undoes an acquire call that failed with an unknown outcome: it leaves the queue and,
// if the handle held nothing before, gives back any hold the call may have taken; if the
// handle held the lock already, it takes back the level the call may have counted (Redis
// remembers which attempt counted last), and the hold stays.
func (m *Mutex) abandon(ctx context.Context, entry string) {
	m.mu.Lock()
	orphan := m.hold == nil || m.hold.ctx.Err() != nil
	m.mu.Unlock()
	if orphan {
		m.cancelScript(ctx, entry, "1")
	} else {
		m.cancelScript(ctx, entry, "0")
	}
}

func (m *Mutex) cancelScript(ctx context.Context, entry, orphan string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = scriptCancel.run(ctx, m.c.nodes[0].r, m.keys, entry, orphan).Err()
}

// acquireReply is acquire.lua's answer: held (with the hold's token and the reentrancy count
// after the call), or busy (with the lock key's remaining TTL).
type acquireReply struct {
	held  bool
	fresh bool // took the free lock, count 1; if nobody was queued the value is "<attempt id>|<token>|1|0||"
	token uint64
	count int
	pttl  time.Duration
}

// decodeAcquire reads acquire.lua's reply: a bare token for a new hold, {1, token, count}
// for any other way of holding, {0, pttl} for busy.
func decodeAcquire(v any) (acquireReply, error) {
	switch v := v.(type) {
	case int64:
		if v >= 1 {
			return acquireReply{held: true, fresh: true, token: uint64(v), count: 1}, nil
		}
	case []any:
		switch {
		case len(v) == 3 && v[0] == int64(1):
			t, ok1 := v[1].(int64)
			c, ok2 := v[2].(int64)
			if ok1 && ok2 && t >= 1 && c >= 1 {
				return acquireReply{held: true, token: uint64(t), count: int(c)}, nil
			}
		case len(v) == 2 && v[0] == int64(0):
			if p, ok := v[1].(int64); ok {
				return acquireReply{pttl: time.Duration(p) * time.Millisecond}, nil
			}
		}
	}
	return acquireReply{}, fmt.Errorf("unexpected reply %v from acquire.lua", v)
}

// decodeRelease reads release.lua's reply: n = -1 not held, 0 free, n >= 1 the levels left;
// entry and token name the waiter the lock was handed to, if any.
func decodeRelease(v any) (n int64, entry string, token int64, err error) {
	switch v := v.(type) {
	case int64:
		if v >= -1 {
			return v, "", 0, nil
		}
	case []any:
		if len(v) == 3 && v[0] == int64(0) {
			e, ok1 := v[1].(string)
			t, ok2 := v[2].(int64)
			if ok1 && ok2 {
				return 0, e, t, nil
			}
		}
	}
	return 0, "", 0, fmt.Errorf("unexpected reply %v from release.lua", v)
}
