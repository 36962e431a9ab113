package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Quorum mode (Redlock). A hold is won when a majority of N independent nodes granted the
// lock within its lease; its fencing token is then made strictly increasing across the quorum
// by a second phase (fence.lua). Reentrancy is counted in the client: a handle whose hold is
// still valid re-enters without a round trip. Waiters do not queue (queues on independent
// nodes could disagree about the order): they subscribe on every node, try again when any node
// publishes a release, and otherwise after the shortest remaining TTL plus a random jitter.

// onNodes runs fn on every node at once, each call bounded by NodeTimeout, and waits for all.
func (c *Client) onNodes(ctx context.Context, fn func(ctx context.Context, i int, n *node)) {
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
			defer cancel()
			fn(nctx, i, n)
		}()
	}
	wg.Wait()
}

func (m *Mutex) acquireQuorum(ctx context.Context, wait time.Duration, deadline time.Time, lease time.Duration, watchdog bool) (*Lease, error) {
	// Re-entry: counted locally while the current hold is valid.
	m.mu.Lock()
	if h := m.hold; h != nil && h.ctx.Err() == nil {
		h.count++
		m.mu.Unlock()
		return &Lease{h: h}, nil
	}
	m.mu.Unlock()

	entry := m.attemptID(ms(lease)) // registers this waiter with the subscribers
	mbox := make(chan string, 1)
	var joined []*node
	defer func() {
		for _, n := range joined {
			n.sub.leave(m.channel, entry)
		}
	}()
	first := true
	for {
		sent := time.Now()
		l, pttl, err := m.tryQuorum(ctx, lease, watchdog, sent)
		if l != nil {
			return l, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if wait == 0 {
			return nil, err
		}
		var d time.Duration
		if first {
			// Subscribe on every node, wait (briefly) until a majority confirmed, then try
			// once more: a release after that try reaches us through at least one node.
			first = false
			var readies []<-chan struct{}
			for _, n := range m.c.nodes {
				r, jerr := n.sub.join(m.channel, entry, mbox)
				if jerr != nil {
					return nil, jerr
				}
				joined = append(joined, n)
				readies = append(readies, r)
			}
			waitReady(ctx, readies, m.c.quorum, m.c.opts.NodeTimeout*4)
			continue
		}
		d = pttl
		if d <= 0 || d > m.c.opts.WaiterTimeout/3 {
			d = m.c.opts.WaiterTimeout / 3
		}
		d += rand.N(m.c.opts.RetryJitter) + time.Millisecond
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, err
			}
			d = min(d, left)
		}
		t := time.NewTimer(d)
		select {
		case <-mbox:
			// a release somewhere: jitter a little so that all woken waiters do not collide
			t.Reset(rand.N(m.c.opts.RetryJitter))
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		case <-t.C:
		case <-m.c.done:
			t.Stop()
			return nil, ErrClosed
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// waitReady waits until at least need of readies are closed, ctx ends, or d passes.
func waitReady(ctx context.Context, readies []<-chan struct{}, need int, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		n := 0
		for _, r := range readies {
			select {
			case <-r:
				n++
			default:
			}
		}
		if n >= need {
			return
		}
		select {
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// tryQuorum makes one attempt on all nodes. On failure it gives back what it won and returns
// the shortest remaining TTL among the nodes that were busy.
func (m *Mutex) tryQuorum(ctx context.Context, lease time.Duration, watchdog bool, sent time.Time) (*Lease, time.Duration, error) {
	type result struct {
		ok    bool
		token uint64
		pttl  int64
		err   error
	}
	res := make([]result, len(m.c.nodes))
	leaseMs := ms(lease)
	attempt := m.attemptID(leaseMs)
	m.c.onNodes(ctx, func(ctx context.Context, i int, n *node) {
		v, err := scriptAcquire.run(ctx, n.r, m.keys, attempt).Result() // try once
		var r acquireReply
		if err == nil {
			r, err = decodeAcquire(v)
		}
		switch {
		case err != nil:
			res[i].err = err
		case r.held:
			res[i] = result{ok: true, token: r.token}
		default:
			res[i].pttl = r.pttl.Milliseconds()
		}
	})
	won, token, minTTL := 0, uint64(0), int64(-1)
	var errs []error
	for i, r := range res {
		switch {
		case r.ok:
			won++
			token = max(token, r.token)
		case r.err != nil:
			errs = append(errs, fmt.Errorf("node %d: %w", i, r.err))
		case r.pttl > 0 && (minTTL < 0 || r.pttl < minTTL):
			minTTL = r.pttl
		}
	}
	valid := m.c.validity(lease) - time.Since(sent)
	if won >= m.c.quorum && valid > 0 {
		// Phase two: every won node adopts the highest token and raises its counter to it.
		committed := 0
		var mu sync.Mutex
		m.c.onNodes(ctx, func(ctx context.Context, i int, n *node) {
			if !res[i].ok {
				return
			}
			v, err := scriptFence.run(ctx, n.r, m.keys[:2], m.owner, token).Int64()
			if err == nil && v == 1 {
				mu.Lock()
				committed++
				mu.Unlock()
			}
		})
		if committed >= m.c.quorum && m.c.validity(lease)-time.Since(sent) > 0 {
			return m.held(token, 1, lease, watchdog, sent, ""), 0, nil
		}
	}
	// Lost the vote (or ran out of validity): give back what we won, on every node, so that
	// no minority stays locked until its TTL.
	m.releaseNodes(context.WithoutCancel(ctx), func(i int) bool { return res[i].ok })
	err := fmt.Errorf("%w: won %d of %d nodes, need %d", ErrNotAcquired, won, len(m.c.nodes), m.c.quorum)
	if len(errs) > 0 {
		err = fmt.Errorf("%w (%w)", err, errors.Join(errs...))
	}
	return nil, time.Duration(minTTL) * time.Millisecond, err
}

// releaseNodes runs the release script on the nodes for which pick is true and counts the
// replies: released (the hold was ours there), notHeld, and errs.
func (m *Mutex) releaseNodes(ctx context.Context, pick func(i int) bool) (released, notHeld int, errs []error) {
	var mu sync.Mutex
	m.c.onNodes(ctx, func(ctx context.Context, i int, n *node) {
		if !pick(i) {
			return
		}
		left, err := scriptReleaseAll.run(ctx, n.r, m.keys[:1], m.owner).Int64()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
		case left < 0:
			notHeld++
		default:
			released++
		}
	})
	return released, notHeld, errs
}

func (m *Mutex) unlockQuorum(ctx context.Context, h *hold) error {
	m.mu.Lock()
	if h.count > 1 {
		h.count--
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	released, notHeld, errs := m.releaseNodes(ctx, func(int) bool { return true })
	switch {
	case notHeld >= m.c.quorum || (released == 0 && len(errs) == 0):
		// A majority says the hold was not ours (any stale keys of ours were removed).
		m.drop(h, fmt.Errorf("%w: found not held at unlock", ErrLost))
		return ErrNotHeld
	case released > 0:
		// Released where it was ours; nodes that did not answer drop it when its TTL ends.
		m.drop(h, ErrReleased)
		return nil
	}
	return fmt.Errorf("lock: unlock %q: %w", m.name, errors.Join(errs...))
}

func (m *Mutex) renewQuorum(ctx context.Context, token uint64, leaseMs int64) (bool, error) {
	var mu sync.Mutex
	ok, gone := 0, 0
	var errs []error
	m.c.onNodes(ctx, func(ctx context.Context, i int, n *node) {
		v, err := scriptRenew.run(ctx, n.r, m.keys[:1], m.owner, token, leaseMs).Int64()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, err)
		case v == 1:
			ok++
		default:
			gone++
		}
	})
	switch {
	case ok >= m.c.quorum:
		return true, nil
	case gone > len(m.c.nodes)-m.c.quorum:
		return false, nil // a majority is surely no longer ours
	}
	return false, fmt.Errorf("lock: renew reached %d of %d nodes: %w", ok, len(m.c.nodes), errors.Join(errs...))
}
