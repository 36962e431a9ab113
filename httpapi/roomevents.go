package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

// Live tickets: GET /api/v1/sales/{id}/waiting-room/events (buyer auth), a text/event-stream
// of
//
//	event: ticket   the caller's ticket as GET .../waiting-room/ticket answers it, on connect
//	                and whenever its state or admission changes; its place alone at most
//	                once per roomRefreshEvery.
//
// One room feed per sale and instance reads the room's counts every EventInterval while
// anybody listens (one engine call per sale and tick however many streams follow it) and hands
// the latest counts to every stream. A stream derives its ticket from them: its Index is fixed
// once the sale has started, so its position is Index − admitted (service.TicketAt), and once
// the room closed (sold_out, ended) a ticket beyond the final serving counter has the closing
// state: the whole crowd is told from the one read of the counts. It reads its own ticket from
// the engine only when that cannot tell (service.Due): its turn has come (it is admitted, with
// its token), or the sale started (or closed after admitting) while it was in the pre-queue
// (the draw places it) — at most once per roomRefreshEvery. The streams count against the same
// bounds as the sale's (per user, per address, per instance).

// roomRefreshEvery bounds how often one stream re-reads its ticket while it is due, and how
// often it writes a ticket whose only change is its place: every tick of a busy room moves
// every waiting buyer, and a crowd's streams written four times a second would cost an
// instance more than the crowd's polls (docs/BENCHMARKS.md). A change of state or admission
// is written at once.
const roomRefreshEvery = time.Second

// roomFeeds holds the room feed of every sale with live ticket streams on this instance
// (hub.go): its listeners are one-slot inboxes of the latest counts.
type roomFeeds struct {
	*hub[chan seckill.RoomState, struct{}]
	svc      *service.Service
	interval time.Duration
}

// roomFeed is one sale's room feed.
type roomFeed = hubFeed[chan seckill.RoomState, struct{}]

func newRoomFeeds(svc *service.Service, interval time.Duration) *roomFeeds {
	return &roomFeeds{hub: newHub[chan seckill.RoomState, struct{}](), svc: svc, interval: interval}
}

// subscribe adds a listener to the sale's room feed, starting it if it is the first; ok is
// false once the server is closing.
func (f *roomFeeds) subscribe(saleID string) (chan seckill.RoomState, bool) {
	in := make(chan seckill.RoomState, 1)
	ok := f.hub.subscribe(saleID, in, func() struct{} { return struct{}{} }, f.run, nil)
	return in, ok
}

// unsubscribe removes a listener; the last one out stops the feed.
func (f *roomFeeds) unsubscribe(saleID string, in chan seckill.RoomState) {
	f.hub.unsubscribe(saleID, in, nil)
}

// run reads the room's counts every interval and hands them, when they changed, to every
// listener: a listener's inbox keeps only the latest, so the feed never waits for a stream.
func (f *roomFeeds) run(fd *roomFeed) {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	var last seckill.RoomState
	first := true
	for {
		select {
		case <-fd.stop:
			return
		case <-f.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), feedReadTimeout)
		st, err := f.svc.RoomState(ctx, fd.id)
		cancel()
		if err != nil || (!first && st == last) {
			continue
		}
		first, last = false, st
		f.mu.Lock()
		for in := range fd.listeners {
			select {
			case <-in: // drop the older counts
			default:
			}
			in <- st
		}
		f.mu.Unlock()
	}
}

// roomEvents serves GET /api/v1/sales/{id}/waiting-room/events.
func (s *Server) roomEvents(w http.ResponseWriter, r *http.Request) error {
	user, err := s.userOf(r)
	if err != nil {
		return err
	}
	saleID, err := roomSaleID(r)
	if err != nil {
		return err
	}
	// The slot is taken before the engine is read: a refused stream costs no read.
	addr, hasAddr := clientKey(s.cfg.TrustedProxies, r)
	release, code, detail := s.streams.acquire(user, addr, hasAddr)
	if release == nil {
		refuse(w, code, streamRetryAfter, detail)
		return nil
	}
	defer release()
	follow, first, err := s.svc.FollowTicket(r.Context(), saleID, user)
	if err != nil {
		return err
	}
	in, ok := s.rooms.subscribe(saleID)
	if !ok {
		return seckill.Errorf(seckill.CodeUnavailable, "the server is shutting down")
	}
	defer s.rooms.unsubscribe(saleID, in)

	st, end := s.openStream(w)
	defer end()
	st.write(sseEvent("ticket", first))
	st.flush()
	sent := shownTicket(first)

	// check re-reads or derives the ticket from counts, and writes it when what it shows
	// changed. A due ticket is re-read at most once per roomRefreshEvery.
	var counts seckill.RoomState
	var haveCounts bool
	var refreshed time.Time
	written := time.Now() // the first ticket, just written
	check := func() {
		if !haveCounts {
			return
		}
		var v service.TicketView
		if s.svc.Due(follow, counts) {
			if time.Since(refreshed) < roomRefreshEvery {
				return
			}
			refreshed = time.Now()
			ctx, cancel := context.WithTimeout(r.Context(), feedReadTimeout)
			f, fresh, err := s.svc.Refresh(ctx, follow, counts)
			cancel()
			if err != nil {
				return // the engine is down for a moment: the next tick tries again
			}
			follow, v = f, fresh
		} else {
			v = s.svc.TicketAt(follow, counts)
		}
		shown := shownTicket(v)
		if shown == sent || (shown.onlyMoved(sent) && time.Since(written) < roomRefreshEvery*9/10) {
			return // unchanged, or only its place moved and one was written less than a second ago: the tick sends it
		}
		sent, written = shown, time.Now()
		if v.State == counts.Closed && !counts.ClosedAt.IsZero() {
			// Counted before the write, so that a buyer who has read it finds it counted.
			s.metrics.closeWritten.Observe(max(0, written.Sub(counts.ClosedAt).Seconds()))
		}
		st.write(sseEvent("ticket", v))
		st.flush()
	}
	ping := time.NewTicker(streamPing)
	defer ping.Stop()
	tick := time.NewTicker(roomRefreshEvery) // a pre-queue ticket becomes due at the start, with or without new counts
	defer tick.Stop()
	for st.err == nil {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.rooms.done:
			return nil
		case counts = <-in:
			haveCounts = true
			follow = follow.Saw(counts)
			check()
		case <-tick.C:
			check()
		case <-ping.C:
			st.write([]byte(": ping\n\n"))
			st.flush()
		}
	}
	return nil
}

// ticketShown is what makes a ticket event worth sending: its state, place and admission
// (the estimate follows the place; a pre-queue's, which counts down to the start, is not
// resent every second).
type ticketShown struct {
	state string
	index int64
	ahead int64
	token string
}

// onlyMoved reports whether t differs from before only in its place (index or number ahead).
func (t ticketShown) onlyMoved(before ticketShown) bool {
	return t.state == before.state && t.token == before.token
}

func shownTicket(v service.TicketView) ticketShown {
	return ticketShown{state: v.State, index: v.Index, ahead: v.Ahead, token: v.AdmissionToken}
}
