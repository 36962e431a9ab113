package memory

import "math/bits"

// book keeps a sale's reservations by sequence number, in chunks of 8, 8, 16, 32, 64, 128 and
// then 256 entries (20 KiB, an exact allocation size class). It is the reservations' storage
// and their index at once: a reservation is allocated in the slot of its seq, never moves
// (the per-user table and the hold and buyer queues point at it), and finding it by id is two
// index operations. Growing allocates one chunk and copies nothing, so a rush of a million
// buyers allocates what it keeps, and a sale with few buyers keeps a few small chunks.
type book struct {
	chunks [][]reservation // chunk k holds seqs from chunkStart(k)+1; nil: none stored there
	n      int             // reservations stored
}

const bookChunk = 256

// chunkOf returns the chunk and offset of the reservation with index i (seq-1).
func chunkOf(i uint64) (k, off int) {
	switch {
	case i < 8:
		return 0, int(i)
	case i < bookChunk:
		b := bits.Len64(i) // 4..8: chunk 1 covers [8, 16), chunk 2 [16, 32), ...
		return b - 3, int(i - 1<<(b-1))
	}
	return int(6 + (i-bookChunk)/bookChunk), int(i % bookChunk)
}

// chunkLen is the number of entries of chunk k.
func chunkLen(k int) int {
	if k >= 6 {
		return bookChunk
	}
	return 8 << max(k-1, 0)
}

// get returns the reservation with sequence seq, or nil.
func (b *book) get(seq uint64) *reservation {
	if seq == 0 {
		return nil
	}
	k, off := chunkOf(seq - 1)
	if k >= len(b.chunks) || b.chunks[k] == nil {
		return nil
	}
	if r := &b.chunks[k][off]; r.seq != 0 {
		return r
	}
	return nil
}

// put returns the empty slot for seq (at least 1), to be filled with a reservation of that
// seq; the slot must be empty (get returned nil).
func (b *book) put(seq uint64) *reservation {
	k, off := chunkOf(seq - 1)
	for len(b.chunks) <= k {
		b.chunks = append(b.chunks, nil)
	}
	if b.chunks[k] == nil {
		b.chunks[k] = make([]reservation, chunkLen(k))
	}
	b.n++
	r := &b.chunks[k][off]
	r.seq = seq
	return r
}

// each calls f for every stored reservation, in seq order.
func (b *book) each(f func(r *reservation)) {
	for _, c := range b.chunks {
		for i := range c {
			if c[i].seq != 0 {
				f(&c[i])
			}
		}
	}
}
