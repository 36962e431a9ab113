package memory

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/pipeline"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// TestFootprintFollowsUse: a sale of a million units with a long queue allowed, that five
// buyers use, allocates what five buyers cost, not what the stock or the queue limit could
// have cost. The engine preallocated by stock and queue limit (up to 2^20 entries of its
// reservation index, user map and hold heap): tens of MB for this sale.
func TestFootprintFollowsUse(t *testing.T) {
	ctx := context.Background()
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	sale := benchSale("big", 1_000_000, clock.Now())
	sale.QueueLimit = 10_000_000
	us := users(5)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e := New(clock)
	if err := e.LoadSale(ctx, sale, 0); err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "big", UserID: u, Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(e)
	// TotalAlloc counts every byte allocated, whatever the collector does meanwhile.
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
		t.Fatalf("a sale of 10^6 units with 5 holds allocated %d bytes; want under 256 KiB", got)
	}
}

// TestHoldSetShrinks: the hold set gives back what a rush grew once its holds are gone, both
// the run (holds in expiry order) and the heap (holds out of order).
func TestHoldSetShrinks(t *testing.T) {
	var h holdSet
	rs := make([]reservation, 10_000)
	for i := range rs { // descending expiries: the first starts the run, the others go to the heap
		rs[i] = reservation{seq: uint64(i + 1), expiresAt: int64(len(rs) - i), status: stHeld}
		h.push(&rs[i])
	}
	grown := cap(h.heap)
	for h.len() > 10 {
		h.pop()
	}
	if cap(h.heap) > 256 || cap(h.heap) >= grown {
		t.Fatalf("heap of %d entries keeps capacity %d (was %d)", len(h.heap), cap(h.heap), grown)
	}
	for i := range rs { // ascending: the run
		rs[i].expiresAt = int64(len(rs) + i)
		h.push(&rs[i])
	}
	for h.len() > 10 {
		h.pop()
	}
	if n := len(h.run.chunks); n > 1 {
		t.Fatalf("run of %d entries keeps %d chunks", h.run.n, n)
	}
	for i := 9_990; i < 10_000; i++ { // still in order
		if e := h.pop(); e.seq != uint64(i+1) {
			t.Fatalf("pop = seq %d, want %d", e.seq, i+1)
		}
	}
}

// releaseRig is a memory engine wired as `seckill serve` wires it: events through the pipeline
// into a SQLite order store, which is also the engine's archive, and a Service over both.
type releaseRig struct {
	t     *testing.T
	ctx   context.Context
	clock *seckilltest.ManualClock
	store *sqlstore.Store
	e     *Engine
	svc   *service.Service
	pipe  *pipeline.Pipeline
}

var releaseT0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func newReleaseRig(t *testing.T, clock *seckilltest.ManualClock, store *sqlstore.Store) *releaseRig {
	t.Helper()
	ch := make(chan seckill.Event, 1024)
	r := &releaseRig{t: t, ctx: context.Background(), clock: clock, store: store}
	r.e = New(clock, WithEvents(ch), WithArchive(store))
	r.pipe = pipeline.New(store, ch, pipeline.Config{FlushEvery: time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- r.pipe.Run(context.Background()) }()
	t.Cleanup(func() {
		close(ch)
		<-done
	})
	r.svc = service.New(service.Config{Inventory: r.e, Settled: r.e, Store: store, Clock: clock})
	return r
}

func openReleaseStore(t *testing.T) *sqlstore.Store {
	t.Helper()
	store, err := sqlstore.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// startReleaseSale opens a store and a rig on a manual clock at releaseT0, and creates and
// loads sale "s" there (3 units at 100, 2 a user, a queue of 10) open from releaseT0 for open,
// with holds of holdSeconds.
func startReleaseSale(t *testing.T, open time.Duration, holdSeconds int) *releaseRig {
	t.Helper()
	store := openReleaseStore(t)
	r := newReleaseRig(t, seckilltest.NewManualClock(releaseT0), store)
	sale := seckill.Sale{
		ID: "s", Name: "s", PriceCents: 100, Stock: 3, StartsAt: releaseT0, EndsAt: releaseT0.Add(open),
		PerUserLimit: 2, HoldSeconds: holdSeconds, QueueLimit: 10, CreatedAt: releaseT0,
	}
	if err := store.CreateSale(r.ctx, sale); err != nil {
		t.Fatal(err)
	}
	if err := r.e.LoadSale(r.ctx, sale, 0); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *releaseRig) buy(user string, key string) seckill.Reservation {
	r.t.Helper()
	res, err := r.e.Buy(r.ctx, seckill.BuyRequest{SaleID: "s", UserID: user, Quantity: 1, IdempotencyKey: key})
	if err != nil {
		r.t.Fatalf("buy %s: %v", user, err)
	}
	return res.Reservation
}

func (r *releaseRig) pay(paymentID string, res seckill.Reservation, amount int64, want seckill.PaymentResult) {
	r.t.Helper()
	got, err := r.svc.ApplyPayment(r.ctx, seckill.PaymentConfirmation{
		PaymentID: paymentID, ReservationID: res.ID, AmountCents: amount,
	}, true)
	if err != nil || got != want {
		r.t.Fatalf("payment %s for %s: %s, %v; want %s", paymentID, res.ID, got, err, want)
	}
}

// read returns the reservation as the engine answers for it.
func (r *releaseRig) read(id string) seckill.Reservation {
	r.t.Helper()
	got, err := r.e.Reservation(r.ctx, id)
	if err != nil {
		r.t.Fatalf("Reservation(%s): %v", id, err)
	}
	return got
}

// released reports whether the sale's per-reservation state is gone.
func (r *releaseRig) released() bool {
	s, err := r.e.sale("s")
	if err != nil {
		r.t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.rel.done {
		return false
	}
	if s.book.chunks != nil || s.foreign != nil || s.users.hs != nil || s.idem != nil || s.holds.run.chunks != nil ||
		s.holds.heap != nil || s.queue.slots != nil || s.idBuf != nil {
		r.t.Fatal("released sale keeps per-reservation state")
	}
	return true
}

// settle waits until the sale is released, calling Reclaim as the sweeper does. The pipeline
// runs on real time and the release on the manual clock, so the clock moves only once the
// store shows the settled sale as the engine does (what the release compares), or while the
// sale has not settled: then by releaseRetryMax, which makes the next comparison due whatever
// its backoff. The wait is for
// the store, bounded by a generous deadline, never by a number of rounds.
func (r *releaseRig) settle() {
	r.t.Helper()
	s, err := r.e.sale("s")
	if err != nil {
		r.t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if _, err := r.e.Reclaim(r.ctx, "s"); err != nil {
			r.t.Fatal(err)
		}
		if r.released() {
			return
		}
		rows, err := r.store.Reservations(r.ctx, "s")
		if err != nil {
			r.t.Fatal(err)
		}
		s.mu.Lock()
		settled := s.settled(r.clock.Now())
		agree := settled && s.archivedAsIs(rows)
		s.mu.Unlock()
		if agree || !settled { // a sale not settled yet settles as its holds expire
			r.clock.Advance(releaseRetryMax)
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	r.t.Fatalf("the sale was not released within a minute (pipeline applied %d events, %d failures)", r.pipe.Applied(), r.pipe.Failures())
}

// TestReleasedSaleAnswersFromStore: a sale that ended and settled is released (its
// reservations, holds, queue, user units and keys are dropped), and every read, cancel and
// payment of its reservations still answers as docs/MODEL.md says, from the order store; a
// restart loads it released without reading its reservations into memory.
func TestReleasedSaleAnswersFromStore(t *testing.T) {
	r := startReleaseSale(t, time.Hour, 60)
	store, clock := r.store, r.clock
	alice, bob, carol := r.buy("alice", "ka"), r.buy("bob", ""), r.buy("carol", "kc")
	dave, erin := r.buy("dave", ""), r.buy("erin", "")
	if dave.Status != seckill.StatusQueued || erin.Status != seckill.StatusQueued {
		t.Fatalf("dave %s, erin %s; want queued", dave.Status, erin.Status)
	}
	clock.Advance(time.Second)
	r.pay("p-alice", alice, 100, seckill.PaymentApplied)
	if _, err := r.e.Cancel(r.ctx, bob.ID, "bob"); err != nil { // dave is granted
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := r.svc.CloseSale(r.ctx, "s"); err != nil { // erin is rejected
		t.Fatal(err)
	}
	r.pay("p-dave", dave, 100, seckill.PaymentApplied) // a hold may be paid after the end
	clock.Advance(time.Minute)                         // carol's hold expires
	if _, err := r.e.Reclaim(r.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	ids := []string{alice.ID, bob.ID, carol.ID, dave.ID, erin.ID}
	before := map[string]seckill.Reservation{}
	for _, id := range ids {
		before[id] = r.read(id)
	}
	want := map[string]seckill.ReservationStatus{alice.ID: seckill.StatusPaid, bob.ID: seckill.StatusCancelled,
		carol.ID: seckill.StatusExpired, dave.ID: seckill.StatusPaid, erin.ID: seckill.StatusRejected}
	for id, st := range want {
		if before[id].Status != st {
			t.Fatalf("%s before release: %s, want %s", id, before[id].Status, st)
		}
	}
	if r.released() {
		t.Fatal("released before the store was compared")
	}

	r.settle()

	for _, id := range ids {
		got := r.read(id)
		if !sameReservation(got, before[id]) {
			t.Fatalf("%s after release reads %+v\nbefore %+v", id, got, before[id])
		}
	}
	_, st, err := r.e.Sale(r.ctx, "s")
	if err != nil || st != (seckill.StockState{Sellable: 3, Available: 1, Sold: 2}) {
		t.Fatalf("released sale's counts %+v, %v", st, err)
	}
	checkReleasedAnswers(t, r, alice, bob, carol, erin)

	// A restart: the sale is loaded released, its reservations stay in the store.
	r2 := newReleaseRig(t, clock, store)
	if err := r2.svc.Recover(r2.ctx); err != nil {
		t.Fatal(err)
	}
	if !r2.released() {
		t.Fatal("Recover read a settled ended sale's reservations into memory")
	}
	for _, id := range ids {
		got := r2.read(id)
		if id != carol.ID && !sameReservation(got, before[id]) {
			t.Fatalf("%s after restart reads %+v\nbefore %+v", id, got, before[id])
		}
	}
	if got := r2.read(carol.ID); got.Status != seckill.StatusRefundRequired {
		t.Fatalf("carol after restart: %s, want refund_required", got.Status)
	}
	_, st, err = r2.e.Sale(r2.ctx, "s")
	if err != nil || st != (seckill.StockState{Sellable: 3, Available: 1, Sold: 2}) {
		t.Fatalf("restored released sale's counts %+v, %v", st, err)
	}
	if a, err := r2.svc.Audit(r2.ctx, "s"); err != nil || !a.OK {
		t.Fatalf("audit after restart: %+v, %v", a, err)
	}
}

// checkReleasedAnswers runs every call a released sale's reservations can still get.
func checkReleasedAnswers(t *testing.T, r *releaseRig, alice, bob, carol, erin seckill.Reservation) {
	t.Helper()
	ctx := r.ctx
	if _, err := r.e.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: "alice", Quantity: 1, IdempotencyKey: "ka"}); seckill.ErrorCode(err) != seckill.CodeEnded {
		t.Fatalf("buy on a released sale: %v, want ended", err)
	}
	unknown := seckill.ReservationID("s", make([]byte, 16))
	for _, c := range []struct{ id, user string }{{unknown, "alice"}, {alice.ID, "mallory"}} {
		if _, err := r.svc.Reservation(ctx, c.id, c.user); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("read %s as %s: %v, want not_found", c.id, c.user, err)
		}
		if _, err := r.e.Cancel(ctx, c.id, c.user); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("cancel %s as %s: %v, want not_found", c.id, c.user, err)
		}
	}
	if _, err := r.e.Cancel(ctx, alice.ID, "alice"); seckill.ErrorCode(err) != seckill.CodeConflict {
		t.Fatalf("cancel of a paid reservation: %v, want conflict", err)
	}
	for _, res := range []seckill.Reservation{bob, carol, erin} {
		got, err := r.e.Cancel(ctx, res.ID, res.UserID)
		if err != nil || got.Status != r.read(res.ID).Status {
			t.Fatalf("cancel of finished %s: %+v, %v; want it unchanged", res.ID, got, err)
		}
	}
	if _, err := r.svc.Pay(ctx, carol.ID, "carol"); seckill.ErrorCode(err) != seckill.CodeHoldExpired {
		t.Fatalf("pay for an expired reservation: %v, want hold_expired", err)
	}

	r.pay("p-alice", alice, 100, seckill.PaymentDuplicate)
	r.pay("p-alice-2", alice, 100, seckill.PaymentRefundRequired)
	r.pay("p-bob", bob, 99, seckill.PaymentRefundRequired) // wrong amount: nothing changes
	r.pay("p-erin", erin, 100, seckill.PaymentRefundRequired)
	r.pay("p-unknown", seckill.Reservation{ID: unknown}, 100, seckill.PaymentRefundRequired)
	r.pay("p-carol", carol, 100, seckill.PaymentRefundRequired) // rule 7: the sale has ended
	for id, st := range map[string]seckill.ReservationStatus{alice.ID: seckill.StatusPaid,
		bob.ID: seckill.StatusCancelled, erin.ID: seckill.StatusRejected, carol.ID: seckill.StatusRefundRequired} {
		if got := r.read(id); got.Status != st {
			t.Fatalf("%s after the payments: %s, want %s", id, got.Status, st)
		}
	}
	if got := r.read(alice.ID); got.PaymentID != "p-alice" {
		t.Fatalf("alice paid by %q, want p-alice", got.PaymentID)
	}
	r.pay("p-carol-2", carol, 100, seckill.PaymentRefundRequired)
	if a, err := r.svc.Audit(ctx, "s"); err != nil || !a.OK {
		t.Fatalf("audit of the released sale: %+v, %v", a, err)
	}
	if !r.released() {
		t.Fatal("the sale came back")
	}
}

// TestReleaseWaitsForStore: a settled sale whose store lags (a payment applied in the engine
// and not yet recorded) is not released, whatever the clock says, and is once the store agrees.
func TestReleaseWaitsForStore(t *testing.T) {
	r := startReleaseSale(t, time.Minute, 60)
	store, clock := r.store, r.clock
	a := r.buy("alice", "")
	clock.Advance(time.Minute - time.Second)
	// The store has alice's hold (else the comparison below would fail for the wrong reason).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if got, err := store.Reservation(r.ctx, a.ID); err == nil && got.Status == seckill.StatusHeld {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the store never had alice's hold")
		}
	}
	// The engine applies the payment; the database does not hear of it yet.
	if res, _, err := r.e.ConfirmPayment(r.ctx, seckill.PaymentConfirmation{PaymentID: "p1", ReservationID: a.ID, AmountCents: 100}); err != nil || res != seckill.PaymentApplied {
		t.Fatalf("confirm: %s, %v", res, err)
	}
	for range 40 {
		clock.Advance(time.Minute)
		if _, err := r.e.Reclaim(r.ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if r.released() {
			t.Fatal("released while the store did not have the payment")
		}
	}
	r.pay("p1", a, 100, seckill.PaymentApplied) // the gateway's retry: the engine says duplicate
	clock.Advance(releaseRetryMax)
	r.settle()
	if got := r.read(a.ID); got.Status != seckill.StatusPaid || got.PaymentID != "p1" {
		t.Fatalf("after release: %+v", got)
	}
}

// TestRecoverRestoresUnsettledEndedSale: an ended sale with a hold stored is restored whole
// (the hold may still be paid), and released once it settles.
func TestRecoverRestoresUnsettledEndedSale(t *testing.T) {
	r := startReleaseSale(t, time.Minute, 120)
	store, clock := r.store, r.clock
	a := r.buy("alice", "")
	clock.Advance(50 * time.Second)
	for r.pipe.Applied() < 1 {
		time.Sleep(time.Millisecond)
	}
	clock.Advance(20 * time.Second) // ended; alice's hold runs until 120 s
	r2 := newReleaseRig(t, clock, store)
	if err := r2.svc.Recover(r2.ctx); err != nil {
		t.Fatal(err)
	}
	if r2.released() {
		t.Fatal("an ended sale with a live hold was loaded released")
	}
	r2.pay("p1", a, 100, seckill.PaymentApplied)
	r2.settle()
	if got := r2.read(a.ID); got.Status != seckill.StatusPaid {
		t.Fatalf("after release: %+v", got)
	}
}
