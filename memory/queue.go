package memory

// fifo is the sale's queue of waiting buyers in arrival order. Cancelling a queued buyer leaves a
// hole that the head skips later, so removal is O(log n); a Fenwick tree over the slots counts the
// live entries ahead of any buyer, so its live 1-based position is also O(log n).
type fifo struct {
	slots []*reservation // slots[i] == nil: removed
	head  int            // first slot that may be live
	live  int            // number of live entries (buyers)
	units int            // sum of live entries' quantities
	tree  []int          // 1-based Fenwick tree over slots: 1 for live, 0 for removed
}

func (q *fifo) len() int { return q.live }

// push appends r at the tail.
func (q *fifo) push(r *reservation) {
	r.slot = len(q.slots)
	q.slots = append(q.slots, r)
	q.live++
	q.units += r.quantity
	// Extend the Fenwick tree by one node: node n covers (n-lowbit(n), n].
	if len(q.tree) == 0 {
		q.tree = append(q.tree, 0) // index 0 is unused
	}
	n := len(q.slots)
	q.tree = append(q.tree, 1+q.prefix(n-1)-q.prefix(n-(n&-n)))
}

// peek returns the earliest live entry, or nil.
func (q *fifo) peek() *reservation {
	for q.head < len(q.slots) && q.slots[q.head] == nil {
		q.head++
	}
	if q.head == len(q.slots) {
		return nil
	}
	return q.slots[q.head]
}

// remove takes r out of the queue wherever it is.
func (q *fifo) remove(r *reservation) {
	if r.slot < 0 || r.slot >= len(q.slots) || q.slots[r.slot] != r {
		return
	}
	q.slots[r.slot] = nil
	q.add(r.slot+1, -1)
	q.live--
	q.units -= r.quantity
	r.slot = -1
	q.compact()
}

// position is r's live 1-based place in line.
func (q *fifo) position(r *reservation) int {
	if r.slot < 0 {
		return 0
	}
	return q.prefix(r.slot + 1)
}

// drain removes and returns every live entry in order.
func (q *fifo) drain() []*reservation {
	var out []*reservation
	for r := q.peek(); r != nil; r = q.peek() {
		q.remove(r)
		out = append(out, r)
	}
	return out
}

func (q *fifo) prefix(i int) int {
	s := 0
	for ; i > 0; i -= i & -i {
		s += q.tree[i]
	}
	return s
}

func (q *fifo) add(i, d int) {
	for ; i < len(q.tree); i += i & -i {
		q.tree[i] += d
	}
}

// compact drops the removed prefix once it is at least half of the slots, so memory stays
// proportional to the live queue and the amortized cost per entry stays O(log n).
func (q *fifo) compact() {
	q.peek()
	if q.head < 64 || q.head*2 < len(q.slots) {
		return
	}
	rest := make([]*reservation, 0, len(q.slots)-q.head)
	for _, r := range q.slots[q.head:] {
		if r != nil {
			r.slot = len(rest)
			rest = append(rest, r)
		}
	}
	q.slots, q.head, q.tree = nil, 0, nil
	q.live, q.units = 0, 0
	for _, r := range rest {
		q.push(r)
	}
}
