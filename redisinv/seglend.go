// Moving units between a segmented sale's segments: lending to a short one, and the collapse
// into segment 0 at the tail (segment.go has the whole design).

package redisinv

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/seckill-go/seckill"
)

// lend moves at least need free units to segment h from the others, the richest first (as this
// instance last saw them), and reports whether it found them. Each donor gives up to half of
// what it has, so that h need not borrow again at once.
func (g *segments) lend(ctx context.Context, saleID string, in *segInfo, h int, need int64) (bool, error) {
	donors := make([]int, 0, in.n-1)
	for d := range in.n {
		if d != h {
			donors = append(donors, d)
		}
	}
	slices.SortStableFunc(donors, func(a, b int) int {
		x, y := in.avail[a].Load(), in.avail[b].Load()
		switch {
		case x > y:
			return -1
		case x < y:
			return 1
		}
		return 0
	})
	for _, d := range donors {
		want := max(need, in.avail[d].Load()/2)
		r, err := g.segOp(ctx, saleID, d, "take", itoa(h), i64toa(min(want, seckill.MaxQuantity)))
		if err != nil {
			return false, err
		}
		if r.code() == "busy" {
			continue // collapsing or moved: its units are going to segment 0
		}
		k, seq := r.int(1), r.int(2)
		in.avail[d].Store(r.int(3))
		if k == 0 {
			continue
		}
		if err := g.transfer(ctx, saleID, d, h, seq, k); err != nil {
			return false, err
		}
		in.avail[h].Add(k)
		if need -= k; need <= 0 {
			return true, nil
		}
	}
	return false, nil
}

// transfer applies outbox entry seq of d (k units for h) at h, then acknowledges it at d. An
// entry of the pair that is still pending before it is applied first (flushOutbox).
func (g *segments) transfer(ctx context.Context, saleID string, d, h int, seq, k int64) error {
	r, err := g.segOp(ctx, saleID, h, "apply", itoa(d), i64toa(seq), i64toa(k))
	if err != nil {
		return err
	}
	if r.code() == "gap" {
		return g.flushOutbox(ctx, saleID, d)
	}
	_, err = g.segOp(ctx, saleID, d, "ack", itoa(h), i64toa(seq))
	return err
}

// flushOutbox applies and acknowledges every entry of d's outbox, in order: the recovery of
// transfers that a crash (or a timeout) left taken and not applied.
func (g *segments) flushOutbox(ctx context.Context, saleID string, d int) error {
	r, err := g.segOp(ctx, saleID, d, "outbox")
	if err != nil {
		return err
	}
	type entry struct{ to, seq, k int64 }
	var es []entry
	for i := 1; i+2 < len(r); i += 3 {
		es = append(es, entry{r.int(i), r.int(i + 1), r.int(i + 2)})
	}
	slices.SortFunc(es, func(a, b entry) int {
		if a.to != b.to {
			return int(a.to - b.to)
		}
		return int(a.seq - b.seq)
	})
	for _, x := range es {
		a, err := g.segOp(ctx, saleID, int(x.to), "apply", itoa(d), i64toa(x.seq), i64toa(x.k))
		if err != nil {
			return err
		}
		if a.code() == "gap" {
			return fmt.Errorf("redisinv: sale %s: transfer %d from segment %d to %d is missing its predecessor (applied up to %d)",
				saleID, x.seq, d, x.to, a.int(1))
		}
		if _, err := g.segOp(ctx, saleID, d, "ack", i64toa(x.to), i64toa(x.seq)); err != nil {
			return err
		}
	}
	return nil
}

// collapse moves every segment into segment 0, which then serves the sale alone, exactly as a
// one-segment sale. Every step can be repeated, by this instance or another that finds the
// collapse half done (after a crash): the segments it copies from are FROZEN, segment 0 takes
// only fields it does not have (a repeated copy must not undo what segment 0 did with the first
// one), and each segment's counts once (docs/DECISIONS.md "Segmented stock").
func (g *segments) collapse(ctx context.Context, saleID string, in *segInfo) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.collapsed.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*g.timeout)
	defer cancel()
	r0, err := g.segOp(ctx, saleID, 0, "freeze") // segment 0 first: it stops answering sold_out
	if err != nil {
		return err
	}
	if r0.int(1) == modeSingle {
		in.collapsed.Store(true)
		return nil
	}
	moved := make([]bool, in.n)
	if err := inParallel(in.n-1, func(j int) error {
		r, err := g.segOp(ctx, saleID, j+1, "freeze")
		moved[j+1] = err == nil && r.int(1) == modeMoved
		return err
	}); err != nil {
		return err
	}
	// Every segment is frozen or collapsing now: no new transfer can start.
	if err := inParallel(in.n, func(i int) error { return g.flushOutbox(ctx, saleID, i) }); err != nil {
		return err
	}
	if err := inParallel(in.n-1, func(j int) error {
		if moved[j+1] {
			return nil
		}
		if err := g.absorb(ctx, saleID, in.tag(j+1), j+1); err != nil {
			return err
		}
		_, err := g.segOp(ctx, saleID, j+1, "seal")
		return err
	}); err != nil {
		return err
	}
	r, err := g.segOp(ctx, saleID, 0, "finish")
	if err != nil {
		return err
	}
	if r.code() != "ok" {
		return fmt.Errorf("redisinv: sale %s: collapse finished before every segment was absorbed", saleID)
	}
	in.collapsed.Store(true)
	return nil
}

// The modes of common.lua.
const (
	modeSingle     = 0
	modeSplit      = 1
	modeCollapsing = 2
	modeFrozen     = 3
	modeMoved      = 4
)

// absorbChunk is how many users, keys or holds one absorb call copies.
const absorbChunk = 500

// absorb copies FROZEN segment i's (tag's) users, idempotency keys and holds into segment 0,
// then its counts (once: after that segment 0 refuses further copies from i).
func (g *segments) absorb(ctx context.Context, saleID, tag string, i int) error {
	keys := g.core.keys(tag)
	for _, kind := range []struct {
		name string
		key  string
	}{{"users", keys[4]}, {"idem", keys[5]}} {
		var cursor uint64
		for {
			se, err := g.core.redis().Do(ctx, g.core.redis().B().Hscan().Key(kind.key).Cursor(cursor).Count(absorbChunk).Build()).AsScanEntry()
			if err != nil {
				return errUnavailable(fmt.Errorf("redisinv: collapse sale %s: %w", saleID, err))
			}
			if len(se.Elements) > 0 {
				for from := 0; from < len(se.Elements); from += 2 * absorbChunk {
					part := se.Elements[from:min(len(se.Elements), from+2*absorbChunk)]
					r, err := g.segOp(ctx, saleID, 0, "absorb", append([]string{itoa(i), kind.name}, part...)...)
					if err != nil {
						return err
					}
					if r.int(1) == 0 {
						return nil // another instance absorbed i already
					}
				}
			}
			if cursor = se.Cursor; cursor == 0 {
				break
			}
		}
	}
	for start := int64(0); ; start += absorbChunk {
		ids, err := g.core.redis().Do(ctx, g.core.redis().B().Zrange().Key(keys[2]).Min(i64toa(start)).Max(i64toa(start+absorbChunk-1)).Withscores().Build()).AsZScores()
		if err != nil {
			return errUnavailable(fmt.Errorf("redisinv: collapse sale %s: %w", saleID, err))
		}
		if len(ids) == 0 {
			break
		}
		names := make([]string, len(ids))
		for j, z := range ids {
			names[j] = z.Member
		}
		raws, err := g.core.redis().Do(ctx, g.core.redis().B().Hmget().Key(keys[1]).Field(names...).Build()).ToArray()
		if err != nil {
			return errUnavailable(fmt.Errorf("redisinv: collapse sale %s: %w", saleID, err))
		}
		args := []string{itoa(i), "holds"}
		for j, z := range ids {
			raw, err := raws[j].ToString()
			if err != nil {
				continue // not there: cannot be, the segment is frozen
			}
			args = append(args, z.Member, raw, strconv.FormatFloat(z.Score, 'f', 0, 64))
		}
		if len(args) > 2 {
			r, err := g.segOp(ctx, saleID, 0, "absorb", args...)
			if err != nil {
				return err
			}
			if r.int(1) == 0 {
				return nil
			}
		}
		if len(ids) < absorbChunk {
			break
		}
	}
	c, err := g.segOp(ctx, saleID, i, "counts")
	if err != nil {
		return err
	}
	_, err = g.segOp(ctx, saleID, 0, "counts_in", itoa(i), i64toa(c.int(2)), i64toa(c.int(3)), i64toa(c.int(4)), i64toa(c.int(5)))
	return err
}
