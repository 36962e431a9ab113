package redisinv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
)

// Segmented stock (docs/DECISIONS.md "Segmented stock"): a hot sale's free units split over
// several segments, each a complete set of the sale's keys under its own hash tag ({sale:X} for
// segment 0, {sale:X#i} for segment i), so that a Redis Cluster spreads one sale's buys over
// several nodes. A user's state (units, idempotency keys, reservations) lives in the segment of
// the user's hash, so a buy is one script call on one segment, and the per-user limit and the
// replay are decided where that state is. A segment never answers sold_out nor queues a buyer
// while the sale is split: when it lacks the units it answers 'empty', changing nothing, and the
// engine lends it units from the segment that has the most (lend), inside the same Buy. When the
// segments together cannot serve a buyer, the engine collapses the sale into segment 0
// (collapse), which then is a one-segment sale: the last units sell, and the queue forms, exactly
// as in a sale that never had segments. With no concurrency a segmented sale answers exactly as a
// one-segment sale (the conformance suite's model comparison runs on it).
//
// A one-segment sale never reaches this file: its scripts never answer the codes below, and
// its calls cost one map look-up more than before (segBook.of).

// maxSegments bounds a sale's segments: the API's bound (load.lua allows '#1' to '#99').
const maxSegments = seckill.MaxSegments

// segSignal is a segment's answer that the engine acts on and never hands to a caller: the
// sale has n segments ('segments'), the segment lacks units ('empty', n = its available), has
// been ('moved') or is being ('moving') moved to segment 0, or a replayed key's reservation is
// elsewhere ('elsewhere', s = its suffix).
type segSignal struct {
	code string
	n    int64
	s    string
}

func (s *segSignal) Error() string { return "redisinv: segment answered " + s.code }

// signalOf is the segSignal inside err, or nil.
func signalOf(err error) *segSignal {
	var s *segSignal
	if errors.As(err, &s) {
		return s
	}
	return nil
}

// segSignalOf turns a script's reply into a segSignal if it is one.
func segSignalOf(r reply) *segSignal {
	switch c := r.code(); c {
	case "segments", "empty", "moved", "moving", "busy":
		return &segSignal{code: c, n: r.int(1)}
	case "elsewhere":
		return &segSignal{code: c, s: r.str(1)}
	}
	return nil
}

// execSeg runs a script on segment i. Segment 0 is the sale's own keys (exec, with the
// rebuild of a missing sale); a missing segment i is segmentMissing's. A segment this instance
// no longer knows (a rebuild made the sale one segment meanwhile) answers 'moved': the caller
// goes on at segment 0, as when it finds the segment's keys gone.
func (g *segments) execSeg(ctx context.Context, s *script, saleID string, i int, args ...string) (reply, error) {
	if i == 0 {
		return g.core.exec(ctx, s, saleID, args...)
	}
	in := g.of(saleID)
	if in == nil || i >= in.n {
		return nil, &segSignal{code: "moved"}
	}
	return g.core.execTag(ctx, s, in.tag(i), args...)
}

// segmentMissing answers a call that found a segment of a segmented sale missing (its keys
// gone: Redis restarted empty, a Cluster node lost, or a rebuild removed them). Segment 0 tells
// what it means. A sale that is one segment now (rebuilt from the database) or has collapsed
// has every live unit and reservation in segment 0: this instance takes the sale for collapsed
// (and, rebuilt, forgets its segments), and the call goes on there (the signal 'moved', which
// every caller acts on as a moved segment's answer). A sale still split has lost a segment: it
// is rebuilt whole from the database as a one-segment sale (rebuild.go, 'lost'), and answers
// unavailable meanwhile.
func (g *segments) segmentMissing(ctx context.Context, saleID string) error {
	r, err := g.segOp(ctx, saleID, 0, "counts")
	if err != nil {
		return err
	}
	if one := r.int(9) < 2; one || r.int(1) == modeSingle {
		g.forget(saleID, one)
		return &segSignal{code: "moved"}
	}
	if in := g.of(saleID); in != nil && int64(in.n) != r.int(9) {
		// The sale was dropped and made again with other segments: take it as it is now.
		g.learn(saleID, int(r.int(9)))
		return seckill.Errorf(seckill.CodeUnavailable, "sale %q was made again with other segments; retry", saleID)
	}
	if !g.core.rebuildLost(saleID) {
		return seckill.Errorf(seckill.CodeUnavailable, "a segment of sale %q is missing from Redis; retry shortly", saleID)
	}
	return seckill.Errorf(seckill.CodeUnavailable, "a segment of sale %q is missing from Redis; the sale is being restored from the database; retry shortly", saleID)
}

// movedOn reports whether err is segmentMissing's 'moved': the caller goes on at segment 0.
func movedOn(err error) bool {
	s := signalOf(err)
	return s != nil && s.code == "moved"
}

// segOp runs one operation of segment.lua on segment i.
//
// segment.lua: KEYS the segment's eight keys; ARGV [1] clock, [2] op, then by op: 'take' dest,
// units -> {'ok', taken, seq, available left} / {'busy', mode}; 'apply' source, seq, units ->
// {'ok', added} / {'gap', last applied} / {'moved'}; 'ack' dest, seq; 'outbox' -> {'ok', (dest,
// seq, units)...}; 'counts' -> {'ok', mode, available, held, sold, seq, lent, got, pend,
// segments, streams}; 'halt' token, stale version, lost (rebuild.go); 'freeze' -> {'ok', mode};
// 'absorb' source, kind, entries... -> {'ok', 1/0}; 'counts_in' source, available, held, sold,
// seq; 'seal'; 'finish' -> {'ok'} / {'not_ready'}; 'adopt' suffix, stored reservation. Each
// op's details: lua/segment.lua.
func (g *segments) segOp(ctx context.Context, saleID string, i int, op string, args ...string) (reply, error) {
	r, err := g.execSeg(ctx, g.core.scriptSet().segment, saleID, i, append([]string{op}, args...)...)
	if err != nil {
		return nil, err
	}
	switch r.code() {
	case "ok", "busy", "gap", "not_ready":
		return r, nil
	case "single":
		// A rebuild made the sale one segment since this instance learned its segments (the
		// rebuild of another instance, or one whose reply it has not met yet): the call goes
		// on at segment 0, as segmentMissing's answer for a sale that is one segment now.
		g.forget(saleID, true)
		return nil, &segSignal{code: "moved"}
	}
	return nil, unexpected("segment "+op, r)
}

// loadSegments is Engine.LoadSaleSegments.
func (g *segments) loadSegments(ctx context.Context, def seckill.Sale, sold, n int) error {
	if n == 1 {
		return g.core.loadSale(ctx, def, sold)
	}
	if n < 1 || n > maxSegments {
		return seckill.Errorf(seckill.CodeInvalidArgument, "segments must be 1 to %d", maxSegments)
	}
	if !seckill.ValidID(def.ID) {
		return seckill.Errorf(seckill.CodeInvalidArgument, "sale id must be 1–64 of [A-Za-z0-9_.-]")
	}
	if def.Sellable() < 0 || sold < 0 || sold > def.Sellable() {
		return seckill.Errorf(seckill.CodeInvalidArgument, "sale %q: sold %d outside 0..%d", def.ID, sold, def.Sellable())
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if n, err := g.core.redis().Do(ctx, g.core.redis().B().Exists().Key(g.core.keys(def.ID)[0]).Build()).AsInt64(); err != nil {
		return errUnavailable(fmt.Errorf("redisinv: load sale %s: %w", def.ID, err))
	} else if n > 0 {
		return seckill.Errorf(seckill.CodeConflict, "sale %q already loaded", def.ID)
	}
	free := def.Sellable() - sold
	share := func(i int) string {
		s := free / n
		if i < free%n {
			s++
		}
		return itoa(s)
	}
	// Segments 1 and up first ('segment' replaces what a failed load left), segment 0 last: its
	// 'new' load is the one that conflicts, and a sale is found by its segment 0.
	for i := n - 1; i >= 0; i-- {
		mode, s := "segment", 0
		if i == 0 {
			mode, s = "new", sold
		}
		args := withIncarnation(append(loadArgs(def, s, mode, ""), "1", "0", itoa(n), itoa(i), share(i)), def)
		r, err := g.core.execRaw(ctx, g.core.scriptSet().load, segTag(def.ID, i, n), args...)
		if err != nil {
			return err
		}
		if r.code() == "conflict" {
			return seckill.Errorf(seckill.CodeConflict, "sale %q already loaded", def.ID)
		}
	}
	in := g.learn(def.ID, n)
	for i := range n {
		s, _ := strconv.Atoi(share(i))
		in.avail[i].Store(int64(s))
	}
	return nil
}

// buyNewlySegmented is a Buy whose plain call a segment answered with sig: the sale is segmented
// and this instance had not seen it yet.
func (g *segments) buyNewlySegmented(ctx context.Context, req seckill.BuyRequest, q int, sig *segSignal) (seckill.BuyResult, error) {
	var in *segInfo
	if sig.code == "segments" {
		in = g.learn(req.SaleID, int(sig.n))
	} else {
		var err error
		if in, err = g.discoverSegments(ctx, req.SaleID); err != nil {
			return seckill.BuyResult{}, err
		}
	}
	return g.buySegmented(ctx, in, req, q)
}

// buySegmented runs a buy on a segmented sale: at the user's segment (segment 0 once
// collapsed), lending it units or collapsing the sale when it has too few, until the answer is
// one a one-segment sale would give.
func (g *segments) buySegmented(ctx context.Context, in *segInfo, req seckill.BuyRequest, q int) (seckill.BuyResult, error) {
	lends := 0
	for range 64 {
		h := 0
		if !in.collapsed.Load() {
			h = userSegment(req.UserID, in.n)
		}
		res, err := g.core.buy(ctx, &buyCall{req: req, q: q, random: g.core.random(), tag: in.tag(h), floor: in.maxSeq.Load()})
		sig := signalOf(err)
		if sig == nil {
			if err == nil {
				in.seenSeq(res.Reservation.Seq)
			}
			return res, err
		}
		switch sig.code {
		case "segments":
			in = g.learn(req.SaleID, int(sig.n))
		case "moved":
			in.collapsed.Store(true)
		case "moving":
			if err := g.collapse(ctx, req.SaleID, in); err != nil && !movedOn(err) {
				return seckill.BuyResult{}, err
			}
		case "elsewhere":
			r, err := g.core.Reservation(ctx, req.SaleID+"-"+sig.s)
			if err != nil {
				return seckill.BuyResult{}, err
			}
			return seckill.BuyResult{Reservation: r, Replayed: true}, nil
		case "empty":
			in.avail[h].Store(sig.n)
			lent := false
			if lends < 4 && !g.noLend { // a buyer whose lent units others keep taking ends the split
				lends++
				if lent, err = g.lend(ctx, req.SaleID, in, h, int64(q)-sig.n); movedOn(err) {
					continue // a segment is gone: the sale is in segment 0 now
				} else if err != nil {
					return seckill.BuyResult{}, err
				}
			}
			if !lent {
				if err := g.collapse(ctx, req.SaleID, in); err != nil && !movedOn(err) {
					return seckill.BuyResult{}, err
				}
			}
		default:
			return seckill.BuyResult{}, err
		}
	}
	return seckill.BuyResult{}, errUnavailable(errors.New("redisinv: a buy of a segmented sale went round too often"))
}

// segSale is Sale of a segmented sale that has not collapsed: the definition from segment 0,
// the counts summed over the segments, the units in transit counted as available. The segments
// cannot be read in one atomic step (they are on different nodes), so the read is repeated
// until no transfer happened while it ran (each segment's lent and got the same when read again):
// then the sums are those of one instant (each segment's available + held + sold changes only
// by transfers), and invariant 1 holds in every answer.
func (g *segments) segSale(ctx context.Context, id string, in *segInfo) (seckill.Sale, seckill.StockState, error) {
	for range 100 {
		if in.collapsed.Load() {
			return g.core.Sale(ctx, id)
		}
		// Every segment at once: rueidis pipelines the calls (one round trip per node).
		rs := make([]reply, in.n)
		if err := inParallel(in.n, func(i int) (err error) {
			rs[i], err = g.execSeg(ctx, g.core.scriptSet().sale, id, i)
			return err
		}); movedOn(err) {
			continue // the sale is in segment 0 now
		} else if err != nil {
			return seckill.Sale{}, seckill.StockState{}, err
		}
		var def seckill.Sale
		var sum seckill.StockState
		lent, got := make([]int64, in.n), make([]int64, in.n)
		moving := false
		for i, r := range rs {
			switch r.code() {
			case "ok":
			case "moving", "moved":
				moving = true
				continue
			default:
				return seckill.Sale{}, seckill.StockState{}, unexpected("sale", r)
			}
			if mode := r.int(18); mode != modeSplit {
				if mode == modeSingle && i == 0 {
					in.collapsed.Store(true)
				}
				moving = true
				continue
			}
			s, st := saleOf(id, r)
			if i == 0 {
				def, sum.Sellable = s, st.Sellable
			}
			sum.Available += st.Available
			sum.Held += st.Held
			sum.Sold += st.Sold
			sum.Queued += st.Queued
			lent[i], got[i] = r.int(19), r.int(20)
		}
		if moving {
			if err := g.collapse(ctx, id, in); err != nil && !movedOn(err) {
				return seckill.Sale{}, seckill.StockState{}, err
			}
			continue
		}
		cs := make([]reply, in.n)
		if err := inParallel(in.n, func(i int) (err error) {
			cs[i], err = g.segOp(ctx, id, i, "counts")
			return err
		}); movedOn(err) {
			continue
		} else if err != nil {
			return seckill.Sale{}, seckill.StockState{}, err
		}
		same := true
		var transit int64
		for i, c := range cs {
			same = same && c.int(6) == lent[i] && c.int(7) == got[i]
			transit += lent[i] - got[i]
		}
		if same {
			sum.Available += int(transit)
			return def, sum, nil
		}
		time.Sleep(time.Millisecond)
	}
	return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeUnavailable, "sale %q: its segments kept moving units while read; retry shortly", id)
}

// inParallel runs f(0) to f(n-1) at once and returns the first error.
func inParallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// onReservation runs an id-taking script (run) where reservation suffix of a segmented sale
// lives: its own segment, or segment 0 once that segment has moved there (then, for a
// reservation segment 0 does not have — unknown reports that — the moved segment, which keeps
// its terminal reservations).
func (g *segments) onReservation(ctx context.Context, saleID, suffix string, in *segInfo,
	run func(seg int, flag string) (reply, error), unknown func(reply) bool) (reply, error) {
	k := suffixSegment(suffix)
	if k < 0 || k >= in.n {
		k = 0 // no segment made it: segment 0 answers it is unknown
	}
	for range 16 {
		if k == 0 {
			return run(0, "s")
		}
		if in.collapsed.Load() {
			r, err := run(0, "s")
			if err != nil || !unknown(r) {
				return r, err
			}
			rk, err := run(k, "m")
			if movedOn(err) {
				return r, nil // segment k is gone: segment 0's answer stands
			}
			return rk, err
		}
		r, err := run(k, "s")
		if movedOn(err) {
			continue // the sale is in segment 0 now
		}
		if err != nil {
			return nil, err
		}
		switch r.code() {
		case "moved":
			in.collapsed.Store(true)
		case "moving":
			if err := g.collapse(ctx, saleID, in); err != nil && !movedOn(err) {
				return nil, err
			}
		default:
			return r, nil
		}
	}
	return nil, errUnavailable(errors.New("redisinv: a reservation of a segmented sale went round too often"))
}

func notFoundReply(r reply) bool { return r.code() == "not_found" }

// segReservation is Reservation on a segmented sale.
func (g *segments) segReservation(ctx context.Context, id, saleID, suffix string, in *segInfo) (seckill.Reservation, error) {
	r, err := g.onReservation(ctx, saleID, suffix, in, func(seg int, flag string) (reply, error) {
		return g.execSeg(ctx, g.core.scriptSet().reservation, saleID, seg, suffix, flag)
	}, notFoundReply)
	if err != nil {
		return seckill.Reservation{}, err
	}
	switch r.code() {
	case "ok":
		return reservationOf(saleID, r), nil
	case "not_found":
		return seckill.Reservation{}, errNotFound(id)
	}
	return seckill.Reservation{}, unexpected("reservation", r)
}

// segCancel is Cancel on a segmented sale.
func (g *segments) segCancel(ctx context.Context, id, userID, saleID, suffix string, in *segInfo) (seckill.Reservation, error) {
	r, err := g.onReservation(ctx, saleID, suffix, in, func(seg int, flag string) (reply, error) {
		return g.execSeg(ctx, g.core.scriptSet().cancel, saleID, seg, suffix, userID, flag)
	}, notFoundReply)
	if err != nil {
		return seckill.Reservation{}, err
	}
	return cancelResult(id, saleID, r)
}

// segPay is ConfirmPayment on a segmented sale: a late payment that the reservation's segment
// lacks the units for is served by lending (or collapsing) first, as a buy is; one for a
// reservation of a moved segment is taken over by segment 0 first.
func (g *segments) segPay(ctx context.Context, p seckill.PaymentConfirmation, saleID, suffix string, amount int64, in *segInfo) (reply, error) {
	run := func(seg int, flag string) (reply, error) {
		return g.execSeg(ctx, g.core.scriptSet().pay, saleID, seg, suffix, p.PaymentID, i64toa(amount), flag)
	}
	unknown := func(r reply) bool { return r.code() == "ok" && len(r) == 2 }
	k := suffixSegment(suffix)
	if k < 0 || k >= in.n {
		k = 0
	}
	lends := 0
	for range 16 {
		r, err := g.onReservation(ctx, saleID, suffix, in, run, unknown)
		if err != nil {
			return nil, err
		}
		switch r.code() {
		case "empty":
			lent := false
			if lends < 4 {
				lends++
				if lent, err = g.lend(ctx, saleID, in, k, r.int(2)-r.int(1)); movedOn(err) {
					continue
				} else if err != nil {
					return nil, err
				}
			}
			if !lent {
				if err := g.collapse(ctx, saleID, in); err != nil && !movedOn(err) {
					return nil, err
				}
			}
		case "adopt":
			if _, err := g.segOp(ctx, saleID, 0, "adopt", suffix, r.str(1)); err != nil {
				return nil, err
			}
		default:
			return r, nil
		}
	}
	return nil, errUnavailable(errors.New("redisinv: a payment of a segmented sale went round too often"))
}

// segClose closes every segment of a segmented sale (a MOVED one too); a collapse under way is
// finished first.
func (g *segments) segClose(ctx context.Context, saleID string, in *segInfo) error {
	for range 16 {
		again := false
		for i := range in.n {
			r, err := g.execSeg(ctx, g.core.scriptSet().close, saleID, i)
			if movedOn(err) {
				continue // gone, and the sale is in segment 0 (closed first)
			}
			if err != nil {
				return err
			}
			switch r.code() {
			case "ok":
			case "moving":
				if err := g.collapse(ctx, saleID, in); err != nil && !movedOn(err) {
					return err
				}
				again = true
			default:
				return unexpected("close", r)
			}
			if again {
				break
			}
		}
		if !again {
			return nil
		}
	}
	return errUnavailable(errors.New("redisinv: closing a segmented sale went round too often"))
}

// segReclaim reclaims every segment but 0 (which the caller did), finishes a collapse that an
// instance left half done, and applies the transfers that one left in an outbox. It returns
// the earliest due time of those segments (reclaimDue; negative: none).
func (g *segments) segReclaim(ctx context.Context, saleID string, in *segInfo, pend0 int64) (int, time.Duration, error) {
	total, due := 0, time.Duration(-1)
	if pend0 > 0 {
		if err := g.flushOutbox(ctx, saleID, 0); err != nil {
			return total, 0, err
		}
	}
	if in.collapsed.Load() {
		return total, due, nil
	}
	for i := 1; i < in.n; i++ {
		for {
			r, err := g.execSeg(ctx, g.core.scriptSet().reclaim, saleID, i, itoa(reclaimBatch))
			if movedOn(err) {
				return total, due, nil // the sale is in segment 0, which the caller reclaimed
			}
			if err != nil {
				return total, 0, err
			}
			if r.code() == "moving" {
				if err := g.collapse(ctx, saleID, in); err != nil && !movedOn(err) {
					return total, 0, err
				}
				return total, 0, nil // collapsed: the next sweep reads segment 0 alone
			}
			if r.code() != "ok" {
				return total, 0, unexpected("reclaim", r)
			}
			total += int(r.int(1))
			if r.int(4) > 0 {
				if err := g.flushOutbox(ctx, saleID, i); err != nil && !movedOn(err) {
					return total, 0, err
				}
			}
			if r.int(2) == 0 {
				due = earliestDue(due, msDuration(r.int(6)))
				break
			}
		}
	}
	return total, due, nil
}

// discoverSegments reads segment 0 to learn a sale's segments, for a call that met a segment's
// answer without knowing the sale was segmented.
func (g *segments) discoverSegments(ctx context.Context, saleID string) (*segInfo, error) {
	if in := g.of(saleID); in != nil {
		return in, nil
	}
	r, err := g.core.exec(ctx, g.core.scriptSet().sale, saleID)
	if err != nil {
		return nil, err
	}
	if r.code() != "ok" || r.int(17) < 2 {
		return nil, fmt.Errorf("redisinv: sale %s answered as a segmented sale but is not one", saleID)
	}
	return g.in(saleID, r), nil
}

// segmentsProbe is the sale's segInfo, read from segment 0 if this instance has not seen the
// sale segmented; nil for a one-segment sale. It costs a read: for the rare calls (sale
// administration, restores) that must know before they act.
func (g *segments) segmentsProbe(ctx context.Context, saleID string) (*segInfo, error) {
	if in := g.of(saleID); in != nil {
		return in, nil
	}
	r, err := g.core.exec(ctx, g.core.scriptSet().sale, saleID)
	if err != nil {
		return nil, err
	}
	return g.in(saleID, r), nil
}

// oneSegment collapses a segmented sale into segment 0 (if it has not already), for the calls
// that act on the whole sale at once: a restore (a restored sale is a one-segment sale), and
// CloseUnreserved and DropSale, which must see every reservation in one atomic step.
func (g *segments) oneSegment(ctx context.Context, saleID string) (*segInfo, error) {
	in, err := g.segmentsProbe(ctx, saleID)
	if err != nil || in == nil {
		return in, err
	}
	if err := g.collapse(ctx, saleID, in); err != nil && !movedOn(err) {
		return in, err
	}
	return in, nil
}

// dropSegments deletes the keys of a dropped sale's segments 1 and up (moved: nothing in them
// is live).
func (g *segments) dropSegments(ctx context.Context, saleID string, in *segInfo) error {
	for _, tag := range in.tags[1:] {
		for _, k := range g.core.keys(tag) {
			if err := g.core.redis().Do(ctx, g.core.redis().B().Unlink().Key(k).Build()).Error(); err != nil {
				return errUnavailable(fmt.Errorf("redisinv: drop sale %s: %w", saleID, err))
			}
		}
		g.core.versionBook().m.Delete(tag)
	}
	g.sales.Delete(saleID)
	return nil
}

// WithSegments makes LoadSale split every sale into n segments (LoadSaleSegments), for tests:
// the conformance suite runs on segmented sales through it (package redisinv/segconformance).
// The service never sets it: a sale's own `segments` decides there.
func WithSegments(n int) Option { return func(e *Engine) { e.segs.loadN = n } }
