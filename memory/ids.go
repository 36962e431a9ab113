package memory

import (
	"crypto/rand"
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/seckill-go/seckill"
)

// Reservation ids: how the engine makes, renders, recognises and indexes them.

// seqOf extracts the sequence number from a reservation id "<sale>-<16 hex seq><16 hex random>".
// Finding a reservation by index keeps the hot path free of a second large hash map; the full id
// is still compared, so the random half (64 bits from crypto/rand) makes ids unguessable.
func seqOf(id string) (uint64, bool) {
	if len(id) < 32 {
		return 0, false
	}
	seq, err := strconv.ParseUint(id[len(id)-32:len(id)-16], 16, 64)
	return seq, err == nil && seq > 0
}

// random returns 8 bytes of crypto/rand output for a reservation id. They are read up to 4 KiB
// at a time into a buffer that is reused (64 bytes for a sale's first buyers, doubling), so a
// rush pays for one system call per 512 reservations and a quiet sale does not keep 4 KiB.
func (s *sale) random() uint64 {
	if s.idPos+8 > len(s.idBuf) {
		if len(s.idBuf) < 4096 {
			s.idBuf = make([]byte, min(max(2*len(s.idBuf), 64), 4096))
		}
		_, _ = rand.Read(s.idBuf)
		s.idPos = 0
	}
	v := binary.BigEndian.Uint64(s.idBuf[s.idPos:])
	s.idPos += 8
	return v
}

// hexID writes seq and random in hex, as seckill.ReservationID writes its 16 bytes.
func hexID(seq, random uint64) [32]byte {
	const digits = "0123456789abcdef"
	var b [32]byte
	for i := 15; i >= 0; i-- {
		b[i], b[16+i] = digits[seq&15], digits[random&15]
		seq >>= 4
		random >>= 4
	}
	return b
}

// id renders r's id, "<sale id>-<seq><random>" in hex (seckill.ReservationID), in one
// allocation. It is built when shown rather than stored, which keeps a pointer per reservation
// away from the collector.
func (s *sale) id(r *reservation) string {
	if id := r.foreignID(); id != "" {
		return id
	}
	h := hexID(r.seq, r.random)
	var b strings.Builder
	b.Grow(len(s.def.ID) + 1 + len(h))
	b.WriteString(s.def.ID)
	b.WriteByte('-')
	b.Write(h[:])
	return b.String()
}

// isID reports whether id is r's id, without building it.
func (s *sale) isID(r *reservation, id string) bool {
	if f := r.foreignID(); f != "" {
		return f == id
	}
	n := len(s.def.ID)
	if len(id) != n+33 || id[:n] != s.def.ID || id[n] != '-' {
		return false
	}
	h := hexID(r.seq, r.random)
	return id[n+1:] == string(h[:])
}

// remember indexes r by its buyer's idempotency key.
func (s *sale) remember(r *reservation) {
	if s.idem == nil {
		s.idem = make(map[idemKey]*reservation)
	}
	s.idem[idemKey{r.user, r.idemKey()}] = r
}

// find returns the reservation with this id, or nil.
func (s *sale) find(id string) *reservation {
	if seq, ok := seqOf(id); ok {
		if r := s.book.get(seq); r != nil && s.isID(r, id) {
			return r
		}
	}
	return s.foreign[id]
}

// maxPlacedSeq bounds the seq of a restored reservation that is kept in the book: one with a
// larger seq (never written by the engines, whose seqs count a sale's buyers) is kept in the
// foreign map, so that it cannot make the book's chunk list huge.
const maxPlacedSeq = 1 << 32

// place returns a zeroed reservation for in, a reservation being restored, with its seq, its
// random half and, for an id not in the engine's format, its foreign id set: in the book at its
// seq when its id is "<sale>-<seq><random>" as this engine renders it and the seq is free,
// otherwise (made by another engine, restored after a switch) in the foreign map.
func (s *sale) place(in seckill.Reservation) *reservation {
	if seq, ok := seqOf(in.ID); ok && seq == in.Seq && seq <= maxPlacedSeq && s.book.get(seq) == nil {
		random, err := strconv.ParseUint(in.ID[len(in.ID)-16:], 16, 64)
		own := reservation{seq: seq, random: random}
		if err == nil && s.isID(&own, in.ID) {
			r := s.book.put(seq)
			r.random = random
			return r
		}
	}
	r := &reservation{seq: in.Seq, extra: &extra{foreignID: in.ID}}
	if s.foreign == nil {
		s.foreign = make(map[string]*reservation)
	}
	s.foreign[in.ID] = r
	return r
}
