// This file is the OrderStore half of package seckilltest (the package comment is in doc.go).
// The contract is written down once, as tests, so that the SQLite, MySQL and PostgreSQL stores
// cannot drift apart; a store's own tests only add what is specific to it.

package seckilltest

import (
	"fmt"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestOrderStore runs the seckill.OrderStore conformance suite. open must return a fresh,
// empty, migrated store for the test it is given, and close it when that test ends
// (t.Cleanup). The suite uses nothing but the OrderStore interface, so every dialect runs it
// unchanged; times are whole milliseconds, the precision every store keeps.
func TestOrderStore(t *testing.T, open func(t *testing.T) seckill.OrderStore) {
	t.Helper()
	tests := []story[seckill.OrderStore]{
		{"Sales/RoundTrip", osSaleRoundTrip},
		{"Sales/OldestFirst", osSalesOldestFirst},
		{"Sales/DuplicateIDIsConflict", osDuplicateSale},
		{"Sales/Update", osUpdateSale},
		{"Sales/DeleteOnlyUnused", osDeleteSale},
		{"Sales/ListedAndCurrency", osSaleListedCurrency},
		{"Sales/PreheatSeconds", osSalePreheat},
		{"Sales/WaitingRoom", osSaleRoom},
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
		// The waiting rooms' journal (seckill.RoomJournal, orderstore_rooms.go).
		{"RoomJournal/EntrantsRoundTrip", osRoomEntrantsRoundTrip},
		{"RoomJournal/AdmittedMonotonic", osRoomAdmittedMonotonic},
		{"RoomJournal/GoesWithItsSale", osRoomJournalGoesWithItsSale},
	}
	runStories(t, tests, nil, open)
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
		!got.CreatedAt.Equal(want.CreatedAt) || got.Listed != want.Listed || got.Currency != want.Currency ||
		got.PreheatSeconds != want.PreheatSeconds {
		t.Fatalf("sale = %+v\nwant %+v", got, want)
	}
	if (got.Room == nil) != (want.Room == nil) || got.Room != nil && *got.Room != *want.Room {
		t.Fatalf("sale %s: waiting room = %+v, want %+v", want.ID, got.Room, want.Room)
	}
	if got.StartsAt.Location() != time.UTC || got.EndsAt.Location() != time.UTC {
		t.Fatalf("sale times are not UTC: %v, %v", got.StartsAt, got.EndsAt)
	}
}
