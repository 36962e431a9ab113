package memory

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"unsafe"
)

// TestUserUnitsModel compares the per-user table with a Go map under random adds and takes,
// through growth, backward-shift deletions and shrinking.
func TestUserUnitsModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab userUnits
	model := map[string]int{}
	anchors := map[string]*reservation{}
	for step := range 200_000 {
		phase := step / 50_000 // grow, churn, drain, grow again
		u := "u" + strconv.Itoa(rng.IntN(20_000))
		r := anchors[u]
		if r == nil {
			r = &reservation{user: u}
			anchors[u] = r
		}
		q := 1 + rng.IntN(3)
		if phase == 2 || phase == 1 && rng.IntN(2) == 0 {
			q = -min(q, model[u])
		}
		if q == 0 {
			continue
		}
		tab.add(r, q)
		if model[u] += q; model[u] == 0 {
			delete(model, u)
		}
		if step%997 == 0 || phase == 2 && len(model) < 50 {
			checkUsers(t, &tab, model)
		}
	}
	checkUsers(t, &tab, model)
}

func checkUsers(t *testing.T, tab *userUnits, model map[string]int) {
	t.Helper()
	if tab.n != len(model) {
		t.Fatalf("table has %d users, model %d", tab.n, len(model))
	}
	for u, n := range model {
		if got := tab.units(u); got != n {
			t.Fatalf("units(%s) = %d, want %d", u, got, n)
		}
	}
	if tab.units("nobody") != 0 {
		t.Fatal("units of an unknown user")
	}
	if n := len(tab.hs); n > minUserSlots && 16*tab.n < n/2 || 4*tab.n > 3*n && n > 0 {
		t.Fatalf("%d users in %d slots", tab.n, n)
	}
}

// TestBookChunks: every seq maps to its own slot, chunks cover the seqs without gaps or overlap.
func TestBookChunks(t *testing.T) {
	next := 0
	for k := range 10 {
		for off := range chunkLen(k) {
			if gk, goff := chunkOf(uint64(next)); gk != k || goff != off {
				t.Fatalf("chunkOf(%d) = %d, %d; want %d, %d", next, gk, goff, k, off)
			}
			next++
		}
	}
	var b book
	for _, seq := range []uint64{3, 1, 300, 9, 100_000} {
		r := b.put(seq)
		r.user = strconv.FormatUint(seq, 10)
	}
	for seq := uint64(0); seq < 100_010; seq++ {
		r := b.get(seq)
		switch seq {
		case 1, 3, 9, 300, 100_000:
			if r == nil || r.seq != seq || r.user != strconv.FormatUint(seq, 10) {
				t.Fatalf("get(%d) = %+v", seq, r)
			}
		default:
			if r != nil {
				t.Fatalf("get(%d) = %+v, want nil", seq, r)
			}
		}
	}
	var seen []uint64
	b.each(func(r *reservation) { seen = append(seen, r.seq) })
	if !slices.Equal(seen, []uint64{1, 3, 9, 300, 100_000}) || b.n != 5 {
		t.Fatalf("each: %v, n %d", seen, b.n)
	}
}

// TestHoldSetOrder: holds pushed in any order pop by expiry, then seq.
func TestHoldSetOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h holdSet
	var want []holdEntry
	rs := make([]reservation, 5_000)
	clock := int64(0)
	for i := range rs {
		if rng.IntN(20) == 0 {
			clock -= int64(rng.IntN(50)) // a clock stepping back
		} else {
			clock += int64(rng.IntN(3))
		}
		rs[i] = reservation{seq: uint64(i + 1), expiresAt: clock, status: stHeld}
		h.push(&rs[i])
		want = append(want, holdEntry{expiresAt: clock, seq: uint64(i + 1)})
		if rng.IntN(3) == 0 { // interleave pops with pushes
			slices.SortFunc(want, func(a, b holdEntry) int {
				return cmp.Or(cmp.Compare(a.expiresAt, b.expiresAt), cmp.Compare(a.seq, b.seq))
			})
			if e := h.pop(); e.seq != want[0].seq || e.expiresAt != want[0].expiresAt {
				t.Fatalf("pop = %d@%d, want %d@%d", e.seq, e.expiresAt, want[0].seq, want[0].expiresAt)
			}
			want = want[1:]
		}
	}
	slices.SortFunc(want, func(a, b holdEntry) int {
		return cmp.Or(cmp.Compare(a.expiresAt, b.expiresAt), cmp.Compare(a.seq, b.seq))
	})
	for _, w := range want {
		if n := h.next(); n.seq != w.seq {
			t.Fatalf("next = %d, want %d", n.seq, w.seq)
		}
		if e := h.pop(); e.seq != w.seq || e.expiresAt != w.expiresAt {
			t.Fatalf("pop = %d@%d, want %d@%d", e.seq, e.expiresAt, w.seq, w.expiresAt)
		}
	}
	if h.len() != 0 || h.run.chunks != nil {
		t.Fatalf("set not empty: %d", h.len())
	}
}

// TestReservationSize: a reservation stays 80 bytes (256 of them are one 20 KiB size class).
func TestReservationSize(t *testing.T) {
	if n := unsafe.Sizeof(reservation{}); n != 80 {
		t.Fatalf("reservation is %d bytes, want 80", n)
	}
}
