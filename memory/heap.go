package memory

// holdSet orders a sale's holds by expiry (then arrival), so reclaim pops only the holds that
// have expired, however many are outstanding. A sale's holds nearly always arrive in that order
// (the same hold duration, a clock that moves forward): those go to a run, a FIFO of pointers
// in chunks (O(1) push and pop, no copying as it grows, chunks freed as they empty). A hold
// that would break the run's order (a restored hold, a clock stepping back) goes to a heap,
// O(log n), whose entries carry their key inline. reclaim takes the earlier of the two heads.
// A reservation is held at most once (a hold never goes back to the queue), so its expiry and
// seq do not change while it is in the set, and the run can read them from the reservation.
//
// Removal is lazy: a hold that is paid or cancelled stays in the set until its expiry time
// comes and is then skipped (entry.live() is false). That keeps cancel and pay O(1) and spares
// the set from tracking each reservation's place.
type holdSet struct {
	run  holdRun
	heap holdHeap
}

func (h *holdSet) len() int { return h.run.n + len(h.heap) }

func entryOf(r *reservation) holdEntry { return holdEntry{expiresAt: r.expiresAt, seq: r.seq, r: r} }

// push adds r's hold, with the expiry it has now.
func (h *holdSet) push(r *reservation) {
	e := entryOf(r)
	if h.run.n == 0 || !e.less(entryOf(h.run.last())) {
		h.run.push(r)
	} else {
		h.heap.push(e)
	}
}

// fromHeap reports whether the earliest entry is the heap's.
func (h *holdSet) fromHeap() bool {
	return h.run.n == 0 || len(h.heap) > 0 && h.heap[0].less(entryOf(h.run.first()))
}

// next returns the earliest entry; the set must not be empty.
func (h *holdSet) next() holdEntry {
	if h.fromHeap() {
		return h.heap[0]
	}
	return entryOf(h.run.first())
}

// pop removes and returns the earliest entry; the set must not be empty.
func (h *holdSet) pop() holdEntry {
	if h.fromHeap() {
		return h.heap.pop()
	}
	return entryOf(h.run.pop())
}

// holdRun is a FIFO of held reservations in key order, in chunks of 8 to 512 pointers (4 KiB)
// sized to the run's length: a rush grows it without copying, a quiet sale keeps a small chunk.
type holdRun struct {
	chunks [][]*reservation // chunks[0][head:], ..., chunks[len-1][:tail]
	head   int
	tail   int
	n      int
}

func (q *holdRun) first() *reservation { return q.chunks[0][q.head] }

func (q *holdRun) last() *reservation { return q.chunks[len(q.chunks)-1][q.tail-1] }

func (q *holdRun) push(r *reservation) {
	if len(q.chunks) == 0 || q.tail == len(q.chunks[len(q.chunks)-1]) {
		size := 8
		for size < q.n+1 && size < 512 {
			size *= 2
		}
		q.chunks = append(q.chunks, make([]*reservation, size))
		q.tail = 0
	}
	q.chunks[len(q.chunks)-1][q.tail] = r
	q.tail++
	q.n++
}

func (q *holdRun) pop() *reservation {
	c := q.chunks[0]
	r := c[q.head]
	c[q.head] = nil // the reservation is no longer reachable from here
	q.head++
	q.n--
	if q.head == len(c) || q.n == 0 && len(q.chunks) == 1 {
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
		q.head = 0
		if len(q.chunks) == 0 {
			q.chunks, q.tail = nil, 0
		}
	}
	return r
}

// holdHeap is a binary heap of the holds that arrived out of order.
type holdHeap []holdEntry

type holdEntry struct {
	expiresAt int64 // unix nanoseconds
	seq       uint64
	r         *reservation
}

// live reports whether the entry still describes r's current hold.
func (e holdEntry) live() bool {
	return e.r.status == stHeld && e.r.expiresAt == e.expiresAt
}

// less orders entries by expiry, then arrival.
func (e holdEntry) less(o holdEntry) bool {
	if e.expiresAt != o.expiresAt {
		return e.expiresAt < o.expiresAt
	}
	return e.seq < o.seq
}

func (h holdHeap) less(i, j int) bool { return h[i].less(h[j]) }

func (h *holdHeap) push(e holdEntry) {
	if len(*h) == cap(*h) {
		// Double, where append would grow a large slice by a quarter: a rush of a million
		// holds then copies the array a few times, not dozens (see BenchmarkBuy).
		*h = append(make(holdHeap, 0, max(2*cap(*h), 16)), *h...)
	}
	*h = append(*h, e)
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
