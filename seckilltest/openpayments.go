// This file holds the conformance cases of seckill.OpenPaymentStore (the payments started at a
// gateway, closed there when their hold ends) and of the gateway filter of
// seckill.RefundStore.ClaimRefunds, registered in TestOrderStore's table.

package seckilltest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/leasedjob"
)

// osOpenPayments returns s as an OpenPaymentStore, or skips the test for a store that keeps
// no record of started payments.
func osOpenPayments(t *testing.T, s seckill.OrderStore) seckill.OpenPaymentStore {
	t.Helper()
	return osAs[seckill.OpenPaymentStore](t, s, "the store keeps no record of started payments (seckill.OpenPaymentStore)")
}

// osOpen records payment id of reservation res, started at gateway gw, due for closing at
// closeAt (recorded at osT0).
func osOpen(t *testing.T, ops seckill.OpenPaymentStore, id, res, gw string, closeAt time.Time) {
	t.Helper()
	err := ops.RecordOpenPayment(t.Context(), seckill.OpenPayment{PaymentID: id, ReservationID: res, Gateway: gw,
		Status: seckill.PaymentOpen, CloseAt: closeAt}, osT0)
	if err != nil {
		t.Fatalf("RecordOpenPayment(%s): %v", id, err)
	}
}

func osClaimOpen(t *testing.T, ops seckill.OpenPaymentStore, gw, owner string, now time.Time, limit int) []seckill.OpenPayment {
	t.Helper()
	got, err := ops.ClaimOpenPayments(t.Context(), gw, owner, now, time.Minute, limit)
	if err != nil {
		t.Fatalf("ClaimOpenPayments(%s, %s): %v", gw, owner, err)
	}
	return got
}

// osClaimedIDs returns the payment ids of a claim, in its order.
func osClaimedIDs(ps []seckill.OpenPayment) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.PaymentID
	}
	return ids
}

func osWantClaimed(t *testing.T, what string, got []seckill.OpenPayment, want ...string) {
	t.Helper()
	if ids := osClaimedIDs(got); strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("%s claimed %v, want %v", what, ids, want)
	}
}

func osRecordClose(t *testing.T, ops seckill.OpenPaymentStore, o seckill.CloseOutcome) {
	t.Helper()
	if err := ops.RecordClose(t.Context(), o); err != nil {
		t.Fatalf("RecordClose(%+v): %v", o, err)
	}
}

// osNeverDue is a time by which every open payment of the suite is due.
var osNeverDue = osT0.Add(365 * 24 * time.Hour)

// Recording a payment id again changes nothing: one row, and the first close time stands,
// whether the second is earlier or later.
func osOpenPaymentIdempotent(t *testing.T, s seckill.OrderStore) {
	ops := osOpenPayments(t, s)
	first := osT0.Add(time.Minute)
	osOpen(t, ops, "pay1", "r1", "gw", first)
	osOpen(t, ops, "pay1", "r1", "gw", osT0.Add(time.Second))     // earlier: ignored
	osOpen(t, ops, "pay1", "r-other", "gw2", osT0.Add(time.Hour)) // anything else: ignored
	osWantClaimed(t, "claim before the first close time", osClaimOpen(t, ops, "gw", "a", first.Add(-time.Millisecond), 10))
	got := osClaimOpen(t, ops, "gw", "a", first, 10)
	osWantClaimed(t, "claim at the first close time", got, "pay1")
	if p := got[0]; p.ReservationID != "r1" || p.Gateway != "gw" || p.Status != seckill.PaymentOpen ||
		!p.CloseAt.Equal(first) || p.Attempts != 1 {
		t.Fatalf("claimed %+v; want r1 of gw, open, due at %v, attempt 1", p, first)
	}
	osWantClaimed(t, "claim by the other gateway", osClaimOpen(t, ops, "gw2", "b", osNeverDue, 10))
	osWantClaimed(t, "claim after the lease", osClaimOpen(t, ops, "gw", "b", osNeverDue, 10), "pay1")
}

// A claim returns only the payments due (close time reached), only of the named gateway, the
// longest due first, up to the limit; a lease keeps a payment from every other claim until it
// ends, and then it is claimed again, its attempts counted.
func osOpenPaymentClaimLease(t *testing.T, s seckill.OrderStore) {
	ops := osOpenPayments(t, s)
	osOpen(t, ops, "p-late", "r-late", "gw", osT0.Add(2*time.Minute))
	osOpen(t, ops, "p2", "r2", "gw", osT0.Add(time.Minute+time.Second))
	osOpen(t, ops, "p1", "r1", "gw", osT0.Add(time.Minute))
	osOpen(t, ops, "p-other", "r-other", "other", osT0)
	now := osT0.Add(time.Minute + time.Second)
	osWantClaimed(t, "claim with limit 1", osClaimOpen(t, ops, "gw", "a", now, 1), "p1")
	got := osClaimOpen(t, ops, "gw", "a", now, 10)
	osWantClaimed(t, "second claim", got, "p2")
	if got[0].Attempts != 1 || got[0].Gateway != "gw" || !got[0].CloseAt.Equal(now) {
		t.Fatalf("claimed %+v; want attempt 1 of gw, due at %v", got[0], now)
	}
	osWantClaimed(t, "claim while the leases live", osClaimOpen(t, ops, "gw", "b", now.Add(58*time.Second), 10))

	later := now.Add(time.Minute) // the leases have ended: the closer died, say
	got = osClaimOpen(t, ops, "gw", "b", later, 10)
	osWantClaimed(t, "claim after the leases", got, "p1", "p2", "p-late")
	for _, p := range got {
		if want := map[string]int{"p1": 2, "p2": 2, "p-late": 1}[p.PaymentID]; p.Attempts != want {
			t.Fatalf("payment %s: attempts %d, want %d", p.PaymentID, p.Attempts, want)
		}
	}
	got = osClaimOpen(t, ops, "other", "c", osT0, 10)
	osWantClaimed(t, "claim by the other gateway", got, "p-other")
	if got[0].Gateway != "other" || got[0].ReservationID != "r-other" {
		t.Fatalf("claimed %+v; want r-other of gateway other", got[0])
	}
}

// The owner's record ends a payment (never claimed again); a record by another owner, or on a
// payment no longer open, is a conflict and changes nothing; an unknown payment is not_found.
func osOpenPaymentRecordClose(t *testing.T, s seckill.OrderStore) {
	ops := osOpenPayments(t, s)
	osOpen(t, ops, "p1", "r1", "gw", osT0)
	osOpen(t, ops, "p2", "r2", "gw", osT0)
	now := osT0.Add(time.Second)
	osWantClaimed(t, "claim", osClaimOpen(t, ops, "gw", "a", now, 10), "p1", "p2")
	err := ops.RecordClose(t.Context(), seckill.CloseOutcome{PaymentID: "p1", Owner: "b", Status: seckill.PaymentClosed, At: now})
	osWantCode(t, "record by another owner", err, seckill.CodeConflict)
	osWantClaimed(t, "claim while a's lease lives", osClaimOpen(t, ops, "gw", "b", now.Add(59*time.Second), 10))

	osRecordClose(t, ops, seckill.CloseOutcome{PaymentID: "p1", Owner: "a", Status: seckill.PaymentClosed, At: now})
	osRecordClose(t, ops, seckill.CloseOutcome{PaymentID: "p2", Owner: "a", Status: seckill.PaymentPaid, At: now})
	for _, st := range []seckill.OpenPaymentStatus{seckill.PaymentClosed, seckill.PaymentOpen, seckill.PaymentPaid} {
		for _, id := range []string{"p1", "p2"} {
			err := ops.RecordClose(t.Context(), seckill.CloseOutcome{PaymentID: id, Owner: "a", Status: st,
				NextAttemptAt: now, At: now})
			osWantCode(t, fmt.Sprintf("record %s on ended %s", st, id), err, seckill.CodeConflict)
		}
	}
	osWantClaimed(t, "claim of ended payments", osClaimOpen(t, ops, "gw", "c", osNeverDue, 10))
	err = ops.RecordClose(t.Context(), seckill.CloseOutcome{PaymentID: "nope", Owner: "a", Status: seckill.PaymentClosed, At: now})
	osWantCode(t, "record on an unknown payment", err, seckill.CodeNotFound)
}

// A failed close recorded open with a next attempt is not claimed before that attempt is due,
// and is claimed then, its attempts counted.
func osOpenPaymentRetry(t *testing.T, s seckill.OrderStore) {
	ops := osOpenPayments(t, s)
	osOpen(t, ops, "p1", "r1", "gw", osT0)
	now := osT0.Add(time.Second)
	osWantClaimed(t, "claim", osClaimOpen(t, ops, "gw", "a", now, 10), "p1")
	next := now.Add(10 * time.Second)
	osRecordClose(t, ops, seckill.CloseOutcome{PaymentID: "p1", Owner: "a", Status: seckill.PaymentOpen,
		Error: strings.Repeat("gateway unreachable ", 100), NextAttemptAt: next, At: now})
	osWantClaimed(t, "claim before the next attempt", osClaimOpen(t, ops, "gw", "b", next.Add(-time.Millisecond), 10))
	got := osClaimOpen(t, ops, "gw", "b", next, 10)
	osWantClaimed(t, "claim at the next attempt", got, "p1")
	if got[0].Attempts != 2 || !got[0].CloseAt.Equal(next) || got[0].Status != seckill.PaymentOpen {
		t.Fatalf("claimed %+v; want open, attempt 2, due at %v", got[0], next)
	}
	osRecordClose(t, ops, seckill.CloseOutcome{PaymentID: "p1", Owner: "b", Status: seckill.PaymentClosed, At: next})
	osWantClaimed(t, "claim after the close", osClaimOpen(t, ops, "gw", "c", osNeverDue, 10))
}

// CloseSoon brings a close due later forward, never pushes an earlier one back, and leaves
// closed and paid payments alone.
func osOpenPaymentCloseSoon(t *testing.T, s seckill.OrderStore) {
	ops := osOpenPayments(t, s)
	osOpen(t, ops, "p-later", "r-later", "gw", osT0.Add(time.Hour))
	osOpen(t, ops, "p-earlier", "r-earlier", "gw", osT0.Add(5*time.Second))
	osOpen(t, ops, "p-closed", "r-closed", "gw", osT0)
	osOpen(t, ops, "p-untouched", "r-untouched", "gw", osT0.Add(time.Hour))
	osWantClaimed(t, "claim", osClaimOpen(t, ops, "gw", "a", osT0, 10), "p-closed")
	osRecordClose(t, ops, seckill.CloseOutcome{PaymentID: "p-closed", Owner: "a", Status: seckill.PaymentClosed, At: osT0})

	soon := osT0.Add(10 * time.Second)
	for _, r := range []string{"r-later", "r-earlier", "r-closed", "r-unknown"} {
		if err := ops.CloseSoon(t.Context(), r, soon); err != nil {
			t.Fatalf("CloseSoon(%s): %v", r, err)
		}
	}
	osWantClaimed(t, "claim at the earlier close time", osClaimOpen(t, ops, "gw", "b", osT0.Add(5*time.Second), 10), "p-earlier")
	got := osClaimOpen(t, ops, "gw", "b", soon, 10)
	osWantClaimed(t, "claim at the cancel", got, "p-later")
	if !got[0].CloseAt.Equal(soon) {
		t.Fatalf("brought forward to %v, want %v", got[0].CloseAt, soon)
	}
	for _, id := range []string{"p-earlier", "p-later"} {
		osRecordClose(t, ops, seckill.CloseOutcome{PaymentID: id, Owner: "b", Status: seckill.PaymentClosed, At: soon})
	}
	osWantClaimed(t, "claim before the untouched one is due", osClaimOpen(t, ops, "gw", "c", osT0.Add(time.Hour-time.Millisecond), 10))
	osWantClaimed(t, "claim at the untouched one's close time", osClaimOpen(t, ops, "gw", "c", osT0.Add(time.Hour), 10), "p-untouched")
}

// The payment of a recorded payment is never closed, whatever the engine made of it: paid or
// refund_required, the money arrived. CloseSoon leaves it alone too.
func osOpenPaymentPaidByRecord(t *testing.T, s seckill.OrderStore) {
	ops := osOpenPayments(t, s)
	osCreate(t, s, osSale("s", 5, 0))
	held := osRes("s", "r-held", "alice", 1, seckill.StatusHeld, 1)
	osApply(t, s, osEv(held, osT0))
	late := osRes("s", "r-late", "bob", 1, seckill.StatusExpired, 2)
	osOpen(t, ops, "p-applied", "r-held", "gw", osT0.Add(time.Minute))
	osOpen(t, ops, "p-refund", "r-late", "gw", osT0.Add(time.Minute))
	osOpen(t, ops, "p-open", "r-open", "gw", osT0.Add(time.Minute))
	osWantPay(t, s, "p-applied", held, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(time.Second))
	osWantPay(t, s, "p-refund", late, seckill.PaymentRefundRequired, seckill.PaymentRefundRequired, osT0.Add(time.Second))
	for _, r := range []string{"r-held", "r-late"} {
		if err := ops.CloseSoon(t.Context(), r, osT0.Add(2*time.Second)); err != nil {
			t.Fatalf("CloseSoon(%s): %v", r, err)
		}
	}
	osWantClaimed(t, "claim after the payments", osClaimOpen(t, ops, "gw", "a", osNeverDue, 10), "p-open")
	err := ops.RecordClose(t.Context(), seckill.CloseOutcome{PaymentID: "p-applied", Owner: "a", Status: seckill.PaymentClosed, At: osNeverDue})
	osWantCode(t, "record close on a paid payment", err, seckill.CodeConflict)
}

// Claimers racing on one store never get the same payment while its lease lives, and
// together they get every due one: each exactly once.
func osOpenPaymentConcurrentClaims(t *testing.T, s seckill.OrderStore) {
	const n, claimers = 50, 8
	ops := osOpenPayments(t, s)
	for i := range n {
		osOpen(t, ops, fmt.Sprintf("p%02d", i), fmt.Sprintf("r%02d", i), "gw", osT0.Add(time.Duration(i)*time.Millisecond))
	}
	osConcurrentClaims(t, leasedjob.Queue[seckill.OpenPayment, seckill.CloseOutcome]{Claim: ops.ClaimOpenPayments, Record: ops.RecordClose},
		func(p seckill.OpenPayment) string { return p.PaymentID }, osT0.Add(time.Second), n, claimers)
}

// Bad input is invalid_argument and records nothing.
func osOpenPaymentInvalid(t *testing.T, s seckill.OrderStore) {
	ops := osOpenPayments(t, s)
	ctx := t.Context()
	for _, p := range []seckill.OpenPayment{
		{ReservationID: "r", Gateway: "gw", CloseAt: osT0},
		{PaymentID: "p", Gateway: "gw", CloseAt: osT0},
		{PaymentID: "p", ReservationID: "r", CloseAt: osT0},
		{PaymentID: "p", ReservationID: "r", Gateway: strings.Repeat("g", 100), CloseAt: osT0},
		{PaymentID: strings.Repeat("p", 300), ReservationID: "r", Gateway: "gw", CloseAt: osT0},
	} {
		osWantCode(t, fmt.Sprintf("RecordOpenPayment(%.40s…)", fmt.Sprintf("%+v", p)), ops.RecordOpenPayment(ctx, p, osT0), seckill.CodeInvalidArgument)
	}
	for _, c := range []struct {
		gw, owner string
		lease     time.Duration
		limit     int
	}{
		{"", "a", time.Minute, 1}, {"gw", "", time.Minute, 1}, {"gw", "a", 0, 1}, {"gw", "a", -time.Second, 1},
		{"gw", "a", time.Minute, 0}, {"gw", strings.Repeat("o", 100), time.Minute, 1},
	} {
		_, err := ops.ClaimOpenPayments(ctx, c.gw, c.owner, osT0, c.lease, c.limit)
		osWantCode(t, fmt.Sprintf("ClaimOpenPayments(%q, %.10q, %v, %d)", c.gw, c.owner, c.lease, c.limit), err, seckill.CodeInvalidArgument)
	}
	osOpen(t, ops, "p", "r", "gw", osT0)
	osWantClaimed(t, "claim", osClaimOpen(t, ops, "gw", "a", osT0, 10), "p")
	for _, o := range []seckill.CloseOutcome{
		{Owner: "a", Status: seckill.PaymentClosed, At: osT0},
		{PaymentID: "p", Status: seckill.PaymentClosed, At: osT0},
		{PaymentID: "p", Owner: "a", At: osT0},
		{PaymentID: "p", Owner: "a", Status: "refunded", At: osT0},
	} {
		osWantCode(t, fmt.Sprintf("RecordClose(%+v)", o), ops.RecordClose(ctx, o), seckill.CodeInvalidArgument)
	}
	// Nothing was recorded: the one payment is still a's until its lease ends.
	osWantClaimed(t, "claim while a's lease lives", osClaimOpen(t, ops, "gw", "b", osT0.Add(59*time.Second), 10))
	osWantClaimed(t, "claim after a's lease", osClaimOpen(t, ops, "gw", "b", osT0.Add(time.Minute), 10), "p")
}

// osOweVia records a refund_required payment id of one unit for alice on sale "s" (which must
// exist, without stock), taken by gateway gw.
func osOweVia(t *testing.T, s seckill.OrderStore, id, gw string, seq uint64) {
	t.Helper()
	r := osRes("s", "r-"+id, "alice", 1, seckill.StatusExpired, seq)
	got, err := s.RecordPayment(t.Context(), seckill.PaymentRecord{PaymentID: id, Reservation: r, AmountCents: osPrice,
		Result: seckill.PaymentLateApplied, At: osT0.Add(time.Duration(seq) * time.Second), Gateway: gw})
	if err != nil || got != seckill.PaymentRefundRequired {
		t.Fatalf("RecordPayment(%s via %q) = %s, %v; want refund_required", id, gw, got, err)
	}
}

func osRefundIDs(rs []seckill.Refund) string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.PaymentID + "@" + r.Gateway
	}
	return strings.Join(ids, ",")
}

// A refund goes back through the gateway that took the money: a refunder of another gateway
// never claims it. A refund whose gateway was not recorded ("") is claimed by any refunder.
func osRefundGatewayFilter(t *testing.T, s seckill.OrderStore) {
	rs := osRefunds(t, s)
	osCreate(t, s, osSale("s", 0, 0))
	osOweVia(t, s, "p-a", "a", 1)
	osOweVia(t, s, "p-b", "b", 2)
	now := osT0.Add(time.Hour)
	claim := func(gw, owner string, at time.Time) string {
		t.Helper()
		got, err := rs.ClaimRefunds(t.Context(), gw, owner, at, time.Minute, 10)
		if err != nil {
			t.Fatalf("ClaimRefunds(%s, %s): %v", gw, owner, err)
		}
		return osRefundIDs(got)
	}
	if got := claim("c", "c1", now); got != "" {
		t.Fatalf("gateway c claimed %s; want nothing", got)
	}
	if got := claim("b", "b1", now); got != "p-b@b" {
		t.Fatalf("gateway b claimed %s; want p-b only", got)
	}
	if got := claim("a", "a1", now); got != "p-a@a" {
		t.Fatalf("gateway a claimed %s; want p-a only", got)
	}
	// After the leases end, each is still its own gateway's alone.
	if got := claim("b", "b2", now.Add(time.Hour)); got != "p-b@b" {
		t.Fatalf("gateway b after the leases claimed %s; want p-b only", got)
	}
}

// A refund recorded without a gateway (before gateways were recorded) is claimed by any
// refunder, once.
func osRefundGatewayUnknown(t *testing.T, s seckill.OrderStore) {
	rs := osRefunds(t, s)
	osCreate(t, s, osSale("s", 0, 0))
	osOweVia(t, s, "p-none", "", 1)
	osOweVia(t, s, "p-a", "a", 2)
	now := osT0.Add(time.Hour)
	got, err := rs.ClaimRefunds(t.Context(), "b", "b1", now, time.Minute, 10)
	if err != nil || osRefundIDs(got) != "p-none@" {
		t.Fatalf("gateway b claimed %s, %v; want p-none only", osRefundIDs(got), err)
	}
	got, err = rs.ClaimRefunds(t.Context(), "a", "a1", now, time.Minute, 10)
	if err != nil || osRefundIDs(got) != "p-a@a" {
		t.Fatalf("gateway a claimed %s, %v; want p-a only (p-none is b's while leased)", osRefundIDs(got), err)
	}
	got, err = rs.ClaimRefunds(t.Context(), "a", "a2", now.Add(time.Hour), time.Minute, 10)
	if err != nil || osRefundIDs(got) != "p-none@,p-a@a" {
		t.Fatalf("gateway a after the leases claimed %s, %v; want p-none and p-a", osRefundIDs(got), err)
	}
}

// Refunds lists each refund with the gateway that took the money ("" when not recorded).
func osRefundGatewayListed(t *testing.T, s seckill.OrderStore) {
	rs := osRefunds(t, s)
	osCreate(t, s, osSale("s", 0, 0))
	osOweVia(t, s, "p-a", "a", 1)
	osOweVia(t, s, "p-none", "", 2)
	list, err := rs.Refunds(t.Context(), seckill.RefundRequired, 10)
	if err != nil || osRefundIDs(list) != "p-a@a,p-none@" {
		t.Fatalf("Refunds(refund_required) = %s, %v; want p-a of gateway a, p-none of none", osRefundIDs(list), err)
	}
}

// osOpenPage records payment id of reservation res at gateway gw with page url, at at.
func osOpenPage(t *testing.T, ops seckill.OpenPaymentStore, id, res, url string, at time.Time) {
	t.Helper()
	err := ops.RecordOpenPayment(t.Context(), seckill.OpenPayment{PaymentID: id, ReservationID: res, Gateway: "gw",
		RedirectURL: url, Status: seckill.PaymentOpen, CloseAt: osT0.Add(time.Hour)}, at)
	if err != nil {
		t.Fatalf("RecordOpenPayment(%s): %v", id, err)
	}
}

// osWantPage checks that OpenPaymentOf(res) answers payment id with page url, or not_found
// when id is "".
func osWantPage(t *testing.T, ops seckill.OpenPaymentStore, what, res, id, url string) {
	t.Helper()
	p, err := ops.OpenPaymentOf(t.Context(), res)
	if id == "" {
		osWantCode(t, what, err, seckill.CodeNotFound)
		return
	}
	if err != nil || p.PaymentID != id || p.ReservationID != res || p.RedirectURL != url || p.Gateway != "gw" ||
		p.Status != seckill.PaymentOpen || !p.CloseAt.Equal(osT0.Add(time.Hour)) {
		t.Fatalf("%s: OpenPaymentOf(%s) = %+v, %v; want %s with page %q at gw, open, closing at %v",
			what, res, p, err, id, url, osT0.Add(time.Hour))
	}
}

// OpenPaymentOf answers a reservation's open payment with its page (the latest recorded), and
// not_found for one with none: no payment, no page kept (recorded without one, or one longer
// than the store keeps), or no longer open (closed, or paid by RecordPayment).
func osOpenPaymentPage(t *testing.T, s seckill.OrderStore) {
	ops := osOpenPayments(t, s)
	osWantPage(t, ops, "no payment", "r1", "", "")
	osOpenPage(t, ops, "p1", "r1", "https://pay.example/p1", osT0)
	osWantPage(t, ops, "recorded", "r1", "p1", "https://pay.example/p1")
	osOpenPage(t, ops, "p1", "r1", "https://pay.example/other", osT0.Add(time.Second))
	osWantPage(t, ops, "recorded again", "r1", "p1", "https://pay.example/p1")
	osOpenPage(t, ops, "p2", "r1", "https://pay.example/p2", osT0.Add(time.Second))
	osWantPage(t, ops, "a later payment", "r1", "p2", "https://pay.example/p2")

	osOpenPage(t, ops, "p3", "r3", "", osT0)
	osWantPage(t, ops, "recorded without a page", "r3", "", "")
	osOpenPage(t, ops, "p4", "r4", "https://pay.example/"+strings.Repeat("x", 4096), osT0)
	osWantPage(t, ops, "a page longer than the store keeps", "r4", "", "")

	osOpenPage(t, ops, "p5", "r5", "https://pay.example/p5", osT0)
	if got := osClaimOpen(t, ops, "gw", "a", osNeverDue, 10); len(got) != 5 {
		t.Fatalf("claimed %v, want the 5 payments", osClaimedIDs(got))
	}
	osRecordClose(t, ops, seckill.CloseOutcome{PaymentID: "p5", Owner: "a", Status: seckill.PaymentClosed, At: osT0})
	osWantPage(t, ops, "closed", "r5", "", "")

	osCreate(t, s, osSale("s", 5, 0))
	held := osRes("s", "r-held", "alice", 1, seckill.StatusHeld, 1)
	osApply(t, s, osEv(held, osT0))
	osOpenPage(t, ops, "p-paid", "r-held", "https://pay.example/paid", osT0)
	osWantPay(t, s, "p-paid", held, seckill.PaymentApplied, seckill.PaymentApplied, osT0.Add(time.Second))
	osWantPage(t, ops, "paid", "r-held", "", "")
}
