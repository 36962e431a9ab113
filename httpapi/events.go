package httpapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
)

// Live updates: GET /api/v1/sales/{id}/events, a text/event-stream of
//
//	event: sale          the sale as GET /api/v1/sales/{id} answers it, on connect and on
//	                     every change of its status or stock_state;
//	event: reservation   each reservation named by a ?reservation= parameter that belongs to
//	                     the signed-in caller, on connect and on every change.
//
// One feed per sale and instance reads the sale every EventInterval while anybody listens, and
// sends what changed to every listener of that instance: the engine is read a few times a
// second however many browsers watch. With several instances on the Redis engine, each feed
// reads the shared state, so every instance's stream shows the same truth.
//
// A listener's reservations are read again when the sale changed (every reservation change
// but one moves a sale count: a hold that ends, a grant, a payment, a cancellation, a queue
// that advances) and, for the one that does not (a hold reaching its expires_at, which the
// feed's read of the sale reclaims, so that too shows as a change), every
// reservationRecheck as a safety net.
//
// Each listener has a small buffer. The feed never waits for a listener: one whose buffer is
// full (a browser that does not read) is disconnected, and its writes have a deadline, so a
// slow browser costs buyers nothing.

const (
	// maxWatchedReservations bounds the ?reservation= parameters of one stream.
	maxWatchedReservations = 8
	// listenerBuffer is the number of sale events a listener may fall behind by.
	listenerBuffer = 16
	// streamWriteTimeout bounds one write to a listener.
	streamWriteTimeout = 10 * time.Second
	// streamPing is how often an idle stream sends a comment, so proxies keep it open.
	streamPing = 15 * time.Second
	// reservationRecheck is how often a listener's reservations are read with no sale change.
	reservationRecheck = 5 * time.Second
	// streamRetry is the reconnection delay the stream asks EventSource clients to use.
	streamRetry = "retry: 2000\n\n"
)

// feeds holds the live feed of every sale that has listeners on this instance.
type feeds struct {
	svc      *seckill.Service
	interval time.Duration

	mu      sync.Mutex
	sales   map[string]*feed
	closed  bool
	done    chan struct{} // closed by close: every stream ends
	running sync.WaitGroup
	dropped func() // counts a listener disconnected for being slow
}

// feed is one sale's: its listeners, and the last state it sent them.
type feed struct {
	id        string
	listeners map[*listener]struct{}
	stop      chan struct{}
}

// listener is one stream's inbox.
type listener struct {
	events chan []byte   // encoded sale events, oldest first
	gone   chan struct{} // closed when the feed disconnects the listener (too slow)
	once   sync.Once
}

func newFeeds(svc *seckill.Service, interval time.Duration, dropped func()) *feeds {
	return &feeds{svc: svc, interval: interval, sales: map[string]*feed{}, done: make(chan struct{}), dropped: dropped}
}

// subscribe adds a listener to the sale's feed, starting the feed if it is the first; seen is
// the sale as the listener was just sent it, so that a new feed does not send it again. ok is
// false once the server is closing.
func (f *feeds) subscribe(saleID string, seen seckill.SaleView) (*listener, bool) {
	l := &listener{events: make(chan []byte, listenerBuffer), gone: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, false
	}
	fd := f.sales[saleID]
	if fd == nil {
		fd = &feed{id: saleID, listeners: map[*listener]struct{}{}, stop: make(chan struct{})}
		f.sales[saleID] = fd
		f.running.Add(1)
		go f.run(fd, stateOf(seen))
	}
	fd.listeners[l] = struct{}{}
	return l, true
}

// unsubscribe removes a listener; the last one out stops the feed.
func (f *feeds) unsubscribe(saleID string, l *listener) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fd := f.sales[saleID]
	if fd == nil {
		return
	}
	delete(fd.listeners, l)
	if len(fd.listeners) == 0 {
		delete(f.sales, saleID)
		close(fd.stop)
	}
}

// close ends every stream and feed, and waits for the feeds.
func (f *feeds) close() {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	f.mu.Unlock()
	f.running.Wait()
}

// run reads the sale every interval and sends each change to the listeners.
func (f *feeds) run(fd *feed, last saleState) {
	defer f.running.Done()
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-fd.stop:
			return
		case <-f.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, err := f.svc.Sale(ctx, fd.id)
		cancel()
		if err != nil {
			continue // a dependency is down for a moment, or the sale is gone: try again next tick
		}
		if st := stateOf(v); st != last {
			last = st
			f.broadcast(fd, sseEvent("sale", v))
		}
	}
}

// broadcast queues ev for every listener of fd, disconnecting those whose buffer is full.
func (f *feeds) broadcast(fd *feed, ev []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range fd.listeners {
		select {
		case l.events <- ev:
		default:
			delete(fd.listeners, l)
			l.once.Do(func() { close(l.gone) })
			if f.dropped != nil {
				f.dropped()
			}
		}
	}
}

// saleState is what makes a sale event worth sending: its status and stock.
type saleState struct {
	status seckill.SaleStatus
	stock  seckill.StockState
}

func stateOf(v seckill.SaleView) saleState {
	return saleState{status: v.Status, stock: v.StockState}
}

// sseEvent encodes one server-sent event; JSON has no raw newlines, so data is one line.
func sseEvent(name string, v any) []byte {
	var b bytes.Buffer
	b.WriteString("event: ")
	b.WriteString(name)
	b.WriteString("\ndata: ")
	b.Write(mustJSON(v))
	b.WriteString("\n\n")
	return b.Bytes()
}

// saleEvents serves GET /api/v1/sales/{id}/events.
func (s *Server) saleEvents(w http.ResponseWriter, r *http.Request) error {
	saleID := r.PathValue("id")
	watched := r.URL.Query()["reservation"]
	var user string
	if len(watched) > 0 {
		if len(watched) > maxWatchedReservations {
			return seckill.Errorf(seckill.CodeInvalidArgument, "at most %d reservation parameters", maxWatchedReservations)
		}
		for _, id := range watched {
			if !seckill.ValidID(id) {
				return seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q is not a valid id", id)
			}
		}
		var err error
		if user, err = s.userOf(r); err != nil {
			return err
		}
	}
	first, err := s.svc.Sale(r.Context(), saleID)
	if err != nil {
		return err
	}
	l, ok := s.feeds.subscribe(saleID, first)
	if !ok {
		return seckill.Errorf(seckill.CodeUnavailable, "the server is shutting down")
	}
	defer s.feeds.unsubscribe(saleID, l)

	rc := http.NewResponseController(w)
	// The deadlines set below stay on the connection; a kept-alive connection must not keep them.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	st := &stream{w: w, rc: rc}
	st.write([]byte(streamRetry))
	st.write(sseEvent("sale", first))

	// The caller's reservations, as last sent.
	sent := map[string]seckill.Reservation{}
	sendReservations := func() {
		for _, id := range watched {
			res, err := s.svc.Reservation(r.Context(), id, user)
			if err != nil {
				continue // not the caller's (not found), or a dependency is down: next time
			}
			if prev, ok := sent[id]; ok && sameReservation(prev, res) {
				continue
			}
			sent[id] = res
			st.write(sseEvent("reservation", res))
		}
	}
	sendReservations()
	st.flush()

	ping := time.NewTicker(streamPing)
	defer ping.Stop()
	var recheck <-chan time.Time
	if len(watched) > 0 {
		t := time.NewTicker(reservationRecheck)
		defer t.Stop()
		recheck = t.C
	}
	for st.err == nil {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.feeds.done:
			return nil
		case <-l.gone:
			s.log.Debug("event stream dropped: the client reads too slowly", "sale", saleID)
			return nil
		case ev := <-l.events:
			st.write(ev)
			sendReservations()
		case <-recheck:
			sendReservations()
		case <-ping.C:
			st.write([]byte(": ping\n\n"))
		}
		st.flush()
	}
	return nil // the client went away: nothing to answer
}

// sameReservation compares what a reservation event shows.
func sameReservation(a, b seckill.Reservation) bool {
	sameExpiry := (a.ExpiresAt == nil) == (b.ExpiresAt == nil) && (a.ExpiresAt == nil || a.ExpiresAt.Equal(*b.ExpiresAt))
	return a.Status == b.Status && a.Position == b.Position && a.Quantity == b.Quantity && sameExpiry
}

// stream writes to one client with a deadline per write; the first error ends it.
type stream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func (st *stream) write(b []byte) {
	if st.err != nil {
		return
	}
	if err := st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		st.err = err
		return
	}
	_, st.err = st.w.Write(b)
}

func (st *stream) flush() {
	if st.err == nil {
		st.err = st.rc.Flush()
	}
}
