package memory

import "github.com/seckill-go/seckill"

// holdHeap orders holds by expiry (then arrival), so reclaim pops only the holds that have
// expired: O(log n) per expired hold, however many holds are outstanding. Entries carry their
// key inline, so sifting touches only the heap's own array, not a million reservations.
//
// Removal is lazy: a hold that is paid or cancelled stays in the heap until its expiry time
// comes and is then skipped (entry.live() is false). That keeps cancel and pay O(1) and spares
// the heap from tracking each reservation's index.
type holdHeap []holdEntry

type holdEntry struct {
	expiresAt int64 // unix nanoseconds
	seq       uint64
	r         *reservation
}

// live reports whether the entry still describes r's current hold.
func (e holdEntry) live() bool {
	return e.r.status == seckill.StatusHeld && e.r.expiresAt == e.expiresAt
}

func (h holdHeap) less(i, j int) bool {
	if h[i].expiresAt != h[j].expiresAt {
		return h[i].expiresAt < h[j].expiresAt
	}
	return h[i].seq < h[j].seq
}

func (h *holdHeap) push(r *reservation) {
	if len(*h) == cap(*h) {
		// Double, where append would grow a large slice by a quarter: a rush of a million
		// holds then copies the array a few times, not dozens (see BenchmarkBuy).
		*h = append(make(holdHeap, 0, max(2*cap(*h), 16)), *h...)
	}
	*h = append(*h, holdEntry{expiresAt: r.expiresAt, seq: r.seq, r: r})
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// pop removes and returns the earliest entry; the heap must not be empty.
func (h *holdHeap) pop() holdEntry {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = holdEntry{}
	s = s[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	// Give back the array a rush grew once the holds are mostly gone: halving at a quarter
	// full keeps each entry's amortized cost O(1) and memory proportional to the live holds.
	if cap(s) > 64 && n <= cap(s)/4 {
		s = append(make(holdHeap, 0, cap(s)/2), s...)
	}
	*h = s
	return top
}
