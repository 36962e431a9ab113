// This file holds the conformance cases of seckill.RoomJournal (the waiting rooms' journal,
// what a room the engine lost is restored from), registered in TestOrderStore's table.

package seckilltest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

func osRoomJournal(t *testing.T, s seckill.OrderStore) seckill.RoomJournal {
	t.Helper()
	return osAs[seckill.RoomJournal](t, s, "the store keeps no room journal (seckill.RoomJournal)")
}

// osEntrant is entrant i of the room of sale/inc, arrival i.
func osEntrant(sale, inc string, i int, drawn bool) seckill.RoomEntrant {
	return seckill.RoomEntrant{SaleID: sale, Incarnation: inc, Entrant: seckill.EntrantID(sale, fmt.Sprint("u", i)),
		Arrival: int64(i), Drawn: drawn, JoinedAt: osT0.Add(time.Duration(i) * time.Millisecond)}
}

// osRoomEntrantsRoundTrip: entrants come back by arrival, as written; a second write of one
// leaves the first; incarnations and sales are apart; a batch beyond the bound is refused.
func osRoomEntrantsRoundTrip(t *testing.T, s seckill.OrderStore) {
	j := osRoomJournal(t, s)
	ctx := t.Context()
	var want []seckill.RoomEntrant
	for i := 1; i <= 30; i++ {
		want = append(want, osEntrant("rj1", "inc1", i, i <= 10))
	}
	// Out of order, in two batches that overlap.
	if err := j.AddRoomEntrants(ctx, append([]seckill.RoomEntrant{}, want[15:]...)); err != nil {
		t.Fatalf("AddRoomEntrants: %v", err)
	}
	again := append([]seckill.RoomEntrant{}, want[:20]...)
	changed := want[17]
	changed.Arrival, changed.Drawn = 99, true
	again[17] = changed // stored before: left as it was
	if err := j.AddRoomEntrants(ctx, append(again, osEntrant("rj2", "inc1", 1, false), osEntrant("rj1", "inc2", 1, false))); err != nil {
		t.Fatalf("AddRoomEntrants: %v", err)
	}
	got, err := j.RoomEntrants(ctx, "rj1", "inc1")
	if err != nil {
		t.Fatalf("RoomEntrants: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("RoomEntrants = %d entrants, want %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].JoinedAt.Equal(want[i].JoinedAt) {
			t.Fatalf("entrant %d joined at %v, want %v", i, got[i].JoinedAt, want[i].JoinedAt)
		}
		got[i].JoinedAt = want[i].JoinedAt
		if got[i] != want[i] {
			t.Fatalf("entrant %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, k := range [][2]string{{"rj2", "inc1"}, {"rj1", "inc2"}} {
		if got, err := j.RoomEntrants(ctx, k[0], k[1]); err != nil || len(got) != 1 {
			t.Fatalf("RoomEntrants(%s, %s) = %d, %v; want 1", k[0], k[1], len(got), err)
		}
	}
	if got, err := j.RoomEntrants(ctx, "rj3", "inc1"); err != nil || len(got) != 0 {
		t.Fatalf("RoomEntrants of a room never journaled = %v, %v; want none", got, err)
	}
	big := make([]seckill.RoomEntrant, seckill.MaxRoomJournalBatch+1)
	for i := range big {
		big[i] = osEntrant("rj4", "inc1", i+1, false)
	}
	if err := j.AddRoomEntrants(ctx, big); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
		t.Fatalf("AddRoomEntrants of %d = %v, want invalid_argument", len(big), err)
	}
	bad := osEntrant("rj4", "inc1", 1, false)
	bad.Entrant = "not-hex"
	if err := j.AddRoomEntrants(ctx, []seckill.RoomEntrant{bad}); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
		t.Fatalf("AddRoomEntrants of a malformed entrant = %v, want invalid_argument", err)
	}
	if got, _ := j.RoomEntrants(ctx, "rj4", "inc1"); len(got) != 0 {
		t.Fatalf("a refused batch stored %d entrants", len(got))
	}
}

// osRoomAdmittedMonotonic: the count only rises, whatever order concurrent admitters report
// it in, and carries the time of its last raise.
func osRoomAdmittedMonotonic(t *testing.T, s seckill.OrderStore) {
	j := osRoomJournal(t, s)
	ctx := t.Context()
	if got, err := j.RoomAdmitted(ctx, "ra1", "inc1"); err != nil || got.Count != 0 {
		t.Fatalf("RoomAdmitted before any = %+v, %v; want 0", got, err)
	}
	set := func(n int64, at time.Time) {
		t.Helper()
		if err := j.SetRoomAdmitted(ctx, "ra1", "inc1", n, at); err != nil {
			t.Fatalf("SetRoomAdmitted(%d): %v", n, err)
		}
	}
	set(5, osT0)
	set(3, osT0.Add(time.Second)) // lower: ignored
	if got, _ := j.RoomAdmitted(ctx, "ra1", "inc1"); got.Count != 5 || !got.At.Equal(osT0) {
		t.Fatalf("RoomAdmitted = %+v, want 5 at %v", got, osT0)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := int64(g); n <= 200; n += 8 {
				if err := j.SetRoomAdmitted(ctx, "ra1", "inc1", n, osT0.Add(time.Duration(n)*time.Millisecond)); err != nil {
					t.Errorf("SetRoomAdmitted(%d): %v", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := osT0.Add(200 * time.Millisecond)
	if got, err := j.RoomAdmitted(ctx, "ra1", "inc1"); err != nil || got.Count != 200 || !got.At.Equal(want) {
		t.Fatalf("RoomAdmitted after the race = %+v, %v; want 200 at %v", got, err, want)
	}
	if got, _ := j.RoomAdmitted(ctx, "ra1", "inc2"); got.Count != 0 {
		t.Fatalf("another incarnation's count = %+v, want 0", got)
	}
	if err := j.SetRoomAdmitted(ctx, "ra1", "inc1", -1, osT0); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
		t.Fatalf("SetRoomAdmitted(-1) = %v, want invalid_argument", err)
	}
}

// osRoomJournalGoesWithItsSale: deleting a sale deletes its room's journal (entrants and
// count, of every incarnation under its id), and only its: another sale's rows stay.
func osRoomJournalGoesWithItsSale(t *testing.T, s seckill.OrderStore) {
	j := osRoomJournal(t, s)
	ctx := t.Context()
	osCreate(t, s, osSale("rgone", 5, 0))
	osCreate(t, s, osSale("rkept", 5, 0))
	var es []seckill.RoomEntrant
	for i := 1; i <= 3; i++ {
		es = append(es, osEntrant("rgone", "inc1", i, false), osEntrant("rgone", "inc0", i, false), osEntrant("rkept", "inc1", i, false))
	}
	if err := j.AddRoomEntrants(ctx, es); err != nil {
		t.Fatalf("AddRoomEntrants: %v", err)
	}
	for _, k := range [][2]string{{"rgone", "inc1"}, {"rgone", "inc0"}, {"rkept", "inc1"}} {
		if err := j.SetRoomAdmitted(ctx, k[0], k[1], 2, osT0); err != nil {
			t.Fatalf("SetRoomAdmitted: %v", err)
		}
	}
	if err := s.DeleteSale(ctx, "rgone"); err != nil {
		t.Fatalf("DeleteSale: %v", err)
	}
	for _, k := range [][2]string{{"rgone", "inc1"}, {"rgone", "inc0"}, {"rkept", "inc1"}} {
		got, err := j.RoomEntrants(ctx, k[0], k[1])
		if err != nil {
			t.Fatalf("RoomEntrants: %v", err)
		}
		adm, err := j.RoomAdmitted(ctx, k[0], k[1])
		if err != nil {
			t.Fatalf("RoomAdmitted: %v", err)
		}
		want, wantAdm := 0, int64(0)
		if k[0] == "rkept" {
			want, wantAdm = 3, 2
		}
		if len(got) != want || adm.Count != wantAdm {
			t.Fatalf("room %s/%s after DeleteSale(rgone): %d entrants, %d admitted; want %d, %d", k[0], k[1], len(got), adm.Count, want, wantAdm)
		}
	}
}
