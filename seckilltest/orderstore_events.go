// OrderStore conformance cases: reservation events (round trips, forward only, idempotence)
// and the reads built on them. TestOrderStore in orderstore.go runs them.

package seckilltest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

func osEventRoundTrip(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	held := osRes("s", "r1", "alice", 3, seckill.StatusHeld, 42)
	queued := osRes("s", "r2", "bob", 1, seckill.StatusQueued, 43)
	queued.IdempotencyKey = ""
	queued.Position = 1 // live engine state; not stored
	osApply(t, s, osEv(held, osT0), osEv(queued, osT0))
	osSameReservation(t, osGet(t, s, "s", "r1"), held)
	osSameReservation(t, osGet(t, s, "s", "r2"), queued)
	if err := s.ApplyEvents(t.Context(), nil); err != nil {
		t.Fatalf("ApplyEvents(nil): %v", err)
	}
	// Leaving held drops the expiry: expires_at is shown only while held.
	osApply(t, s, osEv(osWith(held, seckill.StatusCancelled), osT0.Add(time.Second)))
	if got := osWantStatus(t, s, "s", "r1", seckill.StatusCancelled); got.ExpiresAt != nil {
		t.Fatalf("cancelled reservation still has expires_at %v", got.ExpiresAt)
	}
	// A queued buyer granted a hold gets its expiry.
	granted := osWith(queued, seckill.StatusHeld)
	osApply(t, s, osEv(granted, osT0.Add(time.Second)))
	osSameReservation(t, osGet(t, s, "s", "r2"), granted)
}

// Every order of the same three events, whether in one batch or in three, ends at the
// furthest status.
func osForwardOnly(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	perms := [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for i, perm := range perms {
		for _, oneBatch := range []bool{true, false} {
			id := fmt.Sprintf("r%d-%v", i, oneBatch)
			r := osRes("s", id, "alice", 1, seckill.StatusQueued, uint64(i+1))
			evs := []seckill.Event{
				osEv(r, osT0),
				osEv(osWith(r, seckill.StatusHeld), osT0.Add(time.Second)),
				osEv(osWith(r, seckill.StatusExpired), osT0.Add(time.Minute)),
			}
			var ordered []seckill.Event
			for _, k := range perm {
				ordered = append(ordered, evs[k])
			}
			if oneBatch {
				osApply(t, s, ordered...)
			} else {
				for _, e := range ordered {
					osApply(t, s, e)
				}
			}
			want := osWith(r, seckill.StatusExpired)
			osSameReservation(t, osGet(t, s, "s", id), want)
		}
	}
	// The ends of an unpaid reservation do not replace each other.
	r := osRes("s", "ends", "bob", 1, seckill.StatusHeld, 99)
	osApply(t, s, osEv(osWith(r, seckill.StatusCancelled), osT0), osEv(osWith(r, seckill.StatusExpired), osT0.Add(time.Second)))
	osApply(t, s, osEv(osWith(r, seckill.StatusRejected), osT0.Add(time.Second)))
	osWantStatus(t, s, "s", "ends", seckill.StatusCancelled)
}

// A hold re-granted with a later expiry updates it; a late copy of the older event does not
// bring the old expiry back.
func osSameStatusNewerWins(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	r := osRes("s", "r1", "alice", 1, seckill.StatusHeld, 1)
	later := r
	exp := osT0.Add(5 * time.Minute)
	later.ExpiresAt = &exp
	osApply(t, s, osEv(r, osT0))
	osApply(t, s, osEv(later, osT0.Add(time.Second)))
	osSameReservation(t, osGet(t, s, "s", "r1"), later)
	osApply(t, s, osEv(r, osT0))
	osSameReservation(t, osGet(t, s, "s", "r1"), later)
}

func osEventsIdempotent(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	var batch []seckill.Event
	for i := range 5 {
		r := osRes("s", fmt.Sprintf("r%d", i), fmt.Sprintf("u%d", i), 1, seckill.StatusQueued, uint64(i+1))
		batch = append(batch, osEv(r, osT0))
		if i%2 == 0 {
			batch = append(batch, osEv(osWith(r, seckill.StatusHeld), osT0.Add(time.Second)))
		}
		if i == 4 {
			batch = append(batch, osEv(osWith(r, seckill.StatusRejected), osT0.Add(2*time.Second)))
		}
	}
	osApply(t, s, batch...)
	first := osList(t, s, "s")
	counts, _ := s.Counts(t.Context(), "s")
	osApply(t, s, batch...)
	second := osList(t, s, "s")
	if len(first) != 5 || len(second) != 5 {
		t.Fatalf("stored %d then %d reservations, want 5", len(first), len(second))
	}
	for i := range first {
		osSameReservation(t, second[i], first[i])
	}
	osCounts(t, s, "s", counts)
}

// Once the payment transaction has made a reservation paid or refund_required, no event
// changes it.
func osPaidIsFinal(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	r := osRes("s", "r1", "alice", 2, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	osWantPay(t, s, "p1", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(time.Second))
	refund := osRes("s", "r2", "bob", 1, seckill.StatusExpired, 2)
	osApply(t, s, osEv(refund, osT0))
	osWantPay(t, s, "p2", osWith(refund, seckill.StatusRefundRequired), seckill.PaymentRefundRequired,
		seckill.PaymentRefundRequired, osT0.Add(time.Second))
	wantPaid, wantRefund := osGet(t, s, "s", "r1"), osGet(t, s, "s", "r2")

	later := osT0.Add(time.Hour)
	var evs []seckill.Event
	for _, st := range []seckill.ReservationStatus{seckill.StatusQueued, seckill.StatusHeld, seckill.StatusCancelled,
		seckill.StatusExpired, seckill.StatusRejected, seckill.StatusRefundRequired, seckill.StatusPaid} {
		evs = append(evs, osEv(osWith(r, st), later), osEv(osWith(refund, st), later))
	}
	other := osWith(r, seckill.StatusPaid)
	other.PaymentID, other.Quantity = "p-other", 5
	evs = append(evs, osEv(other, later))
	osApply(t, s, evs...)
	osSameReservation(t, osGet(t, s, "s", "r1"), wantPaid)
	osSameReservation(t, osGet(t, s, "s", "r2"), wantRefund)
	osCounts(t, s, "s", seckill.DBCounts{Sold: 2, PaidUnits: 2, Refunds: 1, PaidOrders: 1})
}

// Paid and refund_required are written only by the payment transaction, together with the
// units: an event that reports them changes no row and no count, so that the paid rows always
// add up to sales.sold (a restarted engine takes paid rows as sold).
func osEventsNeverWriteFinal(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	var held, final []seckill.Event
	for i := range 3 {
		r := osRes("s", fmt.Sprintf("r%d", i), "alice", 2, seckill.StatusHeld, uint64(i+1))
		held = append(held, osEv(r, osT0))
		st := []seckill.ReservationStatus{seckill.StatusPaid, seckill.StatusRefundRequired}[i%2]
		f := osWith(r, st)
		f.PaymentID = fmt.Sprintf("p%d", i)
		final = append(final, osEv(f, osT0.Add(time.Second)))
	}
	osApply(t, s, append(held, final...)...)
	osApply(t, s, final...)
	for _, e := range held {
		osSameReservation(t, osGet(t, s, "s", e.Reservation.ID), e.Reservation)
	}
	// Without an earlier event there is no row to keep, and none is made.
	lone := osRes("s", "lone", "bob", 1, seckill.StatusPaid, 9)
	lone.PaymentID = "p-lone"
	osApply(t, s, osEv(lone, osT0))
	if got := osList(t, s, "s"); len(got) != 3 {
		t.Fatalf("stored %d reservations, want the 3 held ones", len(got))
	}
	osCounts(t, s, "s", seckill.DBCounts{})
}

// A batch with an event that can never be stored fails whole, with a code that tells the
// pipeline a retry cannot help.
func osInvalidEvents(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	good := osRes("s", "a-good", "alice", 1, seckill.StatusHeld, 1) // sorts before "z-bad"
	for _, c := range []struct {
		name string
		bad  seckill.Reservation
		code seckill.Code
	}{
		{"unknown status", osWith(osRes("s", "z-bad", "bob", 1, seckill.StatusHeld, 2), "lost"), seckill.CodeInvalidArgument},
		{"no id", osRes("s", "", "bob", 1, seckill.StatusHeld, 2), seckill.CodeInvalidArgument},
		{"no sale id", osRes("", "z-bad", "bob", 1, seckill.StatusHeld, 2), seckill.CodeInvalidArgument},
		{"zero quantity", osRes("s", "z-bad", "bob", 0, seckill.StatusHeld, 2), seckill.CodeInvalidArgument},
		{"unknown sale", osRes("no-such-sale", "z-bad", "bob", 1, seckill.StatusHeld, 2), seckill.CodeNotFound},
	} {
		err := s.ApplyEvents(t.Context(), []seckill.Event{osEv(good, osT0), osEv(c.bad, osT0)})
		osWantCode(t, "ApplyEvents with "+c.name, err, c.code)
		if got := osList(t, s, "s"); len(got) != 0 {
			t.Fatalf("a failed batch (%s) stored %d reservations", c.name, len(got))
		}
	}
	_, err := s.Reservations(t.Context(), "s", "lost")
	osWantCode(t, "Reservations with an unknown status", err, seckill.CodeInvalidArgument)
}

// Events and payments for the same reservations interleave; payments decide and nothing is
// lost or oversold.
func osEventsWithPayments(t *testing.T, s seckill.OrderStore) {
	const n = 16
	osCreate(t, s, osSale("s", n, 0))
	rs := make([]seckill.Reservation, n)
	for i := range rs {
		rs[i] = osRes("s", fmt.Sprintf("r%02d", i), fmt.Sprintf("u%02d", i), 1, seckill.StatusHeld, uint64(i+1))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for i, r := range rs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for _, st := range []seckill.ReservationStatus{seckill.StatusQueued, seckill.StatusHeld, seckill.StatusPaid} {
				e := osWith(r, st)
				if err := s.ApplyEvents(t.Context(), []seckill.Event{osEv(e, osT0), osEv(rs[(i+1)%n], osT0)}); err != nil {
					fail(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			res, err := s.RecordPayment(t.Context(), seckill.PaymentRecord{
				PaymentID: "p" + r.ID, Reservation: r, AmountCents: osPrice, Result: seckill.PaymentApplied, At: osT0,
			})
			if err != nil || res != seckill.PaymentApplied {
				fail(fmt.Errorf("RecordPayment(%s) = %s, %v; want applied", r.ID, res, err))
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	for _, r := range rs {
		if got := osWantStatus(t, s, "s", r.ID, seckill.StatusPaid); got.PaymentID != "p"+r.ID {
			t.Fatalf("reservation %s paid by %q, want %q", r.ID, got.PaymentID, "p"+r.ID)
		}
	}
	osCounts(t, s, "s", seckill.DBCounts{Sold: n, PaidUnits: n, PaidOrders: n})
}

func osReservationsFilter(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	osCreate(t, s, osSale("other", 10, 0))
	statuses := map[uint64]seckill.ReservationStatus{
		5: seckill.StatusQueued, 1: seckill.StatusHeld, 4: seckill.StatusQueued, 2: seckill.StatusQueued,
		3: seckill.StatusExpired, 6: seckill.StatusHeld,
	}
	var evs []seckill.Event
	for _, seq := range []uint64{5, 1, 4, 2, 3, 6} { // stored out of arrival order
		// Ids sort against arrival order, so an order by id cannot pass for an order by seq.
		evs = append(evs, osEv(osRes("s", fmt.Sprintf("r%02d", 10-seq), "u", 1, statuses[seq], seq), osT0))
	}
	evs = append(evs, osEv(osRes("other", "elsewhere", "u", 1, seckill.StatusQueued, 1), osT0))
	osApply(t, s, evs...)
	seqs := func(rs []seckill.Reservation) []uint64 {
		var out []uint64
		for _, r := range rs {
			out = append(out, r.Seq)
		}
		return out
	}
	for _, c := range []struct {
		statuses []seckill.ReservationStatus
		want     []uint64
	}{
		{nil, []uint64{1, 2, 3, 4, 5, 6}},
		{[]seckill.ReservationStatus{seckill.StatusQueued}, []uint64{2, 4, 5}},
		{[]seckill.ReservationStatus{seckill.StatusQueued, seckill.StatusHeld}, []uint64{1, 2, 4, 5, 6}},
		{[]seckill.ReservationStatus{seckill.StatusPaid}, nil},
	} {
		if got := seqs(osList(t, s, "s", c.statuses...)); !slices.Equal(got, c.want) {
			t.Fatalf("Reservations(s, %v) seqs = %v, want %v", c.statuses, got, c.want)
		}
	}
}

// Reservation(id) reads one row exactly as Reservations lists it (expires_at only while held),
// follows events and payments, and is not_found for an id nobody stored (the memory engine
// answers from it for a sale it has released, so an unknown id must stay unknown).
func osReservationByID(t *testing.T, s seckill.OrderStore) {
	ctx := t.Context()
	osCreate(t, s, osSale("s", 10, 0))
	held := osRes("s", "s-held", "alice", 2, seckill.StatusHeld, 1)
	late := osRes("s", "s-late", "bob", 1, seckill.StatusHeld, 2)
	paid := osRes("s", "s-paid", "carol", 1, seckill.StatusHeld, 3)
	osApply(t, s, osEv(held, osT0), osEv(late, osT0), osEv(paid, osT0),
		osEv(osWith(late, seckill.StatusExpired), osT0.Add(time.Minute)))
	osWantPay(t, s, "p-paid", paid, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(time.Second))
	osWantPay(t, s, "p-late", osWith(late, seckill.StatusRefundRequired), seckill.PaymentRefundRequired,
		seckill.PaymentRefundRequired, osT0.Add(2*time.Minute))
	for _, id := range []string{"s-held", "s-late", "s-paid"} {
		got, err := s.Reservation(ctx, id)
		if err != nil {
			t.Fatalf("Reservation(%s): %v", id, err)
		}
		osSameReservation(t, got, osGet(t, s, "s", id))
	}
	want := map[string]seckill.ReservationStatus{
		"s-held": seckill.StatusHeld, "s-late": seckill.StatusRefundRequired, "s-paid": seckill.StatusPaid,
	}
	for id, st := range want {
		if got, _ := s.Reservation(ctx, id); got.Status != st {
			t.Fatalf("Reservation(%s).Status = %s, want %s", id, got.Status, st)
		}
	}
	if got, _ := s.Reservation(ctx, "s-paid"); got.PaymentID != "p-paid" || got.ExpiresAt != nil {
		t.Fatalf("paid reservation: payment id %q, expires_at %v; want p-paid and none", got.PaymentID, got.ExpiresAt)
	}
	if got, _ := s.Reservation(ctx, "s-held"); got.ExpiresAt == nil || !got.ExpiresAt.Equal(*held.ExpiresAt) {
		t.Fatalf("held reservation: expires_at %v, want %v", got.ExpiresAt, held.ExpiresAt)
	}
	for _, id := range []string{"s-nope", "S-HELD", "s-held ", ""} {
		_, err := s.Reservation(ctx, id)
		osWantCode(t, fmt.Sprintf("Reservation(%q)", id), err, seckill.CodeNotFound)
	}
}

// Orders lists exactly one entry per recorded payment of the user, newest first, across
// sales, and nothing of other users.
func osOrdersOnePerPayment(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("a", 10, 0))
	osCreate(t, s, osSale("b", 1, 0))
	ra := osRes("a", "ra", "alice", 2, seckill.StatusHeld, 1)
	rb := osRes("b", "rb", "alice", 1, seckill.StatusHeld, 1)
	rbob := osRes("b", "rbob", "bob", 1, seckill.StatusHeld, 2)
	rlate := osRes("a", "rlate", "alice", 1, seckill.StatusExpired, 3)
	osApply(t, s, osEv(ra, osT0), osEv(rb, osT0), osEv(rbob, osT0), osEv(rlate, osT0))
	osWantPay(t, s, "pa", ra, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(1*time.Second))
	osWantPay(t, s, "pbob", rbob, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(2*time.Second))
	osWantPay(t, s, "pb", rb, seckill.PaymentApplied, seckill.PaymentRefundRequired, osT0.Add(3*time.Second))
	osWantPay(t, s, "pa", ra, seckill.PaymentApplied, seckill.PaymentDuplicate, osT0.Add(4*time.Second))
	osWantPay(t, s, "plate", osWith(rlate, seckill.StatusPaid), seckill.PaymentLateApplied, seckill.PaymentLateApplied, osT0.Add(5*time.Second))

	orders, err := s.Orders(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		pay, res, sale string
		q              int
		status         seckill.ReservationStatus
		at             time.Time
	}
	var got []row
	for _, o := range orders {
		if o.UserID != "alice" || o.AmountCents != int64(o.Quantity)*osPrice {
			t.Fatalf("order %+v: wrong user or amount", o)
		}
		got = append(got, row{o.PaymentID, o.ReservationID, o.SaleID, o.Quantity, o.Status, o.CreatedAt})
	}
	want := []row{
		{"plate", "rlate", "a", 1, seckill.StatusPaid, osT0.Add(5 * time.Second)},
		{"pb", "rb", "b", 1, seckill.StatusRefundRequired, osT0.Add(3 * time.Second)},
		{"pa", "ra", "a", 2, seckill.StatusPaid, osT0.Add(1 * time.Second)},
	}
	if !slices.EqualFunc(got, want, func(g, w row) bool {
		return g.pay == w.pay && g.res == w.res && g.sale == w.sale && g.q == w.q && g.status == w.status && g.at.Equal(w.at)
	}) {
		t.Fatalf("Orders(alice) =\n%+v\nwant\n%+v", got, want)
	}
	bob, err := s.Orders(t.Context(), "bob")
	if err != nil || len(bob) != 1 || bob[0].PaymentID != "pbob" || bob[0].Status != seckill.StatusPaid {
		t.Fatalf("Orders(bob) = %+v, %v; want pbob paid", bob, err)
	}
}

func osPing(t *testing.T, s seckill.OrderStore) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}
