package lock

import (
	"sync"
	"time"
)

// watchdogIdleExit is how long the watchdog goroutine outlives the last hold of its Client.
const watchdogIdleExit = 250 * time.Millisecond

// watchdog runs the monitor ticks (renewals and checks, see hold.tick) of all holds of one
// Client from one goroutine and one timer. Arming a runtime timer per acquisition would cost
// a wake-up of the network poller on every Lock; here a new hold only joins a set, and the
// goroutine is woken early only when a hold is due before its current alarm (a lease shorter
// than the others'). Each due tick runs in a goroutine of its own, so a slow node never
// delays another hold's renewal.
//
// Goroutine: loop, started by the first hold, exits when the Client is closed or when it has
// had no hold for watchdogIdleExit; a later hold starts it again. Tick goroutines end with
// their tick (a renewal bounded by lease/3).
type watchdog struct {
	mu         sync.Mutex
	holds      map[*hold]struct{}
	running    bool
	closed     bool
	wakeAt     time.Time // when loop's timer fires
	emptySince time.Time
	kick       chan struct{} // wakes loop to recompute its alarm
	stop       chan struct{} // closed by close
	wg         sync.WaitGroup
}

func newWatchdog() *watchdog {
	return &watchdog{holds: make(map[*hold]struct{}), kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// add starts monitoring h, whose first tick is due at h.due. It reports false when the Client
// is closed.
func (w *watchdog) add(h *hold) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.holds[h] = struct{}{}
	switch {
	case !w.running:
		w.running = true
		w.wakeAt = h.due
		w.wg.Add(1)
		go w.loop()
	case h.due.Before(w.wakeAt):
		w.wakeAt = h.due
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// remove stops monitoring h. A tick already running finishes but does not reschedule.
func (w *watchdog) remove(h *hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.holds[h]; !ok {
		return
	}
	delete(w.holds, h)
	if len(w.holds) == 0 {
		w.emptySince = time.Now()
	}
}

// reschedule sets the next tick of h after one has run.
func (w *watchdog) reschedule(h *hold, due time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h.ticking = false
	h.due = due
	if _, ok := w.holds[h]; ok && due.Before(w.wakeAt) {
		w.wakeAt = due
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// close stops the loop, ends every hold still monitored with cause (which also cancels a
// renewal in flight), and waits for the loop and the ticks to return.
func (w *watchdog) close(cause error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.stop)
	var left []*hold
	for h := range w.holds {
		left = append(left, h)
	}
	w.mu.Unlock()
	for _, h := range left {
		h.cancel(cause)
	}
	w.wg.Wait()
}

func (w *watchdog) loop() {
	defer w.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		now := time.Now()
		var next time.Time
		for h := range w.holds {
			if h.ticking {
				continue
			}
			if !now.Before(h.due) {
				h.ticking = true
				w.wg.Add(1)
				go func() {
					defer w.wg.Done()
					h.tick()
				}()
				continue
			}
			if next.IsZero() || h.due.Before(next) {
				next = h.due
			}
		}
		if len(w.holds) == 0 {
			if now.Sub(w.emptySince) >= watchdogIdleExit {
				w.running = false
				w.mu.Unlock()
				return
			}
			next = w.emptySince.Add(watchdogIdleExit)
		}
		if next.IsZero() { // every hold is ticking: each reschedules (and kicks) when done
			next = now.Add(time.Hour)
		}
		w.wakeAt = next
		w.mu.Unlock()
		t.Reset(time.Until(next))
		select {
		case <-t.C:
		case <-w.kick:
		case <-w.stop:
			return
		}
	}
}
