package seckilltest

// The rule "Tell" of the rooms suite (seckill.RoomTeller; docs/MODEL.md invariant 14): an
// admission held untold reads waiting, first in line, until TellAdmitted covers it; AdmitUntold
// answers every untold admission with the journal's facts, admits no more while a batch is
// untold, and a room restored from the journal's count of told admissions admits the untold
// ones again at the same places.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

func testRoomTell(t *testing.T, newEngine NewRoomEngine) {
	t.Run("UntoldUntilTold", func(t *testing.T) {
		if err := checkRoomTell(t, newEngine); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("AtMostABatchUntold", func(t *testing.T) {
		r := newRoomRig(t, newEngine, 10, seckill.RoomInput{Order: seckill.RoomFIFO, MaxActive: 5000})
		teller := r.eng.(seckill.RoomTeller)
		n := seckill.RoomAdmitBatch + 100
		for _, u := range users(0, n) {
			r.join(u)
		}
		r.clock.Set(roomStart)
		untold := func(first int64, count int) {
			t.Helper()
			_, u, err := teller.AdmitUntold(r.ctx, r.sale)
			if err != nil {
				t.Fatalf("AdmitUntold: %v", err)
			}
			if u.First != first || len(u.Entrants) != count {
				t.Fatalf("AdmitUntold = first %d, %d entrants; want first %d, %d entrants", u.First, len(u.Entrants), first, count)
			}
		}
		untold(1, seckill.RoomAdmitBatch)
		untold(1, seckill.RoomAdmitBatch) // no more: a batch is untold
		if err := teller.TellAdmitted(r.ctx, r.sale.ID, 400); err != nil {
			t.Fatalf("TellAdmitted: %v", err)
		}
		untold(401, seckill.RoomAdmitBatch-300) // 400 more allowed, 100 left to admit
		if st := r.room(); st.Admitted != 400 || st.Waiting != int64(n-400) {
			t.Fatalf("room = %+v, want 400 admitted (told), %d waiting", st, n-400)
		}
	})
	t.Run("ClosedTellsTheClosing", func(t *testing.T) {
		r := newRoomRig(t, newEngine, 10, seckill.RoomInput{Order: seckill.RoomFIFO, MaxActive: 2})
		teller := r.eng.(seckill.RoomTeller)
		for _, u := range users(0, 3) {
			r.join(u)
		}
		r.clock.Set(roomStart)
		if _, u, err := teller.AdmitUntold(r.ctx, r.sale); err != nil || len(u.Entrants) != 2 {
			t.Fatalf("AdmitUntold = %+v, %v; want 2 untold", u, err)
		}
		r.clock.Set(r.sale.EndsAt)
		st, u, err := teller.AdmitUntold(r.ctx, r.sale)
		if err != nil || st.Closed != seckill.TicketEnded || len(u.Entrants) != 0 {
			t.Fatalf("AdmitUntold after the end = %+v, %+v, %v; want ended, none untold", st, u, err)
		}
		// A tell that comes after the close (another instance's admitter closed the room
		// between this one's admission and its tell) tells nobody: they were told "ended".
		if err := teller.TellAdmitted(r.ctx, r.sale.ID, 2); err != nil {
			t.Fatalf("TellAdmitted after the close: %v", err)
		}
		for _, us := range users(0, 3) {
			if tk := r.ticket(us); tk.State != seckill.TicketEnded {
				t.Fatalf("ticket of %s = %+v, want ended (never told admitted)", us, tk)
			}
		}
		if st := r.room(); st.Admitted != 0 {
			t.Fatalf("room after a tell past the close = %+v, want 0 admitted (told)", st)
		}
	})
}

// checkRoomTell is the scenario of UntoldUntilTold; an error says what broke (the package's
// own tests run it on a faulty engine, its negative control).
func checkRoomTell(t *testing.T, newEngine NewRoomEngine) error {
	r := newRoomRig(t, newEngine, 10, seckill.RoomInput{Order: seckill.RoomFIFO, MaxActive: 5})
	teller, ok := r.eng.(seckill.RoomTeller)
	if !ok {
		return fmt.Errorf("the engine is no seckill.RoomTeller")
	}
	us := users(0, 8)
	for _, u := range us {
		r.clock.Advance(time.Millisecond)
		r.join(u)
	}
	r.clock.Set(roomStart)
	j := journal{}
	for _, u := range us {
		tk := r.ticket(u)
		j.entrants = append(j.entrants, seckill.RoomEntrant{SaleID: r.sale.ID, Entrant: tk.Entrant, Arrival: tk.Arrival,
			Drawn: tk.Drawn, JoinedAt: tk.JoinedAt})
	}
	st, u, err := teller.AdmitUntold(r.ctx, r.sale)
	if err != nil {
		return fmt.Errorf("AdmitUntold: %w", err)
	}
	want := j.entrants[:5]
	if u.First != 1 || !slices.Equal(u.Entrants, want) {
		return fmt.Errorf("AdmitUntold answered untold %+v, want first 1 and %+v", u, want)
	}
	if st.Admitted != 0 || st.Waiting != 8 || st.Active != 5 {
		return fmt.Errorf("room after AdmitUntold = %+v, want 0 admitted (told), 8 waiting, 5 active", st)
	}
	// Nobody is told: each reads waiting at its index, with those before it ahead.
	for i, us := range us {
		tk := r.ticket(us)
		if tk.State != seckill.TicketWaiting || tk.Index != int64(i+1) || tk.Ahead != int64(i) {
			return fmt.Errorf("ticket of %s after AdmitUntold = %+v, want waiting at index %d, %d ahead", us, tk, i+1, i)
		}
	}
	r.release(us[0], time.Time{}) // not told: no outcome to count
	if _, u, err = teller.AdmitUntold(r.ctx, r.sale); err != nil || u.First != 1 || len(u.Entrants) != 5 {
		return fmt.Errorf("AdmitUntold again = %+v, %v; want the same 5 untold, no one more", u, err)
	}
	if err := teller.TellAdmitted(r.ctx, r.sale.ID, 3); err != nil {
		return fmt.Errorf("TellAdmitted(3): %w", err)
	}
	if err := teller.TellAdmitted(r.ctx, r.sale.ID, 2); err != nil { // never lowers
		return fmt.Errorf("TellAdmitted(2): %w", err)
	}
	for i, us := range us {
		tk := r.ticket(us)
		switch {
		case i < 3 && (tk.State != seckill.TicketAdmitted || tk.Index != int64(i+1)):
			return fmt.Errorf("ticket of %s after TellAdmitted(3) = %+v, want admitted at index %d", us, tk, i+1)
		case i >= 3 && (tk.State != seckill.TicketWaiting || tk.Index != int64(i+1) || tk.Ahead != int64(i-3)):
			return fmt.Errorf("ticket of %s after TellAdmitted(3) = %+v, want waiting at index %d, %d ahead", us, tk, i+1, i-3)
		}
	}
	if st := r.room(); st.Admitted != 3 || st.Waiting != 5 {
		return fmt.Errorf("room after TellAdmitted(3) = %+v, want 3 admitted, 5 waiting", st)
	}
	if _, u, err = teller.AdmitUntold(r.ctx, r.sale); err != nil || u.First != 4 || !slices.Equal(u.Entrants, j.entrants[3:5]) {
		return fmt.Errorf("AdmitUntold after TellAdmitted(3) = %+v, %v; want first 4: %s and %s", u, err, us[3], us[4])
	}
	// The engine loses the room; the journal holds the 3 told: the restored room admits the
	// untold ones again at their places, each once.
	j.seed, j.sale, j.admitted = r.seed, r.sale, seckill.RoomAdmissions{Count: 3, At: r.clock.Now()}
	r.restoreInto(newEngine(t, r.clock), &j)
	if st := r.room(); st.Admitted != 3 {
		return fmt.Errorf("restored room = %+v, want 3 admitted", st)
	}
	r.clock.Advance(time.Duration(r.sale.Room.TokenSeconds+1) * time.Second) // the restored places end
	r.admit(5)
	for i, us := range us {
		if tk := r.ticket(us); tk.State != seckill.TicketAdmitted || tk.Index != int64(i+1) {
			return fmt.Errorf("ticket of %s after the restore = %+v, want admitted at index %d", us, tk, i+1)
		}
	}
	return nil
}
