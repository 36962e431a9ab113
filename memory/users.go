package memory

import "hash/maphash"

// userUnits counts each user's held + queued + paid units in a sale: an open-addressing table
// (linear probing, at most 3/4 full, doubling and halving) made for the buy path. A Go map
// keyed by the user string hashed each user twice per buy (the limit check, then the update)
// and again each time the map grew; in a rush of a million new buyers the growth alone was a
// quarter of a buy's time (docs/BENCHMARKS.md "Issue 31"). Here the table keeps each key's
// hash, so a buy hashes its user once and growing never hashes a string. Neither the key nor
// the count is copied into the table: a slot is a hash (4 bytes, probed alone) and one of the
// user's reservations (8 bytes), the anchor, whose user is the key and whose units field is
// the count. Reservations stay where they are for the sale's life (book.go).
type userUnits struct {
	seed maphash.Seed
	hs   []uint32       // the keys' hashes, never 0; 0: an empty slot. nil until the first buyer
	rs   []*reservation // the anchors
	n    int            // users with units
}

const minUserSlots = 8

// hash returns user's hash in this table, never 0.
func (t *userUnits) hash(user string) uint32 { return uint32(maphash.String(t.seed, user)) | 1 }

// find returns user's slot and whether the user has units; when not, i is the empty slot where
// the user would go (-1 while the table is empty) and h its hash.
func (t *userUnits) find(user string) (i int, h uint32, ok bool) {
	if t.hs == nil {
		return -1, 0, false
	}
	h = t.hash(user)
	mask := len(t.hs) - 1
	for i = int(h) & mask; ; i = (i + 1) & mask {
		switch t.hs[i] {
		case 0:
			return i, h, false
		case h:
			if t.rs[i].user == user {
				return i, h, true
			}
		}
	}
}

// units returns user's units.
func (t *userUnits) units(user string) int {
	if i, _, ok := t.find(user); ok {
		return int(t.rs[i].units)
	}
	return 0
}

// at returns the units of the user at slot i, as find returned it.
func (t *userUnits) at(i int) int { return int(t.rs[i].units) }

// add adds q (negative: takes) to the units of r's user.
func (t *userUnits) add(r *reservation, q int) {
	i, h, ok := t.find(r.user)
	t.addAt(i, h, ok, r, q)
}

// addAt is add at the slot that find returned for r's user, with nothing changed in between.
func (t *userUnits) addAt(i int, h uint32, ok bool, r *reservation, q int) {
	if ok {
		a := t.rs[i]
		if a.units += int32(q); a.units == 0 {
			t.deleteAt(i) // the user is back to no units
		}
		return
	}
	if q == 0 {
		return
	}
	if t.hs == nil {
		t.seed = maphash.MakeSeed()
		t.hs, t.rs = make([]uint32, minUserSlots), make([]*reservation, minUserSlots)
		h = t.hash(r.user)
		i = int(h) & (minUserSlots - 1)
	} else if 4*(t.n+1) > 3*len(t.hs) {
		t.resize(2 * len(t.hs))
		i = t.empty(h)
	}
	t.hs[i], t.rs[i] = h, r
	r.units = int32(q)
	t.n++
}

// empty returns the first empty slot on h's probe sequence.
func (t *userUnits) empty(h uint32) int {
	mask := len(t.hs) - 1
	i := int(h) & mask
	for t.hs[i] != 0 {
		i = (i + 1) & mask
	}
	return i
}

// resize moves every entry to a table of size slots, with the hashes it keeps.
func (t *userUnits) resize(size int) {
	hs, rs := t.hs, t.rs
	t.hs, t.rs = make([]uint32, size), make([]*reservation, size)
	for j, h := range hs {
		if h != 0 {
			i := t.empty(h)
			t.hs[i], t.rs[i] = h, rs[j]
		}
	}
}

// deleteAt empties slot i, moving back the entries after it that would no longer be found
// (backward-shift deletion: no tombstones), and halves the table once it is 1/16 full, so
// that memory follows the users who still have units.
func (t *userUnits) deleteAt(i int) {
	mask := len(t.hs) - 1
	for j := (i + 1) & mask; t.hs[j] != 0; j = (j + 1) & mask {
		home := int(t.hs[j]) & mask
		// The entry at j may move to i unless its home lies cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.hs[i], t.rs[i] = t.hs[j], t.rs[j]
			i = j
		}
	}
	t.hs[i], t.rs[i] = 0, nil
	t.n--
	switch {
	case t.n == 0:
		t.hs, t.rs = nil, nil
	case len(t.hs) > minUserSlots && 16*t.n <= len(t.hs):
		t.resize(len(t.hs) / 2)
	}
}
