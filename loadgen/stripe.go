package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/payment/stripegw"
)

// StripeConfig has buyers pay at Stripe Checkout: the targets run the Stripe gateway against
// a Stripe stand-in (package stripegw/stripetest, in front of stripe-mock), and the generator
// plays both the buyers on the hosted page and Stripe delivering its signed events.
//
// Every buyer who does not cancel starts a payment (POST /pay, one Checkout Session per hold).
// Abandoners walk away from the page: their session is closed by the targets when the hold
// expires, and Stripe's checkout.session.expired event follows. Payers pay on the page
// (the stand-in settles the session) and Stripe delivers checkout.session.completed: once, or
// twice for some (a redelivery); for some as an asynchronous payment, whose
// async_payment_succeeded comes with, and for half of them before, the unpaid completed event
// (out of order). Late payers split in two: half paid in time but their event arrives after
// the hold expired (the late rule decides: paid if a unit is free, else refunded); half reach
// the page only after the hold expired, when the targets should have closed the session, so
// that their payment is refused at Stripe (counted in Result.ClosedBeforePaid).
type StripeConfig struct {
	WebhookSecret string // the targets' SECKILL_STRIPE_WEBHOOK_SECRET
	// StandIn is the stand-in's base URL (the targets' SECKILL_STRIPE_API_URL): a buyer pays
	// with POST {StandIn}/_stripetest/sessions/{id}/settle.
	StandIn string
}

// stripeBuyer is a held buyer who pays (or not) at Stripe Checkout; see StripeConfig.
func (r *runner) stripeBuyer(ctx context.Context, i int, user, token string, b Behavior, res seckill.Reservation, tr *tracker) {
	var intent seckill.PaymentIntent
	a, ok := r.call(ctx, i, "pay", token, time.Time{}, func(c *client.Client) (err error) {
		intent, err = c.Pay(ctx, res.ID)
		return err
	})
	if !ok || a.err != nil {
		if !r.noPaymentPath(a) {
			r.fail("pay %s: %v", res.ID, a.err)
		}
		return
	}
	atomic.AddInt64(&r.res.PaymentsBegun, 1)
	session := stripegw.EventSession{ID: intent.PaymentID, ReservationID: res.ID, AmountCents: res.AmountCents}
	late := b == PayLate && res.ExpiresAt != nil
	slowBuyer := late && rand.IntN(2) == 0

	switch {
	case b == Abandon:
		atomic.AddInt64(&r.res.Abandoned, 1)
		if r.waitForEnd(ctx, i, token, res) == "expired" {
			session.Status, session.PaymentStatus = "expired", "unpaid"
			r.stripeEvent(ctx, i, user, "checkout.session.expired", session, res)
		}
		return
	case slowBuyer:
		// Reaches the page after the hold expired and the targets closed the session.
		if !wait.Sleep(ctx, time.Until(*res.ExpiresAt)+r.cfg.LateBy+2*time.Second) {
			atomic.AddInt64(&r.res.GaveUp, 1)
			return
		}
	default:
		wait.Sleep(ctx, time.Duration(rand.IntN(100))*time.Millisecond) // the buyer on the page
	}
	tr.set(phasePay)
	if !r.settleAtStripe(ctx, session.ID) {
		atomic.AddInt64(&r.res.ClosedBeforePaid, 1)
		r.waitForEnd(ctx, i, token, res)
		return
	}
	if late && !slowBuyer && !wait.Sleep(ctx, time.Until(*res.ExpiresAt)+r.cfg.LateBy) { // Stripe's event is slow
		atomic.AddInt64(&r.res.GaveUp, 1)
		return
	}
	session.Status, session.PaymentStatus = "complete", "paid"
	switch n := rand.IntN(10); {
	case n == 0: // asynchronous payment, its events out of order
		r.stripeEvent(ctx, i, user, "checkout.session.async_payment_succeeded", session, res)
		unpaid := session
		unpaid.PaymentStatus = "unpaid"
		r.stripeEvent(ctx, i, user, "checkout.session.completed", unpaid, res)
	case n == 1: // asynchronous payment, in order
		unpaid := session
		unpaid.PaymentStatus = "unpaid"
		r.stripeEvent(ctx, i, user, "checkout.session.completed", unpaid, res)
		r.stripeEvent(ctx, i, user, "checkout.session.async_payment_succeeded", session, res)
	case n == 2: // delivered twice
		r.stripeEvent(ctx, i, user, "checkout.session.completed", session, res)
		r.stripeEvent(ctx, i, user, "checkout.session.completed", session, res)
	default:
		r.stripeEvent(ctx, i, user, "checkout.session.completed", session, res)
	}
}

// settleAtStripe pays a session on the stand-in's hosted page; false if it refused (the
// session was closed, too late to pay).
func (r *runner) settleAtStripe(ctx context.Context, sessionID string) bool {
	url := r.cfg.Stripe.StandIn + "/_stripetest/sessions/" + sessionID + "/settle"
	for attempt := 0; attempt < 5; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			return false
		}
		resp, err := r.cfg.Client.Do(req)
		if err == nil {
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
		if !wait.Sleep(ctx, 100*time.Millisecond) {
			return false
		}
	}
	return false
}

// stripeEvent delivers one signed Stripe event to any target, retried until one answers 200,
// and records a paid one's result as deliver does. Each event gets an id of its own; a
// redelivery of the same session's payment is answered duplicate.
func (r *runner) stripeEvent(ctx context.Context, i int, user, eventType string, s stripegw.EventSession, res seckill.Reservation) {
	eventID := "evt_bench_" + strconv.FormatUint(rand.Uint64(), 36)
	result, ok := r.notify(ctx, i, func(c *client.Client) (seckill.PaymentResult, error) {
		return c.Notify(ctx, stripegw.Name, func(now time.Time) payment.SignedBody {
			hdr, body := stripegw.SignedEvent(r.cfg.Stripe.WebhookSecret, eventID, eventType, s, now)
			return payment.SignedBody{Body: body, Header: stripegw.SignatureHeader, Value: hdr.Get(stripegw.SignatureHeader)}
		})
	})
	if ok && s.PaymentStatus == "paid" {
		r.recordPayment(user, s.ID, result, res)
	}
}

// StripeRefunds reads the stand-in's record of refunds: how many were made of each session's
// payment, so that a run can check every refund owed was paid back exactly once.
func StripeRefunds(ctx context.Context, client *http.Client, standIn string) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, standIn+"/_stripetest/refunds", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Sessions map[string]int `json:"sessions"`
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(nil, resp.Body, 64<<20)); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("stripe stand-in refunds: %s", resp.Status)
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("stripe stand-in refunds: %w", err)
	}
	return out.Sessions, nil
}
