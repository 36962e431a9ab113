// This file is the outbox half of package seckilltest: the contract of events.Outbox, the
// order store's side of the event export (docs/EVENTS.md, "The order store's outbox"), as
// stories that every SQL dialect passes.

package seckilltest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
)

// OutboxUnderTest is a fresh, empty store with its outbox.
type OutboxUnderTest struct {
	// Store writes the outbox: ApplyEvents (its outbox enabled), RecordPayment and, as a
	// seckill.RefundStore, RecordRefund.
	Store seckill.OrderStore
	// Outbox reads it (usually the same value as Store).
	Outbox events.Outbox
}

// TestOutbox runs the events.Outbox conformance suite. open must return a fresh, empty,
// migrated store whose ApplyEvents write the outbox, closed when the test ends (t.Cleanup).
func TestOutbox(t *testing.T, open func(t *testing.T) OutboxUnderTest) {
	t.Helper()
	tests := []story[OutboxUnderTest]{
		{"Events/OnceEachInOrder", obEventsInOrder},
		{"Events/RedeliveredBatchAddsNothing", obRedelivered},
		{"Refunds/RequiredRefundedFailed", obRefundEvents},
		{"Visibility/ReaderNeverSkipsUnderConcurrency", obVisibility},
		{"Visibility/DetectorCatchesOutOfOrderCommits", func(t *testing.T, _ OutboxUnderTest) { obDetectorNegative(t) }},
		{"Cursors/LeaseExclusive", obCursorLease},
		{"Cursors/Invalid", obCursorInvalid},
		{"DeadLetters/RoundTripAndReplay", obDeadLetters},
		{"Since/Range", obSince},
		{"Trim/AndLag", obTrimAndLag},
	}
	runStories(t, tests, nil, open)
}

// obReadAll reads the whole outbox, a page at a time, checking that seqs only grow.
func obReadAll(t *testing.T, ob events.Outbox) []events.OutboxEntry {
	t.Helper()
	var all []events.OutboxEntry
	var after int64
	for {
		page, err := ob.ReadOutbox(t.Context(), after, 7)
		if err != nil {
			t.Fatalf("ReadOutbox(%d): %v", after, err)
		}
		if len(page) == 0 {
			return all
		}
		for _, e := range page {
			if e.Seq <= after {
				t.Fatalf("ReadOutbox(%d) returned seq %d: not after the cursor, or out of order", after, e.Seq)
			}
			after = e.Seq
		}
		all = append(all, page...)
	}
}

func obIDs(entries []events.OutboxEntry) []string {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.Event.ID
	}
	return ids
}

// obTyped is an event with an explicit Type (granted, late_paid).
func obTyped(r seckill.Reservation, typ string, at time.Time) seckill.Event {
	return seckill.Event{Reservation: r, At: at, Type: typ}
}

// obBatch is one batch of every event type an engine reports, for sale "s", starting at at.
func obBatch(at time.Time) []seckill.Event {
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	r1 := osRes("s", "r1", "alice", 1, seckill.StatusHeld, 1)
	r2 := osRes("s", "r2", "bob", 2, seckill.StatusQueued, 2)
	r3 := osRes("s", "r3", "carol", 1, seckill.StatusHeld, 3)
	r4 := osRes("s", "r4", "dave", 1, seckill.StatusHeld, 4)
	r5 := osRes("s", "r5", "erin", 1, seckill.StatusQueued, 5)
	paid := osWith(r1, seckill.StatusPaid)
	paid.PaymentID = "pay-1"
	late := osWith(r4, seckill.StatusPaid)
	late.PaymentID = "pay-4"
	return []seckill.Event{
		osEv(r1, ms(0)), osEv(r2, ms(1)), obTyped(osWith(r2, seckill.StatusHeld), seckill.EventGranted, ms(2)),
		osEv(paid, ms(3)), osEv(r3, ms(4)), osEv(osWith(r3, seckill.StatusCancelled), ms(5)),
		osEv(r4, ms(6)), osEv(osWith(r4, seckill.StatusExpired), ms(7)), obTyped(late, seckill.EventLatePaid, ms(8)),
		osEv(r5, ms(9)), osEv(osWith(r5, seckill.StatusRejected), ms(10)),
		// The order store exports refund_required per payment, never from an event.
		osEv(osWith(osRes("s", "r6", "frank", 1, seckill.StatusHeld, 6), seckill.StatusRefundRequired), ms(11)),
	}
}

// Every event of a batch appears once, in the batch's order, with its stable id and type:
// granted and late_paid from Event.Type, paid although the store writes no paid row for it.
func obEventsInOrder(t *testing.T, o OutboxUnderTest) {
	osCreate(t, o.Store, osSale("s", 10, 0))
	batch := obBatch(osT0)
	osApply(t, o.Store, batch...)
	got := obReadAll(t, o.Outbox)
	want := []string{"r1:held", "r2:queued", "r2:granted", "r1:paid", "r3:held", "r3:cancelled", "r4:held",
		"r4:expired", "r4:late_paid", "r5:queued", "r5:rejected"}
	if ids := obIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("outbox ids = %v\nwant %v", ids, want)
	}
	for i, e := range got { // in batch order; the refund_required event, last, left out
		want, ok := events.FromEngine(batch[i])
		if !ok {
			t.Fatalf("event %d is not exported", i)
		}
		obSameEvent(t, e.Event, want)
	}
	if e := got[0].Event; e.ExpiresAt == nil || !e.ExpiresAt.Equal(osT0.Add(time.Minute)) || e.SchemaVersion != events.SchemaVersion ||
		e.Status != "held" || e.UserID != "alice" || e.AmountCents != osPrice || !e.At.Equal(osT0) {
		t.Fatalf("r1:held = %+v; want held, alice, expiring at osT0+1m, at osT0", e)
	}
	if e := got[3].Event; e.Type != "paid" || e.Status != "paid" || e.PaymentID != "pay-1" || e.ExpiresAt != nil {
		t.Fatalf("r1:paid = %+v; want type and status paid, payment pay-1, no expiry", e)
	}
	if e := got[8].Event; e.Type != "late_paid" || e.Status != "paid" || e.PaymentID != "pay-4" {
		t.Fatalf("r4:late_paid = %+v; want type late_paid, status paid, payment pay-4", e)
	}
}

// obSameEvent compares every field of an exported event.
func obSameEvent(t *testing.T, got, want events.Event) {
	t.Helper()
	sameExp := (got.ExpiresAt == nil) == (want.ExpiresAt == nil) &&
		(got.ExpiresAt == nil || got.ExpiresAt.Equal(*want.ExpiresAt))
	g, w := got, want
	g.ExpiresAt, w.ExpiresAt, g.At, w.At = nil, nil, time.Time{}, time.Time{}
	if g != w || !sameExp || !got.At.Equal(want.At) {
		t.Fatalf("outbox event = %+v\nwant %+v", got, want)
	}
}

// A batch delivered again, whole or in part, adds nothing; a new event after it is added.
func obRedelivered(t *testing.T, o OutboxUnderTest) {
	osCreate(t, o.Store, osSale("s", 10, 0))
	batch := obBatch(osT0)
	osApply(t, o.Store, batch...)
	first := obReadAll(t, o.Outbox)
	osApply(t, o.Store, batch...)
	osApply(t, o.Store, batch[3], batch[0]) // a part, out of order
	if again := obReadAll(t, o.Outbox); !slices.Equal(obIDs(again), obIDs(first)) {
		t.Fatalf("after redelivery the outbox holds %v; want %v", obIDs(again), obIDs(first))
	}
	r7 := osRes("s", "r7", "gina", 1, seckill.StatusHeld, 7)
	osApply(t, o.Store, batch[0], osEv(r7, osT0.Add(time.Second)))
	all := obReadAll(t, o.Outbox)
	if len(all) != len(first)+1 || all[len(all)-1].Event.ID != "r7:held" || all[len(all)-1].Seq <= first[len(first)-1].Seq {
		t.Fatalf("after a batch with one new event the outbox holds %v; want %v then r7:held", obIDs(all), obIDs(first))
	}
}

// The payment transaction writes refund_required (once per payment, naming the reservation as
// stored, or as the payment named it when nobody knows it); the refund transaction writes
// refunded or refund_failed when the refund ends, nothing for a retry.
func obRefundEvents(t *testing.T, o OutboxUnderTest) {
	rs := osOwe(t, o.Store, 2) // p0, p1: refund_required (sale "s" has no stock)
	osCreate(t, o.Store, osSale("ok", 5, 0))
	rok := osRes("ok", "rok", "alice", 1, seckill.StatusHeld, 1)
	osWantPay(t, o.Store, "pok", rok, seckill.PaymentApplied, seckill.PaymentApplied, osT0) // paid: no refund event
	osWantPay(t, o.Store, "p0", osRes("s", "r0", "alice", 1, seckill.StatusExpired, 1), seckill.PaymentLateApplied,
		seckill.PaymentDuplicate, osT0) // a duplicate: nothing
	ghost := seckill.Reservation{ID: "gone-" + strings.Repeat("0", 32), UserID: "zed", Quantity: 2}
	if got, err := o.Store.RecordPayment(t.Context(), seckill.PaymentRecord{PaymentID: "pg", Reservation: ghost,
		AmountCents: 500, Result: seckill.PaymentApplied, At: osT0.Add(time.Minute)}); err != nil || got != seckill.PaymentRefundRequired {
		t.Fatalf("payment for an unknown reservation = %s, %v; want refund_required", got, err)
	}
	all := obReadAll(t, o.Outbox)
	// Events of ApplyEvents are not part of this story, so only the refund ones are there.
	if ids := obIDs(all); !slices.Equal(ids, []string{"p0:refund_required", "p1:refund_required", "pg:refund_required"}) {
		t.Fatalf("outbox = %v; want the refund_required of p0, p1 and pg", ids)
	}
	want0 := events.Event{ID: "p0:refund_required", Type: "refund_required", SchemaVersion: events.SchemaVersion, SaleID: "s",
		ReservationID: "r0", UserID: "alice", Quantity: 1, AmountCents: osPrice, Status: "refund_required", PaymentID: "p0", At: osT0}
	obSameEvent(t, all[0].Event, want0)
	wantG := events.Event{ID: "pg:refund_required", Type: "refund_required", SchemaVersion: events.SchemaVersion, SaleID: "gone",
		ReservationID: "gone-" + strings.Repeat("0", 32), UserID: "zed", Quantity: 2, AmountCents: 500, Status: "refund_required", PaymentID: "pg",
		At: osT0.Add(time.Minute)}
	obSameEvent(t, all[2].Event, wantG)

	now := osT0.Add(time.Hour)
	claimed := osClaim(t, rs, "a", now, 10)
	if len(claimed) != 3 { // none names a gateway, so any refunder claims them
		t.Fatalf("claimed %d refunds; want p0, p1 and pg", len(claimed))
	}
	osRecord(t, rs, seckill.RefundOutcome{PaymentID: "p0", Owner: "a", Status: seckill.RefundPending, Error: "timeout",
		NextAttemptAt: now.Add(time.Second), At: now})
	if n := len(obReadAll(t, o.Outbox)); n != 3 {
		t.Fatalf("a pending retry wrote to the outbox: %d entries, want 3", n)
	}
	osRecord(t, rs, seckill.RefundOutcome{PaymentID: "p1", Owner: "a", Status: seckill.Refunded, RefundID: "re_1", At: now})
	again := osClaim(t, rs, "b", now.Add(time.Minute), 10)
	var p0 bool
	for _, r := range again {
		p0 = p0 || r.PaymentID == "p0"
	}
	if !p0 {
		t.Fatalf("claim after p0's retry time = %+v; want p0", again)
	}
	osRecord(t, rs, seckill.RefundOutcome{PaymentID: "p0", Owner: "b", Status: seckill.RefundFailed, Error: "card closed",
		At: now.Add(time.Minute)})
	err := rs.RecordRefund(t.Context(), seckill.RefundOutcome{PaymentID: "p0", Owner: "b", Status: seckill.Refunded, At: now.Add(2 * time.Minute)})
	osWantCode(t, "record on a failed refund", err, seckill.CodeConflict)
	all = obReadAll(t, o.Outbox)
	if ids := obIDs(all); !slices.Equal(ids[3:], []string{"p1:refunded", "p0:refund_failed"}) {
		t.Fatalf("outbox = %v; want the three refund_required, then p1:refunded, p0:refund_failed", ids)
	}
	want1 := events.Event{ID: "p1:refunded", Type: "refunded", SchemaVersion: events.SchemaVersion, SaleID: "s",
		ReservationID: "r1", UserID: "alice", Quantity: 1, AmountCents: osPrice, Status: "refund_required", PaymentID: "p1", At: now}
	obSameEvent(t, all[3].Event, want1)
	if e := all[4].Event; e.Type != "refund_failed" || e.PaymentID != "p0" || !e.At.Equal(now.Add(time.Minute)) {
		t.Fatalf("p0:refund_failed = %+v", e)
	}
}

// OutboxFollower reads an outbox as an exporter does: from a cursor, which moves to the last
// seq read. Missed is the detector of the visibility contract: an entry a follower never saw
// although its polls went past it became visible after an entry with a larger seq.
type OutboxFollower struct {
	Cursor int64
	seen   map[int64]bool
	order  []string // problems: seqs out of order or repeated
}

// Poll reads once, up to limit entries after the cursor, and returns how many it read.
func (f *OutboxFollower) Poll(ctx context.Context, read func(ctx context.Context, after int64, limit int) ([]events.OutboxEntry, error), limit int) (int, error) {
	if f.seen == nil {
		f.seen = map[int64]bool{}
	}
	page, err := read(ctx, f.Cursor, limit)
	if err != nil {
		return 0, err
	}
	for _, e := range page {
		if e.Seq <= f.Cursor || f.seen[e.Seq] {
			f.order = append(f.order, fmt.Sprintf("seq %d after cursor %d", e.Seq, f.Cursor))
		}
		f.seen[e.Seq] = true
		f.Cursor = e.Seq
	}
	return len(page), nil
}

// Missed returns the entries of all (a full read once the writers are done) that the
// follower never read, and any seq it read out of order.
func (f *OutboxFollower) Missed(all []events.OutboxEntry) []string {
	problems := slices.Clone(f.order)
	for _, e := range all {
		if !f.seen[e.Seq] {
			problems = append(problems, fmt.Sprintf("seq %d (%s) never read", e.Seq, e.Event.ID))
		}
	}
	return problems
}

// Writers commit ApplyEvents batches and refund_required payments at once while a follower
// polls: at the end the follower has read every committed entry (none became visible behind
// its cursor), each event is in the outbox exactly once, and the seqs only grow.
func obVisibility(t *testing.T, o OutboxUnderTest) {
	const writers, rounds, perBatch = 6, 12, 4
	osCreate(t, o.Store, osSale("c", writers*rounds*perBatch, 0))
	osCreate(t, o.Store, osSale("z", 0, 0)) // every payment for it is refund_required
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		done     = make(chan struct{})
		mu       sync.Mutex
		expected []string
		errs     []error
	)
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range rounds {
				var batch []seckill.Event
				var ids []string
				for j := range perBatch {
					id := fmt.Sprintf("c-w%d-%d-%d", w, i, j)
					r := osRes("c", id, fmt.Sprintf("u%d", w), 1, seckill.StatusHeld, uint64(1+(w*rounds+i)*perBatch+j))
					batch = append(batch, osEv(r, osT0.Add(time.Duration(i)*time.Millisecond)))
					ids = append(ids, id+":held")
				}
				err := o.Store.ApplyEvents(t.Context(), batch)
				pid := fmt.Sprintf("pz-w%d-%d", w, i)
				if err == nil {
					var got seckill.PaymentResult
					got, err = o.Store.RecordPayment(t.Context(), seckill.PaymentRecord{PaymentID: pid,
						Reservation: osRes("z", fmt.Sprintf("z-w%d-%d", w, i), "zz", 1, seckill.StatusExpired, uint64(i+1)),
						AmountCents: osPrice, Result: seckill.PaymentLateApplied, At: osT0.Add(time.Second)})
					if err == nil && got != seckill.PaymentRefundRequired {
						err = fmt.Errorf("payment %s = %s, want refund_required", pid, got)
					}
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					expected = append(expected, ids...)
					expected = append(expected, pid+":refund_required")
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	var f OutboxFollower
	var readErr error
	reader := make(chan struct{})
	go func() {
		defer close(reader)
		for {
			writing := true
			select {
			case <-done:
				writing = false
			default:
			}
			n, err := f.Poll(t.Context(), o.Outbox.ReadOutbox, 5)
			if err != nil {
				readErr = err
				return
			}
			if n == 0 && !writing {
				return // the writers were done before this read, which found nothing more
			}
			if n == 0 {
				time.Sleep(100 * time.Microsecond) // let the writers have the database
			}
		}
	}()
	close(start)
	wg.Wait()
	close(done)
	<-reader
	if err := errors.Join(append(errs, readErr)...); err != nil {
		t.Fatal(err)
	}
	all := obReadAll(t, o.Outbox)
	if problems := f.Missed(all); len(problems) > 0 {
		t.Fatalf("the follower skipped entries that became visible behind its cursor (%d):\n%s",
			len(problems), strings.Join(problems[:min(len(problems), 20)], "\n"))
	}
	got := obIDs(all)
	sort.Strings(got)
	sort.Strings(expected)
	if !slices.Equal(got, expected) {
		t.Fatalf("the outbox holds %d events, want %d, each once", len(got), len(expected))
	}
}

// fakeAutoIncrementOutbox takes seqs when a write begins, as an auto-increment key would, and
// makes entries visible when they commit, in any order: what the store must never do.
type fakeAutoIncrementOutbox struct {
	next      int64
	committed []events.OutboxEntry
}

func (f *fakeAutoIncrementOutbox) begin() int64 { f.next++; return f.next }

func (f *fakeAutoIncrementOutbox) commit(seq int64) {
	f.committed = append(f.committed, events.OutboxEntry{Seq: seq, Event: events.Event{ID: fmt.Sprint("e", seq)}})
	slices.SortFunc(f.committed, func(a, b events.OutboxEntry) int { return int(a.Seq - b.Seq) })
}

func (f *fakeAutoIncrementOutbox) read(_ context.Context, after int64, limit int) ([]events.OutboxEntry, error) {
	var out []events.OutboxEntry
	for _, e := range f.committed {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// The negative control of obVisibility's detector: seqs taken in one order and committed in
// another (two transactions take 1 and 2, 2 commits, a follower reads it, then 1 commits) make
// the follower skip seq 1, and the detector says so; committed in seq order, it does not.
func obDetectorNegative(t *testing.T) {
	ctx := t.Context()
	var bad fakeAutoIncrementOutbox
	var f OutboxFollower
	s1, s2 := bad.begin(), bad.begin()
	bad.commit(s2)
	if _, err := f.Poll(ctx, bad.read, 10); err != nil {
		t.Fatal(err)
	}
	bad.commit(s1)
	if _, err := f.Poll(ctx, bad.read, 10); err != nil {
		t.Fatal(err)
	}
	all, _ := bad.read(ctx, 0, 10)
	if problems := f.Missed(all); len(problems) != 1 || !strings.Contains(problems[0], "seq 1 ") {
		t.Fatalf("detector on out-of-order commits found %v; want seq 1 never read", problems)
	}

	var good fakeAutoIncrementOutbox
	var g OutboxFollower
	s1, s2 = good.begin(), good.begin()
	good.commit(s1)
	if _, err := g.Poll(ctx, good.read, 10); err != nil {
		t.Fatal(err)
	}
	good.commit(s2)
	if _, err := g.Poll(ctx, good.read, 10); err != nil {
		t.Fatal(err)
	}
	all, _ = good.read(ctx, 0, 10)
	if problems := g.Missed(all); len(problems) != 0 {
		t.Fatalf("detector on in-order commits found %v; want nothing", problems)
	}
}

// A cursor is leased to one owner at a time: another owner's claim fails while the lease
// lives and succeeds after it ends, after which the first owner's save is ErrLeaseLost. A
// cursor never moves backwards, and a release lets another owner in at once.
func obCursorLease(t *testing.T, o OutboxUnderTest) {
	ctx, ob := t.Context(), o.Outbox
	now := osT0
	claim := func(sink, owner string, at time.Time) (int64, bool) {
		t.Helper()
		pos, ok, err := ob.ClaimExportCursor(ctx, sink, owner, at, time.Minute)
		if err != nil {
			t.Fatalf("ClaimExportCursor(%s, %s): %v", sink, owner, err)
		}
		return pos, ok
	}
	save := func(sink, owner string, pos int64, at time.Time) error {
		return ob.SaveExportCursor(ctx, sink, owner, pos, at, time.Minute)
	}
	if pos, ok := claim("hooks", "a", now); !ok || pos != 0 {
		t.Fatalf("first claim = %d, %v; want 0, true", pos, ok)
	}
	if _, ok := claim("hooks", "b", now.Add(59*time.Second)); ok {
		t.Fatal("b claimed a cursor a holds")
	}
	if pos, ok := claim("kafka", "b", now); !ok || pos != 0 {
		t.Fatalf("b's claim of another sink = %d, %v; want 0, true", pos, ok)
	}
	if err := save("hooks", "a", 5, now.Add(30*time.Second)); err != nil {
		t.Fatalf("save by the owner: %v", err)
	}
	if err := save("hooks", "a", 3, now.Add(40*time.Second)); err != nil { // backwards: kept at 5
		t.Fatalf("save backwards: %v", err)
	}
	if pos, ok := claim("hooks", "a", now.Add(50*time.Second)); !ok || pos != 5 {
		t.Fatalf("renewal by a = %d, %v; want 5, true (never backwards)", pos, ok)
	}
	// a's lease was renewed to now+50s+1m: b cannot take it at now+1m30s, can at now+1m50s.
	if _, ok := claim("hooks", "b", now.Add(90*time.Second)); ok {
		t.Fatal("b took over a renewed lease")
	}
	if pos, ok := claim("hooks", "b", now.Add(110*time.Second)); !ok || pos != 5 {
		t.Fatalf("takeover after expiry = %d, %v; want 5, true", pos, ok)
	}
	if err := save("hooks", "a", 9, now.Add(111*time.Second)); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("save by the old owner = %v; want ErrLeaseLost", err)
	}
	if err := save("nosuch", "a", 1, now); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("save of a cursor never claimed = %v; want ErrLeaseLost", err)
	}
	if _, ok := claim("hooks", "a", now.Add(112*time.Second)); ok {
		t.Fatal("the old owner claimed back a live lease")
	}
	// A lease that expired with nobody taking it is still its owner's to save.
	if err := save("hooks", "b", 7, now.Add(10*time.Minute)); err != nil {
		t.Fatalf("save by the owner after its lease expired untaken: %v", err)
	}
	if err := ob.ReleaseExportCursor(ctx, "hooks", "a"); err != nil { // not a's: changes nothing
		t.Fatalf("release by a non-owner: %v", err)
	}
	if _, ok := claim("hooks", "a", now.Add(10*time.Minute+time.Second)); ok {
		t.Fatal("a release by a non-owner freed the lease")
	}
	if err := ob.ReleaseExportCursor(ctx, "hooks", "b"); err != nil {
		t.Fatalf("release: %v", err)
	}
	if pos, ok := claim("hooks", "a", now.Add(10*time.Minute+2*time.Second)); !ok || pos != 7 {
		t.Fatalf("claim after a release = %d, %v; want 7, true", pos, ok)
	}
}

// Bad arguments are invalid_argument; claims racing for one new cursor: exactly one wins.
func obCursorInvalid(t *testing.T, o OutboxUnderTest) {
	ctx, ob := t.Context(), o.Outbox
	_, _, err := ob.ClaimExportCursor(ctx, "", "a", osT0, time.Minute)
	osWantCode(t, "claim without a sink", err, seckill.CodeInvalidArgument)
	_, _, err = ob.ClaimExportCursor(ctx, "s", "", osT0, time.Minute)
	osWantCode(t, "claim without an owner", err, seckill.CodeInvalidArgument)
	_, _, err = ob.ClaimExportCursor(ctx, strings.Repeat("s", 4096), "a", osT0, time.Minute)
	osWantCode(t, "claim of an over-long sink", err, seckill.CodeInvalidArgument)
	_, err = ob.ReadOutbox(ctx, 0, 0)
	osWantCode(t, "read with limit 0", err, seckill.CodeInvalidArgument)

	const claimers = 6
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []string
		errs []error
	)
	start := make(chan struct{})
	for c := range claimers {
		wg.Go(func() {
			<-start
			me := fmt.Sprintf("owner-%d", c)
			_, ok, err := ob.ClaimExportCursor(ctx, "race", me, osT0, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				won = append(won, me)
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(won) != 1 {
		t.Fatalf("concurrent claims won by %v; want exactly one", won)
	}
}

// Dead letters keep the event, sink and reason (truncated on a character boundary), are
// listed per sink or all, page by id, and once marked replayed are hidden unless asked for.
func obDeadLetters(t *testing.T, o OutboxUnderTest) {
	ctx, ob := t.Context(), o.Outbox
	exp := osT0.Add(time.Minute)
	e1 := events.Event{ID: "r1:held", Type: "held", SchemaVersion: 1, SaleID: "s", ReservationID: "r1", UserID: "alice",
		Quantity: 1, AmountCents: osPrice, Status: "held", ExpiresAt: &exp, At: osT0}
	e2 := events.Event{ID: "r1:expired", Type: "expired", SchemaVersion: 1, SaleID: "s", ReservationID: "r1", UserID: "alice",
		Quantity: 1, AmountCents: osPrice, Status: "expired", At: osT0.Add(time.Minute)}
	long := strings.Repeat("é", 1000)
	if err := ob.AddDeadLetters(ctx, "https://shop/hook", []events.Event{e1, e2}, long, osT0.Add(time.Hour)); err != nil {
		t.Fatalf("AddDeadLetters: %v", err)
	}
	if err := ob.AddDeadLetters(ctx, "kafka://k:9092", []events.Event{e2}, "topic missing", osT0.Add(2*time.Hour)); err != nil {
		t.Fatalf("AddDeadLetters: %v", err)
	}
	if err := ob.AddDeadLetters(ctx, "kafka://k:9092", nil, "nothing", osT0); err != nil {
		t.Fatalf("AddDeadLetters of no events: %v", err)
	}
	list := func(sink string, after int64, limit int, replayed bool) []events.DeadLetter {
		t.Helper()
		got, err := ob.DeadLetters(ctx, sink, after, limit, replayed)
		if err != nil {
			t.Fatalf("DeadLetters(%q): %v", sink, err)
		}
		return got
	}
	hook := list("https://shop/hook", 0, 10, false)
	if len(hook) != 2 || hook[0].ID >= hook[1].ID || hook[0].Sink != "https://shop/hook" || !hook[0].FailedAt.Equal(osT0.Add(time.Hour)) ||
		hook[0].ReplayedAt != nil || hook[0].Reason == "" || !strings.HasPrefix(long, hook[0].Reason) || len(hook[0].Reason) >= len(long) ||
		!utf8.ValidString(hook[0].Reason) {
		t.Fatalf("dead letters of the hook = %+v; want two, in id order, reason a truncated prefix", hook)
	}
	obSameEvent(t, hook[0].Event, e1)
	obSameEvent(t, hook[1].Event, e2)
	all := list("", 0, 10, false)
	if len(all) != 3 || all[2].Sink != "kafka://k:9092" || all[2].Reason != "topic missing" {
		t.Fatalf("all dead letters = %+v; want three, the kafka one last", all)
	}
	if page := list("", all[0].ID, 1, false); len(page) != 1 || page[0].ID != all[1].ID {
		t.Fatalf("page after the first, limit 1 = %+v; want the second", page)
	}
	at := osT0.Add(3 * time.Hour)
	if err := ob.MarkDeadLettersReplayed(ctx, []int64{all[0].ID, all[2].ID, 1 << 40}, at); err != nil {
		t.Fatalf("MarkDeadLettersReplayed: %v", err)
	}
	if left := list("", 0, 10, false); len(left) != 1 || left[0].ID != all[1].ID {
		t.Fatalf("unreplayed dead letters = %+v; want only the second", left)
	}
	with := list("", 0, 10, true)
	if len(with) != 3 || with[0].ReplayedAt == nil || !with[0].ReplayedAt.Equal(at) || with[1].ReplayedAt != nil {
		t.Fatalf("dead letters with replayed = %+v; want three, the first and last replayed at %v", with, at)
	}
	_, err := ob.DeadLetters(ctx, "", 0, 0, true)
	osWantCode(t, "dead letters with limit 0", err, seckill.CodeInvalidArgument)
}

// obTimeline applies held events of sale "s" at osT0 + 0s, 1s, 2s, 3s and returns their entries.
func obTimeline(t *testing.T, o OutboxUnderTest) []events.OutboxEntry {
	t.Helper()
	osCreate(t, o.Store, osSale("s", 10, 0))
	for i := range 4 {
		r := osRes("s", fmt.Sprintf("t%d", i), "alice", 1, seckill.StatusHeld, uint64(i+1))
		osApply(t, o.Store, osEv(r, osT0.Add(time.Duration(i)*time.Second)))
	}
	all := obReadAll(t, o.Outbox)
	if len(all) != 4 {
		t.Fatalf("outbox = %v; want t0..t3 held", obIDs(all))
	}
	return all
}

// OutboxSince returns the entries of a time range, after a seq, at most limit, in seq order.
func obSince(t *testing.T, o OutboxUnderTest) {
	all := obTimeline(t, o)
	since := func(from, until time.Duration, after int64, limit int) []string {
		t.Helper()
		got, err := o.Outbox.OutboxSince(t.Context(), osT0.Add(from), osT0.Add(until), after, limit)
		if err != nil {
			t.Fatalf("OutboxSince: %v", err)
		}
		return obIDs(got)
	}
	if got := since(time.Second, 3*time.Second, 0, 10); !slices.Equal(got, []string{"t1:held", "t2:held"}) {
		t.Fatalf("OutboxSince([1s, 3s)) = %v; want t1, t2", got)
	}
	if got := since(0, time.Hour, all[1].Seq, 10); !slices.Equal(got, []string{"t2:held", "t3:held"}) {
		t.Fatalf("OutboxSince after t1's seq = %v; want t2, t3", got)
	}
	if got := since(0, time.Hour, 0, 1); !slices.Equal(got, []string{"t0:held"}) {
		t.Fatalf("OutboxSince limit 1 = %v; want t0", got)
	}
	if got := since(time.Hour, 2*time.Hour, 0, 10); len(got) != 0 {
		t.Fatalf("OutboxSince of an empty range = %v", got)
	}
}

// TrimOutbox deletes what is older than its bound and nothing else; OutboxLag counts what is
// after a seq and dates the oldest of it.
func obTrimAndLag(t *testing.T, o OutboxUnderTest) {
	ctx, ob := t.Context(), o.Outbox
	all := obTimeline(t, o)
	lag := func(after int64) (int64, time.Time) {
		t.Helper()
		n, oldest, err := ob.OutboxLag(ctx, after)
		if err != nil {
			t.Fatalf("OutboxLag: %v", err)
		}
		return n, oldest
	}
	if n, oldest := lag(0); n != 4 || !oldest.Equal(osT0) {
		t.Fatalf("lag from 0 = %d, %v; want 4, osT0", n, oldest)
	}
	if n, oldest := lag(all[1].Seq); n != 2 || !oldest.Equal(osT0.Add(2*time.Second)) {
		t.Fatalf("lag after t1 = %d, %v; want 2, osT0+2s", n, oldest)
	}
	if n, oldest := lag(all[3].Seq); n != 0 || !oldest.IsZero() {
		t.Fatalf("lag at the end = %d, %v; want 0, zero time", n, oldest)
	}
	n, err := ob.TrimOutbox(ctx, osT0.Add(2*time.Second))
	if err != nil || n != 2 {
		t.Fatalf("TrimOutbox(osT0+2s) = %d, %v; want 2", n, err)
	}
	if got := obIDs(obReadAll(t, ob)); !slices.Equal(got, []string{"t2:held", "t3:held"}) {
		t.Fatalf("after trimming the outbox holds %v; want t2, t3", got)
	}
	if n, err := ob.TrimOutbox(ctx, osT0.Add(2*time.Second)); err != nil || n != 0 {
		t.Fatalf("TrimOutbox again = %d, %v; want 0", n, err)
	}
	// Seqs go on after a trim: a new entry comes after the kept ones.
	osApply(t, o.Store, osEv(osRes("s", "t9", "bob", 1, seckill.StatusHeld, 9), osT0.Add(time.Hour)))
	if got := obReadAll(t, ob); len(got) != 3 || got[2].Event.ID != "t9:held" || got[2].Seq <= all[3].Seq {
		t.Fatalf("after a trim and a new event the outbox holds %v", obIDs(got))
	}
}
