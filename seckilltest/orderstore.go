// This file is the OrderStore half of package seckilltest (the package comment is in doc.go).
// The contract is written down once, as tests, so that the SQLite, MySQL and PostgreSQL stores
// cannot drift apart; a store's own tests only add what is specific to it.

package seckilltest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seckill-go/seckill"
)

// TestOrderStore runs the seckill.OrderStore conformance suite. open must return a fresh,
// empty, migrated store for the test it is given, and close it when that test ends
// (t.Cleanup). The suite uses nothing but the OrderStore interface, so every dialect runs it
// unchanged; times are whole milliseconds, the precision every store keeps.
func TestOrderStore(t *testing.T, open func(t *testing.T) seckill.OrderStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s seckill.OrderStore)
	}{
		{"Sales/RoundTrip", osSaleRoundTrip},
		{"Sales/OldestFirst", osSalesOldestFirst},
		{"Sales/DuplicateIDIsConflict", osDuplicateSale},
		{"Sales/Update", osUpdateSale},
		{"Sales/DeleteOnlyUnused", osDeleteSale},
		{"Sales/ListedAndCurrency", osSaleListedCurrency},
		{"Sales/BoundsRefused", osSaleBounds},
		{"NotFound", osNotFound},
		{"Payments/Applied", osPaymentApplied},
		{"Payments/LateApplied", osPaymentLateApplied},
		{"Payments/BeforeAnyEvent", osPaymentBeforeEvents},
		{"Payments/DuplicateSequential", osDuplicatePaymentSequential},
		{"Payments/DuplicateConcurrent", osDuplicatePaymentConcurrent},
		{"Payments/SoldGuardBoundary", osSoldGuardBoundary},
		{"Payments/SoldGuardConcurrent", osSoldGuardConcurrent},
		{"Payments/SoldGuardConcurrentQuantityTwo", osSoldGuardConcurrentQuantityTwo},
		{"Payments/SecondPaymentForPaidReservation", osSecondPayment},
		{"Payments/RefundRequiredFromEngine", osRefundFromEngine},
		{"Payments/RefundLeavesHoldAsEngineSaysIt", osRefundKeepsHold},
		{"Payments/UnknownReservation", osUnknownReservation},
		{"Payments/InvalidArgument", osInvalidPayment},
		{"Payments/AuthorityOverEvents", osPaymentAuthority},
		{"Events/RoundTrip", osEventRoundTrip},
		{"Events/ForwardOnlyAnyOrder", osForwardOnly},
		{"Events/SameStatusNewerWins", osSameStatusNewerWins},
		{"Events/Idempotent", osEventsIdempotent},
		{"Events/PaidIsFinal", osPaidIsFinal},
		{"Events/NeverWritePaidOrRefund", osEventsNeverWriteFinal},
		{"Events/InvalidBatchIsAtomic", osInvalidEvents},
		{"Events/ConcurrentWithPayments", osEventsWithPayments},
		{"Reservations/FilterAndOrder", osReservationsFilter},
		{"Reservations/ByID", osReservationByID},
		{"Orders/OnePerPayment", osOrdersOnePerPayment},
		{"Ping", osPing},
		// The refunds of refund_required payments (seckill.RefundStore), for stores that keep them.
		{"Refunds/OwedWithPayment", osRefundOwed},
		{"Refunds/ClaimLeaseRecord", osRefundClaimLease},
		{"Refunds/RetryBackoffThenFail", osRefundRetry},
		{"Refunds/RecordRefusesBadOutcome", osRefundBadOutcome},
		{"Refunds/ConcurrentClaims", osRefundConcurrentClaims},
		// Refunds go back through the gateway that took the money (openpayments.go).
		{"Refunds/GatewayFilter", osRefundGatewayFilter},
		{"Refunds/GatewayUnknownClaimedByAny", osRefundGatewayUnknown},
		{"Refunds/GatewayListed", osRefundGatewayListed},
		// Payments started at a gateway, closed there when their hold ends
		// (seckill.OpenPaymentStore, openpayments.go), for stores that keep them.
		{"OpenPayments/RecordIdempotent", osOpenPaymentIdempotent},
		{"OpenPayments/ClaimDueOfGatewayLeased", osOpenPaymentClaimLease},
		{"OpenPayments/RecordCloseByOwnerOnly", osOpenPaymentRecordClose},
		{"OpenPayments/RetryAtNextAttempt", osOpenPaymentRetry},
		{"OpenPayments/CloseSoonOnlyForward", osOpenPaymentCloseSoon},
		{"OpenPayments/PaidByRecordPayment", osOpenPaymentPaidByRecord},
		{"OpenPayments/ConcurrentClaims", osOpenPaymentConcurrentClaims},
		{"OpenPayments/InvalidArgument", osOpenPaymentInvalid},
		{"OpenPayments/PageOfReservation", osOpenPaymentPage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

// osT0 is the suite's reference time: whole milliseconds, far from the epoch, UTC.
var osT0 = time.Date(2030, 1, 2, 3, 4, 5, 123_000_000, time.UTC)

const osPrice = 1999

func osSale(id string, stock, holdback int) seckill.Sale {
	return seckill.Sale{
		ID: id, Name: "Sale " + id, PriceCents: osPrice, Stock: stock, Holdback: holdback,
		StartsAt: osT0, EndsAt: osT0.Add(time.Hour), PerUserLimit: 5, HoldSeconds: 60,
		QueueLimit: 10 * (stock - holdback), CreatedAt: osT0,
	}
}

func osCreate(t *testing.T, s seckill.OrderStore, sale seckill.Sale) seckill.Sale {
	t.Helper()
	if err := s.CreateSale(t.Context(), sale); err != nil {
		t.Fatalf("CreateSale(%s): %v", sale.ID, err)
	}
	return sale
}

// osRes is a reservation as an engine would report it.
func osRes(saleID, id, user string, q int, st seckill.ReservationStatus, seq uint64) seckill.Reservation {
	r := seckill.Reservation{
		ID: id, SaleID: saleID, UserID: user, Quantity: q, Status: st, AmountCents: int64(q) * osPrice,
		CreatedAt: osT0.Add(time.Duration(seq) * time.Millisecond), Seq: seq, IdempotencyKey: "key-" + id,
	}
	if st == seckill.StatusHeld {
		e := osT0.Add(time.Minute)
		r.ExpiresAt = &e
	}
	return r
}

func osWith(r seckill.Reservation, st seckill.ReservationStatus) seckill.Reservation {
	r.Status = st
	r.ExpiresAt = nil
	if st == seckill.StatusHeld {
		e := osT0.Add(time.Minute)
		r.ExpiresAt = &e
	}
	return r
}

func osEv(r seckill.Reservation, at time.Time) seckill.Event {
	return seckill.Event{Reservation: r, At: at}
}

func osApply(t *testing.T, s seckill.OrderStore, events ...seckill.Event) {
	t.Helper()
	if err := s.ApplyEvents(t.Context(), events); err != nil {
		t.Fatalf("ApplyEvents: %v", err)
	}
}

func osPay(t *testing.T, s seckill.OrderStore, paymentID string, r seckill.Reservation, result seckill.PaymentResult, at time.Time) seckill.PaymentResult {
	t.Helper()
	got, err := s.RecordPayment(t.Context(), seckill.PaymentRecord{
		PaymentID: paymentID, Reservation: r, AmountCents: int64(r.Quantity) * osPrice, Result: result, At: at,
	})
	if err != nil {
		t.Fatalf("RecordPayment(%s): %v", paymentID, err)
	}
	return got
}

func osWantPay(t *testing.T, s seckill.OrderStore, paymentID string, r seckill.Reservation, result, want seckill.PaymentResult, at time.Time) {
	t.Helper()
	if got := osPay(t, s, paymentID, r, result, at); got != want {
		t.Fatalf("RecordPayment(%s, %s) = %s, want %s", paymentID, result, got, want)
	}
}

func osWantCode(t *testing.T, what string, err error, want seckill.Code) {
	t.Helper()
	if got := seckill.ErrorCode(err); got != want {
		t.Fatalf("%s: error %v has code %q, want %q", what, err, got, want)
	}
}

func osSold(t *testing.T, s seckill.OrderStore, saleID string) int {
	t.Helper()
	_, sold, err := s.Sale(t.Context(), saleID)
	if err != nil {
		t.Fatalf("Sale(%s): %v", saleID, err)
	}
	return sold
}

func osWantSold(t *testing.T, s seckill.OrderStore, saleID string, want int) {
	t.Helper()
	if got := osSold(t, s, saleID); got != want {
		t.Fatalf("sale %s: sold = %d, want %d", saleID, got, want)
	}
}

func osCounts(t *testing.T, s seckill.OrderStore, saleID string, want seckill.DBCounts) {
	t.Helper()
	got, err := s.Counts(t.Context(), saleID)
	if err != nil {
		t.Fatalf("Counts(%s): %v", saleID, err)
	}
	if _, ok := s.(seckill.RefundStore); ok && want.RefundsRequired+want.RefundsPending+want.Refunded+want.RefundsFailed == 0 {
		// A store that keeps refunds: nothing has been refunded yet in the tests that leave
		// these out, so every refund_required payment's refund is refund_required.
		want.RefundsRequired = want.Refunds
	}
	if got != want {
		t.Fatalf("Counts(%s) = %+v, want %+v", saleID, got, want)
	}
}

func osList(t *testing.T, s seckill.OrderStore, saleID string, statuses ...seckill.ReservationStatus) []seckill.Reservation {
	t.Helper()
	rs, err := s.Reservations(t.Context(), saleID, statuses...)
	if err != nil {
		t.Fatalf("Reservations(%s, %v): %v", saleID, statuses, err)
	}
	return rs
}

// osGet returns the stored reservation id of saleID; it fails the test if there is none.
func osGet(t *testing.T, s seckill.OrderStore, saleID, id string) seckill.Reservation {
	t.Helper()
	for _, r := range osList(t, s, saleID) {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("reservation %s of sale %s is not stored", id, saleID)
	return seckill.Reservation{}
}

func osWantStatus(t *testing.T, s seckill.OrderStore, saleID, id string, want seckill.ReservationStatus) seckill.Reservation {
	t.Helper()
	r := osGet(t, s, saleID, id)
	if r.Status != want {
		t.Fatalf("reservation %s: status %s, want %s", id, r.Status, want)
	}
	return r
}

// osSameReservation compares every stored field. Position is the engine's live queue place
// and is not expected from a store.
func osSameReservation(t *testing.T, got, want seckill.Reservation) {
	t.Helper()
	var diffs []string
	check := func(field string, ok bool, g, w any) {
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", field, g, w))
		}
	}
	check("ID", got.ID == want.ID, got.ID, want.ID)
	check("SaleID", got.SaleID == want.SaleID, got.SaleID, want.SaleID)
	check("UserID", got.UserID == want.UserID, got.UserID, want.UserID)
	check("Quantity", got.Quantity == want.Quantity, got.Quantity, want.Quantity)
	check("Status", got.Status == want.Status, got.Status, want.Status)
	check("AmountCents", got.AmountCents == want.AmountCents, got.AmountCents, want.AmountCents)
	check("PaymentID", got.PaymentID == want.PaymentID, got.PaymentID, want.PaymentID)
	check("CreatedAt", got.CreatedAt.Equal(want.CreatedAt), got.CreatedAt, want.CreatedAt)
	check("Seq", got.Seq == want.Seq, got.Seq, want.Seq)
	check("IdempotencyKey", got.IdempotencyKey == want.IdempotencyKey, got.IdempotencyKey, want.IdempotencyKey)
	switch {
	case (got.ExpiresAt == nil) != (want.ExpiresAt == nil):
		check("ExpiresAt", false, got.ExpiresAt, want.ExpiresAt)
	case got.ExpiresAt != nil:
		check("ExpiresAt", got.ExpiresAt.Equal(*want.ExpiresAt), *got.ExpiresAt, *want.ExpiresAt)
	}
	if len(diffs) > 0 {
		t.Fatalf("reservation %s differs:\n%v", want.ID, diffs)
	}
}

func osSameSale(t *testing.T, got, want seckill.Sale) {
	t.Helper()
	if got.ID != want.ID || got.Name != want.Name || got.PriceCents != want.PriceCents ||
		got.Stock != want.Stock || got.Holdback != want.Holdback || !got.StartsAt.Equal(want.StartsAt) ||
		!got.EndsAt.Equal(want.EndsAt) || got.PerUserLimit != want.PerUserLimit ||
		got.HoldSeconds != want.HoldSeconds || got.QueueLimit != want.QueueLimit ||
		!got.CreatedAt.Equal(want.CreatedAt) || got.Listed != want.Listed || got.Currency != want.Currency {
		t.Fatalf("sale = %+v\nwant %+v", got, want)
	}
	if got.StartsAt.Location() != time.UTC || got.EndsAt.Location() != time.UTC {
		t.Fatalf("sale times are not UTC: %v, %v", got.StartsAt, got.EndsAt)
	}
}

func osSaleRoundTrip(t *testing.T, s seckill.OrderStore) {
	want := osSale("s1", 1000, 20)
	want.QueueLimit = 0 // zero is a real value (no queue), not "unset"
	osCreate(t, s, want)
	got, sold, err := s.Sale(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	osSameSale(t, got, want)
	if sold != 0 {
		t.Fatalf("new sale: sold = %d, want 0", sold)
	}
}

// osSaleListedCurrency: listed and currency are kept as given (an empty currency too, for a
// sale built in code), listed changes with UpdateSale and currency does not, and a currency
// that is not 3 lower-case letters is refused before anything is stored.
func osSaleListedCurrency(t *testing.T, s seckill.OrderStore) {
	ctx := t.Context()
	hidden := osSale("hidden", 5, 0)
	hidden.Listed, hidden.Currency = false, "eur"
	shown := osSale("shown", 5, 0)
	shown.Listed, shown.Currency, shown.CreatedAt = true, "jpy", osT0.Add(time.Second)
	bare := osSale("bare", 5, 0)
	bare.Listed, bare.CreatedAt = true, osT0.Add(2*time.Second)
	for _, sale := range []seckill.Sale{hidden, shown, bare} {
		osCreate(t, s, sale)
		got, _, err := s.Sale(ctx, sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		osSameSale(t, got, sale)
	}
	sales, _, err := s.Sales(ctx)
	if err != nil || len(sales) != 3 {
		t.Fatalf("Sales = %v, %v; want 3 sales", sales, err)
	}
	for i, want := range []seckill.Sale{hidden, shown, bare} {
		osSameSale(t, sales[i], want)
	}

	listed, unlisted := hidden, shown
	listed.Listed, unlisted.Listed = true, false
	listed.Currency, unlisted.Currency = "gbp", "" // UpdateSale keeps the stored currency
	for _, u := range []seckill.Sale{listed, unlisted} {
		if err := s.UpdateSale(ctx, u); err != nil {
			t.Fatalf("UpdateSale(%s): %v", u.ID, err)
		}
	}
	hidden.Listed, shown.Listed = true, false
	for _, want := range []seckill.Sale{hidden, shown} {
		got, _, err := s.Sale(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		osSameSale(t, got, want)
	}

	for _, c := range []string{"EUR", "eu", "euro", "e1r", "€"} {
		bad := osSale("badcur", 5, 0)
		bad.Currency = c
		osWantCode(t, fmt.Sprintf("CreateSale with currency %q", c), s.CreateSale(ctx, bad), seckill.CodeInvalidArgument)
	}
	osWantCode(t, "Sale of a sale refused for its currency", func() error { _, _, err := s.Sale(ctx, "badcur"); return err }(), seckill.CodeNotFound)
}

func osSalesOldestFirst(t *testing.T, s seckill.OrderStore) {
	sales, sold, err := s.Sales(t.Context())
	if err != nil || len(sales) != 0 || len(sold) != 0 {
		t.Fatalf("empty store: Sales = %v, %v, %v", sales, sold, err)
	}
	for i, id := range []string{"b", "a", "c"} {
		sale := osSale(id, 10, 0)
		sale.CreatedAt = osT0.Add(time.Duration([]int{2, 1, 3}[i]) * time.Second)
		osCreate(t, s, sale)
	}
	r := osRes("b", "rb", "u", 2, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	osWantPay(t, s, "pb", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0)
	sales, sold, err = s.Sales(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sale := range sales {
		ids = append(ids, sale.ID)
	}
	if !slices.Equal(ids, []string{"a", "b", "c"}) || !slices.Equal(sold, []int{0, 2, 0}) {
		t.Fatalf("Sales = %v with sold %v, want [a b c] with [0 2 0]", ids, sold)
	}
}

func osDuplicateSale(t *testing.T, s seckill.OrderStore) {
	osCreate(t, s, osSale("dup", 10, 0))
	again := osSale("dup", 99, 0)
	again.Name = "second"
	osWantCode(t, "CreateSale of an existing id", s.CreateSale(t.Context(), again), seckill.CodeConflict)
	got, _, err := s.Sale(t.Context(), "dup")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Sale dup" || got.Stock != 10 {
		t.Fatalf("a refused duplicate changed the sale: %+v", got)
	}
}

func osUpdateSale(t *testing.T, s seckill.OrderStore) {
	sale := osCreate(t, s, osSale("u", 10, 0))
	r := osRes("u", "r1", "alice", 3, seckill.StatusHeld, 1)
	osApply(t, s, osEv(r, osT0))
	osWantPay(t, s, "p1", r, seckill.PaymentApplied, seckill.PaymentApplied, osT0)

	sale.Stock, sale.Holdback, sale.EndsAt = 20, 1, osT0.Add(2*time.Hour)
	if err := s.UpdateSale(t.Context(), sale); err != nil {
		t.Fatalf("UpdateSale: %v", err)
	}
	got, sold, err := s.Sale(t.Context(), "u")
	if err != nil {
		t.Fatal(err)
	}
	osSameSale(t, got, sale)
	if sold != 3 {
		t.Fatalf("UpdateSale changed sold to %d, want 3", sold)
	}
	if err := s.UpdateSale(t.Context(), sale); err != nil {
		t.Fatalf("UpdateSale with no change: %v", err)
	}

	shrunk := sale
	shrunk.Stock, shrunk.Holdback = 4, 2 // sellable 2 < 3 sold
	osWantCode(t, "UpdateSale below the units sold", s.UpdateSale(t.Context(), shrunk), seckill.CodeConflict)
	got, sold, _ = s.Sale(t.Context(), "u")
	if got.Stock != 20 || sold != 3 {
		t.Fatalf("a refused update changed the sale: stock %d, sold %d", got.Stock, sold)
	}
}

// osDeleteSale: DeleteSale removes a sale nothing refers to, and refuses one with a reservation
// or a payment (it undoes a create whose engine load failed, never a sale in use).
func osDeleteSale(t *testing.T, s seckill.OrderStore) {
	ctx := t.Context()
	osCreate(t, s, osSale("gone", 5, 0))
	if err := s.DeleteSale(ctx, "gone"); err != nil {
		t.Fatalf("DeleteSale of an unused sale: %v", err)
	}
	_, _, err := s.Sale(ctx, "gone")
	osWantCode(t, "Sale after DeleteSale", err, seckill.CodeNotFound)
	osWantCode(t, "DeleteSale of an unknown sale", s.DeleteSale(ctx, "gone"), seckill.CodeNotFound)
	osCreate(t, s, osSale("gone", 5, 0)) // the id is free again

	osCreate(t, s, osSale("used", 5, 0))
	osApply(t, s, osEv(osRes("used", "used-1", "u1", 1, seckill.StatusHeld, 1), osT0))
	osWantCode(t, "DeleteSale of a sale with a reservation", s.DeleteSale(ctx, "used"), seckill.CodeConflict)
	osCreate(t, s, osSale("paid", 5, 0))
	osWantPay(t, s, "p-late", osRes("paid", "paid-1", "bob", 1, seckill.StatusRefundRequired, 1),
		seckill.PaymentRefundRequired, seckill.PaymentRefundRequired, osT0)
	osWantCode(t, "DeleteSale of a sale with a payment", s.DeleteSale(ctx, "paid"), seckill.CodeConflict)
	for _, id := range []string{"used", "paid"} {
		if _, _, err := s.Sale(ctx, id); err != nil {
			t.Fatalf("a refused DeleteSale removed %s: %v", id, err)
		}
	}
}

// osSaleBounds: the store refuses a sale outside the bounds every engine keeps (seckill.Sale.Validate),
// so no row is written that an engine would refuse.
func osSaleBounds(t *testing.T, s seckill.OrderStore) {
	bad := map[string]func(*seckill.Sale){
		"before 1970":    func(x *seckill.Sale) { x.StartsAt = seckill.MinTime.Add(-time.Millisecond) },
		"past MaxTime":   func(x *seckill.Sale) { x.EndsAt = seckill.MaxTime.Add(time.Millisecond) },
		"amount":         func(x *seckill.Sale) { x.PriceCents, x.PerUserLimit = seckill.MaxPriceCents, 10_000 },
		"NUL in name":    func(x *seckill.Sale) { x.Name = "a\x00b" },
		"dot id":         func(x *seckill.Sale) { x.ID = ".." },
		"ends <= starts": func(x *seckill.Sale) { x.EndsAt = x.StartsAt },
	}
	for what, mutate := range bad {
		sale := osSale("bounds", 5, 0)
		mutate(&sale)
		osWantCode(t, "CreateSale with "+what, s.CreateSale(t.Context(), sale), seckill.CodeInvalidArgument)
	}
	if _, _, err := s.Sale(t.Context(), "bounds"); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("a refused sale was stored: %v", err)
	}
}

func osNotFound(t *testing.T, s seckill.OrderStore) {
	ctx := t.Context()
	_, _, err := s.Sale(ctx, "nope")
	osWantCode(t, "Sale", err, seckill.CodeNotFound)
	osWantCode(t, "UpdateSale", s.UpdateSale(ctx, osSale("nope", 1, 0)), seckill.CodeNotFound)
	_, err = s.Counts(ctx, "nope")
	osWantCode(t, "Counts", err, seckill.CodeNotFound)
	_, err = s.Reservations(ctx, "nope")
	osWantCode(t, "Reservations", err, seckill.CodeNotFound)
	_, err = s.PaymentResult(ctx, "nope")
	osWantCode(t, "PaymentResult", err, seckill.CodeNotFound)
	orders, err := s.Orders(ctx, "nobody")
	if err != nil || len(orders) != 0 {
		t.Fatalf("Orders of a user without payments = %v, %v; want none", orders, err)
	}
}

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
	results := osRace(t, n, func(i int) (seckill.PaymentResult, error) {
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

// osRace runs fn(0..n-1) in n goroutines released at once and counts the results. Any error
// fails the test.
func osRace(t *testing.T, n int, fn func(i int) (seckill.PaymentResult, error)) map[seckill.PaymentResult]int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		start   = make(chan struct{})
		results = map[seckill.PaymentResult]int{}
		errs    []error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("goroutine %d: %w", i, err))
				return
			}
			results[res]++
		}()
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
	results := osRace(t, n, func(i int) (seckill.PaymentResult, error) {
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
	results := osRace(t, n, func(i int) (seckill.PaymentResult, error) {
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

// osRefunds returns s as a RefundStore, or skips the test for a store that keeps no refunds.
func osRefunds(t *testing.T, s seckill.OrderStore) seckill.RefundStore {
	t.Helper()
	rs, ok := s.(seckill.RefundStore)
	if !ok {
		t.Skip("the store keeps no refund records (seckill.RefundStore)")
	}
	return rs
}

// osOwe records n refund_required payments p0..p<n-1> for alice on sale "s" (one unit each,
// stock 0 so none can be paid), the i-th at osT0+i s, and returns the store as a RefundStore.
func osOwe(t *testing.T, s seckill.OrderStore, n int) seckill.RefundStore {
	t.Helper()
	rs := osRefunds(t, s)
	osCreate(t, s, osSale("s", 0, 0))
	for i := range n {
		r := osRes("s", fmt.Sprintf("r%d", i), "alice", 1, seckill.StatusExpired, uint64(i+1))
		osWantPay(t, s, fmt.Sprintf("p%d", i), r, seckill.PaymentLateApplied, seckill.PaymentRefundRequired,
			osT0.Add(time.Duration(i)*time.Second))
	}
	return rs
}

func osClaim(t *testing.T, rs seckill.RefundStore, owner string, now time.Time, limit int) []seckill.Refund {
	t.Helper()
	got, err := rs.ClaimRefunds(t.Context(), "gw", owner, now, time.Minute, limit)
	if err != nil {
		t.Fatalf("ClaimRefunds(%s): %v", owner, err)
	}
	return got
}

func osRecord(t *testing.T, rs seckill.RefundStore, o seckill.RefundOutcome) {
	t.Helper()
	if err := rs.RecordRefund(t.Context(), o); err != nil {
		t.Fatalf("RecordRefund(%+v): %v", o, err)
	}
}

func osRefundCounts(t *testing.T, rs seckill.RefundStore, want seckill.RefundCounts) {
	t.Helper()
	got, err := rs.RefundCounts(t.Context())
	if err != nil || got.Required != want.Required || got.Pending != want.Pending || got.Refunded != want.Refunded ||
		got.Failed != want.Failed || !got.OldestOpen.Equal(want.OldestOpen) {
		t.Fatalf("RefundCounts = %+v, %v; want %+v", got, err, want)
	}
}

// Every refund_required payment owes a refund, refund_required from the start, shown on the
// order and counted per sale; a paid order owes none.
func osRefundOwed(t *testing.T, s seckill.OrderStore) {
	rs := osOwe(t, s, 1)
	osCreate(t, s, osSale("paid", 1, 0))
	rp := osRes("paid", "rp", "alice", 1, seckill.StatusHeld, 1)
	osApply(t, s, osEv(rp, osT0))
	osWantPay(t, s, "pp", rp, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(time.Hour))
	orders, err := s.Orders(t.Context(), "alice")
	if err != nil || len(orders) != 2 || orders[0].PaymentID != "pp" || orders[0].RefundStatus != "" ||
		orders[1].PaymentID != "p0" || orders[1].RefundStatus != seckill.RefundRequired {
		t.Fatalf("Orders(alice) = %+v, %v; want pp (no refund) and p0 refund_required", orders, err)
	}
	osCounts(t, s, "s", seckill.DBCounts{Refunds: 1, RefundsRequired: 1})
	osCounts(t, s, "paid", seckill.DBCounts{Sold: 1, PaidUnits: 1, PaidOrders: 1})
	list, err := rs.Refunds(t.Context(), seckill.RefundRequired, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("Refunds(refund_required) = %+v, %v; want p0", list, err)
	}
	want := seckill.Refund{PaymentID: "p0", ReservationID: "r0", SaleID: "s", UserID: "alice", AmountCents: osPrice,
		Status: seckill.RefundRequired, NextAttemptAt: osT0, CreatedAt: osT0, UpdatedAt: osT0}
	if got := list[0]; got.PaymentID != want.PaymentID || got.ReservationID != want.ReservationID || got.SaleID != want.SaleID ||
		got.UserID != want.UserID || got.AmountCents != want.AmountCents || got.Status != want.Status || got.Attempts != 0 ||
		!got.NextAttemptAt.Equal(want.NextAttemptAt) || !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("refund = %+v, want %+v", got, want)
	}
	osRefundCounts(t, rs, seckill.RefundCounts{Required: 1, OldestOpen: osT0})
}

// A claim leases a refund to one owner: nobody else gets it until the lease ends; after it
// ends another owner may take it over, and then the first may no longer record.
func osRefundClaimLease(t *testing.T, s seckill.OrderStore) {
	rs := osOwe(t, s, 1)
	now := osT0.Add(time.Hour)
	got := osClaim(t, rs, "a", now, 10)
	if len(got) != 1 || got[0].PaymentID != "p0" || got[0].Status != seckill.RefundPending || got[0].Attempts != 1 ||
		got[0].AmountCents != osPrice {
		t.Fatalf("first claim = %+v; want p0 refund_pending, attempt 1", got)
	}
	if again := osClaim(t, rs, "b", now.Add(59*time.Second), 10); len(again) != 0 {
		t.Fatalf("claim while the lease lives = %+v; want none", again)
	}
	osRefundCounts(t, rs, seckill.RefundCounts{Pending: 1, OldestOpen: osT0})
	osCounts(t, s, "s", seckill.DBCounts{Refunds: 1, RefundsPending: 1})
	orders, _ := s.Orders(t.Context(), "alice")
	if len(orders) != 1 || orders[0].RefundStatus != seckill.RefundPending {
		t.Fatalf("Orders(alice) = %+v; want p0 refund_pending", orders)
	}

	later := now.Add(time.Minute) // a's lease has ended: a crashed, say
	taken := osClaim(t, rs, "b", later, 10)
	if len(taken) != 1 || taken[0].PaymentID != "p0" || taken[0].Attempts != 2 {
		t.Fatalf("claim after the lease = %+v; want p0, attempt 2", taken)
	}
	err := rs.RecordRefund(t.Context(), seckill.RefundOutcome{PaymentID: "p0", Owner: "a", Status: seckill.Refunded,
		RefundID: "re_a", At: later})
	osWantCode(t, "record by an owner whose lease was taken over", err, seckill.CodeConflict)
	osRecord(t, rs, seckill.RefundOutcome{PaymentID: "p0", Owner: "b", Status: seckill.Refunded, RefundID: "re_b", At: later})
	if more := osClaim(t, rs, "c", later.Add(time.Hour), 10); len(more) != 0 {
		t.Fatalf("claim of a refunded refund = %+v; want none", more)
	}
	err = rs.RecordRefund(t.Context(), seckill.RefundOutcome{PaymentID: "p0", Owner: "b", Status: seckill.RefundFailed, At: later})
	osWantCode(t, "record on a refunded refund", err, seckill.CodeConflict)
	list, err := rs.Refunds(t.Context(), seckill.Refunded, 10)
	if err != nil || len(list) != 1 || list[0].RefundID != "re_b" || list[0].Attempts != 2 || !list[0].UpdatedAt.Equal(later) {
		t.Fatalf("Refunds(refunded) = %+v, %v; want p0 with re_b after 2 attempts", list, err)
	}
	osRefundCounts(t, rs, seckill.RefundCounts{Refunded: 1})
	osCounts(t, s, "s", seckill.DBCounts{Refunds: 1, Refunded: 1})
	osWantCode(t, "record on an unknown refund", rs.RecordRefund(t.Context(),
		seckill.RefundOutcome{PaymentID: "nope", Owner: "b", Status: seckill.Refunded, At: later}), seckill.CodeNotFound)
}

// A retry is due only at its next attempt time, keeps the gateway's refund id, and a failure
// ends refund_failed, listed with its reason and never claimed again.
func osRefundRetry(t *testing.T, s seckill.OrderStore) {
	rs := osOwe(t, s, 2)
	now := osT0.Add(time.Hour)
	if got := osClaim(t, rs, "a", now, 1); len(got) != 1 || got[0].PaymentID != "p0" {
		t.Fatalf("claim with limit 1 = %+v; want the longest due, p0", got)
	}
	osRecord(t, rs, seckill.RefundOutcome{PaymentID: "p0", Owner: "a", Status: seckill.RefundPending,
		RefundID: "re_1", Error: "gateway timeout", NextAttemptAt: now.Add(10 * time.Second), At: now})
	if got := osClaim(t, rs, "a", now.Add(9*time.Second), 10); len(got) != 1 || got[0].PaymentID != "p1" {
		t.Fatalf("claim before p0's next attempt = %+v; want p1 only", got)
	}
	got := osClaim(t, rs, "b", now.Add(10*time.Second), 10)
	if len(got) != 1 || got[0].PaymentID != "p0" || got[0].Attempts != 2 || got[0].RefundID != "re_1" || got[0].LastError != "gateway timeout" {
		t.Fatalf("claim at p0's next attempt = %+v; want p0, attempt 2, re_1, its last error", got)
	}
	long := strings.Repeat("é", 1000) // longer than any store keeps; cut on a character boundary
	osRecord(t, rs, seckill.RefundOutcome{PaymentID: "p0", Owner: "b", Status: seckill.RefundFailed,
		Error: long, At: now.Add(11 * time.Second)})
	failed, err := rs.Refunds(t.Context(), seckill.RefundFailed, 10)
	if err != nil || len(failed) != 1 || failed[0].PaymentID != "p0" || failed[0].RefundID != "re_1" ||
		failed[0].LastError == "" || !strings.HasPrefix(long, failed[0].LastError) || !utf8.ValidString(failed[0].LastError) {
		t.Fatalf("Refunds(refund_failed) = %+v, %v; want p0 with a prefix of its reason", failed, err)
	}
	if again := osClaim(t, rs, "c", now.Add(24*time.Hour), 10); len(again) != 1 || again[0].PaymentID != "p1" {
		t.Fatalf("claim a day later = %+v; want p1 (its lease ended), never the failed p0", again)
	}
	osRefundCounts(t, rs, seckill.RefundCounts{Pending: 1, Failed: 1, OldestOpen: osT0.Add(time.Second)})
	osCounts(t, s, "s", seckill.DBCounts{Refunds: 2, RefundsPending: 1, RefundsFailed: 1})
}

func osRefundBadOutcome(t *testing.T, s seckill.OrderStore) {
	rs := osOwe(t, s, 1)
	now := osT0.Add(time.Hour)
	osClaim(t, rs, "a", now, 1)
	for _, o := range []seckill.RefundOutcome{
		{PaymentID: "p0", Owner: "a", Status: seckill.RefundRequired, At: now},
		{PaymentID: "p0", Owner: "a", Status: "paid", At: now},
		{PaymentID: "p0", Owner: "", Status: seckill.Refunded, At: now},
		{PaymentID: "p0", Owner: "a", Status: seckill.Refunded, RefundID: strings.Repeat("x", 300), At: now},
	} {
		osWantCode(t, fmt.Sprintf("RecordRefund(%+v)", o), rs.RecordRefund(t.Context(), o), seckill.CodeInvalidArgument)
	}
	_, err := rs.ClaimRefunds(t.Context(), "gw", "", now, time.Minute, 1)
	osWantCode(t, "claim without an owner", err, seckill.CodeInvalidArgument)
	osRefundCounts(t, rs, seckill.RefundCounts{Pending: 1, OldestOpen: osT0})
}

// Claimers racing on one store never get the same refund while its lease lives, and together
// they get every due one.
func osRefundConcurrentClaims(t *testing.T, s seckill.OrderStore) {
	const n, claimers = 40, 6
	rs := osOwe(t, s, n)
	now := osT0.Add(time.Hour)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		owner = map[string]string{}
		dup   []string
		start = make(chan struct{})
	)
	for c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			me := fmt.Sprintf("claimer-%d", c)
			for range n { // small batches, so that the claimers interleave
				got, err := rs.ClaimRefunds(t.Context(), "gw", me, now, time.Minute, 3)
				if err != nil {
					t.Errorf("%s: %v", me, err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					if prev, ok := owner[r.PaymentID]; ok {
						dup = append(dup, fmt.Sprintf("%s by %s and %s", r.PaymentID, prev, me))
					}
					owner[r.PaymentID] = me
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(dup) > 0 {
		t.Fatalf("refunds claimed twice while leased: %v", dup)
	}
	if len(owner) != n {
		t.Fatalf("%d of %d refunds claimed", len(owner), n)
	}
	osRefundCounts(t, rs, seckill.RefundCounts{Pending: n, OldestOpen: osT0})
}
