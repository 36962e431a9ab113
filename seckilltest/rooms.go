package seckilltest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// RoomEngine is an engine with waiting rooms: every engine is one, and restores them.
type RoomEngine interface {
	seckill.Inventory
	seckill.WaitingRooms
	seckill.RoomRestorer
	seckill.RoomTeller
}

// NewRoomEngine builds a fresh, empty engine that reads time from clock, for TestWaitingRooms.
type NewRoomEngine = func(t *testing.T, clock seckill.Clock) RoomEngine

// TestWaitingRooms is the conformance suite of seckill.WaitingRooms (docs/MODEL.md "The waiting
// room"). Every engine runs it from its own tests. Subtests:
//   - Rules: one scenario per rule, with exact expected tickets and counts: the draw's order,
//     FIFO rooms, the rate's bucket, max_active and Release, sold out and ended, the errors,
//     the entrant list.
//   - Model: a pgregory.net/rapid state machine that drives the engine and a plain model of the
//     room (roomModel) side by side with random joins, admissions, releases, clock steps and
//     closes, and requires identical tickets, counts and entrant lists.
//   - Restore: a room rebuilt in a fresh engine from what the journal keeps (RestoreRoom)
//     answers the same tickets and counts, admits no one twice and goes on in the draw's order.
//   - Tell: an admission held untold (seckill.RoomTeller) reads waiting until it is told, at
//     most a batch is untold, and a room restored from the count of those told admits the
//     untold again at their places.
//   - Concurrency: thousands of entrants joining on many goroutines before and after the start
//     while several admitters and releasers run, checked by CheckRoom (whose negative controls
//     are in this package's own tests).
func TestWaitingRooms(t *testing.T, newEngine NewRoomEngine) {
	t.Run("Rules", func(t *testing.T) { testRoomRules(t, newEngine) })
	t.Run("Model", func(t *testing.T) { testRoomModel(t, newEngine) })
	t.Run("Restore", func(t *testing.T) { testRoomRestore(t, newEngine) })
	t.Run("Tell", func(t *testing.T) { testRoomTell(t, newEngine) })
	t.Run("Concurrency", func(t *testing.T) { testRoomConcurrency(t, newEngine) })
}

// roomSecret is the secret the suite derives seeds from.
var roomSecret = []byte("rooms-suite-secret")

// roomRig is one room scenario: an engine, its clock and a sale with a room starting at
// epoch + 1 min (the room opens at epoch: opens_seconds 60).
type roomRig struct {
	t     *testing.T
	ctx   context.Context
	clock *ManualClock
	eng   RoomEngine
	sale  seckill.Sale
	seed  []byte
}

// roomStart is when every rooms scenario's sale starts.
var roomStart = epoch.Add(time.Minute)

func newRoomRig(t *testing.T, newEngine NewRoomEngine, stock int, room seckill.RoomInput) *roomRig {
	t.Helper()
	clock := NewManualClock(epoch)
	return newRoomRigOn(t, newEngine(t, clock), clock, stock, room)
}

// newRoomRigOn is newRoomRig on an engine already built, reading clock.
func newRoomRigOn(t *testing.T, eng RoomEngine, clock *ManualClock, stock int, room seckill.RoomInput) *roomRig {
	t.Helper()
	r := &roomRig{t: t, ctx: context.Background(), clock: clock, eng: eng}
	if room.OpensSeconds == nil {
		room.OpensSeconds = ptr(60)
	}
	in := seckill.SaleInput{ID: "r" + strconv.Itoa(stock), PriceCents: ptr(int64(price)), Stock: &stock,
		PerUserLimit: ptr(1), HoldSeconds: ptr(10), StartsAt: ptr(roomStart), WaitingRoom: &room}
	s, err := seckill.NewSale(in, epoch)
	if err != nil {
		t.Fatalf("NewSale: %v", err)
	}
	if err := r.eng.LoadSale(r.ctx, s, 0); err != nil {
		t.Fatalf("LoadSale: %v", err)
	}
	r.sale, r.seed = s, seckill.RoomSeed(roomSecret, s)
	return r
}

// entrant is user's entrant id in the rig's sale.
func (r *roomRig) entrant(user string) string { return seckill.EntrantID(r.sale.ID, user) }

// join joins user and requires success.
func (r *roomRig) join(user string) seckill.Ticket {
	r.t.Helper()
	e := r.entrant(user)
	tk, err := r.eng.Join(r.ctx, r.sale, e, seckill.DrawKey(r.seed, e))
	if err != nil {
		r.t.Fatalf("Join(%s): %v", user, err)
	}
	if tk.Entrant != e {
		r.t.Fatalf("Join(%s) = ticket of %q, want %q", user, tk.Entrant, e)
	}
	return tk
}

func (r *roomRig) joinFails(user string, code seckill.Code) {
	r.t.Helper()
	e := r.entrant(user)
	if tk, err := r.eng.Join(r.ctx, r.sale, e, seckill.DrawKey(r.seed, e)); seckill.ErrorCode(err) != code {
		r.t.Fatalf("Join(%s) = %+v, %v; want %s", user, tk, err, code)
	}
}

func (r *roomRig) ticket(user string) seckill.Ticket {
	r.t.Helper()
	tk, err := r.eng.Ticket(r.ctx, r.sale.ID, r.entrant(user))
	if err != nil {
		r.t.Fatalf("Ticket(%s): %v", user, err)
	}
	return tk
}

// admit calls Admit and requires that it admitted exactly n.
func (r *roomRig) admit(n int64) seckill.RoomState {
	r.t.Helper()
	before := r.room().Admitted
	st, err := r.eng.Admit(r.ctx, r.sale)
	if err != nil {
		r.t.Fatalf("Admit: %v", err)
	}
	if got := st.Admitted - before; got != n {
		r.t.Fatalf("Admit at %s admitted %d, want %d (state %+v)", r.clock.Now().Sub(roomStart), got, n, st)
	}
	return st
}

func (r *roomRig) room() seckill.RoomState {
	r.t.Helper()
	st, err := r.eng.Room(r.ctx, r.sale.ID)
	if err != nil {
		r.t.Fatalf("Room: %v", err)
	}
	return st
}

func (r *roomRig) release(user string, until time.Time) {
	r.t.Helper()
	if err := r.eng.Release(r.ctx, r.sale.ID, r.entrant(user), until); err != nil {
		r.t.Fatalf("Release(%s): %v", user, err)
	}
}

// users is u<from>..u<to-1>.
func users(from, to int) []string {
	var us []string
	for i := from; i < to; i++ {
		us = append(us, "u"+strconv.Itoa(i))
	}
	return us
}

// admissionOrder is the entrant ids of us in the order they were admitted (admittedUsers),
// and fails unless every one of them was admitted.
func (r *roomRig) admissionOrder(us []string) []string {
	r.t.Helper()
	got := r.admittedUsers(us)
	if len(got) != len(us) {
		r.t.Fatalf("%d of %d admitted (%v), want all", len(got), len(us), got)
	}
	for i, u := range got {
		got[i] = r.entrant(u)
	}
	return got
}

func testRoomRules(t *testing.T, newEngine NewRoomEngine) {
	draw := seckill.RoomInput{AdmitPerSecond: 100} // burst 10

	t.Run("Errors", func(t *testing.T) {
		r := newRoomRig(t, newEngine, 5, seckill.RoomInput{AdmitPerSecond: 100, OpensSeconds: ptr(30)})
		r.joinFails("u1", seckill.CodeNotStarted) // opens at start − 30 s
		if _, err := r.eng.Join(r.ctx, r.sale, "not-an-entrant", 1); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
			t.Fatalf("Join(bad entrant) = %v, want invalid_argument", err)
		}
		if _, err := r.eng.Join(r.ctx, r.sale, "ABCDEF0123456789ABCDEF0123456789", 1); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
			t.Fatalf("Join(upper-case entrant) = %v, want invalid_argument", err)
		}
		other := r.sale
		other.ID = "nosuch"
		if _, err := r.eng.Join(r.ctx, other, r.entrant("u1"), 1); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("Join(unknown sale) = %v, want not_found", err)
		}
		plain, err := seckill.NewSale(seckill.SaleInput{ID: "plain", PriceCents: ptr(int64(price)), Stock: ptr(3), StartsAt: ptr(epoch)}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.eng.LoadSale(r.ctx, plain, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := r.eng.Join(r.ctx, plain, seckill.EntrantID("plain", "u1"), 1); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
			t.Fatalf("Join(sale without a room) = %v, want invalid_argument", err)
		}
		if _, err := r.eng.Ticket(r.ctx, r.sale.ID, r.entrant("u1")); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("Ticket(never joined) = %v, want not_found", err)
		}
		if st := r.room(); st != (seckill.RoomState{}) {
			t.Fatalf("Room before anyone joined = %+v, want zero counts", st)
		}
		for _, limit := range []int{0, -1, seckill.MaxDrawEntrantsPage + 1} {
			if _, err := r.eng.DrawEntrants(r.ctx, r.sale.ID, "", limit); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
				t.Fatalf("DrawEntrants(limit %d) = %v, want invalid_argument", limit, err)
			}
		}
		if err := r.eng.Release(r.ctx, r.sale.ID, r.entrant("u1"), epoch); err != nil {
			t.Fatalf("Release(never joined) = %v, want nil", err)
		}
	})

	// The pre-queue is in the draw's order at the start; later arrivals come behind it, in
	// order of arrival; each is admitted once.
	t.Run("Draw", func(t *testing.T) {
		r := newRoomRig(t, newEngine, 100, draw)
		pre, later := users(0, 30), users(30, 36)
		for i, u := range pre {
			tk := r.join(u)
			if tk.State != seckill.TicketPreQueue || !tk.Drawn || tk.Index != 0 || tk.Ahead != 0 {
				t.Fatalf("pre-queue join %d = %+v, want pre_queue, drawn, no index", i, tk)
			}
			r.clock.Advance(time.Second)
		}
		if got := r.join(pre[3]); got != r.ticket(pre[3]) || got.JoinedAt != epoch.Add(3*time.Second) {
			t.Fatalf("joining again = %+v, want the first ticket, joined at %s", got, epoch.Add(3*time.Second))
		}
		r.admit(0) // before the start
		if st := r.room(); st.Entrants != 30 || st.PreQueue != 30 || st.Waiting != 30 || st.Admitted != 0 {
			t.Fatalf("room before the start = %+v", st)
		}
		r.clock.Set(roomStart)
		ids := make([]string, len(pre))
		for i, u := range pre {
			ids[i] = r.entrant(u)
		}
		want := seckill.DrawOrder(r.seed, ids)
		if tk := r.ticket(pre[0]); tk.State != seckill.TicketWaiting || tk.Index != int64(slices.Index(want, tk.Entrant)+1) || tk.Ahead != tk.Index-1 {
			t.Fatalf("ticket at the start = %+v, want waiting at its draw place %d", tk, slices.Index(want, tk.Entrant)+1)
		}
		for i, u := range later {
			tk := r.join(u)
			if tk.State != seckill.TicketWaiting || tk.Drawn || tk.Index != int64(31+i) || tk.Ahead != int64(30+i) {
				t.Fatalf("join after the start = %+v, want waiting at %d", tk, 31+i)
			}
			r.clock.Advance(time.Millisecond)
		}
		st := r.admit(10) // the burst
		if st.Waiting != 26 || st.Active != 10 {
			t.Fatalf("room after the first admission = %+v", st)
		}
		if tk := r.ticket(later[0]); tk.Ahead != 20 || tk.Index != 31 {
			t.Fatalf("ticket after admitting 10 = %+v, want 20 ahead", tk)
		}
		r.clock.Advance(100 * time.Millisecond)
		r.admit(10)
		r.clock.Advance(time.Second)
		r.admit(10) // the bucket holds at most the burst
		r.clock.Advance(time.Second)
		r.admit(6)
		got := r.admissionOrder(append(slices.Clone(pre), later...))
		laterIDs := make([]string, len(later))
		for i, u := range later {
			laterIDs[i] = r.entrant(u)
		}
		if err := CheckAdmissionOrder(r.seed, ids, laterIDs, got); err != nil {
			t.Fatal(err)
		}
		again := r.join(pre[5])
		if again.State != seckill.TicketAdmitted || r.room().Admitted != 36 {
			t.Fatalf("joining again once admitted = %+v (room %+v): want the same admission", again, r.room())
		}
		var listed []string
		for after := ""; ; {
			page, err := r.eng.DrawEntrants(r.ctx, r.sale.ID, after, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			listed, after = append(listed, page...), page[len(page)-1]
		}
		sorted := slices.Sorted(slices.Values(ids))
		if !slices.Equal(listed, sorted) {
			t.Fatalf("DrawEntrants in pages of 7 = %d ids %v…, want the %d pre-queue ids in byte order", len(listed), listed[:min(3, len(listed))], len(sorted))
		}
	})

	t.Run("FIFO", func(t *testing.T) {
		r := newRoomRig(t, newEngine, 100, seckill.RoomInput{Order: seckill.RoomFIFO, AdmitPerSecond: 1000})
		us := users(0, 20)
		for _, u := range us[:10] {
			if tk := r.join(u); tk.State != seckill.TicketPreQueue || tk.Drawn {
				t.Fatalf("FIFO join before the start = %+v, want pre_queue, not drawn", tk)
			}
			r.clock.Advance(time.Millisecond)
		}
		r.clock.Set(roomStart)
		for _, u := range us[10:] {
			r.join(u)
		}
		r.admit(20)
		want := make([]string, len(us))
		for i, u := range us {
			want[i] = r.entrant(u)
		}
		if got := r.admissionOrder(us); !slices.Equal(got, want) {
			t.Fatalf("FIFO admission order differs from arrival order")
		}
		if page, err := r.eng.DrawEntrants(r.ctx, r.sale.ID, "", 10); err != nil || len(page) != 0 {
			t.Fatalf("DrawEntrants of a FIFO room = %v, %v; want none", page, err)
		}
	})

	// The rate's bucket: full (the burst) at the start, refilled at admit_per_second, never
	// above the burst however long the room stayed idle.
	t.Run("Rate", func(t *testing.T) {
		r := newRoomRig(t, newEngine, 100, seckill.RoomInput{AdmitPerSecond: 20}) // burst 2
		for _, u := range users(0, 50) {
			r.join(u)
		}
		r.clock.Set(roomStart)
		r.admit(2)
		r.admit(0)
		r.clock.Advance(50 * time.Millisecond)
		r.admit(1)
		r.clock.Advance(49 * time.Millisecond)
		r.admit(0)
		r.clock.Advance(time.Millisecond)
		r.admit(1)
		r.clock.Advance(10 * time.Second)
		r.admit(2)
		for range 20 {
			r.clock.Advance(50 * time.Millisecond)
			r.admit(1)
		}
		if st := r.room(); st.Admitted != 26 || st.Waiting != 24 {
			t.Fatalf("room = %+v, want 26 admitted, 24 waiting", st)
		}
	})

	// max_active: admitted entrants without an outcome. An admission's place lasts
	// token_seconds unless Release moves its end; an ended place is never revived.
	t.Run("MaxActive", func(t *testing.T) {
		r := newRoomRig(t, newEngine, 100, seckill.RoomInput{MaxActive: 3, TokenSeconds: ptr(30)})
		us := users(0, 10)
		for _, u := range us {
			r.join(u)
		}
		r.clock.Set(roomStart)
		r.admit(3)
		r.admit(0)
		order := r.admittedUsers(us)
		a, b, c := order[0], order[1], order[2]
		r.release(a, roomStart) // an outcome: now
		if tk := r.ticket(a); !tk.ActiveUntil.Equal(roomStart) {
			t.Fatalf("released ticket = %+v, want its place ended at %s", tk, roomStart)
		}
		r.release(a, roomStart.Add(time.Hour)) // never revived
		if st := r.room(); st.Active != 2 {
			t.Fatalf("room after one outcome and a revival attempt = %+v, want 2 active", st)
		}
		r.admit(1)
		r.release(b, roomStart.Add(100*time.Second)) // a hold until then
		r.release(r.waitingUsers(us)[0], roomStart)  // not admitted: nothing
		r.clock.Advance(30 * time.Second)            // c's and the fourth's tokens lapse
		if st := r.room(); st.Active != 1 {
			t.Fatalf("room after the tokens lapsed = %+v, want 1 active (b's hold)", st)
		}
		if tk := r.ticket(c); tk.State != seckill.TicketAdmitted || !tk.ActiveUntil.Equal(roomStart.Add(30*time.Second)) {
			t.Fatalf("lapsed ticket = %+v", tk)
		}
		r.admit(2)
		r.clock.Advance(70 * time.Second) // b's hold ends, and the last two's tokens
		r.admit(3)
		last := r.waitingUsers(us)
		if len(last) != 1 {
			t.Fatalf("%d waiting, want 1", len(last))
		}
		if tk := r.ticket(last[0]); tk.Ahead != 0 || tk.Index != 10 {
			t.Fatalf("last entrant = %+v, want waiting at 10 with nobody ahead", tk)
		}
	})

	// When every unit is sold the room closes: no one is admitted again, everyone waiting
	// reads sold_out at once, and a new entrant learns it at its join.
	t.Run("SoldOut", func(t *testing.T) {
		r := newRoomRig(t, newEngine, 2, draw)
		us := users(0, 15)
		for _, u := range us {
			r.join(u)
		}
		r.clock.Set(roomStart)
		r.admit(10)
		r.clock.Advance(time.Second)
		rg := &rig{t: t, ctx: r.ctx, clock: r.clock, inv: r.eng, sale: r.sale}
		order := r.admittedUsers(us)
		for i, u := range order[:2] {
			res := rg.buy(u, 1, "")
			rg.payFull("p"+strconv.Itoa(i), res, seckill.PaymentApplied)
		}
		if st := r.room(); st.Closed != "" || !st.ClosedAt.IsZero() {
			t.Fatalf("room before the close = %+v, want open, no closed_at", st)
		}
		before := make(map[string]seckill.Ticket, len(us))
		for _, u := range us {
			before[u] = r.ticket(u)
		}
		closedAt := r.clock.Now().Truncate(time.Millisecond)
		st := r.admit(0)
		if st.Closed != seckill.TicketSoldOut || st.Waiting != 0 || !st.ClosedAt.Equal(closedAt) {
			t.Fatalf("room after the last unit was paid = %+v, want closed sold_out at %s, none waiting", st, closedAt)
		}
		// What a live stream derives from the counts alone (service.TicketAt): a ticket placed
		// beyond the final serving counter was never admitted, and reads the closing state
		// with no place; one at or below it was admitted.
		for _, u := range us {
			tk := r.ticket(u)
			admitted := slices.Contains(order, u)
			if admitted && tk.State != seckill.TicketAdmitted || !admitted && tk.State != seckill.TicketSoldOut {
				t.Fatalf("ticket of %s after sold out = %+v (admitted before: %v)", u, tk, admitted)
			}
			if b := before[u]; !admitted && (tk.Index != 0 || tk.Ahead != 0 || b.Index <= st.Admitted) ||
				admitted && tk.Index > st.Admitted {
				t.Fatalf("ticket of %s after sold out = %+v, before %+v, counts %+v: its place and the serving counter disagree", u, tk, b, st)
			}
		}
		r.clock.Advance(time.Minute)
		r.admit(0)
		if tk := r.join("late"); tk.State != seckill.TicketSoldOut {
			t.Fatalf("join after sold out = %+v, want sold_out", tk)
		}
		if st := r.room(); st.Admitted != 10 || st.Closed != seckill.TicketSoldOut || !st.ClosedAt.Equal(closedAt) {
			t.Fatalf("room = %+v, want sold_out, closed at %s (the close's time, kept)", st, closedAt)
		}
	})

	t.Run("Ended", func(t *testing.T) {
		r := newRoomRig(t, newEngine, 5, draw)
		for _, u := range users(0, 20) {
			r.join(u)
		}
		r.clock.Set(roomStart)
		r.admit(10)
		if _, _, err := r.eng.CloseSale(r.ctx, r.sale.ID); err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(time.Second)
		if st := r.admit(0); st.Closed != seckill.TicketEnded || st.Waiting != 0 {
			t.Fatalf("room after the close = %+v, want closed ended", st)
		}
		if tk := r.ticket("u19"); tk.State != seckill.TicketEnded && tk.State != seckill.TicketAdmitted {
			t.Fatalf("ticket after the close = %+v", tk)
		}
		r.joinFails("new", seckill.CodeEnded)
	})
}

// waitingUsers is the users among us whose ticket reads waiting.
func (r *roomRig) waitingUsers(us []string) []string {
	r.t.Helper()
	var out []string
	for _, u := range us {
		if r.ticket(u).State == seckill.TicketWaiting {
			out = append(out, u)
		}
	}
	return out
}

// admittedUsers is the admitted users among us in the order of their admission.
func (r *roomRig) admittedUsers(us []string) []string {
	r.t.Helper()
	type ui struct {
		u string
		i int64
	}
	var got []ui
	for _, u := range us {
		if tk := r.ticket(u); tk.State == seckill.TicketAdmitted {
			got = append(got, ui{u, tk.Index})
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i].i < got[j].i })
	out := make([]string, len(got))
	for i, g := range got {
		out[i] = g.u
	}
	return out
}

// Admission is one observed admission: an entrant and its index in the room's order.
type Admission struct {
	Entrant string
	Index   int64
}

// CheckAdmissionOrder requires that admitted (entrant ids in order of admission) be the
// draw's order of the pre-queue (seckill.DrawOrder(seed, pre)) followed by later (those who
// joined after the start, in order of arrival), or a prefix of it.
func CheckAdmissionOrder(seed []byte, pre, later, admitted []string) error {
	want := append(seckill.DrawOrder(seed, pre), later...)
	if len(admitted) > len(want) {
		return fmt.Errorf("%d admissions of %d entrants: someone was admitted twice or never joined", len(admitted), len(want))
	}
	for i, e := range admitted {
		if e != want[i] {
			return fmt.Errorf("admission %d is %s, the draw says %s: the order is not the published draw's", i+1, e, want[i])
		}
	}
	return nil
}

// RoomObservation is what the concurrency scenario saw of a room: the tickets of every entrant
// at the end, and the room's counts after each Admit call in the order the calls returned.
type RoomObservation struct {
	Tickets []seckill.Ticket
	// Samples are RoomStates read after Admit calls, each with whether the room was seen
	// closed by a call that had returned before this call began.
	Samples   []RoomSample
	MaxActive int64
}

// RoomSample is one Admit call's answer, and the highest Admitted any call saw closed before
// this call began (-1 if none had).
type RoomSample struct {
	State          seckill.RoomState
	ClosedAdmitted int64
}

// CheckRoom is the concurrency scenario's detector: every admission has a distinct index,
// the indexes are 1..Admitted with no gap (no double admission, nobody skipped), the counts
// agree with the tickets, max_active was never exceeded, and nothing was admitted after the
// room was seen closed.
func CheckRoom(obs RoomObservation) error {
	var errs []error
	seen := map[int64]string{}
	var admitted int64
	for _, tk := range obs.Tickets {
		if tk.State != seckill.TicketAdmitted {
			continue
		}
		admitted++
		if other, dup := seen[tk.Index]; dup {
			errs = append(errs, fmt.Errorf("entrants %s and %s were both admitted at index %d", other, tk.Entrant, tk.Index))
		}
		seen[tk.Index] = tk.Entrant
	}
	var final seckill.RoomState
	for _, s := range obs.Samples {
		if s.State.Admitted > final.Admitted {
			final = s.State
		}
		if obs.MaxActive > 0 && s.State.Active > obs.MaxActive {
			errs = append(errs, fmt.Errorf("%d active admissions, above max_active %d", s.State.Active, obs.MaxActive))
		}
		if s.ClosedAdmitted >= 0 && s.State.Admitted > s.ClosedAdmitted {
			errs = append(errs, fmt.Errorf("admitted rose to %d after the room was seen closed at %d", s.State.Admitted, s.ClosedAdmitted))
		}
	}
	if admitted != final.Admitted {
		errs = append(errs, fmt.Errorf("%d tickets read admitted, the room counted %d admissions", admitted, final.Admitted))
	}
	for i := int64(1); i <= admitted; i++ {
		if _, ok := seen[i]; !ok {
			errs = append(errs, fmt.Errorf("no admission at index %d of %d", i, admitted))
			break
		}
	}
	return errors.Join(errs...)
}

// testRoomConcurrency joins 2 400 entrants on 24 goroutines before the start and 1 200 after,
// while 3 admitters and the entrants themselves (releasing their place once admitted) run.
func testRoomConcurrency(t *testing.T, newEngine NewRoomEngine) {
	clock := NewManualClock(epoch)
	if err := runRoomConcurrency(t, newEngine(t, clock), clock); err != nil {
		t.Fatal(err)
	}
}

// runRoomConcurrency is testRoomConcurrency on eng, reporting what CheckRoom and
// CheckAdmissionOrder found (and any failed call) as its error.
func runRoomConcurrency(t *testing.T, eng RoomEngine, clock *ManualClock) error {
	const (
		workers  = 24
		preEach  = 100
		postEach = 50
		maxAct   = 200
	)
	r := newRoomRigOn(t, eng, clock, 1_000_000, seckill.RoomInput{MaxActive: maxAct, TokenSeconds: ptr(60)})
	var errMu sync.Mutex
	var callErrs []error
	fail := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		callErrs = append(callErrs, fmt.Errorf(format, args...))
	}
	join := func(prefix string, n int) []string {
		var mu sync.Mutex
		var all []string
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range n {
					u := prefix + strconv.Itoa(w) + "x" + strconv.Itoa(i)
					e := r.entrant(u)
					if _, err := r.eng.Join(r.ctx, r.sale, e, seckill.DrawKey(r.seed, e)); err != nil {
						fail("Join: %v", err)
						return
					}
					mu.Lock()
					all = append(all, e)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return all
	}
	pre := join("p", preEach)
	r.clock.Set(roomStart)

	var obsMu sync.Mutex
	var samples []RoomSample
	closedAt := int64(-1)
	stop := make(chan struct{})
	var admitters sync.WaitGroup
	for range 3 {
		admitters.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				obsMu.Lock()
				before := closedAt
				obsMu.Unlock()
				st, err := r.eng.Admit(r.ctx, r.sale)
				if err != nil {
					fail("Admit: %v", err)
					return
				}
				obsMu.Lock()
				samples = append(samples, RoomSample{State: st, ClosedAdmitted: before})
				if st.Closed != "" && closedAt < 0 {
					closedAt = st.Admitted
				}
				obsMu.Unlock()
			}
		})
	}
	// Releasers: every entrant that reads admitted ends its place (an outcome), so that
	// max_active keeps the admissions flowing.
	var releasers sync.WaitGroup
	releasedAll := func(ids []string) {
		for w := range workers {
			releasers.Go(func() {
				var pending []string
				for i := w; i < len(ids); i += workers {
					pending = append(pending, ids[i])
				}
				// Each pass releases whichever of the worker's entrants are admitted: the
				// admissions come in the room's order, not the worker's.
				for len(pending) > 0 {
					left := pending[:0]
					for _, e := range pending {
						tk, err := r.eng.Ticket(r.ctx, r.sale.ID, e)
						if err != nil {
							fail("Ticket: %v", err)
							return
						}
						switch tk.State {
						case seckill.TicketAdmitted:
							if err := r.eng.Release(r.ctx, r.sale.ID, e, time.Time{}); err != nil {
								fail("Release: %v", err)
								return
							}
						case seckill.TicketWaiting:
							left = append(left, e)
						default:
							fail("ticket %+v while the room is open", tk)
							return
						}
					}
					pending = left
					runtime.Gosched()
				}
			})
		}
	}
	releasedAll(pre)
	post := join("q", postEach)
	releasedAll(post)
	releasers.Wait()
	close(stop)
	admitters.Wait()
	if err := errors.Join(callErrs...); err != nil {
		return err
	}
	var tickets []seckill.Ticket
	byIndex := map[int64]string{}
	for _, e := range append(slices.Clone(pre), post...) {
		tk, err := r.eng.Ticket(r.ctx, r.sale.ID, e)
		if err != nil {
			return err
		}
		tickets = append(tickets, tk)
		byIndex[tk.Index] = e
	}
	if err := CheckRoom(RoomObservation{Tickets: tickets, Samples: samples, MaxActive: maxAct}); err != nil {
		return err
	}
	order := make([]string, 0, len(byIndex))
	for i := int64(1); i <= int64(len(pre)); i++ {
		order = append(order, byIndex[i])
	}
	if err := CheckAdmissionOrder(r.seed, pre, nil, order); err != nil {
		return err
	}
	if st := r.room(); st.Admitted != int64(len(pre)+len(post)) || st.Active != 0 || st.Waiting != 0 {
		return fmt.Errorf("room at the end = %+v, want all %d admitted, none active or waiting", st, len(pre)+len(post))
	}
	return nil
}
