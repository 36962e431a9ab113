// What this instance knows of the segmented sales: which sales are split, into how many
// segments, under which tags, and whether they have collapsed. The other rooms ask through
// segBook's methods (of, learn, in, forget, tags); the operations on a segmented sale are in
// segment.go, seglend.go and segplace.go.

package redisinv

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/seckill-go/seckill"
)

// segments is the room of the segmented sales: what this instance knows of them (segBook) and
// every operation on one (segment.go, seglend.go). The engine holds it and calls it for the
// sales segBook.of (or a script's signal) says are segmented; it sees of the engine only segCore.
type segments struct {
	segBook
	core    segCore
	timeout time.Duration // the engine's: bounds a load, ten of it a collapse
	loadN   int           // WithSegments: LoadSale splits every sale (tests)
	noLend  bool          // tests: a segment short of units collapses the sale at once
}

// segCore is all the segments see of the engine: its core (script calls, keys, the client, the
// scripts, the batched buy, a reservation id's random half), its public reads (a moved buyer's
// reservation; a collapsed sale's Sale), the plain load, and the rebuild and versions rooms'
// doors for a lost segment and a dropped one.
type segCore interface {
	exec(ctx context.Context, s *script, saleID string, args ...string) (reply, error)
	execRaw(ctx context.Context, s *script, saleID string, args ...string) (reply, error)
	execTag(ctx context.Context, s *script, tag string, args ...string) (reply, error)
	scriptSet() *scriptSet
	keys(saleID string) []string
	redis() rueidis.Client
	buy(ctx context.Context, c *buyCall) (seckill.BuyResult, error)
	random() string
	loadSale(ctx context.Context, def seckill.Sale, sold int) error
	Sale(ctx context.Context, id string) (seckill.Sale, seckill.StockState, error)
	Reservation(ctx context.Context, id string) (seckill.Reservation, error)
	rebuildLost(saleID string) bool
	versionBook() *versionBook
}

// attach gives the segments the engine they serve, once its options are applied.
func (g *segments) attach(e *Engine) { g.core, g.timeout = e, e.timeout }

// segBook is the engine's record of the segmented sales it has seen.
type segBook struct {
	sales sync.Map // sale id -> *segInfo
	tags  sync.Map // sale id -> []string, its segments' tags (segTag)
}

// of is the sale's segInfo, nil for a sale this instance takes for a one-segment sale.
func (b *segBook) of(saleID string) *segInfo {
	if v, ok := b.sales.Load(saleID); ok {
		return v.(*segInfo)
	}
	return nil
}

// learn records that the sale has n segments (a script said so).
func (b *segBook) learn(saleID string, n int) *segInfo {
	if n < 2 || n > maxSegments {
		n = max(min(n, maxSegments), 2)
	}
	if in := b.of(saleID); in != nil && in.n == n {
		return in
	}
	in := &segInfo{n: n, avail: make([]atomic.Int64, n), tags: b.tagsOf(saleID, n)}
	if v, loaded := b.sales.LoadOrStore(saleID, in); loaded {
		if old := v.(*segInfo); old.n == n {
			return old
		}
		b.sales.Store(saleID, in) // a sale made again under this id, with other segments
	}
	return in
}

// forget makes this instance send every call of the sale to segment 0: the sale
// collapsed, or (one) a rebuild made it a one-segment sale, whose calls then take the plain path.
func (b *segBook) forget(saleID string, one bool) {
	if in := b.of(saleID); in != nil {
		in.collapsed.Store(true)
		if one {
			b.sales.CompareAndDelete(saleID, in)
		}
	}
}

// in is the sale's segInfo when r, a sale_reply of segment 0, is of a segmented sale
// (recording whether it has collapsed), else nil. A sale this instance took for segmented
// whose segment 0 says one segment was rebuilt as one (by another instance, or by a rebuild
// whose end this instance did not see): it is forgotten, so its calls take the plain path.
func (b *segBook) in(saleID string, r reply) *segInfo {
	n := r.int(17)
	if n < 2 {
		if r.code() == "ok" && b.of(saleID) != nil {
			b.forget(saleID, true)
		}
		return nil
	}
	in := b.learn(saleID, int(n))
	if r.int(18) == modeSingle {
		in.collapsed.Store(true)
	}
	return in
}

// tagsOf is segTag of each of the sale's n segments, kept per sale (the streams' readers ask
// for them at every read).
func (b *segBook) tagsOf(saleID string, n int) []string {
	if v, ok := b.tags.Load(saleID); ok {
		if t := v.([]string); len(t) == n {
			return t
		}
	}
	t := append([]string{saleID}, segTagsFrom(saleID, n)...)
	b.tags.Store(saleID, t)
	return t
}

// segInfo is what this instance knows of a segmented sale: its number of segments, whether it
// has collapsed into segment 0 (then every call goes there), and the free units each segment had
// at its last reply (the choice of a donor; a hint, never trusted for a decision).
type segInfo struct {
	n         int
	tags      []string // segTag of each segment
	collapsed atomic.Bool
	avail     []atomic.Int64
	mu        sync.Mutex // one collapse at a time from this instance
	maxSeq    atomic.Uint64
}

// seenSeq raises the highest seq this instance has seen of the sale: the floor of the next
// buys' seqs, so that seq grows with arrival as far as this instance can tell (a buy answered
// before another was sent has the lower seq), whichever segments made them.
func (in *segInfo) seenSeq(s uint64) {
	for {
		cur := in.maxSeq.Load()
		if cur >= s || in.maxSeq.CompareAndSwap(cur, s) {
			return
		}
	}
}

// tag is segment i's tag (segTag), kept.
func (in *segInfo) tag(i int) string { return in.tags[i] }
