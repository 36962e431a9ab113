package service

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-go/seckill"
)

// Pay starts a payment with the gateway for a held reservation; a free hold is confirmed at
// once instead (confirmFree), and confirming it again answers the same.
func (s *Service) Pay(ctx context.Context, id, userID string) (seckill.PaymentIntent, error) {
	r, err := s.Reservation(ctx, id, userID)
	if err != nil {
		return seckill.PaymentIntent{}, err
	}
	switch r.Status {
	case seckill.StatusHeld:
		if free(r) {
			return s.confirmFree(ctx, r)
		}
	case seckill.StatusPaid:
		if free(r) && r.PaymentID == seckill.FreePaymentID(r.ID) {
			// Confirmed before: answered the same, and recorded if the database missed it.
			return s.confirmFree(ctx, r)
		}
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeConflict, "reservation %s is already paid", id)
	case seckill.StatusQueued:
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeConflict, "reservation %s is still queued; pay once it is held", id)
	default:
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeHoldExpired, "reservation %s is %s; its hold is gone", id, r.Status)
	}
	if s.payments == nil {
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeUnavailable, "no payment gateway is configured")
	}
	// A hold has one payment: while it is open its page is answered again, and the gateway
	// (whose rate limit is the whole shop's) is not asked. Only calls that find no record reach
	// the gateway: the first, joined with those of this instance that come while it runs
	// (paying), and the first of each other instance; the gateway's idempotency key (the
	// reservation id) makes them one payment.
	p, err := s.store.OpenPaymentOf(ctx, r.ID)
	if err == nil {
		return seckill.PaymentIntent{PaymentID: p.PaymentID, RedirectURL: p.RedirectURL, Gateway: p.Gateway}, nil
	}
	if seckill.ErrorCode(err) != seckill.CodeNotFound {
		return seckill.PaymentIntent{}, unavailable(err)
	}
	v, err, _ := s.paying.Do(r.ID, func() (any, error) {
		// The call is shared by every caller that joined it, so it must not end with the first
		// caller's request (a buyer who closed the tab would fail the others): it keeps ctx's
		// values but not its cancellation, bounded by paymentStartWait.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), paymentStartWait)
		defer cancel()
		return s.startPayment(sctx, r)
	})
	if err != nil {
		return seckill.PaymentIntent{}, err
	}
	return v.(seckill.PaymentIntent), nil
}

// startPayment asks the gateway for the hold's payment and records it (Pay).
func (s *Service) startPayment(ctx context.Context, r seckill.Reservation) (seckill.PaymentIntent, error) {
	sale, err := s.saleWindow(ctx, r.SaleID) // currency, name and hold_seconds
	if err != nil {
		return seckill.PaymentIntent{}, err
	}
	intent, err := s.payments.CreatePaymentFor(ctx, r, sale)
	if err != nil {
		return seckill.PaymentIntent{}, fmt.Errorf("create payment: %w", err)
	}
	// The payment page is handed out only once the payment is recorded for closing when the
	// hold ends; if that fails the buyer is answered 503 and retries, and the gateway, asked
	// again with the same idempotency key, starts no second payment.
	if intent.Gateway != "" && r.ExpiresAt != nil {
		err := s.store.RecordOpenPayment(ctx, seckill.OpenPayment{PaymentID: intent.PaymentID, ReservationID: r.ID,
			Gateway: intent.Gateway, RedirectURL: intent.RedirectURL, Status: seckill.PaymentOpen, CloseAt: *r.ExpiresAt}, s.clock.Now())
		if err != nil {
			return seckill.PaymentIntent{}, unavailable(err)
		}
	}
	return intent, nil
}

// paymentStartWait bounds a payment start shared by the /pay calls of one hold (Pay): the
// gateway's call and the record of the open payment.
const paymentStartWait = 30 * time.Second

// paymentLookupWait bounds ApplyPayment's look-up of an earlier record of the payment. A
// database that hangs (a stopped server, a partition) rather than refusing must not keep a
// payment from the engine while its hold runs out; a healthy one answers in milliseconds, and
// a look-up cut short costs nothing but the guard described at ApplyPayment.
const paymentLookupWait = 250 * time.Millisecond

// ApplyPayment handles a verified webhook delivery. A failed payment changes nothing. A
// succeeded one is confirmed in the engine, then recorded in one SQL transaction that guards
// sales.sold; only after that commits may the webhook answer 200.
//
// The engine is asked even while the database is down, so that a payment delivered before
// its hold expired is honoured however long the outage lasts: the engine settles the hold at
// once (it remembers which payment paid it) and the delivery is answered 503. The gateway's
// retry, once the database is back, finds the engine answering duplicate and records the
// payment as applied. The paid event the engine emits meanwhile cannot get ahead of the
// record: events never write paid rows (OrderStore.ApplyEvents).
//
// First the database is asked whether the payment is recorded already (for at most
// paymentLookupWait): a recorded payment is a duplicate and the engine is not asked again, so
// that a refund_required record stays final even if its reservation could now be paid (a
// payment that arrived while it was queued). A look-up that fails or is slow is no answer; the
// engine goes on, and RecordPayment's own check of the payment id still records it once.
func (s *Service) ApplyPayment(ctx context.Context, p seckill.PaymentConfirmation, succeeded bool) (seckill.PaymentResult, error) {
	if !succeeded {
		return seckill.PaymentIgnored, nil
	}
	if s.paymentRecorded(ctx, p.PaymentID) {
		return seckill.PaymentDuplicate, nil
	}
	result, r, err := s.inv.ConfirmPayment(ctx, p)
	if err != nil {
		return "", err
	}
	if result == seckill.PaymentApplied {
		s.releaseOutcome(ctx, r)
	}
	if result == seckill.PaymentDuplicate {
		// The engine applied this payment before but the database has no record of it: an
		// earlier delivery reached the engine while the database was down or failed (and the
		// gateway retried). Record it now, so engine and database agree on sold units.
		result = seckill.PaymentApplied
	}
	var reason string
	if result == seckill.PaymentRefundRequired {
		reason = s.refundReason(ctx, p, r)
	}
	if r.ID == "" {
		r = seckill.Reservation{ID: p.ReservationID}
	}
	recorded, err := s.store.RecordPayment(ctx, seckill.PaymentRecord{
		PaymentID: p.PaymentID, Reservation: r, AmountCents: p.AmountCents, Result: result, At: s.clock.Now(),
		Gateway: p.Gateway, Reason: reason,
	})
	return recorded, unavailable(err)
}

// refundReason says why the engine answered refund_required for p (r as the engine returned
// it; no id when it knows no such reservation), for the operator who reads the refund: the
// engine answers only the result, and these are its rules' cases (MODEL.md) in their order. A
// sale that cannot be read leaves the currency unchecked here.
func (s *Service) refundReason(ctx context.Context, p seckill.PaymentConfirmation, r seckill.Reservation) string {
	if r.ID == "" {
		return fmt.Sprintf("no reservation %q is known", p.ReservationID)
	}
	if sale, err := s.saleWindow(ctx, r.SaleID); err == nil && !p.InCurrency(sale.Currency) {
		currency := sale.Currency
		if currency == "" {
			currency = seckill.DefaultCurrency
		}
		return fmt.Sprintf("paid in %s; the sale is in %s", strings.ToLower(p.Currency), currency)
	}
	if p.AmountCents != r.AmountCents {
		return fmt.Sprintf("paid %d cents; the reservation's amount is %d", p.AmountCents, r.AmountCents)
	}
	if r.PaymentID != "" && r.PaymentID != p.PaymentID {
		return "the reservation is paid by another payment"
	}
	return fmt.Sprintf("paid after the hold ended (the reservation is %s) and the late rule could not honour it: no unit free, or the buyer at the limit", r.Status)
}

// paymentRecorded reports whether the database answers, within paymentLookupWait, that the
// payment is recorded. Any failure reports false: see ApplyPayment.
func (s *Service) paymentRecorded(ctx context.Context, paymentID string) bool {
	ctx, cancel := context.WithTimeout(ctx, paymentLookupWait)
	defer cancel()
	prev, err := s.store.PaymentResult(ctx, paymentID)
	return err == nil && prev != ""
}

// Orders lists the user's paid orders and refunds owed, from the database.
func (s *Service) Orders(ctx context.Context, userID string) ([]seckill.Order, error) {
	orders, err := s.store.Orders(ctx, userID)
	return orders, unavailable(err)
}
