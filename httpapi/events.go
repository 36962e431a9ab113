package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

// Live updates: GET /api/v1/sales/{id}/events, a text/event-stream of
//
//	event: sale          the sale as GET /api/v1/sales/{id} answers it, on connect and on
//	                     every change of its status or stock_state;
//	event: reservation   each reservation of this sale named by a ?reservation= parameter that
//	                     belongs to the signed-in caller, on connect and on every change.
//
// One feed per sale and instance reads the sale every EventInterval while anybody listens, and
// sends what changed to every listener of that instance: the engine is read a few times a
// second however many browsers watch. With several instances on the Redis engine, each feed
// reads the shared state, so every instance's stream shows the same truth.
//
// Watched reservations are shared the same way: the feed reads each distinct watched
// reservation once per tick in which it is due, however many streams watch it. A stream checks
// its ?reservation= ids once, on connect; an id that is not the caller's (or not of this sale)
// is dropped there and never read again, so made-up ids cost one read each and nothing after.
// A reservation is due when the sale changed (every reservation change but one moves a sale
// count: a hold that ends, a grant, a payment, a cancellation, a queue that advances), every
// reservationRecheck as a safety net for the one that does not (a hold reaching its expires_at,
// which the feed's read of the sale reclaims, so that too shows as a change), and once when a
// stream starts watching it (its state may have moved since the stream's own check). Final
// reservations (paid, rejected, refund_required) are never read again.
//
// Each listener has a small buffer. The feed never waits for a listener: one whose buffer is
// full (a browser that does not read) is disconnected, and its writes have a deadline, so a
// slow browser costs buyers nothing.

const (
	// maxWatchedReservations bounds the ?reservation= parameters of one stream.
	maxWatchedReservations = 8
	// listenerBuffer is the number of events a listener may fall behind by.
	listenerBuffer = 16
	// streamWriteTimeout bounds one write to a listener.
	streamWriteTimeout = 10 * time.Second
	// streamPing is how often an idle stream sends a comment, so proxies keep it open.
	streamPing = 15 * time.Second
	// reservationRecheck is how often watched reservations are read with no sale change.
	reservationRecheck = 5 * time.Second
	// streamRetry is the reconnection delay the stream asks EventSource clients to use.
	streamRetry = "retry: 2000\n\n"
	// feedReadTimeout bounds each of a feed's engine reads.
	feedReadTimeout = 2 * time.Second
)

// feeds holds the live feed of every sale that has listeners on this instance (hub.go); a
// feed's state is the reservations its listeners watch.
type feeds struct {
	*hub[*listener, map[string]*watch]
	svc      *service.Service
	interval time.Duration
	dropped  func() // counts a listener disconnected for being slow
}

// feed is one sale's: its listeners, the reservations they watch (state, by reservation id).
type feed = hubFeed[*listener, map[string]*watch]

// watch is one reservation watched by one or more listeners of a feed (all of them its
// owner's streams: each was checked on connect).
type watch struct {
	owner     string
	last      seckill.Reservation // as last read
	due       bool                // read at the next tick whatever happens
	listeners map[*listener]struct{}
}

// listener is one stream's inbox.
type listener struct {
	events   chan event    // oldest first
	gone     chan struct{} // closed when the feed disconnects the listener (too slow)
	once     sync.Once
	watching []string // reservation ids
}

// event is one encoded server-sent event; rid names the reservation of a reservation event.
type event struct {
	rid  string
	data []byte
}

func newFeeds(svc *service.Service, interval time.Duration, dropped func()) *feeds {
	return &feeds{hub: newHub[*listener, map[string]*watch](), svc: svc, interval: interval, dropped: dropped}
}

// subscribe adds a listener to the sale's feed, starting the feed if it is the first; seen is
// the sale as the listener was just sent it, so that a new feed does not send it again, and
// follow are the caller's reservations (checked, as just sent) to follow. ok is false once the
// server is closing.
func (f *feeds) subscribe(saleID string, seen service.SaleView, follow map[string]seckill.Reservation) (*listener, bool) {
	l := &listener{events: make(chan event, listenerBuffer), gone: make(chan struct{})}
	ok := f.hub.subscribe(saleID, l,
		func() map[string]*watch { return map[string]*watch{} },
		func(fd *feed) { f.run(fd, stateOf(seen)) },
		func(fd *feed) {
			for id, res := range follow {
				watchReservation(fd, l, id, res)
			}
		})
	return l, ok
}

// watchReservation adds l to the watchers of reservation id, which l's stream has just read as
// res. The hub's mu is held.
func watchReservation(fd *feed, l *listener, id string, res seckill.Reservation) {
	w := fd.state[id]
	if w == nil {
		w = &watch{owner: res.UserID, last: res, listeners: map[*listener]struct{}{}}
		fd.state[id] = w
	}
	w.due = true
	w.listeners[l] = struct{}{}
	l.watching = append(l.watching, id)
}

// unsubscribe removes a listener and its watches; the last one out stops the feed.
func (f *feeds) unsubscribe(saleID string, l *listener) {
	f.hub.unsubscribe(saleID, l, func(fd *feed) {
		for _, id := range l.watching {
			if w := fd.state[id]; w != nil {
				delete(w.listeners, l)
				if len(w.listeners) == 0 {
					delete(fd.state, id)
				}
			}
		}
	})
}

// run reads the sale every interval and sends each change to the listeners, then reads the
// watched reservations that are due and sends theirs to their watchers.
func (f *feeds) run(fd *feed, last saleState) {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	recheck := time.Now()
	for {
		select {
		case <-fd.stop:
			return
		case <-f.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), feedReadTimeout)
		v, err := f.svc.Sale(ctx, fd.id)
		cancel()
		changed := err == nil && stateOf(v) != last
		if changed {
			last = stateOf(v)
			f.broadcast(fd, sseEvent("sale", v))
		}
		// A sale that could not be read is not a reason to skip the reservations: a hold may
		// have ended meanwhile. The safety net still runs on time.
		all := changed || time.Since(recheck) >= reservationRecheck
		if all {
			recheck = time.Now()
		}
		f.readWatches(fd, f.due(fd, all))
	}
}

// dueWatch is a reservation to read, and whose it is.
type dueWatch struct{ id, owner string }

// due lists the watched reservations to read now (every one that is not final when all),
// and clears their due marks.
func (f *feeds) due(fd *feed, all bool) []dueWatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []dueWatch
	for id, w := range fd.state {
		if (all || w.due) && !final(w.last.Status) {
			out = append(out, dueWatch{id, w.owner})
		}
		w.due = false
	}
	return out
}

// readWatches reads each due reservation once and sends those that changed to their watchers.
func (f *feeds) readWatches(fd *feed, due []dueWatch) {
	for _, d := range due {
		if f.stopped(fd) { // nobody listens any more, or the server is closing: do not make it wait
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), feedReadTimeout)
		res, err := f.svc.Reservation(ctx, d.id, d.owner)
		cancel()
		if err != nil {
			continue // a dependency is down for a moment: the next change or recheck reads it again
		}
		f.mu.Lock()
		if w := fd.state[d.id]; w != nil && !sameReservation(w.last, res) {
			w.last = res
			ev := event{rid: d.id, data: sseEvent("reservation", res)}
			for l := range w.listeners {
				f.send(fd, l, ev)
			}
		}
		f.mu.Unlock()
	}
}

// final reports whether a reservation in status st can never change again.
func final(st seckill.ReservationStatus) bool {
	return st == seckill.StatusPaid || st == seckill.StatusRejected || st == seckill.StatusRefundRequired
}

// broadcast queues a sale event for every listener of fd.
func (f *feeds) broadcast(fd *feed, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range fd.listeners {
		f.send(fd, l, event{data: data})
	}
}

// send queues ev for l, disconnecting l if its buffer is full. f.mu is held.
func (f *feeds) send(fd *feed, l *listener, ev event) {
	if _, ok := fd.listeners[l]; !ok {
		return // already disconnected
	}
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

// saleState is what makes a sale event worth sending: its status and stock.
type saleState struct {
	status seckill.SaleStatus
	stock  seckill.StockState
}

func stateOf(v service.SaleView) saleState {
	return saleState{status: v.Status, stock: v.StockState}
}

// sseEvent encodes one server-sent event; JSON has no raw newlines, so data is one line. A
// value that cannot be rendered (a sale stored with a time past year 9999 by an older
// release) is no event at all (nil): the feed goes on, it never panics.
func sseEvent(name string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("event: ")
	b.WriteString(name)
	b.WriteString("\ndata: ")
	b.Write(data)
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
	// The slot is taken before the engine is read: a refused stream costs no read.
	addr, hasAddr := clientKey(s.cfg.TrustedProxies, r)
	release, code, detail := s.streams.acquire(user, addr, hasAddr)
	if release == nil {
		refuse(w, code, streamRetryAfter, detail)
		return nil
	}
	defer release()
	first, err := s.svc.Sale(r.Context(), saleID)
	if err != nil {
		return err
	}
	mine, err := s.checkWatched(r.Context(), saleID, user, watched)
	if err != nil {
		return err
	}
	follow := map[string]seckill.Reservation{}
	for _, res := range mine {
		if !final(res.Status) {
			follow[res.ID] = res
		}
	}
	l, ok := s.feeds.subscribe(saleID, first, follow)
	if !ok {
		return seckill.Errorf(seckill.CodeUnavailable, "the server is shutting down")
	}
	defer s.feeds.unsubscribe(saleID, l)

	st, end := s.openStream(w)
	defer end()
	st.write(sseEvent("sale", first))
	// The caller's reservations, as last written, so that a change the feed reports to
	// several of the caller's streams, or reports again, is written once.
	sent := map[string][]byte{}
	for _, res := range mine {
		b := sseEvent("reservation", res)
		sent[res.ID] = b
		st.write(b)
	}
	st.flush()

	ping := time.NewTicker(streamPing)
	defer ping.Stop()
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
			if ev.rid != "" {
				if bytes.Equal(sent[ev.rid], ev.data) {
					continue
				}
				sent[ev.rid] = ev.data
			}
			st.write(ev.data)
		case <-ping.C:
			st.write([]byte(": ping\n\n"))
		}
		st.flush()
	}
	return nil // the client went away: nothing to answer
}

// checkWatched reads each reservation named by the stream once, and returns those that are
// the caller's and of this sale, in the order named. Any other id is dropped silently (it is
// never read again); an engine that cannot answer refuses the stream (503), since what the
// stream would show is not known.
func (s *Server) checkWatched(ctx context.Context, saleID, user string, ids []string) ([]seckill.Reservation, error) {
	var mine []seckill.Reservation
	seen := map[string]bool{}
	for _, id := range ids {
		// An id is <sale id>-<32 hex>: one that cannot be of this sale is not even read.
		if sid, ok := seckill.SaleOfReservation(id); !ok || sid != saleID || seen[id] {
			continue
		}
		seen[id] = true
		res, err := s.svc.Reservation(ctx, id, user)
		switch {
		case seckill.ErrorCode(err) == seckill.CodeNotFound || seckill.ErrorCode(err) == seckill.CodeInvalidArgument:
			continue
		case err != nil:
			return nil, err
		}
		mine = append(mine, res)
	}
	return mine, nil
}

// sameReservation compares what a reservation event shows.
func sameReservation(a, b seckill.Reservation) bool {
	sameExpiry := (a.ExpiresAt == nil) == (b.ExpiresAt == nil) && (a.ExpiresAt == nil || a.ExpiresAt.Equal(*b.ExpiresAt))
	return a.Status == b.Status && a.Position == b.Position && a.Quantity == b.Quantity && sameExpiry
}

// openStream starts a text/event-stream answer with the reconnection delay, and returns the
// stream and what ends it. A stream outlives the server's read and write timeouts, which bound
// ordinary requests: no read deadline (the client sends nothing more, and a read that timed
// out would end the stream by cancelling its context; net/http lifts it once the request is
// read, and this says so rather than depend on it), and a write deadline per write
// (stream.write). The deadlines set here stay on the connection; a kept-alive connection must
// not keep them, so end lifts them.
func (s *Server) openStream(w http.ResponseWriter) (st *stream, end func()) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	s.metrics.streams.Inc()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	st = &stream{w: w, rc: rc}
	w.WriteHeader(http.StatusOK)
	st.write([]byte(streamRetry))
	return st, func() {
		s.metrics.streams.Dec()
		_ = rc.SetWriteDeadline(time.Time{})
	}
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
