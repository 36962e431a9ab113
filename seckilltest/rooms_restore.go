package seckilltest

import (
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// journal is what the service journals of a room (seckill.RoomJournal): each entrant from its
// join's ticket, and the count of admissions with the time it was raised.
type journal struct {
	seed     []byte
	sale     seckill.Sale
	entrants []seckill.RoomEntrant
	admitted seckill.RoomAdmissions
}

func (j *journal) joined(tk seckill.Ticket) {
	j.entrants = append(j.entrants, seckill.RoomEntrant{SaleID: j.sale.ID, Incarnation: j.sale.Incarnation,
		Entrant: tk.Entrant, Arrival: tk.Arrival, Drawn: tk.Drawn, JoinedAt: tk.JoinedAt})
}

// restored is the journal as RestoreRoom takes it, draw keys computed from the seed, in an
// order other than arrival's (RestoreRoom takes any).
func (j *journal) restored() []seckill.RestoredEntrant {
	out := make([]seckill.RestoredEntrant, len(j.entrants))
	for i, e := range j.entrants {
		out[len(out)-1-i] = seckill.RestoredEntrant{RoomEntrant: e, DrawKey: seckill.DrawKey(j.seed, e.Entrant)}
	}
	return out
}

// restoreInto loads the journal's sale into a fresh engine reading the rig's clock and
// restores the room there: the rig then drives that engine.
func (r *roomRig) restoreInto(eng RoomEngine, j *journal) {
	r.t.Helper()
	if err := eng.LoadSale(r.ctx, r.sale, 0); err != nil {
		r.t.Fatalf("LoadSale: %v", err)
	}
	if err := eng.RestoreRoom(r.ctx, r.sale, j.restored(), j.admitted); err != nil {
		r.t.Fatalf("RestoreRoom: %v", err)
	}
	r.eng = eng
}

// sameTickets requires the tickets of us to be before's (everything but the admission's
// times, which the journal does not keep exactly).
func (r *roomRig) sameTickets(us []string, before map[string]seckill.Ticket) {
	r.t.Helper()
	for _, u := range us {
		got, want := r.ticket(u), before[u]
		got.AdmittedAt, got.ActiveUntil, want.AdmittedAt, want.ActiveUntil = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if got != want {
			r.t.Fatalf("restored ticket of %s = %+v, want %+v", u, got, want)
		}
	}
}

func (r *roomRig) tickets(us []string) map[string]seckill.Ticket {
	r.t.Helper()
	m := make(map[string]seckill.Ticket, len(us))
	for _, u := range us {
		m[u] = r.ticket(u)
	}
	return m
}

func testRoomRestore(t *testing.T, newEngine NewRoomEngine) {
	t.Run("LostRowRenumbers", func(t *testing.T) { testRoomLostRow(t, newEngine) })
	for _, kind := range []string{seckill.RoomDraw, seckill.RoomFIFO} {
		t.Run(kind, func(t *testing.T) {
			r := newRoomRig(t, newEngine, 100, seckill.RoomInput{Order: kind, MaxActive: 4, TokenSeconds: ptr(10)})
			j := &journal{seed: r.seed, sale: r.sale}
			pre, later := users(0, 12), users(12, 20)
			for i, u := range pre {
				r.clock.Set(epoch.Add(time.Duration(i) * time.Second))
				j.joined(r.join(u))
			}
			// Restored before the start: the pre-queue is placed by the draw at the start.
			r.restoreInto(newEngine(t, r.clock), j)
			if st := r.room(); st.Entrants != 12 || st.Admitted != 0 {
				t.Fatalf("room restored before the start = %+v, want 12 entrants", st)
			}
			r.clock.Set(roomStart)
			r.admit(4)
			r.release(pre[0], roomStart)
			r.release(r.admittedUsers(pre)[1], roomStart)
			for _, u := range later {
				r.clock.Advance(time.Millisecond)
				j.joined(r.join(u))
			}
			r.clock.Advance(time.Millisecond)
			r.admit(2)
			all := append(append([]string{}, pre...), later...)
			admittedBefore := r.admittedUsers(all)
			j.admitted = seckill.RoomAdmissions{Count: r.room().Admitted, At: r.clock.Now()}
			before, st := r.tickets(all), r.room()

			r.restoreInto(newEngine(t, r.clock), j)
			r.sameTickets(all, before)
			got := r.room()
			// The journal keeps no releases: every admitted place counts until its token ends.
			want := st
			want.Active = j.admitted.Count
			if got != want {
				t.Fatalf("restored room = %+v, want %+v (the original's %+v, every admitted place active)", got, want, st)
			}
			r.admit(0) // max_active is full of the restored places
			// A new arrival comes after every restored one.
			late := r.join("late")
			if late.Arrival != int64(len(all)+1) || late.State != seckill.TicketWaiting || late.Index != int64(len(all)+1) {
				t.Fatalf("join after the restore = %+v, want arrival and index %d, waiting", late, len(all)+1)
			}
			// Admission goes on from the head: the rest, once each, in the draw's order.
			for i := 0; i < 40 && r.room().Waiting > 0; i++ {
				r.clock.Advance(11 * time.Second) // every place's token ends
				if _, err := r.eng.Admit(r.ctx, r.sale); err != nil {
					t.Fatalf("Admit: %v", err)
				}
			}
			es := func(us []string) []string {
				out := make([]string, len(us))
				for i, u := range us {
					out[i] = r.entrant(u)
				}
				return out
			}
			all = append(all, "late")
			order := r.admissionOrder(all)
			if first := order[:len(admittedBefore)]; !slices.Equal(first, es(admittedBefore)) {
				t.Fatalf("the restored room's first admissions %v, want those admitted before %v", first, es(admittedBefore))
			}
			drawn, rest := es(pre), es(append(later, "late"))
			if kind == seckill.RoomFIFO {
				drawn, rest = nil, es(all)
			}
			if err := CheckAdmissionOrder(r.seed, drawn, rest, order); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// testRoomLostRow: a join row lost to the journal (a crash within its interval) renumbers the
// places of those after it when the room is restored, and the room's counts show fewer
// entrants than before: the signal on which a live stream stops trusting a place it read
// before (service.Due), which would otherwise derive the closing state for an entrant the
// restored room admitted.
func testRoomLostRow(t *testing.T, newEngine NewRoomEngine) {
	r := newRoomRig(t, newEngine, 10, seckill.RoomInput{Order: seckill.RoomFIFO, MaxActive: 3})
	j := &journal{seed: r.seed, sale: r.sale}
	us := users(0, 5)
	for i, u := range us {
		tk := r.join(u)
		if i != 1 {
			j.joined(tk)
		}
	}
	r.clock.Set(roomStart)
	before, counts := r.ticket(us[3]), r.room()
	r.restoreInto(newEngine(t, r.clock), j)
	r.admit(3)
	r.clock.Set(r.sale.EndsAt)
	st := r.admit(0)
	after := r.ticket(us[3])
	if before.Index != 4 || counts.Entrants != 5 || st.Entrants != 4 || st.Closed != seckill.TicketEnded ||
		after.State != seckill.TicketAdmitted || after.Index != 3 {
		t.Fatalf("%s before the loss %+v (room %+v); after the restore, 3 admissions and the end %+v (room %+v); "+
			"want index 4 of 5 entrants, then admitted at index 3 of 4 in a room closed ended", us[3], before, counts, after, st)
	}
}
