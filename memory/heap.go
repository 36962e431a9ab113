package memory

// holdHeap orders held reservations by expiry (then arrival), so reclaim pops only the holds
// that have expired: O(log n) per expired hold, however many holds are outstanding.
type holdHeap []*reservation

func (h holdHeap) Len() int { return len(h) }
func (h holdHeap) Less(i, j int) bool {
	if h[i].expiresAt != h[j].expiresAt {
		return h[i].expiresAt < h[j].expiresAt
	}
	return h[i].seq < h[j].seq
}
func (h holdHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}
func (h *holdHeap) Push(x any) {
	r := x.(*reservation)
	r.heapIndex = len(*h)
	*h = append(*h, r)
}
func (h *holdHeap) Pop() any {
	old := *h
	n := len(old)
	r := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	r.heapIndex = -1
	return r
}
