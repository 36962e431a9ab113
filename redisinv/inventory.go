package redisinv

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill-go/seckill"
)

// maxExact is 2^53, the largest integer the scripts (Lua doubles) hold exactly.
const maxExact = 1 << 53

// maxPaymentID bounds payment ids as the scripts accept them.
const maxPaymentID = 255

// maxIdempotencyKey bounds idempotency keys as the scripts accept them.
const maxIdempotencyKey = 128

// reclaimBatch is how many overdue holds one Reclaim script expires; Reclaim repeats it.
const reclaimBatch = 1024

// LoadSale preheats a sale: its definition and counters, with sold units already sold.
// Loading a sale that is loaded is a conflict, so a repeated preheat changes nothing.
//
// Keys left by a deleted sale under the same id (service.Service.DeleteSale's last step, the
// engine's drop, failed) are not a conflict: they are of another incarnation
// (seckill.Sale.Incarnation), closed and empty, and are dropped before the new sale is loaded.
func (e *Engine) LoadSale(ctx context.Context, def seckill.Sale, sold int) error {
	err := e.load(ctx, def, sold)
	if !isCode(err, seckill.CodeConflict) || def.Incarnation == "" {
		return err
	}
	if inc, ok := e.incarnationOf(ctx, def.ID); !ok || inc == def.Incarnation {
		return err // the sale itself, loaded already (a rebuild that read it first)
	}
	if derr := e.DropSale(ctx, def.ID); derr != nil {
		return err // not a deleted sale's closed, empty copy: left as it is
	}
	e.log.Info("redisinv: dropped the keys a deleted sale left under the id of a new one", "sale", def.ID)
	return e.load(ctx, def, sold)
}

// load is LoadSale without the check for a deleted sale's keys.
func (e *Engine) load(ctx context.Context, def seckill.Sale, sold int) error {
	if e.segs.loadN > 1 {
		return e.LoadSaleSegments(ctx, def, sold, e.segs.loadN)
	}
	if n := def.SegmentCount(); n > 1 {
		return e.LoadSaleSegments(ctx, def, sold, n)
	}
	return e.loadSale(ctx, def, sold)
}

// incarnationOf is the incarnation of the sale's (or a segment's) keys in Redis: the hash's
// field inc, "" for keys loaded before incarnations existed; ok is false when Redis cannot be
// read or has no such keys.
func (e *Engine) incarnationOf(ctx context.Context, id string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	vals, err := e.rdb.Do(ctx, e.rdb.B().Hmget().Key(e.keys(id)[0]).Field("st", "inc").Build()).ToArray()
	if err != nil || len(vals) != 2 || vals[0].IsNil() {
		return "", false
	}
	inc, _ := vals[1].ToString() // nil: loaded before incarnations
	return inc, true
}

// loadSale is LoadSale of a one-segment sale.
func (e *Engine) loadSale(ctx context.Context, def seckill.Sale, sold int) error {
	if !seckill.ValidID(def.ID) {
		return seckill.Errorf(seckill.CodeInvalidArgument, "sale id must be 1–64 of [A-Za-z0-9_.-]")
	}
	if def.Sellable() < 0 || sold < 0 || sold > def.Sellable() {
		return seckill.Errorf(seckill.CodeInvalidArgument, "sale %q: sold %d outside 0..%d", def.ID, sold, def.Sellable())
	}
	r, err := e.execRaw(ctx, e.scripts.load, def.ID, withIncarnation(loadArgs(def, sold, "new", ""), def)...)
	if err != nil {
		return err
	}
	if r.code() == "conflict" {
		return seckill.Errorf(seckill.CodeConflict, "sale %q already loaded", def.ID)
	}
	return nil
}

// loadArgs are load.lua's ARGV after the clock.
//
// load.lua: KEYS the sale's (or segment's) seven keys; ARGV [1] clock, [2] mode ('new',
// 'rebuild', 'segment'), [3] the rebuild's token, [4] name, [5] price, [6] stock, [7] holdback,
// [8] starts_at ms, [9] ends_at ms, [10] per-user limit, [11] hold seconds, [12] queue limit,
// [13] created_at ms, [14] units sold, [15] currency, [16] listed; then, optionally, [17] the
// starting version and [18] a stale version (rebuild.go), or for a segment [17] '1', [18] '0',
// [19] segments, [20] its index, [21] its share of the free units (LoadSaleSegments). Reply
// {'ok'} / {'conflict'} / {'fenced'}.
func loadArgs(def seckill.Sale, sold int, mode, token string) []string {
	return []string{
		mode, token, def.Name, i64toa(def.PriceCents), itoa(def.Stock), itoa(def.Holdback),
		i64toa(def.StartsAt.UnixMilli()), i64toa(def.EndsAt.UnixMilli()), itoa(def.PerUserLimit),
		itoa(def.HoldSeconds), itoa(def.QueueLimit), i64toa(max(def.CreatedAt.UnixMilli(), 0)), itoa(sold),
		def.Currency, boolArg(def.Listed),
	}
}

// loadDefaults are load.lua's defaults for its optional ARGV [17] to [21].
var loadDefaults = []string{"1", "0", "1", "0", "0"}

// withIncarnation appends load.lua's ARGV [22], [23] and [24], the sale's incarnation, preheat
// seconds and waiting room (room.go roomField), to args (its ARGV after the clock), giving the
// optional arguments before them their defaults.
func withIncarnation(args []string, def seckill.Sale) []string {
	const before = 20 // ARGV [2] to [21]
	for len(args) < before {
		args = append(args, loadDefaults[len(args)-15])
	}
	return append(args, def.Incarnation, itoa(min(max(def.PreheatSeconds, 0), seckill.MaxPreheatSeconds)), roomField(def.Room))
}

// Sale returns the definition and live counts, after reclaiming expired holds.
func (e *Engine) Sale(ctx context.Context, id string) (seckill.Sale, seckill.StockState, error) {
	return e.sale(ctx, id, true)
}

// SaleWindow is seckill.SaleWindows: the definition as Sale returns it, for the purchase path.
// A segmented sale is read at segment 0 only (one script call, where Sale makes two per
// segment), which holds the whole definition (segSale takes it from there too; CloseSale closes
// segment 0 as well). Its errors are Sale's, but for one case: a segment other than 0 lost while
// the sale is split is found by the calls that reach it (its users' buys, the sweeper's reclaim
// of every segment), not here. With local answers, when the sale's exact view cannot answer,
// the definition comes from the instance's copy, at most localWindowAge old (localanswers.go
// window).
func (e *Engine) SaleWindow(ctx context.Context, id string) (seckill.Sale, error) {
	s, _, err := e.sale(ctx, id, false)
	return s, err
}

var _ seckill.SaleWindows = (*Engine)(nil)

// sale is Sale; without counts (SaleWindow) a segmented sale is read at segment 0 only, and the
// counts returned are segment 0's alone.
//
// sale.lua: KEYS the sale's seven keys; ARGV [1] clock. Reply a sale_reply (saleOf; field 17 the
// segments, 18 the mode) or {'not_loaded'} / {'loading'}; a segment also {'moving'} / {'moved'}.
func (e *Engine) sale(ctx context.Context, id string, counts bool) (seckill.Sale, seckill.StockState, error) {
	if !seckill.ValidID(id) {
		return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", id)
	}
	in := e.segs.of(id)
	if in == nil {
		if s, st, ok := e.local.saleState(id); ok { // localanswers.go
			return s, st, nil
		}
	} else if counts && !in.collapsed.Load() {
		return e.segs.segSale(ctx, id, in)
	}
	if !counts {
		if s, ok := e.local.window(id); ok { // localanswers.go
			return s, seckill.StockState{}, nil
		}
	}
	var w *windowCopy
	if !counts {
		w = e.local.windowRead(id)
	}
	r, err := e.exec(ctx, e.scripts.sale, id)
	if cs := asCold(err); cs != nil { // cold.go: answered from the database
		return cs.sale, cs.state(), nil
	}
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	in = e.segs.in(id, r)
	if counts && in != nil && !in.collapsed.Load() {
		return e.segs.segSale(ctx, id, in)
	}
	s, st := saleOf(id, r)
	if !counts && r.code() == "ok" {
		e.local.keepWindow(id, w, s)
	}
	return s, st, nil
}

// Reservation returns a reservation as it is now.
//
// reservation.lua: KEYS the sale's seven keys; ARGV [1] clock, [2] reservation suffix, [3]
// segment flag (segmented sales only). Reply {'ok', 0, res_reply...} / {'not_found'} /
// {'not_loaded'} / {'loading'}, or {'segments', n} for a sale this instance took for plain.
func (e *Engine) Reservation(ctx context.Context, id string) (seckill.Reservation, error) {
	saleID, suffix, ok := splitID(id)
	if !ok {
		return seckill.Reservation{}, errNotFound(id)
	}
	if in := e.segs.of(saleID); in != nil {
		return e.segs.segReservation(ctx, id, saleID, suffix, in)
	}
	r, err := e.exec(ctx, e.scripts.reservation, saleID, suffix)
	if asCold(err) != nil { // cold.go: answered from the database
		return e.coldReservation(ctx, id)
	}
	if isCode(err, seckill.CodeNotFound) {
		return seckill.Reservation{}, errNotFound(id)
	}
	if err != nil {
		return seckill.Reservation{}, err
	}
	switch r.code() {
	case "ok":
		return reservationOf(saleID, r), nil
	case "not_found":
		return seckill.Reservation{}, errNotFound(id)
	case "segments":
		return e.segs.segReservation(ctx, id, saleID, suffix, e.segs.learn(saleID, int(r.int(1))))
	}
	return seckill.Reservation{}, unexpected("reservation", r)
}

// Cancel cancels a held or queued reservation of userID.
//
// cancel.lua: KEYS the sale's seven keys; ARGV [1] clock, [2] reservation suffix, [3] user id,
// [4] segment flag (segmented sales only). Reply {'ok', 0, res_reply...} / {'not_found'} /
// {'conflict'} (paid) / {'not_loaded'} / {'loading'}, or {'segments', n}.
func (e *Engine) Cancel(ctx context.Context, id, userID string) (seckill.Reservation, error) {
	saleID, suffix, ok := splitID(id)
	if !ok || !seckill.ValidID(userID) {
		return seckill.Reservation{}, errNotFound(id)
	}
	if in := e.segs.of(saleID); in != nil {
		return e.segs.segCancel(ctx, id, userID, saleID, suffix, in)
	}
	r, err := e.exec(ctx, e.scripts.cancel, saleID, suffix, userID)
	if isCode(err, seckill.CodeNotFound) {
		return seckill.Reservation{}, errNotFound(id)
	}
	if err != nil {
		return seckill.Reservation{}, err
	}
	if r.code() == "segments" {
		return e.segs.segCancel(ctx, id, userID, saleID, suffix, e.segs.learn(saleID, int(r.int(1))))
	}
	return cancelResult(id, saleID, r)
}

// cancelResult decodes cancel.lua's reply.
func cancelResult(id, saleID string, r reply) (seckill.Reservation, error) {
	switch r.code() {
	case "ok":
		return reservationOf(saleID, r), nil
	case "not_found":
		return seckill.Reservation{}, errNotFound(id)
	case "conflict":
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeConflict, "reservation %q is already paid", id)
	}
	return seckill.Reservation{}, unexpected("cancel", r)
}

// noAmount is the amount pay.lua is given for a payment in another currency than its sale's:
// no reservation's amount is negative, so the script answers it as it answers a wrong amount
// (refund_required, the reservation unchanged, a duplicate still a duplicate), exactly as the
// memory engine does. The currency is compared here rather than in the script because the
// sale's definition is at hand (SaleWindow, usually the instance's copy) and it never changes.
const noAmount = -1

// ConfirmPayment applies a succeeded payment (docs/MODEL.md "ConfirmPayment"). A payment for
// a reservation no sale of this engine knows is refund_required; one for a sale that is being
// rebuilt is unavailable, so the gateway retries once the reservation may be back. A payment in
// another currency than the sale's is refund_required (seckill.PaymentConfirmation.InCurrency).
//
// pay.lua: KEYS the sale's seven keys; ARGV [1] clock, [2] reservation suffix, [3] payment id,
// [4] amount in cents (noAmount for another currency), [5] segment flag (segmented sales only).
// Reply {'ok', result, res_reply from its third element...} or {'ok', 'refund_required'} for an
// unknown reservation, {'not_loaded'} / {'loading'}, or a segment's {'segments', n} / {'empty',
// available, quantity} / {'adopt', stored reservation} (segPay).
func (e *Engine) ConfirmPayment(ctx context.Context, p seckill.PaymentConfirmation) (seckill.PaymentResult, seckill.Reservation, error) {
	if p.PaymentID == "" || len(p.PaymentID) > maxPaymentID {
		return "", seckill.Reservation{}, seckill.Errorf(seckill.CodeInvalidArgument, "payment id must be 1 to %d bytes", maxPaymentID)
	}
	saleID, suffix, ok := splitID(p.ReservationID)
	if !ok {
		return seckill.PaymentRefundRequired, seckill.Reservation{}, nil
	}
	amount := min(max(p.AmountCents, -maxExact), maxExact)
	if p.Currency != "" {
		sale, err := e.SaleWindow(ctx, saleID)
		if isCode(err, seckill.CodeNotFound) {
			return seckill.PaymentRefundRequired, seckill.Reservation{}, nil
		}
		if err != nil {
			return "", seckill.Reservation{}, err
		}
		if !p.InCurrency(sale.Currency) {
			amount = noAmount
		}
	}
	var r reply
	var err error
	if in := e.segs.of(saleID); in != nil {
		r, err = e.segs.segPay(ctx, p, saleID, suffix, amount, in)
	} else {
		r, err = e.exec(ctx, e.scripts.pay, saleID, suffix, p.PaymentID, i64toa(amount))
		if err == nil && r.code() == "segments" {
			r, err = e.segs.segPay(ctx, p, saleID, suffix, amount, e.segs.learn(saleID, int(r.int(1))))
		}
	}
	if isCode(err, seckill.CodeNotFound) {
		return seckill.PaymentRefundRequired, seckill.Reservation{}, nil
	}
	if err != nil {
		return "", seckill.Reservation{}, err
	}
	if r.code() != "ok" {
		return "", seckill.Reservation{}, unexpected("pay", r)
	}
	result := seckill.PaymentResult(r.str(1))
	if len(r) < 3 {
		return result, seckill.Reservation{}, nil
	}
	return result, reservationOf(saleID, r), nil
}

// AddStock adds units to a sale; queued buyers are served first.
//
// add_stock.lua: KEYS the sale's seven keys; ARGV [1] clock, [2] units to add ('0' for anything
// out of range). Reply a sale_reply, {'invalid_argument', largest stock}, {'not_loaded'} /
// {'loading'}, or {'moving'} while segment 0 of a segmented sale is collapsing.
func (e *Engine) AddStock(ctx context.Context, saleID string, add int) (seckill.Sale, seckill.StockState, error) {
	if !seckill.ValidID(saleID) {
		return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	arg := add
	if add < 1 || add > seckill.MaxQuantity {
		arg = 0 // the script answers invalid_argument, after telling an unknown sale
	}
	r, err := e.exec(ctx, e.scripts.addStock, saleID, itoa(arg))
	for try := 0; err == nil && r.code() == "moving" && try < 16; try++ {
		// Segment 0 of a segmented sale is collapsing: finish that, then add.
		var in *segInfo
		if in, err = e.segs.discoverSegments(ctx, saleID); err == nil {
			if err = e.segs.collapse(ctx, saleID, in); err == nil || movedOn(err) {
				r, err = e.exec(ctx, e.scripts.addStock, saleID, itoa(arg))
			}
		}
	}
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	switch r.code() {
	case "ok":
		if in := e.segs.in(saleID, r); in != nil && !in.collapsed.Load() {
			return e.segs.segSale(ctx, saleID, in) // added at segment 0, lent from there
		}
		s, st := saleOf(saleID, r)
		return s, st, nil
	case "invalid_argument":
		if add < 1 || add > seckill.MaxQuantity {
			return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeInvalidArgument, "add must be between 1 and %d", seckill.MaxQuantity)
		}
		return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeInvalidArgument, "stock would exceed %d", seckill.MaxQuantity)
	}
	return seckill.Sale{}, seckill.StockState{}, unexpected("add_stock", r)
}

// CloseSale ends a sale now.
//
// close.lua: KEYS the sale's seven keys; ARGV [1] clock. Reply a sale_reply, {'not_loaded'} /
// {'loading'}, or {'moving'} while a segmented sale is collapsing.
func (e *Engine) CloseSale(ctx context.Context, saleID string) (seckill.Sale, seckill.StockState, error) {
	if !seckill.ValidID(saleID) {
		return seckill.Sale{}, seckill.StockState{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	r, err := e.exec(ctx, e.scripts.close, saleID)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	if r.code() == "moving" || (r.code() == "ok" && r.int(17) > 1) {
		// A segmented sale: every segment is closed (a moved one too: a late payment there
		// must see the sale ended).
		in, err := e.segs.discoverSegments(ctx, saleID)
		if err == nil {
			err = e.segs.segClose(ctx, saleID, in)
		}
		if err != nil {
			return seckill.Sale{}, seckill.StockState{}, err
		}
		return e.Sale(ctx, saleID)
	}
	if r.code() != "ok" {
		return seckill.Sale{}, seckill.StockState{}, unexpected("close", r)
	}
	s, st := saleOf(saleID, r)
	return s, st, nil
}

// Reclaim expires every overdue hold of the sale, reclaimBatch per script call, so that a
// backlog never blocks Redis for long in one go.
func (e *Engine) Reclaim(ctx context.Context, saleID string) (int, error) {
	n, _, err := e.reclaimDue(ctx, saleID)
	return n, err
}

// sweepNext is what a reclaim tells the sweeper's due-time index (sweeper.go) about a sale:
// when it next needs a sweep, and for how long no new hold can be made in it.
type sweepNext struct {
	due   time.Duration // from the reclaim; < 0: nothing will come due by itself
	quiet time.Duration // 0: holds can be made now; > 0: not before the start; < 0: never again
}

// reclaimDue is Reclaim, and what the reclaim tells of the sale's next sweep: the earliest
// over its segments.
//
// reclaim.lua: KEYS the sale's seven keys; ARGV [1] clock, [2] the most holds to expire. Reply
// {'ok', expired, more (1/0), segments, outbox entries pending, mode, due ms, quiet ms},
// {'not_loaded'} / {'loading'}, or {'moving'} (a frozen segment).
func (e *Engine) reclaimDue(ctx context.Context, saleID string) (int, sweepNext, error) {
	if !seckill.ValidID(saleID) {
		return 0, sweepNext{}, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	total := 0
	for {
		r, err := e.exec(ctx, e.scripts.reclaim, saleID, itoa(reclaimBatch))
		if err != nil {
			return total, sweepNext{}, err
		}
		if r.code() != "ok" {
			return total, sweepNext{}, unexpected("reclaim", r)
		}
		total += int(r.int(1))
		if r.int(2) == 0 {
			next := sweepNext{due: msDuration(r.int(6)), quiet: msDuration(r.int(7))}
			if r.int(3) > 1 { // a segmented sale: the other segments too
				in := e.segs.learn(saleID, int(r.int(3)))
				if r.int(5) == modeSingle {
					in.collapsed.Store(true)
				}
				n, due, err := e.segs.segReclaim(ctx, saleID, in, r.int(4))
				next.due = earliestDue(next.due, due)
				return total + n, next, err
			}
			return total, next, nil
		}
	}
}

// msDuration is a due or quiet time of reclaim.lua: ms, or -1 for none (kept negative).
func msDuration(ms int64) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// earliestDue is the earlier of two due times, where a negative one is none.
func earliestDue(a, b time.Duration) time.Duration {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	return min(a, b)
}

// RestoreReservation puts back a reservation that the order store knew (docs/MODEL.md
// "Restore").
func (e *Engine) RestoreReservation(ctx context.Context, in seckill.Reservation) error {
	args, err := restoreArgs(in, "")
	if err != nil {
		return err
	}
	saleID, _, _ := splitID(in.ID)
	if _, err := e.segs.oneSegment(ctx, saleID); err != nil { // a restored sale has one segment
		return err
	}
	r, err := e.exec(ctx, e.scripts.restore, saleID, args...)
	if err != nil {
		return err
	}
	return restoreResult(in.ID, r)
}

// restoreArgs validates a reservation for restore.lua and returns its ARGV after the clock.
//
// restore.lua: KEYS the sale's seven keys; ARGV [1] clock, [2] rebuild token (empty outside a
// rebuild), [3] suffix, [4] user id, [5] quantity, [6] status, [7] expires_at ms (0: none), [8]
// amount, [9] created_at ms, [10] seq, [11] payment id, [12] idempotency key. Reply {'ok'} /
// {'conflict'} (known id) / {'fenced'} (a newer rebuild) / {'not_loaded'} / {'loading'}
// (restoreResult).
func restoreArgs(in seckill.Reservation, token string) ([]string, error) {
	saleID, suffix, ok := splitID(in.ID)
	switch {
	case !ok || saleID != in.SaleID || in.Seq == 0 || in.Seq > maxExact:
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q: id must be of sale %q and seq at least 1", in.ID, in.SaleID)
	case in.Quantity < 1 || in.Quantity > seckill.MaxQuantity || !in.Status.Valid():
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q: bad quantity or status", in.ID)
	case !seckill.ValidID(in.UserID):
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q: bad user id", in.ID)
	case in.AmountCents < 0 || in.AmountCents > maxExact:
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q: amount out of range", in.ID)
	case len(in.PaymentID) > maxPaymentID || len(in.IdempotencyKey) > maxIdempotencyKey:
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "reservation %q: payment id or idempotency key too long", in.ID)
	}
	var exp int64
	if in.ExpiresAt != nil {
		exp = max(in.ExpiresAt.UnixMilli(), 1)
	}
	created := max(in.CreatedAt.UnixMilli(), 0)
	return []string{
		token, suffix, in.UserID, itoa(in.Quantity), string(in.Status), i64toa(exp), i64toa(in.AmountCents),
		i64toa(created), fmt.Sprint(in.Seq), in.PaymentID, in.IdempotencyKey,
	}, nil
}

func restoreResult(id string, r reply) error {
	switch r.code() {
	case "ok":
		return nil
	case "conflict":
		return seckill.Errorf(seckill.CodeConflict, "reservation %q already restored", id)
	case "fenced":
		return errFenced
	}
	return unexpected("restore", r)
}

// Now is the Redis clock (or the test clock), for callers that must agree with the scripts.
func (e *Engine) Now(ctx context.Context) (time.Time, error) {
	if e.clock != nil {
		return e.clock.Now(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	v, err := e.rdb.Do(ctx, e.rdb.B().Time().Build()).AsStrSlice()
	if err != nil || len(v) != 2 {
		return time.Time{}, errUnavailable(fmt.Errorf("redisinv: TIME: %w", err))
	}
	var sec, usec int64
	_, _ = fmt.Sscan(v[0], &sec)
	_, _ = fmt.Sscan(v[1], &usec)
	return time.Unix(sec, usec*1000).UTC(), nil
}
