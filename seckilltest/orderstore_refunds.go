// OrderStore conformance cases: refunds (owed, claimed, recorded, counted). TestOrderStore in
// orderstore.go runs them.

package seckilltest

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/leasedjob"
)

// osRefunds returns s as a RefundStore, or skips the test for a store that keeps no refunds.
func osRefunds(t *testing.T, s seckill.OrderStore) seckill.RefundStore {
	t.Helper()
	return osAs[seckill.RefundStore](t, s, "the store keeps no refund records (seckill.RefundStore)")
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
	osConcurrentClaims(t, leasedjob.Queue[seckill.Refund, seckill.RefundOutcome]{Claim: rs.ClaimRefunds, Record: rs.RecordRefund},
		func(r seckill.Refund) string { return r.PaymentID }, osT0.Add(time.Hour), n, claimers)
	osRefundCounts(t, rs, seckill.RefundCounts{Pending: n, OldestOpen: osT0})
}
