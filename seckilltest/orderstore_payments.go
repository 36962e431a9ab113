// OrderStore conformance cases: payments (applied, late, duplicates, the sold guard, refunds
// owed by the engine). TestOrderStore in orderstore.go runs them.

package seckilltest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

func osPaymentApplied(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 5, 0))
	r := osRes("s", "r1", "alice", 2, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	osWantPay(t, s, "p1", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(time.Second))
	osWantSold(t, s, "s", 2)
	if got, err := s.PaymentResult(t.Context(), "p1"); err != nil || got != seckill.PaymentApplied {
		t.Fatalf("PaymentResult(p1) = %s, %v; want applied", got, err)
	}
	want := osWith(r, seckill.StatusPaid)
	want.PaymentID = "p1"
	osSameReservation(t, osGet(t, s, "s", "r1"), want)
	osCounts(t, s, "s", seckill.DBCounts{Sold: 2, PaidUnits: 2, Refunds: 0, PaidOrders: 1})
}

func osPaymentLateApplied(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 5, 0))
	r := osRes("s", "r1", "alice", 1, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0), osEv(osWith(r, seckill.StatusExpired), osT0.Add(time.Minute)))
	osWantPay(t, s, "p1", osWith(r, seckill.StatusPaid), seckill.PaymentLateApplied, seckill.PaymentLateApplied, osT0.Add(2*time.Minute))
	osWantSold(t, s, "s", 1)
	osWantStatus(t, s, "s", "r1", seckill.StatusPaid)
	orders, err := s.Orders(t.Context(), "alice")
	if err != nil || len(orders) != 1 || orders[0].Status != seckill.StatusPaid {
		t.Fatalf("Orders(alice) = %+v, %v; want one paid order", orders, err)
	}
	osCounts(t, s, "s", seckill.DBCounts{Sold: 1, PaidUnits: 1, PaidOrders: 1})
}

// The event pipeline may lag behind the synchronous payment: the payment creates the row.
func osPaymentBeforeEvents(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 5, 0))
	r := osRes("s", "r1", "alice", 2, seckill.StatusPaid, 7)
	osWantPay(t, s, "p1", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0)
	want := r
	want.PaymentID = "p1"
	osSameReservation(t, osGet(t, s, "s", "r1"), want)
	// The lagging events arrive afterwards and change nothing.
	osApply(t, s, osEv(osWith(r, seckill.StatusQueued), osT0), osEv(osWith(r, seckill.StatusHeld), osT0))
	osSameReservation(t, osGet(t, s, "s", "r1"), want)
	osCounts(t, s, "s", seckill.DBCounts{Sold: 2, PaidUnits: 2, PaidOrders: 1})
}

func osDuplicatePaymentSequential(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 5, 0))
	r := osRes("s", "r1", "alice", 2, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	osWantPay(t, s, "p1", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0)
	osWantPay(t, s, "p1", r, seckill.PaymentApplied, seckill.PaymentDuplicate, osT0.Add(time.Second))
	// A duplicate id is a duplicate whatever else the delivery says.
	other := osRes("s", "r2", "bob", 1, seckill.StatusHeld, 2)
	osApply(t, s, osEv(other, osT0))
	osWantPay(t, s, "p1", other, seckill.PaymentRefundRequired, seckill.PaymentDuplicate, osT0.Add(2*time.Second))
	osWantSold(t, s, "s", 2)
	osWantStatus(t, s, "s", "r2", seckill.StatusHeld)
	if got, _ := s.PaymentResult(t.Context(), "p1"); got != seckill.PaymentApplied {
		t.Fatalf("PaymentResult(p1) = %s after duplicates, want applied", got)
	}
	for _, u := range []string{"alice", "bob"} {
		orders, err := s.Orders(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"alice": 1, "bob": 0}[u]; len(orders) != want {
			t.Fatalf("Orders(%s) has %d entries, want %d: %+v", u, len(orders), want, orders)
		}
	}
	osCounts(t, s, "s", seckill.DBCounts{Sold: 2, PaidUnits: 2, PaidOrders: 1})
}

func osDuplicatePaymentConcurrent(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 5, 0))
	r := osRes("s", "r1", "alice", 2, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	const n = 16
	results := RacePayments(t, n, func(i int) (seckill.PaymentResult, error) {
		return s.RecordPayment(t.Context(), seckill.PaymentRecord{
			PaymentID: "p1", Reservation: r, AmountCents: 2 * osPrice, Result: seckill.PaymentApplied, At: osT0,
		})
	})
	if results[seckill.PaymentApplied] != 1 || results[seckill.PaymentDuplicate] != n-1 {
		t.Fatalf("%d concurrent deliveries of one payment: %v; want 1 applied, %d duplicate", n, results, n-1)
	}
	osWantSold(t, s, "s", 2)
	orders, err := s.Orders(t.Context(), "alice")
	if err != nil || len(orders) != 1 {
		t.Fatalf("Orders(alice) = %+v, %v; want exactly one", orders, err)
	}
	osCounts(t, s, "s", seckill.DBCounts{Sold: 2, PaidUnits: 2, PaidOrders: 1})
}

// RacePayments runs fn(0..n-1) in n goroutines released at once and counts the results; any
// error fails the test. The order-store suite races payments with it, and so may a store's own
// tests.
func RacePayments(t *testing.T, n int, fn func(i int) (seckill.PaymentResult, error)) map[seckill.PaymentResult]int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		start   = make(chan struct{})
		results = map[seckill.PaymentResult]int{}
		errs    []error
	)
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("goroutine %d: %w", i, err))
				return
			}
			results[res]++
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return results
}

// The guard must allow sold + q == sellable and refuse sold + q > sellable: the off-by-one
// that sold 101 of 100 in a peer project. Stock 0 and a full holdback sell
// nothing.
func osSoldGuardBoundary(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("one", 1, 0))
	r1 := osRes("one", "r1", "alice", 1, seckill.StatusHeld, 1)
	r2 := osRes("one", "r2", "bob", 1, seckill.StatusExpired, 2)
	osApply(t, s, osEv(r1, osT0), osEv(r2, osT0))
	osWantPay(t, s, "p1", r1, seckill.PaymentApplied, seckill.PaymentApplied, osT0)
	osWantPay(t, s, "p2", r2, seckill.PaymentLateApplied, seckill.PaymentRefundRequired, osT0)
	osWantSold(t, s, "one", 1)
	osWantStatus(t, s, "one", "r2", seckill.StatusRefundRequired)

	for _, sale := range []seckill.Sale{osSale("zero", 0, 0), osSale("kept", 3, 3)} {
		osCreate(t, s, sale)
		r := osRes(sale.ID, "r-"+sale.ID, "carol", 1, seckill.StatusHeld, 1)
		osApply(t, s, osEv(r, osT0))
		osWantPay(t, s, "p-"+sale.ID, r, seckill.PaymentApplied, seckill.PaymentRefundRequired, osT0)
		osWantSold(t, s, sale.ID, 0)
		osCounts(t, s, sale.ID, seckill.DBCounts{Refunds: 1})
	}

	osCreate(t, s, osSale("two", 3, 0))
	big := osRes("two", "big", "dave", 2, seckill.StatusHeld, 1)
	osApply(t, s, osEv(big, osT0))
	osWantPay(t, s, "p-big", big, seckill.PaymentApplied, seckill.PaymentApplied, osT0)
	big2 := osRes("two", "big2", "erin", 2, seckill.StatusHeld, 2)
	osApply(t, s, osEv(big2, osT0))
	osWantPay(t, s, "p-big2", big2, seckill.PaymentApplied, seckill.PaymentRefundRequired, osT0)
	osWantSold(t, s, "two", 2) // one unit left, but not two: nothing partial
}

// 32 buyers race for the last 3 units: exactly 3 are paid, the rest are refunds, and the
// database never records more than the sellable stock.
func osSoldGuardConcurrent(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("hot", 10, 2)) // sellable 8
	for i := range 5 {
		r := osRes("hot", fmt.Sprintf("early%d", i), fmt.Sprintf("early-user%d", i), 1, seckill.StatusHeld, uint64(i+1))
		osApply(t, s, osEv(r, osT0))
		osWantPay(t, s, "early-p"+fmt.Sprint(i), r, seckill.PaymentApplied, seckill.PaymentApplied, osT0)
	}
	const n = 32
	rs := make([]seckill.Reservation, n)
	var events []seckill.Event
	for i := range rs {
		rs[i] = osRes("hot", fmt.Sprintf("late%02d", i), fmt.Sprintf("user%02d", i), 1, seckill.StatusHeld, uint64(100+i))
		events = append(events, osEv(rs[i], osT0))
	}
	osApply(t, s, events...)
	results := RacePayments(t, n, func(i int) (seckill.PaymentResult, error) {
		return s.RecordPayment(t.Context(), seckill.PaymentRecord{
			PaymentID: fmt.Sprintf("late-p%02d", i), Reservation: rs[i], AmountCents: osPrice,
			Result: seckill.PaymentApplied, At: osT0.Add(time.Second),
		})
	})
	if results[seckill.PaymentApplied] != 3 || results[seckill.PaymentRefundRequired] != n-3 || len(results) != 2 {
		t.Fatalf("%d payments racing for 3 units: %v; want 3 applied, %d refund_required", n, results, n-3)
	}
	osWantSold(t, s, "hot", 8)
	osCounts(t, s, "hot", seckill.DBCounts{Sold: 8, PaidUnits: 8, Refunds: n - 3, PaidOrders: 8})
	paid, refunds := 0, 0
	for i, r := range rs {
		got := osGet(t, s, "hot", r.ID)
		orders, err := s.Orders(t.Context(), r.UserID)
		if err != nil || len(orders) != 1 {
			t.Fatalf("Orders(%s) = %+v, %v; want exactly one", r.UserID, orders, err)
		}
		if orders[0].Status != got.Status || orders[0].PaymentID != fmt.Sprintf("late-p%02d", i) {
			t.Fatalf("user %s: order %+v does not match reservation status %s", r.UserID, orders[0], got.Status)
		}
		switch got.Status {
		case seckill.StatusPaid:
			paid++
		case seckill.StatusRefundRequired:
			refunds++
		default:
			t.Fatalf("reservation %s ended %s, want paid or refund_required", r.ID, got.Status)
		}
	}
	if paid != 3 || refunds != n-3 {
		t.Fatalf("reservations: %d paid, %d refund_required; want 3 and %d", paid, refunds, n-3)
	}
}

// With two units per payment and 5 sellable, only two payments fit: the fifth unit stays
// unsold rather than being oversold.
func osSoldGuardConcurrentQuantityTwo(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("pairs", 5, 0))
	const n = 32
	rs := make([]seckill.Reservation, n)
	var events []seckill.Event
	for i := range rs {
		rs[i] = osRes("pairs", fmt.Sprintf("r%02d", i), fmt.Sprintf("u%02d", i), 2, seckill.StatusHeld, uint64(i+1))
		events = append(events, osEv(rs[i], osT0))
	}
	osApply(t, s, events...)
	results := RacePayments(t, n, func(i int) (seckill.PaymentResult, error) {
		return s.RecordPayment(t.Context(), seckill.PaymentRecord{
			PaymentID: fmt.Sprintf("p%02d", i), Reservation: rs[i], AmountCents: 2 * osPrice,
			Result: seckill.PaymentApplied, At: osT0,
		})
	})
	if results[seckill.PaymentApplied] != 2 || results[seckill.PaymentRefundRequired] != n-2 {
		t.Fatalf("%d payments of 2 units for 5: %v; want 2 applied, %d refund_required", n, results, n-2)
	}
	osCounts(t, s, "pairs", seckill.DBCounts{Sold: 4, PaidUnits: 4, Refunds: n - 2, PaidOrders: 2})
}

// A second payment id for a reservation that is already paid is a refund; the reservation
// stays paid by the first, whatever result the engine reported for the second.
func osSecondPayment(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	r := osRes("s", "r1", "alice", 2, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	osWantPay(t, s, "p1", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(1*time.Second))
	osWantPay(t, s, "p2", r, seckill.PaymentApplied, seckill.PaymentRefundRequired, osT0.Add(2*time.Second))
	osWantPay(t, s, "p3", osWith(r, seckill.StatusPaid), seckill.PaymentRefundRequired, seckill.PaymentRefundRequired, osT0.Add(3*time.Second))
	osWantSold(t, s, "s", 2)
	got := osWantStatus(t, s, "s", "r1", seckill.StatusPaid)
	if got.PaymentID != "p1" {
		t.Fatalf("reservation paid by %q, want p1", got.PaymentID)
	}
	orders, err := s.Orders(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, o := range orders {
		summary = append(summary, o.PaymentID+":"+string(o.Status))
	}
	if want := []string{"p3:refund_required", "p2:refund_required", "p1:paid"}; !slices.Equal(summary, want) {
		t.Fatalf("Orders(alice) = %v, want %v (newest first)", summary, want)
	}
	osCounts(t, s, "s", seckill.DBCounts{Sold: 2, PaidUnits: 2, Refunds: 2, PaidOrders: 1})
}

// The engine turned an expired reservation refund_required (no free unit): recorded, listed,
// no unit taken.
func osRefundFromEngine(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	r := osRes("s", "r1", "alice", 1, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0), osEv(osWith(r, seckill.StatusExpired), osT0.Add(time.Minute)))
	osWantPay(t, s, "p1", osWith(r, seckill.StatusRefundRequired), seckill.PaymentRefundRequired,
		seckill.PaymentRefundRequired, osT0.Add(2*time.Minute))
	osWantSold(t, s, "s", 0)
	osWantStatus(t, s, "s", "r1", seckill.StatusRefundRequired)
	if got, _ := s.PaymentResult(t.Context(), "p1"); got != seckill.PaymentRefundRequired {
		t.Fatalf("PaymentResult(p1) = %s, want refund_required", got)
	}
	orders, err := s.Orders(t.Context(), "alice")
	if err != nil || len(orders) != 1 {
		t.Fatalf("Orders(alice) = %+v, %v; want one", orders, err)
	}
	want := seckill.Order{PaymentID: "p1", ReservationID: "r1", SaleID: "s", UserID: "alice", Quantity: 1,
		AmountCents: osPrice, Status: seckill.StatusRefundRequired, CreatedAt: osT0.Add(2 * time.Minute)}
	if o := orders[0]; o.PaymentID != want.PaymentID || o.ReservationID != want.ReservationID || o.SaleID != want.SaleID ||
		o.UserID != want.UserID || o.Quantity != want.Quantity || o.AmountCents != want.AmountCents ||
		o.Status != want.Status || !o.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("order = %+v, want %+v", o, want)
	}
	osCounts(t, s, "s", seckill.DBCounts{Refunds: 1})
}

// A payment with the wrong amount is refunded while its hold stays held (docs/MODEL.md,
// ConfirmPayment step 4); the buyer can still pay correctly.
func osRefundKeepsHold(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	r := osRes("s", "r1", "alice", 1, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	got, err := s.RecordPayment(t.Context(), seckill.PaymentRecord{
		PaymentID: "wrong", Reservation: r, AmountCents: 1, Result: seckill.PaymentRefundRequired, At: osT0,
	})
	if err != nil || got != seckill.PaymentRefundRequired {
		t.Fatalf("RecordPayment(wrong amount) = %s, %v; want refund_required", got, err)
	}
	osSameReservation(t, osGet(t, s, "s", "r1"), r)
	osWantPay(t, s, "right", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(time.Second))
	osWantStatus(t, s, "s", "r1", seckill.StatusPaid)
	osCounts(t, s, "s", seckill.DBCounts{Sold: 1, PaidUnits: 1, Refunds: 1, PaidOrders: 1})
}

// Money the gateway received for a reservation nobody knows is still recorded, as a refund.
func osUnknownReservation(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	cases := []struct {
		id string
		r  seckill.Reservation
	}{
		{"p-zero", seckill.Reservation{}},
		{"p-id-only", seckill.Reservation{ID: "ghost"}},
		{"p-no-sale", seckill.Reservation{ID: "ghost2", SaleID: "no-such-sale", UserID: "alice", Quantity: 1, Status: seckill.StatusHeld}},
	}
	for i, c := range cases {
		for _, result := range []seckill.PaymentResult{seckill.PaymentApplied, seckill.PaymentRefundRequired} {
			id := c.id + "-" + string(result)
			got, err := s.RecordPayment(t.Context(), seckill.PaymentRecord{
				PaymentID: id, Reservation: c.r, AmountCents: osPrice, Result: result, At: osT0.Add(time.Duration(i) * time.Second),
			})
			if err != nil || got != seckill.PaymentRefundRequired {
				t.Fatalf("RecordPayment(%s) = %s, %v; want refund_required", id, got, err)
			}
			if got, err := s.PaymentResult(t.Context(), id); err != nil || got != seckill.PaymentRefundRequired {
				t.Fatalf("PaymentResult(%s) = %s, %v; want refund_required", id, got, err)
			}
		}
	}
	osWantSold(t, s, "s", 0)
	// An id that names its sale, as engines make them, counts in that sale's audit.
	lost := seckill.ReservationID("s", make([]byte, 16))
	if got, err := s.RecordPayment(t.Context(), seckill.PaymentRecord{
		PaymentID: "p-lost", Reservation: seckill.Reservation{ID: lost}, AmountCents: osPrice, Result: seckill.PaymentApplied, At: osT0,
	}); err != nil || got != seckill.PaymentRefundRequired {
		t.Fatalf("RecordPayment(p-lost) = %s, %v; want refund_required", got, err)
	}
	osCounts(t, s, "s", seckill.DBCounts{Refunds: 1})
	orders, err := s.Orders(t.Context(), "alice")
	if err != nil || len(orders) != 2 {
		t.Fatalf("Orders(alice) = %+v, %v; want the two refunds of the unknown sale", orders, err)
	}
	for _, o := range orders {
		if o.Status != seckill.StatusRefundRequired || o.ReservationID != "ghost2" || o.SaleID != "no-such-sale" {
			t.Fatalf("order = %+v, want a refund for ghost2", o)
		}
	}
}

func osInvalidPayment(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 10, 0))
	r := osRes("s", "r1", "alice", 1, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	for _, p := range []seckill.PaymentRecord{
		{PaymentID: "", Reservation: r, Result: seckill.PaymentApplied},
		{PaymentID: "p-dup", Reservation: r, Result: seckill.PaymentDuplicate},
		{PaymentID: "p-ign", Reservation: r, Result: seckill.PaymentIgnored},
		{PaymentID: "p-none", Reservation: r, Result: ""},
	} {
		_, err := s.RecordPayment(t.Context(), p)
		osWantCode(t, fmt.Sprintf("RecordPayment(%q, result %q)", p.PaymentID, p.Result), err, seckill.CodeInvalidArgument)
		if p.PaymentID != "" {
			_, err := s.PaymentResult(t.Context(), p.PaymentID)
			osWantCode(t, "PaymentResult of a refused payment", err, seckill.CodeNotFound)
		}
	}
	osWantSold(t, s, "s", 0)
	osWantStatus(t, s, "s", "r1", seckill.StatusHeld)
}

// Events may report a reservation paid before the payment transaction runs, but only
// RecordPayment makes it paid and moves sales.sold, and it decides the final status.
func osPaymentAuthority(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("s", 1, 0))
	r1 := osRes("s", "r1", "alice", 1, seckill.StatusHeld, 1)
	paid1 := osWith(r1, seckill.StatusPaid)
	paid1.PaymentID = "p1"
	osApply(t, s, osEv(r1, osT0), osEv(paid1, osT0.Add(time.Second)))
	osWantSold(t, s, "s", 0)
	osWantStatus(t, s, "s", "r1", seckill.StatusHeld)
	osWantPay(t, s, "p1", paid1, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(time.Second))
	osWantSold(t, s, "s", 1)
	osWantStatus(t, s, "s", "r1", seckill.StatusPaid)

	// The engine believes r2 paid too (it lost state) and says so by event first; the
	// database has no unit left, so r2 ends refund_required and stays so.
	r2 := osRes("s", "r2", "bob", 1, seckill.StatusHeld, 2)
	paid2 := osWith(r2, seckill.StatusPaid)
	paid2.PaymentID = "p2"
	osApply(t, s, osEv(r2, osT0), osEv(paid2, osT0.Add(2*time.Second)))
	osWantPay(t, s, "p2", paid2, seckill.PaymentApplied, seckill.PaymentRefundRequired, osT0.Add(2*time.Second))
	osApply(t, s, osEv(paid2, osT0.Add(3*time.Second)))
	osWantStatus(t, s, "s", "r2", seckill.StatusRefundRequired)
	osWantSold(t, s, "s", 1)
	osCounts(t, s, "s", seckill.DBCounts{Sold: 1, PaidUnits: 1, Refunds: 1, PaidOrders: 1})

	// A refund whose engine view says "paid" (by some other payment the database has not
	// seen) writes no paid row: only a paying payment does, with its units.
	r3 := osRes("s", "r3", "carol", 1, seckill.StatusHeld, 3)
	osApply(t, s, osEv(r3, osT0))
	other := osWith(r3, seckill.StatusPaid)
	other.PaymentID = "p-unseen"
	osWantPay(t, s, "p3", other, seckill.PaymentRefundRequired, seckill.PaymentRefundRequired, osT0.Add(4*time.Second))
	osWantStatus(t, s, "s", "r3", seckill.StatusHeld)
	osCounts(t, s, "s", seckill.DBCounts{Sold: 1, PaidUnits: 1, Refunds: 2, PaidOrders: 1})
}
