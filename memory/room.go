package memory

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/seckill-go/seckill"
)

var (
	_ seckill.WaitingRooms = (*Engine)(nil)
	_ seckill.RoomRestorer = (*Engine)(nil)
	_ seckill.RoomTeller   = (*Engine)(nil)
)

// maxRoomEntrants is seckill.MaxRoomEntrants, a variable so that a test can lower it.
var maxRoomEntrants = seckill.MaxRoomEntrants

// room is a sale's waiting room (docs/MODEL.md "The waiting room"), guarded by the sale's mu.
// Times are Unix milliseconds, as the Redis engine keeps them, so that both answer alike.
type room struct {
	entrants map[string]*entrant
	pre      []*entrant // a draw room's entrants from before the start, in arrival order until placed
	order    []*entrant // the room's order once placed; order[admitted:] are waiting
	placed   bool       // the pre-queue is in order (the first call at or after the start)
	byID     []string   // the draw's entrant ids in byte order, once placed (DrawEntrants)

	seq      int64 // the last arrival's number (Ticket.Arrival)
	admitted int64
	told     int64 // admissions told (seckill.RoomTeller): order[told:admitted] read waiting
	credit   int64 // the rate's bucket, in thousandths of an admission
	last     int64 // when credit was last filled (ms); 0 until the first admission call
	active   int64 // admitted entrants whose place has not ended
	places   placeHeap
	closed   string
	closedAt int64 // when closed was set (ms)
}

// entrant is one entrant of a room.
type entrant struct {
	id          string
	key         uint64 // the draw key (draw rooms, before the start)
	drawn       bool
	arrival     int64 // the arrival number (Ticket.Arrival)
	joined      int64
	index       int64 // 1-based place in order; 0 until placed
	admittedAt  int64 // 0 until admitted
	activeUntil int64 // while admitted: when the place stops counting; ended once ≤ now
	ended       bool  // the place has stopped counting (active was decremented)
}

// place is an entry of the heap of admitted places by end; an entry whose until is not its
// entrant's activeUntil is stale (a Release moved it) and is skipped.
type place struct {
	until int64
	e     *entrant
}

type placeHeap []place

func (h placeHeap) Len() int           { return len(h) }
func (h placeHeap) Less(i, j int) bool { return h[i].until < h[j].until }
func (h placeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *placeHeap) Push(x any)        { *h = append(*h, x.(place)) }
func (h *placeHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	*h = old[:len(old)-1]
	return p
}

// roomOf locks the sale and returns it with its room (nil if nobody joined). The caller unlocks.
func (e *Engine) roomOf(saleID string) (*sale, error) {
	s, err := e.sale(saleID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	return s, nil
}

// Join puts entrant in the sale's room (seckill.WaitingRooms).
func (e *Engine) Join(_ context.Context, def seckill.Sale, id string, drawKey uint64) (seckill.Ticket, error) {
	if !seckill.ValidEntrant(id) {
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeInvalidArgument, "entrant must be 32 lower-case hex digits")
	}
	s, err := e.roomOf(def.ID)
	if err != nil {
		return seckill.Ticket{}, err
	}
	defer s.mu.Unlock()
	p := s.def.Room
	if p == nil {
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeInvalidArgument, "sale %s has no waiting room", s.def.ID)
	}
	now := e.clock.Now()
	ms := now.UnixMilli()
	r := s.roomAt(ms)
	if x := r.entrants[id]; x != nil {
		return r.ticket(x), nil
	}
	switch {
	case s.closed || !now.Before(s.def.EndsAt):
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeEnded, "sale %s has ended", s.def.ID)
	case now.Before(s.def.RoomOpensAt()):
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeNotStarted, "the waiting room of sale %s opens at %s", s.def.ID, s.def.RoomOpensAt().Format(time.RFC3339))
	case r.closed != "":
		return seckill.Ticket{Entrant: id, State: r.closed, JoinedAt: time.UnixMilli(ms).UTC()}, nil
	}
	if len(r.entrants) >= maxRoomEntrants {
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeQueueFull, "sale %s: its waiting room is full (%d entrants)", s.def.ID, maxRoomEntrants)
	}
	r.seq++
	x := &entrant{id: id, joined: ms, arrival: r.seq}
	if r.entrants == nil {
		r.entrants = make(map[string]*entrant)
	}
	r.entrants[id] = x
	if p.Order == seckill.RoomDraw && !r.placed {
		x.key, x.drawn = drawKey, true
		r.pre = append(r.pre, x)
	} else {
		r.order = append(r.order, x)
		x.index = int64(len(r.order))
	}
	return r.ticket(x), nil
}

// roomAt returns s's room, made on first use, with its pre-queue placed once the sale has
// started. Call with s.mu held.
func (s *sale) roomAt(ms int64) *room {
	if s.room == nil {
		s.room = &room{}
	}
	r := s.room
	if !r.placed && ms >= s.def.StartsAt.UnixMilli() {
		r.place()
	}
	return r
}

// place puts the pre-queue in the draw's order (seckill.DrawOrder: by key, then id) ahead of
// everyone who joined after it.
func (r *room) place() {
	slices.SortFunc(r.pre, func(a, b *entrant) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	r.byID = make([]string, len(r.pre))
	for i, x := range r.pre {
		r.byID[i] = x.id
	}
	slices.Sort(r.byID)
	// FIFO rooms and draws with no pre-queue have everyone in order already; a draw room's
	// later arrivals only come after placing, so order is empty here for a draw room.
	r.order = append(r.pre, r.order...)
	for i, x := range r.order {
		x.index = int64(i + 1)
	}
	r.pre, r.placed = nil, true
}

// ticket is x's ticket at ms. Call with s.mu held.
func (r *room) ticket(x *entrant) seckill.Ticket {
	t := seckill.Ticket{Entrant: x.id, Drawn: x.drawn, Arrival: x.arrival, JoinedAt: time.UnixMilli(x.joined).UTC()}
	switch {
	case x.admittedAt != 0 && x.index <= r.told:
		t.State, t.Index = seckill.TicketAdmitted, x.index
		t.AdmittedAt, t.ActiveUntil = time.UnixMilli(x.admittedAt).UTC(), time.UnixMilli(x.activeUntil).UTC()
	case r.closed != "":
		t.State = r.closed
	case !r.placed:
		t.State = seckill.TicketPreQueue
	default: // waiting, or admitted and not told yet: first in line
		t.State, t.Index, t.Ahead = seckill.TicketWaiting, x.index, x.index-1-r.told
	}
	return t
}

// Ticket reads an entrant's ticket (seckill.WaitingRooms).
func (e *Engine) Ticket(_ context.Context, saleID, id string) (seckill.Ticket, error) {
	s, err := e.roomOf(saleID)
	if err != nil {
		return seckill.Ticket{}, err
	}
	defer s.mu.Unlock()
	ms := e.clock.Now().UnixMilli()
	var x *entrant
	if s.room != nil {
		x = s.room.entrants[id]
	}
	if x == nil {
		return seckill.Ticket{}, seckill.Errorf(seckill.CodeNotFound, "no entrant %q in the waiting room of sale %s", id, saleID)
	}
	r := s.roomAt(ms)
	r.endPlaces(ms)
	return r.ticket(x), nil
}

// Admit admits what the sale's policy allows now, and tells every admission
// (seckill.WaitingRooms).
func (e *Engine) Admit(_ context.Context, def seckill.Sale) (seckill.RoomState, error) {
	st, _, err := e.admit(def, true)
	return st, err
}

// AdmitUntold admits what the sale's policy allows now without telling (seckill.RoomTeller).
func (e *Engine) AdmitUntold(_ context.Context, def seckill.Sale) (seckill.RoomState, seckill.UntoldAdmissions, error) {
	return e.admit(def, false)
}

// TellAdmitted tells the admissions up to index n (seckill.RoomTeller); nothing once the room
// has closed, whose untold were told its closing state.
func (e *Engine) TellAdmitted(_ context.Context, saleID string, n int64) error {
	s, err := e.roomOf(saleID)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if r := s.room; r != nil && r.closed == "" {
		r.told = max(r.told, min(n, r.admitted))
	}
	return nil
}

// admit is Admit (tell) and AdmitUntold (not tell).
func (e *Engine) admit(def seckill.Sale, tell bool) (seckill.RoomState, seckill.UntoldAdmissions, error) {
	s, err := e.roomOf(def.ID)
	if err != nil {
		return seckill.RoomState{}, seckill.UntoldAdmissions{}, err
	}
	defer s.mu.Unlock()
	p := s.def.Room
	if p == nil {
		return seckill.RoomState{}, seckill.UntoldAdmissions{}, seckill.Errorf(seckill.CodeInvalidArgument, "sale %s has no waiting room", s.def.ID)
	}
	now := e.clock.Now()
	ms := now.UnixMilli()
	r := s.roomAt(ms)
	r.endPlaces(ms)
	starts := s.def.StartsAt.UnixMilli()
	if r.closed == "" && ms >= starts {
		switch {
		case s.sold >= s.def.Sellable():
			r.closed, r.closedAt = seckill.TicketSoldOut, ms
		case s.closed || !now.Before(s.def.EndsAt):
			r.closed, r.closedAt = seckill.TicketEnded, ms
		}
	}
	if r.closed != "" || ms < starts {
		return r.state(), seckill.UntoldAdmissions{First: r.told + 1}, nil
	}
	n := int64(len(r.order)) - r.admitted
	if p.AdmitPerSecond > 0 {
		burst := int64(p.RoomBurst()) * 1000
		if r.last == 0 {
			r.last, r.credit = starts, burst
		}
		if ms > r.last {
			r.credit = min(burst, r.credit+(ms-r.last)*int64(p.AdmitPerSecond))
			r.last = ms
		}
		n = min(n, r.credit/1000)
	}
	if p.MaxActive > 0 {
		n = min(n, int64(p.MaxActive)-r.active)
	}
	n = min(n, seckill.RoomAdmitBatch-(r.admitted-r.told)) // at most a batch untold
	for range max(n, 0) {
		x := r.order[r.admitted]
		r.admitted++
		x.admittedAt, x.activeUntil = ms, ms+int64(p.TokenSeconds)*1000
		r.active++
		heap.Push(&r.places, place{x.activeUntil, x})
		if p.AdmitPerSecond > 0 {
			r.credit -= 1000
		}
	}
	if tell {
		r.told = r.admitted
	}
	u := seckill.UntoldAdmissions{First: r.told + 1}
	for _, x := range r.order[r.told:r.admitted] {
		u.Entrants = append(u.Entrants, seckill.RoomEntrant{SaleID: s.def.ID, Entrant: x.id, Arrival: x.arrival,
			Drawn: x.drawn, JoinedAt: time.UnixMilli(x.joined).UTC()})
	}
	return r.state(), u, nil
}

// endPlaces ends the admitted places whose time has come.
func (r *room) endPlaces(ms int64) {
	for len(r.places) > 0 && r.places[0].until <= ms {
		p := heap.Pop(&r.places).(place)
		if x := p.e; !x.ended && x.activeUntil == p.until {
			x.ended = true
			r.active--
		}
	}
}

// state is the room's counts.
func (r *room) state() seckill.RoomState {
	st := seckill.RoomState{Admitted: r.told, Active: r.active, Closed: r.closed,
		Entrants: int64(len(r.entrants)), PreQueue: int64(len(r.byID) + len(r.pre))}
	if r.closed == "" {
		st.Waiting = st.Entrants - r.told
	} else {
		st.ClosedAt = time.UnixMilli(r.closedAt).UTC()
	}
	return st
}

// Release sets when an admitted entrant's place ends (seckill.WaitingRooms).
func (e *Engine) Release(_ context.Context, saleID, id string, until time.Time) error {
	s, err := e.roomOf(saleID)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.room == nil {
		return nil
	}
	r := s.room
	ms := e.clock.Now().UnixMilli()
	r.endPlaces(ms)
	x := r.entrants[id]
	if x == nil || x.admittedAt == 0 || x.index > r.told || x.ended {
		return nil
	}
	if u := until.UnixMilli(); u > ms {
		x.activeUntil = u
		heap.Push(&r.places, place{u, x})
		return nil
	}
	x.activeUntil, x.ended = ms, true
	r.active--
	return nil
}

// Room returns the room's counts (seckill.WaitingRooms).
func (e *Engine) Room(_ context.Context, saleID string) (seckill.RoomState, error) {
	s, err := e.roomOf(saleID)
	if err != nil {
		return seckill.RoomState{}, err
	}
	defer s.mu.Unlock()
	if s.room == nil {
		return seckill.RoomState{}, nil
	}
	ms := e.clock.Now().UnixMilli()
	r := s.roomAt(ms)
	r.endPlaces(ms)
	return r.state(), nil
}

// DrawEntrants lists the draw's entrants in id order (seckill.WaitingRooms).
func (e *Engine) DrawEntrants(_ context.Context, saleID, after string, limit int) ([]string, error) {
	if limit < 1 || limit > seckill.MaxDrawEntrantsPage {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "limit must be 1 to %d", seckill.MaxDrawEntrantsPage)
	}
	s, err := e.roomOf(saleID)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if s.room == nil {
		return []string{}, nil
	}
	r := s.roomAt(e.clock.Now().UnixMilli())
	ids := r.byID
	if !r.placed { // before the start: the list so far, in id order
		ids = make([]string, len(r.pre))
		for i, x := range r.pre {
			ids[i] = x.id
		}
		slices.Sort(ids)
	}
	i, _ := slices.BinarySearch(ids, after)
	if i < len(ids) && ids[i] == after {
		i++
	}
	return slices.Clone(ids[i:min(len(ids), i+limit)]), nil
}

// RestoreRoom replaces the sale's room with the journaled one (seckill.RoomRestorer).
func (e *Engine) RestoreRoom(_ context.Context, def seckill.Sale, es []seckill.RestoredEntrant, adm seckill.RoomAdmissions) error {
	for _, x := range es {
		if !seckill.ValidEntrant(x.Entrant) {
			return seckill.Errorf(seckill.CodeInvalidArgument, "entrant must be 32 lower-case hex digits")
		}
	}
	s, err := e.roomOf(def.ID)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	p := s.def.Room
	if p == nil {
		return seckill.Errorf(seckill.CodeInvalidArgument, "sale %s has no waiting room", s.def.ID)
	}
	ms := e.clock.Now().UnixMilli()
	r := &room{entrants: make(map[string]*entrant, len(es))}
	sorted := slices.Clone(es)
	slices.SortFunc(sorted, func(a, b seckill.RestoredEntrant) int { return cmp.Compare(a.Arrival, b.Arrival) })
	for _, y := range sorted {
		if r.entrants[y.Entrant] != nil {
			continue
		}
		x := &entrant{id: y.Entrant, arrival: y.Arrival, joined: y.JoinedAt.UnixMilli()}
		r.entrants[x.id] = x
		r.seq = max(r.seq, x.arrival)
		if y.Drawn && p.Order == seckill.RoomDraw {
			x.key, x.drawn = y.DrawKey, true
			r.pre = append(r.pre, x)
		} else {
			r.order = append(r.order, x)
			x.index = int64(len(r.order))
		}
	}
	s.room = r
	starts := s.def.StartsAt.UnixMilli()
	if ms < starts {
		return nil // nobody admitted before the start; the draw places the pre-queue then
	}
	r.place()
	at := max(min(adm.At.UnixMilli(), ms), starts)
	for r.admitted < min(adm.Count, int64(len(r.order))) {
		x := r.order[r.admitted]
		r.admitted++
		x.admittedAt, x.activeUntil = at, at+int64(p.TokenSeconds)*1000
		if x.activeUntil > ms {
			r.active++
			heap.Push(&r.places, place{x.activeUntil, x})
		} else {
			x.ended = true
		}
	}
	r.told = r.admitted // the journal's count is of admissions told
	if p.AdmitPerSecond > 0 {
		r.last, r.credit = ms, 0 // an empty bucket: no burst on top of what was admitted before
	}
	return nil
}
