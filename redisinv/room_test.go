package redisinv

// Tests of the waiting rooms on Redis (room.go, lua/room_*.lua): a walk through one room's life,
// the policy carried in the sale's definition, the scripts' validation before their first
// write, the room's keys removed with the sale's, and a property test against a plain model.
// The shared rooms suite (seckilltest.TestWaitingRooms) runs in room_conformance_test.go.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// roomSale is a sale with a room: it starts 10 minutes after t0, preheats 10 minutes before,
// and its room opens 5 minutes before the start.
func roomSale(id string, stock int, p seckill.RoomPolicy) seckill.Sale {
	return seckill.Sale{
		ID: id, Name: "room " + id, PriceCents: 100, Stock: stock, PerUserLimit: 1, HoldSeconds: 60,
		QueueLimit: 10, StartsAt: t0.Add(10 * time.Minute), EndsAt: t0.Add(time.Hour), CreatedAt: t0.Add(-time.Hour),
		PreheatSeconds: 600, Room: &p,
	}
}

func entrant(i int) string { return seckill.EntrantID("room-test", fmt.Sprint("user", i)) }

func mustJoin(t testing.TB, e *Engine, s seckill.Sale, ent string, key uint64) seckill.Ticket {
	t.Helper()
	tk, err := e.Join(context.Background(), s, ent, key)
	if err != nil {
		t.Fatalf("Join(%s): %v", ent[:8], err)
	}
	return tk
}

func mustAdmit(t testing.TB, e *Engine, s seckill.Sale) seckill.RoomState {
	t.Helper()
	st, err := e.Admit(context.Background(), s)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return st
}

func mustTicket(t testing.TB, e *Engine, saleID, ent string) seckill.Ticket {
	t.Helper()
	tk, err := e.Ticket(context.Background(), saleID, ent)
	if err != nil {
		t.Fatalf("Ticket(%s): %v", ent[:8], err)
	}
	return tk
}

func wantRoomCode(t testing.TB, what string, err error, code seckill.Code) {
	t.Helper()
	if got := seckill.ErrorCode(err); got != code {
		t.Fatalf("%s: error %v (code %q), want %q", what, err, got, code)
	}
}

// TestRoomWalk: a draw room from its opening to sold out, step by step.
func TestRoomWalk(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(t0)
	e := newTestEngine(t, c.Inventory, clock)
	ctx := context.Background()
	p := seckill.RoomPolicy{Order: seckill.RoomDraw, OpensSeconds: 300, AdmitPerSecond: 10, TokenSeconds: 60}
	s := roomSale("walk", 2, p)
	if err := e.LoadSale(ctx, s, 0); err != nil {
		t.Fatal(err)
	}
	got, _, err := e.Sale(ctx, s.ID)
	if err != nil || got.Room == nil || *got.Room != p {
		t.Fatalf("Sale's room = %+v, %v; want %+v", got.Room, err, p)
	}
	if st, err := e.Room(ctx, s.ID); err != nil || st != (seckill.RoomState{}) {
		t.Fatalf("Room before anyone joined = %+v, %v; want zero", st, err)
	}
	_, err = e.Join(ctx, s, entrant(0), 5)
	wantRoomCode(t, "Join before the room opens", err, seckill.CodeNotStarted)

	// The pre-queue: keys chosen so that the draw's order is 2, 0, 1 (and 3 ties with 0: by id).
	clock.Advance(5 * time.Minute)
	keys := map[int]uint64{0: 20, 1: 30, 2: 10, 3: 20}
	for i := range 4 {
		tk := mustJoin(t, e, s, entrant(i), keys[i])
		if tk.State != seckill.TicketPreQueue || !tk.Drawn || tk.Index != 0 || !tk.JoinedAt.Equal(clock.Now()) {
			t.Fatalf("pre-queue ticket %+v", tk)
		}
	}
	again := mustJoin(t, e, s, entrant(0), 99)
	if again.State != seckill.TicketPreQueue || !again.JoinedAt.Equal(clock.Now()) {
		t.Fatalf("joining again: %+v", again)
	}
	if st := mustAdmit(t, e, s); st.Admitted != 0 || st.Waiting != 4 || st.PreQueue != 4 || st.Entrants != 4 {
		t.Fatalf("Admit before the start: %+v", st)
	}
	ids, err := e.DrawEntrants(ctx, s.ID, "", 1000)
	sorted := []string{entrant(0), entrant(1), entrant(2), entrant(3)}
	slices.Sort(sorted)
	if err != nil || !slices.Equal(ids, sorted) {
		t.Fatalf("DrawEntrants = %v, %v; want %v", ids, err, sorted)
	}
	page, _ := e.DrawEntrants(ctx, s.ID, sorted[1], 1)
	if !slices.Equal(page, sorted[2:3]) {
		t.Fatalf("DrawEntrants after %s limit 1 = %v", sorted[1][:8], page)
	}

	// The start: the draw's order, then arrivals; one admission per 100 ms (burst 1).
	clock.Advance(5 * time.Minute)
	late := mustJoin(t, e, s, entrant(9), 0)
	order := []int{2, 0, 3, 1}
	if entrant(3) < entrant(0) {
		order = []int{2, 3, 0, 1}
	}
	if late.State != seckill.TicketWaiting || late.Index != 5 || late.Ahead != 4 || late.Drawn {
		t.Fatalf("late ticket %+v", late)
	}
	for pos, i := range order {
		tk := mustTicket(t, e, s.ID, entrant(i))
		if tk.State != seckill.TicketWaiting || tk.Index != int64(pos+1) || tk.Ahead != int64(pos) {
			t.Fatalf("ticket of entrant %d at the start: %+v, want index %d", i, tk, pos+1)
		}
	}
	st := mustAdmit(t, e, s)
	if st.Admitted != 1 || st.Waiting != 4 || st.Active != 1 {
		t.Fatalf("first admission: %+v", st)
	}
	if st := mustAdmit(t, e, s); st.Admitted != 1 {
		t.Fatalf("no credit left, yet %+v", st)
	}
	head := mustTicket(t, e, s.ID, entrant(order[0]))
	if head.State != seckill.TicketAdmitted || head.Index != 1 || !head.AdmittedAt.Equal(clock.Now()) ||
		!head.ActiveUntil.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("admitted ticket %+v", head)
	}
	clock.Advance(250 * time.Millisecond) // 2.5 admissions of credit, capped at the burst: 1
	if st := mustAdmit(t, e, s); st.Admitted != 2 {
		t.Fatalf("after 250 ms: %+v", st)
	}
	if tk := mustTicket(t, e, s.ID, entrant(order[2])); tk.Index != 3 || tk.Ahead != 0 {
		t.Fatalf("third ticket after two admissions %+v", tk)
	}
	// Release: ends the place now; never revives it.
	if err := e.Release(ctx, s.ID, entrant(order[0]), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Release(ctx, s.ID, entrant(order[0]), clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := e.Release(ctx, s.ID, entrant(order[3]), clock.Now().Add(time.Hour)); err != nil { // not admitted
		t.Fatal(err)
	}
	if st, _ := e.Room(ctx, s.ID); st.Active != 1 || st.Admitted != 2 {
		t.Fatalf("after release: %+v", st)
	}

	// Sold out: both units paid; the room closes and tells everyone.
	for i, u := range []string{"u1", "u2"} {
		r := mustBuy(t, e, s.ID, u, 1, "", seckill.StatusHeld)
		mustPay(t, e, r.ID, fmt.Sprint("pay", i), r.AmountCents, seckill.PaymentApplied)
	}
	clock.Advance(time.Second)
	if st := mustAdmit(t, e, s); st.Closed != seckill.TicketSoldOut || st.Waiting != 0 || st.Admitted != 2 {
		t.Fatalf("sold out: %+v", st)
	}
	if tk := mustTicket(t, e, s.ID, entrant(order[2])); tk.State != seckill.TicketSoldOut || tk.Ahead != 0 {
		t.Fatalf("a waiting ticket once sold out: %+v", tk)
	}
	if tk := mustJoin(t, e, s, entrant(20), 0); tk.State != seckill.TicketSoldOut {
		t.Fatalf("a join once sold out: %+v", tk)
	}
	if _, err := e.Ticket(ctx, s.ID, entrant(20)); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("a join once sold out is not kept: %v", err)
	}
	clock.Advance(time.Hour)
	_, err = e.Join(ctx, s, entrant(21), 0)
	wantRoomCode(t, "Join after the end", err, seckill.CodeEnded)
}
