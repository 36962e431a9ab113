package httpapi

import "sync"

// hub is the set of per-sale feeds that have listeners on this instance, the one shape of the
// live streams' fan-out (events.go's sale feeds, roomevents.go's room feeds): the first
// listener of a sale starts the sale's feed (one goroutine), the last one out stops it, and
// close ends every feed and waits for them. mu guards every feed's listeners and state.
type hub[L comparable, X any] struct {
	mu      sync.Mutex
	feeds   map[string]*hubFeed[L, X]
	closed  bool
	done    chan struct{} // closed by close: every stream ends
	running sync.WaitGroup
}

// hubFeed is one sale's feed: its listeners, the feed's own state X (guarded by the hub's mu)
// and stop, closed when the last listener leaves.
type hubFeed[L comparable, X any] struct {
	id        string
	listeners map[L]struct{}
	state     X
	stop      chan struct{}
}

func newHub[L comparable, X any]() *hub[L, X] {
	return &hub[L, X]{feeds: map[string]*hubFeed[L, X]{}, done: make(chan struct{})}
}

// subscribe adds l to the sale's feed. If it is the first, the feed is made with state and
// run is started on it; then add, when not nil, runs with the hub's mu held (to register
// what l follows). ok is false once the hub is closing.
func (h *hub[L, X]) subscribe(id string, l L, state func() X, run func(*hubFeed[L, X]), add func(*hubFeed[L, X])) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	fd := h.feeds[id]
	if fd == nil {
		fd = &hubFeed[L, X]{id: id, listeners: map[L]struct{}{}, state: state(), stop: make(chan struct{})}
		h.feeds[id] = fd
		h.running.Add(1)
		go func() {
			defer h.running.Done()
			run(fd)
		}()
	}
	fd.listeners[l] = struct{}{}
	if add != nil {
		add(fd)
	}
	return true
}

// unsubscribe removes l, running remove first (when not nil) with the hub's mu held; the last
// one out stops the feed.
func (h *hub[L, X]) unsubscribe(id string, l L, remove func(*hubFeed[L, X])) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fd := h.feeds[id]
	if fd == nil {
		return
	}
	if remove != nil {
		remove(fd)
	}
	delete(fd.listeners, l)
	if len(fd.listeners) == 0 {
		delete(h.feeds, id)
		close(fd.stop)
	}
}

// close ends every stream and feed, and waits for the feeds.
func (h *hub[L, X]) close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
	h.mu.Unlock()
	h.running.Wait()
}

// stopped reports whether fd should end: nobody listens any more, or the hub is closing.
func (h *hub[L, X]) stopped(fd *hubFeed[L, X]) bool {
	select {
	case <-fd.stop:
		return true
	case <-h.done:
		return true
	default:
		return false
	}
}
