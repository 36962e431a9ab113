// This file is the payment gateway half of package seckilltest: the contract of payment.Gateway
// (docs/PAYMENTS.md) as stories, which the mock, the built-in webhook scheme and every provider
// adapter pass.

package seckilltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/closer"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/refund"
	"github.com/seckill-go/seckill/service"
)

// GatewayHarness is what TestGateway needs to drive a gateway and to play its provider.
type GatewayHarness struct {
	// Open returns a fresh gateway for one test, reading time from clock where it can, and
	// stops it when the test ends (t.Cleanup).
	Open func(t *testing.T, clock *ManualClock) GatewayUnderTest
	// NewService returns a real service (memory engine, SQLite store: the internal servicetest
	// package) reading clock, whose Pay starts payments with payments, and its order store, on
	// which the refunder and the payment closer run. Nil skips the service stories.
	NewService func(t *testing.T, clock seckill.Clock, payments seckill.Payments) (*service.Service, seckill.OrderStore)
	// Skip names the stories that the provider (or its local stand-in) cannot play, each with
	// the reason; such a story is skipped with that reason. Keep it short and honest.
	Skip map[string]string
}

// GatewayUnderTest is one gateway and the provider's side of it.
type GatewayUnderTest struct {
	Gateway payment.Gateway
	// Notify returns the body the provider sends to report outcome o (succeeded, failed or
	// cancelled) of the payment that Start answered with intent for req.
	Notify func(t *testing.T, req payment.StartRequest, intent seckill.PaymentIntent, o payment.Outcome) []byte
	// Sign returns the headers the provider sends with body, signed at time at; when forged,
	// signed with a key that is not the gateway's.
	Sign func(t *testing.T, body []byte, at time.Time, forged bool) http.Header
	// Settle makes the provider take the buyer's money for a started payment now, before (or
	// without) its notification. Nil skips the stories that need it.
	Settle func(t *testing.T, paymentID string)
	// Refunds, if set, counts the refunds the provider made of a payment.
	Refunds func(t *testing.T, paymentID string) int
	// TryPay, if set, is the buyer trying to pay now, from any goroutine: it reports whether the
	// provider took the money (false: the payment was closed first). It must not call
	// t.Fatal. Nil skips the story of a close racing a payment.
	TryPay func(paymentID string) bool
}

// gatewayT0 is where the suite's clock starts: the wall clock, to the second, because a
// provider's stand-in may check times against its own clock.
func gatewayT0() time.Time { return time.Now().Truncate(time.Second) }

// TestGateway runs the payment.Gateway conformance suite: the gateway's own contract, then
// payments through a real service (applied, duplicate, refund owed, late, failed) with every
// notification verified and parsed by the gateway, as the webhook handler does.
func TestGateway(t *testing.T, h GatewayHarness) {
	t.Helper()
	stories := []struct {
		name    string
		service bool
		fn      func(t *testing.T, g *gatewayStory)
	}{
		{"Start/IdempotentByKey", false, gwStartIdempotent},
		{"Start/ConcurrentSameKey", false, gwStartConcurrent},
		{"Parse/Succeeded", false, gwParseSucceeded},
		{"Parse/Failed", false, gwParseFailed},
		{"Parse/Forged", false, gwParseForged},
		{"Parse/Stale", false, gwParseStale},
		{"Parse/Unsigned", false, gwParseUnsigned},
		{"Parse/Malformed", false, gwParseMalformed},
		{"Parse/AlteredBody", false, gwParseAltered},
		{"Close/ThenClosed", false, gwCloseOpen},
		{"Close/AfterSuccess", false, gwCloseAfterSuccess},
		{"Close/RacingPayment", false, gwCloseRacingPay},
		{"Refund/Once", false, gwRefundOnce},
		{"State/Unknown", false, gwStateUnknown},
		{"Service/PayInTime", true, gwSvcInTime},
		{"Service/SamePaymentTwice", true, gwSvcTwice},
		{"Service/TwoPaymentIDs", true, gwSvcTwoPayments},
		{"Service/LateWithFreeUnit", true, gwSvcLateFree},
		{"Service/LateAfterResale", true, gwSvcLateResold},
		{"Service/Failed", true, gwSvcFailed},
		{"Service/FailedAfterSucceeded", true, gwSvcOutOfOrder},
		{"Service/ForgedChangesNothing", true, gwSvcForged},
		{"Service/ClosedWhenHoldExpires", true, gwSvcClosedOnExpiry},
		{"Service/ClosedWhenHoldCancelled", true, gwSvcClosedOnCancel},
		{"Service/RefundPaidBackOnce", true, gwSvcRefundOnce},
		{"Service/RefunderKilledMidRefund", true, gwSvcRefunderKilled},
		{"Service/TwoRefundersOnePayment", true, gwSvcTwoRefunders},
		{"Service/UnknownReservationRefunded", true, gwSvcUnknownRefunded},
		{"Service/WrongAmountRefunded", true, gwSvcWrongAmountRefunded},
	}
	for _, s := range stories {
		t.Run(s.name, func(t *testing.T) {
			if why, ok := h.Skip[s.name]; ok {
				t.Skip(why)
			}
			if s.service && h.NewService == nil {
				t.Skip("the harness has no NewService")
			}
			clock := NewManualClock(gatewayT0())
			g := &gatewayStory{clock: clock, ut: h.Open(t, clock)}
			if s.service {
				g.svc, g.store = h.NewService(t, clock, payment.ForService(g.ut.Gateway))
			}
			s.fn(t, g)
		})
	}
}

// gatewayStory is one story's world.
type gatewayStory struct {
	clock *ManualClock
	ut    GatewayUnderTest
	svc   *service.Service
	store seckill.OrderStore
	n     int
}

func (g *gatewayStory) gw() payment.Gateway { return g.ut.Gateway }

// request is a start request for a fresh reservation id, holding for a minute.
func (g *gatewayStory) request() payment.StartRequest {
	g.n++
	rid := fmt.Sprintf("gwres-%d-%s", g.n, seckill.NewID())
	return payment.StartRequest{
		ReservationID: rid, UserID: "gw-user", AmountCents: 1999 + int64(g.n), Currency: payment.DefaultCurrency,
		ExpiresAt: g.clock.Now().Add(time.Minute), IdempotencyKey: rid,
	}
}

func (g *gatewayStory) start(t *testing.T, req payment.StartRequest) seckill.PaymentIntent {
	t.Helper()
	intent, err := g.gw().Start(context.Background(), req)
	if err != nil {
		t.Fatalf("Start(%s): %v", req.ReservationID, err)
	}
	if intent.PaymentID == "" {
		t.Fatalf("Start(%s) answered no payment id", req.ReservationID)
	}
	return intent
}

// notification is the provider's signed notification of o, signed now.
func (g *gatewayStory) notification(t *testing.T, req payment.StartRequest, intent seckill.PaymentIntent, o payment.Outcome) (http.Header, []byte) {
	t.Helper()
	body := g.ut.Notify(t, req, intent, o)
	return g.ut.Sign(t, body, g.clock.Now(), false), body
}

func (g *gatewayStory) parse(t *testing.T, header http.Header, body []byte) payment.Notification {
	t.Helper()
	n, err := g.gw().Parse(header, body, g.clock.Now())
	if err != nil {
		t.Fatalf("Parse of a genuine notification: %v", err)
	}
	return n
}

// refused checks that Parse refuses a notification with the given code.
func (g *gatewayStory) refused(t *testing.T, what string, header http.Header, body []byte, code seckill.Code) {
	t.Helper()
	n, err := g.gw().Parse(header, body, g.clock.Now())
	if err == nil {
		t.Fatalf("%s: Parse accepted it: %+v", what, n)
	}
	if got := seckill.ErrorCode(err); got != code {
		t.Fatalf("%s: Parse error code %q (%v), want %q", what, got, err, code)
	}
}

func (g *gatewayStory) settle(t *testing.T, paymentID string) {
	t.Helper()
	if g.ut.Settle == nil {
		t.Skip("the harness cannot make the provider take the money (no Settle)")
	}
	g.ut.Settle(t, paymentID)
}

func (g *gatewayStory) state(t *testing.T, paymentID string, want payment.State) {
	t.Helper()
	got, err := g.gw().State(context.Background(), paymentID)
	if err != nil {
		t.Fatalf("State(%s): %v", paymentID, err)
	}
	if got != want {
		t.Fatalf("State(%s) = %q, want %q", paymentID, got, want)
	}
}

// ---- the gateway's contract ----

func gwStartIdempotent(t *testing.T, g *gatewayStory) {
	req := g.request()
	first := g.start(t, req)
	if again := g.start(t, req); again.PaymentID != first.PaymentID {
		t.Fatalf("Start with the same idempotency key: payment %s, then %s", first.PaymentID, again.PaymentID)
	}
	if other := g.start(t, g.request()); other.PaymentID == first.PaymentID {
		t.Fatalf("two reservations got the same payment %s", other.PaymentID)
	}
}

func gwStartConcurrent(t *testing.T, g *gatewayStory) {
	req := g.request()
	const n = 8
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			intent, err := g.gw().Start(context.Background(), req)
			ids[i], errs[i] = intent.PaymentID, err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Start %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("concurrent Starts with one key started payments %s and %s", ids[0], ids[i])
		}
	}
}

func gwParseSucceeded(t *testing.T, g *gatewayStory) {
	req := g.request()
	intent := g.start(t, req)
	header, body := g.notification(t, req, intent, payment.OutcomeSucceeded)
	n := g.parse(t, header, body)
	want := payment.Notification{Outcome: payment.OutcomeSucceeded, PaymentID: intent.PaymentID, ReservationID: req.ReservationID, AmountCents: req.AmountCents}
	if n.Currency != "" { // a gateway that reports the currency reports the one it was started in
		want.Currency = req.Currency
	}
	if n != want {
		t.Fatalf("Parse = %+v, want %+v", n, want)
	}
}

func gwParseFailed(t *testing.T, g *gatewayStory) {
	req := g.request()
	intent := g.start(t, req)
	header, body := g.notification(t, req, intent, payment.OutcomeFailed)
	n := g.parse(t, header, body)
	if n.Outcome != payment.OutcomeFailed || n.PaymentID != intent.PaymentID {
		t.Fatalf("Parse of a failed payment = %+v, want outcome failed for %s", n, intent.PaymentID)
	}
}

func gwParseForged(t *testing.T, g *gatewayStory) {
	req := g.request()
	intent := g.start(t, req)
	body := g.ut.Notify(t, req, intent, payment.OutcomeSucceeded)
	g.refused(t, "signed with another key", g.ut.Sign(t, body, g.clock.Now(), true), body, seckill.CodeInvalidSignature)
}

func gwParseStale(t *testing.T, g *gatewayStory) {
	req := g.request()
	intent := g.start(t, req)
	body := g.ut.Notify(t, req, intent, payment.OutcomeSucceeded)
	g.refused(t, "signed an hour ago", g.ut.Sign(t, body, g.clock.Now().Add(-time.Hour), false), body, seckill.CodeInvalidSignature)
	g.refused(t, "signed an hour ahead", g.ut.Sign(t, body, g.clock.Now().Add(time.Hour), false), body, seckill.CodeInvalidSignature)
}

func gwParseUnsigned(t *testing.T, g *gatewayStory) {
	req := g.request()
	intent := g.start(t, req)
	body := g.ut.Notify(t, req, intent, payment.OutcomeSucceeded)
	g.refused(t, "without a signature", http.Header{"Content-Type": {"application/json"}}, body, seckill.CodeInvalidSignature)
}

func gwParseMalformed(t *testing.T, g *gatewayStory) {
	req := g.request()
	intent := g.start(t, req)
	body := g.ut.Notify(t, req, intent, payment.OutcomeSucceeded)
	cut := body[:len(body)/2] // signed, but not a whole JSON document
	g.refused(t, "a signed, truncated body", g.ut.Sign(t, cut, g.clock.Now(), false), cut, seckill.CodeInvalidArgument)
}

func gwParseAltered(t *testing.T, g *gatewayStory) {
	req := g.request()
	intent := g.start(t, req)
	header, body := g.notification(t, req, intent, payment.OutcomeSucceeded)
	g.parse(t, header, body) // the genuine one passes, and may be parsed again (replays are the service's)
	g.parse(t, header, body)
	altered := alter(body, req.AmountCents)
	g.refused(t, "replayed with an altered body", header, altered, seckill.CodeInvalidSignature)
}

// alter changes the amount in a notification body (or, if it is not there as written, appends
// a space): either way the signed bytes are no longer the ones received.
func alter(body []byte, amount int64) []byte {
	a := []byte(strconv.FormatInt(amount, 10))
	if bytes.Contains(body, a) {
		return bytes.Replace(body, a, []byte(strconv.FormatInt(amount+100, 10)), 1)
	}
	return append(bytes.Clone(body), ' ')
}

func gwCloseOpen(t *testing.T, g *gatewayStory) {
	ctx := context.Background()
	intent := g.start(t, g.request())
	if err := g.gw().ClosePayment(ctx, intent.PaymentID); err != nil {
		t.Fatalf("Close of an open payment: %v", err)
	}
	g.state(t, intent.PaymentID, payment.StateClosed)
	if err := g.gw().ClosePayment(ctx, intent.PaymentID); err != nil {
		t.Fatalf("Close of a closed payment: %v, want nil", err)
	}
	g.state(t, intent.PaymentID, payment.StateClosed)
}

func gwCloseAfterSuccess(t *testing.T, g *gatewayStory) {
	intent := g.start(t, g.request())
	g.settle(t, intent.PaymentID)
	if err := g.gw().ClosePayment(context.Background(), intent.PaymentID); !errors.Is(err, payment.ErrAlreadyPaid) {
		t.Fatalf("Close of a succeeded payment: %v, want ErrAlreadyPaid", err)
	}
	g.state(t, intent.PaymentID, payment.StateSucceeded)
}

// gwCloseRacingPay closes payments while their buyers pay: each ends one way or the other,
// never both (Close nil and the money taken) and never neither. Which one wins is up to the
// scheduler; the in-order case pins the close-first outcome.
func gwCloseRacingPay(t *testing.T, g *gatewayStory) {
	if g.ut.TryPay == nil {
		t.Skip("the harness cannot make a buyer pay concurrently (no TryPay)")
	}
	ctx := context.Background()
	// In order first: a buyer who comes after a successful Close cannot pay.
	closed := g.start(t, g.request())
	if err := g.gw().ClosePayment(ctx, closed.PaymentID); err != nil {
		t.Fatalf("Close of an open payment: %v", err)
	}
	if g.ut.TryPay(closed.PaymentID) {
		t.Fatal("the provider took the money for a payment it had closed")
	}
	g.state(t, closed.PaymentID, payment.StateClosed)
	// Then at once, both ways round.
	for round := range 20 {
		intent := g.start(t, g.request())
		var closeErr error
		var paid bool
		var wg sync.WaitGroup
		wg.Go(func() { closeErr = g.gw().ClosePayment(ctx, intent.PaymentID) })
		wg.Go(func() { paid = g.ut.TryPay(intent.PaymentID) })
		wg.Wait()
		switch {
		case paid && errors.Is(closeErr, payment.ErrAlreadyPaid):
			g.state(t, intent.PaymentID, payment.StateSucceeded)
		case !paid && closeErr == nil:
			g.state(t, intent.PaymentID, payment.StateClosed)
		default:
			t.Fatalf("round %d: the buyer paid: %v, Close answered %v", round, paid, closeErr)
		}
	}
}

func gwRefundOnce(t *testing.T, g *gatewayStory) {
	req := g.request()
	intent := g.start(t, req)
	g.settle(t, intent.PaymentID)
	rr := payment.RefundRequest{PaymentID: intent.PaymentID, AmountCents: req.AmountCents}
	first, err := g.gw().Refund(context.Background(), rr)
	if err != nil || first.Status != payment.RefundSucceeded {
		t.Fatalf("Refund: %+v, %v; want succeeded", first, err)
	}
	again, err := g.gw().Refund(context.Background(), rr)
	if err != nil || again.Status != payment.RefundSucceeded || again.RefundID != first.RefundID {
		t.Fatalf("Refund again: %+v, %v; want the first refund %+v", again, err, first)
	}
	g.state(t, intent.PaymentID, payment.StateRefunded)
	if g.ut.Refunds != nil {
		if n := g.ut.Refunds(t, intent.PaymentID); n != 1 {
			t.Fatalf("the provider refunded the payment %d times, want once", n)
		}
	}
}

func gwStateUnknown(t *testing.T, g *gatewayStory) {
	g.state(t, "pay_never_started_"+seckill.NewID(), payment.StateUnknown)
}

// ---- payments through a real service ----

// hold creates (once per id) a sale of stock units and holds one unit for user.
func (g *gatewayStory) hold(t *testing.T, saleID string, stock int, user string) seckill.Reservation {
	t.Helper()
	ctx := context.Background()
	if _, err := g.svc.Sale(ctx, saleID); err != nil {
		price, hold, limit := int64(2500), 60, 1
		starts := g.clock.Now().Add(-time.Minute)
		if _, err := g.svc.CreateSale(ctx, seckill.SaleInput{ID: saleID, Name: "gateway " + saleID, PriceCents: &price,
			Stock: &stock, StartsAt: &starts, HoldSeconds: &hold, PerUserLimit: &limit}); err != nil {
			t.Fatalf("create sale: %v", err)
		}
	}
	res, err := g.svc.Buy(ctx, seckill.BuyRequest{SaleID: saleID, UserID: user, Quantity: 1})
	if err != nil {
		t.Fatalf("buy: %v", err)
	}
	if res.Reservation.Status != seckill.StatusHeld {
		t.Fatalf("buy: %s, want held", res.Reservation.Status)
	}
	return res.Reservation
}

// pay starts the payment of a held reservation through Service.Pay.
func (g *gatewayStory) pay(t *testing.T, r seckill.Reservation) seckill.PaymentIntent {
	t.Helper()
	intent, err := g.svc.Pay(context.Background(), r.ID, r.UserID)
	if err != nil {
		t.Fatalf("pay %s: %v", r.ID, err)
	}
	return intent
}

// deliver makes the provider report o for the payment, and handles the notification as the
// webhook handler does: Parse, then ApplyPayment for succeeded and failed, nothing otherwise.
func (g *gatewayStory) deliver(t *testing.T, r seckill.Reservation, intent seckill.PaymentIntent, o payment.Outcome) seckill.PaymentResult {
	t.Helper()
	header, body := g.notification(t, payment.StartRequestFor(r), intent, o)
	n := g.parse(t, header, body)
	if n.Outcome != payment.OutcomeSucceeded && n.Outcome != payment.OutcomeFailed {
		return seckill.PaymentIgnored
	}
	result, err := g.svc.ApplyPayment(context.Background(), n.Confirmation(), n.Outcome == payment.OutcomeSucceeded)
	if err != nil {
		t.Fatalf("apply payment %s: %v", intent.PaymentID, err)
	}
	return result
}

func (g *gatewayStory) wantResult(t *testing.T, what string, got, want seckill.PaymentResult) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %s, want %s", what, got, want)
	}
}

func (g *gatewayStory) wantStatus(t *testing.T, r seckill.Reservation, want seckill.ReservationStatus) {
	t.Helper()
	got, err := g.svc.Reservation(context.Background(), r.ID, r.UserID)
	if err != nil {
		t.Fatalf("reservation %s: %v", r.ID, err)
	}
	if got.Status != want {
		t.Fatalf("reservation %s is %s, want %s", r.ID, got.Status, want)
	}
}

// expire moves the clock past every hold of the suite's sales.
func (g *gatewayStory) expire() { g.clock.Advance(90 * time.Second) }

func gwSvcInTime(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	g.wantResult(t, "paid in time", g.deliver(t, r, intent, payment.OutcomeSucceeded), seckill.PaymentApplied)
	g.wantStatus(t, r, seckill.StatusPaid)
}

func gwSvcTwice(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	if again := g.pay(t, r); again.PaymentID != intent.PaymentID {
		t.Fatalf("paying twice for one hold started payments %s and %s", intent.PaymentID, again.PaymentID)
	}
	g.wantResult(t, "first delivery", g.deliver(t, r, intent, payment.OutcomeSucceeded), seckill.PaymentApplied)
	g.wantResult(t, "same payment again", g.deliver(t, r, intent, payment.OutcomeSucceeded), seckill.PaymentDuplicate)
	g.wantStatus(t, r, seckill.StatusPaid)
}

func gwSvcTwoPayments(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 2, "alice")
	first := g.pay(t, r)
	req := payment.StartRequestFor(r)
	req.IdempotencyKey = r.ID + "/second" // the buyer paid twice, through two checkouts
	second := g.start(t, req)
	if second.PaymentID == first.PaymentID {
		t.Fatalf("a second key started the same payment %s", first.PaymentID)
	}
	g.wantResult(t, "first payment", g.deliver(t, r, first, payment.OutcomeSucceeded), seckill.PaymentApplied)
	g.wantResult(t, "second payment for the paid hold", g.deliver(t, r, second, payment.OutcomeSucceeded), seckill.PaymentRefundRequired)
	g.wantResult(t, "second payment again", g.deliver(t, r, second, payment.OutcomeSucceeded), seckill.PaymentDuplicate)
}

func gwSvcLateFree(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	g.expire()
	g.wantResult(t, "paid after expiry, unit free", g.deliver(t, r, intent, payment.OutcomeSucceeded), seckill.PaymentLateApplied)
	g.wantStatus(t, r, seckill.StatusPaid)
}

func gwSvcLateResold(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	g.expire()
	rb := g.hold(t, "gw-s1", 1, "bob") // the unit, freed by alice's expiry, is resold
	g.wantResult(t, "bob pays in time", g.deliver(t, rb, g.pay(t, rb), payment.OutcomeSucceeded), seckill.PaymentApplied)
	g.wantResult(t, "alice pays after resale", g.deliver(t, r, intent, payment.OutcomeSucceeded), seckill.PaymentRefundRequired)
	g.wantResult(t, "alice's payment again", g.deliver(t, r, intent, payment.OutcomeSucceeded), seckill.PaymentDuplicate)
	g.wantStatus(t, rb, seckill.StatusPaid)
}

func gwSvcFailed(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	g.wantResult(t, "failed payment", g.deliver(t, r, intent, payment.OutcomeFailed), seckill.PaymentIgnored)
	g.wantStatus(t, r, seckill.StatusHeld)
}

// gwSvcOutOfOrder: a failed notification arriving after the success of the same payment (out
// of order) changes nothing.
func gwSvcOutOfOrder(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	g.wantResult(t, "succeeded", g.deliver(t, r, intent, payment.OutcomeSucceeded), seckill.PaymentApplied)
	g.wantResult(t, "failed, late and out of order", g.deliver(t, r, intent, payment.OutcomeFailed), seckill.PaymentIgnored)
	g.wantStatus(t, r, seckill.StatusPaid)
}

func gwSvcForged(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	body := g.ut.Notify(t, payment.StartRequestFor(r), intent, payment.OutcomeSucceeded)
	g.refused(t, "forged", g.ut.Sign(t, body, g.clock.Now(), true), body, seckill.CodeInvalidSignature)
	g.wantStatus(t, r, seckill.StatusHeld)
	g.wantResult(t, "the genuine one after", g.deliver(t, r, intent, payment.OutcomeSucceeded), seckill.PaymentApplied)
}

// ---- background work through the gateway: closing payments, paying refunds back ----

// closeDue runs one pass of a payment closer on the story's store and gateway.
func (g *gatewayStory) closeDue(t *testing.T) int {
	t.Helper()
	cs, ok := g.store.(closer.Store)
	if !ok {
		t.Skip("the store records no open payments")
	}
	n, err := closer.New(cs, g.gw(), closer.Config{Clock: g.clock}).RunOnce(context.Background())
	if err != nil {
		t.Fatalf("closer pass: %v", err)
	}
	return n
}

// wantClosed checks that the provider no longer takes the buyer's money for the payment.
func (g *gatewayStory) wantClosed(t *testing.T, paymentID string) {
	t.Helper()
	if g.ut.TryPay != nil && g.ut.TryPay(paymentID) {
		t.Fatalf("the buyer could still pay %s after its hold ended", paymentID)
	}
	g.state(t, paymentID, payment.StateClosed)
}

// gwSvcClosedOnExpiry: a payment started for a hold is closed at the provider once the hold
// has expired (not before), so that the buyer cannot pay for a unit gone to someone else.
func gwSvcClosedOnExpiry(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	if n := g.closeDue(t); n != 0 {
		t.Fatalf("the closer took %d payments while the hold lived", n)
	}
	g.state(t, intent.PaymentID, payment.StateOpen)
	g.expire()
	if n := g.closeDue(t); n != 1 {
		t.Fatalf("the closer took %d payments after the hold expired, want 1", n)
	}
	g.wantClosed(t, intent.PaymentID)
	if n := g.closeDue(t); n != 0 {
		t.Fatalf("a closed payment was taken again (%d)", n)
	}
	g.wantStatus(t, r, seckill.StatusExpired)
}

// gwSvcClosedOnCancel: a cancelled hold's payment is closed at once, not at the expiry.
func gwSvcClosedOnCancel(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	if _, err := g.svc.Cancel(context.Background(), r.ID, r.UserID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if n := g.closeDue(t); n != 1 {
		t.Fatalf("the closer took %d payments after the cancel, want 1", n)
	}
	g.wantClosed(t, intent.PaymentID)
}

// lateRefundOwed makes a payment that is owed back: alice pays after her hold expired and the
// unit was sold to bob. It returns her payment id and its amount.
func (g *gatewayStory) lateRefundOwed(t *testing.T) (string, int64) {
	t.Helper()
	r := g.hold(t, "gw-s1", 1, "alice")
	intent := g.pay(t, r)
	g.settle(t, intent.PaymentID) // she paid in time at the provider; its notification is late
	g.expire()
	rb := g.hold(t, "gw-s1", 1, "bob")
	g.wantResult(t, "bob pays in time", g.deliver(t, rb, g.pay(t, rb), payment.OutcomeSucceeded), seckill.PaymentApplied)
	g.wantResult(t, "alice's late payment", g.deliver(t, r, intent, payment.OutcomeSucceeded), seckill.PaymentRefundRequired)
	return intent.PaymentID, r.AmountCents
}

// refunder is a refunder on the story's store and gateway, named owner.
func (g *gatewayStory) refunder(t *testing.T, store refund.Store, owner string) *refund.Refunder {
	t.Helper()
	return refund.New(store, g.gw(), refund.Config{Clock: g.clock, Owner: owner})
}

func (g *gatewayStory) refundStore(t *testing.T) interface {
	refund.Store
	seckill.RefundStore
} {
	t.Helper()
	rs, ok := g.store.(interface {
		refund.Store
		seckill.RefundStore
	})
	if !ok {
		t.Skip("the store keeps no refund records")
	}
	return rs
}

// wantRefunded checks the refund of paymentID is recorded refunded and the provider made
// exactly one refund of it.
func (g *gatewayStory) wantRefunded(t *testing.T, paymentID string) {
	t.Helper()
	list, err := g.refundStore(t).Refunds(context.Background(), seckill.Refunded, seckill.MaxRefundList)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range list {
		found = found || f.PaymentID == paymentID
	}
	if !found {
		t.Fatalf("the refund of %s is not recorded refunded (refunded: %+v)", paymentID, list)
	}
	if g.ut.Refunds != nil {
		if n := g.ut.Refunds(t, paymentID); n != 1 {
			t.Fatalf("the provider refunded %s %d times, want once", paymentID, n)
		}
	}
	g.state(t, paymentID, payment.StateRefunded)
}

// gwSvcRefundOnce: a refund owed is paid back through the gateway that took the money,
// once; another pass finds nothing left to do.
func gwSvcRefundOnce(t *testing.T, g *gatewayStory) {
	pid, _ := g.lateRefundOwed(t)
	rf := g.refunder(t, g.refundStore(t), "refunder-a")
	if n, err := rf.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("refunder pass: %d claimed, %v; want 1", n, err)
	}
	g.wantRefunded(t, pid)
	g.clock.Advance(time.Hour)
	if n, err := rf.RunOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("a second pass claimed %d (%v); a refunded payment is done", n, err)
	}
	g.wantRefunded(t, pid)
}

// lostRecords is a refund store whose records fail: the refunder "dies" after the gateway
// paid the money back and before the outcome is written.
type lostRecords struct{ refund.Store }

func (lostRecords) RecordRefund(context.Context, seckill.RefundOutcome) error {
	return errors.New("killed before the record")
}

// gwSvcRefunderKilled: a refunder killed between the gateway's refund and its record leaves the
// refund pending under its lease; once the lease ends another refunder asks the gateway again
// with the same idempotency key, and the money is paid back exactly once.
func gwSvcRefunderKilled(t *testing.T, g *gatewayStory) {
	pid, _ := g.lateRefundOwed(t)
	rs := g.refundStore(t)
	if n, err := g.refunder(t, lostRecords{rs}, "refunder-killed").RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("the doomed refunder's pass: %d claimed, %v; want 1", n, err)
	}
	next := g.refunder(t, rs, "refunder-next")
	if n, _ := next.RunOnce(context.Background()); n != 0 {
		t.Fatalf("a refund under a live lease was claimed by another refunder")
	}
	g.clock.Advance(2 * refund.DefaultLease)
	if n, err := next.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("after the lease: %d claimed, %v; want 1", n, err)
	}
	g.wantRefunded(t, pid)
}

// gwSvcTwoRefunders: two refunders (two instances) pass at the same moment: the refund is
// claimed by one of them and paid back once.
func gwSvcTwoRefunders(t *testing.T, g *gatewayStory) {
	pid, _ := g.lateRefundOwed(t)
	rs := g.refundStore(t)
	var claimed [2]int
	var wg sync.WaitGroup
	for i := range claimed {
		rf := g.refunder(t, rs, "refunder-"+strconv.Itoa(i))
		wg.Go(func() { claimed[i], _ = rf.RunOnce(context.Background()) })
	}
	wg.Wait()
	if claimed[0]+claimed[1] != 1 {
		t.Fatalf("two refunders claimed %v; want the refund claimed once", claimed)
	}
	g.wantRefunded(t, pid)
}

// applyNotified has the provider notify a success for req (which may differ from what was
// started: another amount, a reservation nobody holds) and applies it as the webhook handler
// does.
func (g *gatewayStory) applyNotified(t *testing.T, req payment.StartRequest, intent seckill.PaymentIntent) seckill.PaymentResult {
	t.Helper()
	header, body := g.notification(t, req, intent, payment.OutcomeSucceeded)
	n := g.parse(t, header, body)
	if n.Outcome != payment.OutcomeSucceeded {
		t.Fatalf("a paid notification parsed as %s", n.Outcome)
	}
	result, err := g.svc.ApplyPayment(context.Background(), n.Confirmation(), true)
	if err != nil {
		t.Fatalf("apply payment %s: %v", intent.PaymentID, err)
	}
	return result
}

// takeMoney has the provider take the money of a started payment, where the harness can (the
// payment is then refunded by payBack); a gateway whose provider seckill cannot drive (the
// built-in scheme) only reports payments.
func (g *gatewayStory) takeMoney(t *testing.T, paymentID string) {
	t.Helper()
	if g.ut.Settle != nil {
		g.ut.Settle(t, paymentID)
	}
}

// payBack runs a refunder pass and checks the payment was paid back once (where the harness
// can make the provider take money at all: see takeMoney).
func (g *gatewayStory) payBack(t *testing.T, paymentID string) {
	t.Helper()
	if g.ut.Settle == nil {
		return
	}
	if n, err := g.refunder(t, g.refundStore(t), "refunder-a").RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("refunder pass: %d claimed, %v; want 1", n, err)
	}
	g.wantRefunded(t, paymentID)
}

// gwSvcUnknownRefunded: money taken for a reservation nobody holds is recorded as owed and
// paid back, never applied.
func gwSvcUnknownRefunded(t *testing.T, g *gatewayStory) {
	g.hold(t, "gw-s1", 1, "alice") // the sale exists; the payment names another reservation
	req := g.request()
	intent := g.start(t, req)
	g.takeMoney(t, intent.PaymentID)
	g.wantResult(t, "payment for an unknown reservation", g.applyNotified(t, req, intent), seckill.PaymentRefundRequired)
	g.payBack(t, intent.PaymentID)
}

// gwSvcWrongAmountRefunded: money taken for a hold in another amount than the hold's (a payment
// started wrongly, e.g. by a shop's own service) is owed back, in the amount taken, and the
// hold stays held: it can still be paid correctly.
func gwSvcWrongAmountRefunded(t *testing.T, g *gatewayStory) {
	r := g.hold(t, "gw-s1", 1, "alice")
	req := payment.StartRequestFor(r)
	req.AmountCents++
	req.IdempotencyKey = r.ID + "/wrong-amount"
	intent := g.start(t, req)
	g.takeMoney(t, intent.PaymentID)
	g.wantResult(t, "payment of the wrong amount", g.applyNotified(t, req, intent), seckill.PaymentRefundRequired)
	g.wantStatus(t, r, seckill.StatusHeld)
	g.payBack(t, intent.PaymentID)
	g.wantResult(t, "then the right payment", g.deliver(t, r, g.pay(t, r), payment.OutcomeSucceeded), seckill.PaymentApplied)
}
