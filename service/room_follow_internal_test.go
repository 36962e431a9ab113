package service

import (
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// A followed ticket is derived from the room's counts unless they cannot tell: in a closed
// room a ticket beyond the final serving counter has the closing state, but not once the room
// shows fewer entrants than the follow saw (a restore with rows lost renumbered the places).
func TestFollowDueAfterALossyRestore(t *testing.T) {
	s := &Service{clock: seckill.SystemClock{}}
	sale := seckill.Sale{ID: "s", StartsAt: time.Now().Add(-time.Minute), Room: &seckill.RoomPolicy{TokenSeconds: 60}}
	f := RoomFollow{Sale: sale, User: "u3", Ticket: seckill.Ticket{Entrant: "e3", State: seckill.TicketWaiting, Index: 4, Ahead: 3}}
	open := seckill.RoomState{Entrants: 5}
	f = f.Saw(open)
	if s.Due(f, open) {
		t.Fatal("a waiting ticket beyond the counter of an open room is due")
	}
	closed := seckill.RoomState{Entrants: 5, Admitted: 3, Closed: seckill.TicketEnded}
	f = f.Saw(closed)
	if s.Due(f, closed) {
		t.Fatal("a ticket beyond the final counter of a closed room is due")
	}
	if v := s.TicketAt(f, closed); v.State != seckill.TicketEnded || v.Index != 0 || v.Position != 0 {
		t.Fatalf("derived %+v, want ended with no place", v)
	}
	// The room lost u1's journal row and was restored: u3 is now 3rd, admitted, and the room
	// closed again with 4 entrants.
	restored := seckill.RoomState{Entrants: 4, Admitted: 3, Closed: seckill.TicketEnded}
	if f = f.Saw(restored); !s.Due(f, restored) {
		t.Fatal("after a restore with fewer entrants the old place was trusted: the ticket must be read")
	}
	// Read again (Refresh records the counts it read with): trusted from then on.
	f.Ticket, f.entrants = seckill.Ticket{Entrant: "e3", State: seckill.TicketAdmitted, Index: 3}, restored.Entrants
	if s.Due(f.Saw(restored), restored) {
		t.Fatal("a ticket read after the restore is still due")
	}
}
