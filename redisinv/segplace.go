// Where a segmented sale's segments live: their hash tags, placed around a Redis Cluster's
// slot ring, and which segment holds a user or a reservation (segment.go has the whole design).

package redisinv

import (
	"strconv"
)

// segTag is the id under which segment i of a sale of n segments has its keys (Engine.keys)
// and its versions: the sale's id for segment 0, else "<id>#<i>.<salt>". The salt spreads the
// segments' hash slots evenly around a Cluster's slot ring from segment 0's: segment i's slot
// is within slotRing/(16n) of slot0 + i·slotRing/n (the smallest salt that lands there), so a
// Cluster whose masters own equal contiguous ranges of slots (as redis-cli --cluster create
// makes them) gets the segments spread evenly over its nodes, whatever the sale id. With
// "<id>#<i>" alone where a segment landed followed from the id: 3 segments shared 2 of 3 nodes
// in every measured run (docs/BENCHMARKS.md). Every instance computes the same tags from the
// id, i and n. It costs about 8n CRC16s of the tag: callers keep the tags (segBook.tagsOf).
func segTag(saleID string, i, n int) string {
	if i == 0 {
		return saleID
	}
	target := (hashSlot("sale:"+saleID) + i*slotRing/n) % slotRing
	within := max(slotRing/(16*n), 1)
	base := saleID + "#" + strconv.Itoa(i) + "."
	prefix := crc16(0, "sale:"+base) // each salt extends the CRC of the same prefix
	var digits [8]byte
	best, bestDistance := 0, slotRing
	for k := range maxSalt {
		d := ringDistance(int(crc16(prefix, strconv.AppendInt(digits[:0], int64(k), 10)))%slotRing, target)
		if d <= within {
			return base + strconv.Itoa(k)
		}
		if d < bestDistance {
			best, bestDistance = k, d
		}
	}
	return base + strconv.Itoa(best)
}

// slotRing is the number of a Redis Cluster's hash slots; maxSalt bounds the salts segTag tries
// (prelude.lua's key check allows up to 5 digits; about 8n are needed).
const (
	slotRing = 16384
	maxSalt  = 100000
)

// hashSlot is the Redis Cluster hash slot of a hash tag's content: CRC16 (XMODEM, polynomial
// 0x1021) modulo the ring. (rueidis computes slots only inside its Cluster client.)
func hashSlot(tag string) int { return int(crc16(0, tag)) % slotRing }

// crc16 extends CRC16-XMODEM crc over b.
func crc16[T string | []byte](crc uint16, b T) uint16 {
	for i := 0; i < len(b); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^b[i]]
	}
	return crc
}

// crc16Table is CRC16-XMODEM by byte: a rebuild computes the tags of every possible number of
// segments (about 700 000 salts tried, a few milliseconds).
var crc16Table = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()

// ringDistance is the distance between two slots around the ring.
func ringDistance(a, b int) int {
	d := (a - b + slotRing) % slotRing
	return min(d, slotRing-d)
}

// segTagsFrom is segTag of segments 1 to n-1 of a sale of n segments.
func segTagsFrom(saleID string, n int) []string {
	t := make([]string, 0, n-1)
	for i := 1; i < n; i++ {
		t = append(t, segTag(saleID, i, n))
	}
	return t
}

// userSegment is the segment of a user among n: common.lua's user_seg, the same arithmetic.
func userSegment(user string, n int) int {
	h := 0
	for i := 0; i < len(user); i++ {
		h = (h*31 + int(user[i])) % 1000003
	}
	return h % n
}

// suffixSegment is the segment a reservation suffix names (its random half's first byte, set
// by buy.lua in a segmented sale), or -1.
func suffixSegment(suffix string) int {
	if len(suffix) != 32 {
		return -1
	}
	n, err := strconv.ParseUint(suffix[16:18], 16, 8)
	if err != nil {
		return -1
	}
	return int(n)
}
