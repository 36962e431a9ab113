// One buyer's story: path, buy, the queue, then pay, cancel, abandon, pay late or retry
// (its Behavior), and the records the checks read.

package loadgen

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/payment"
)

// buyer is one simulated customer, from fetching the purchase path to a final outcome. due is
// its intended arrival in the open loop (zero in the closed loop).
func (r *runner) buyer(ctx context.Context, i int, due time.Time) {
	user := UserName(r.cfg.FirstUser + i)
	tr := r.track()
	defer tr.end()
	token, err := r.cfg.Token(user)
	if err != nil {
		r.fail("token for %s: %v", user, err)
		return
	}
	b := BehaviorOf(user, r.cfg.Seed, r.cfg.Mix)
	path, ok := r.purchasePath(ctx, i, token, due)
	if !ok {
		return
	}
	key := "k-" + user
	tr.set(phaseBuy)
	var res seckill.Reservation
	for attempt := 0; ; attempt++ {
		var got client.Bought
		a, ok := r.call(ctx, i, "buy", token, time.Time{}, func(c *client.Client) (err error) {
			got, err = c.Buy(ctx, path.Path, 1, key)
			return err
		})
		if !ok {
			atomic.AddInt64(&r.res.GaveUp, 1)
			return
		}
		switch {
		case a.err == nil:
			res = got.Reservation
			switch {
			case got.Replayed: // a replay of an older reservation, as it is now
			case res.Status == seckill.StatusQueued:
				atomic.AddInt64(&r.res.Queued, 1)
				r.unsold(a.sent)
			default: // a fresh hold
				r.unsold(a.sent)
			}
		case a.code() == seckill.CodeQueueFull:
			atomic.AddInt64(&r.res.QueueFull, 1)
			// Every unit is held and the line is full: come back a little later.
			if !wait.Sleep(ctx, time.Duration(100+min(attempt, 20)*25+rand.IntN(100))*time.Millisecond) {
				atomic.AddInt64(&r.res.GaveUp, 1)
				return
			}
			continue
		case a.code() == seckill.CodeSoldOut:
			atomic.AddInt64(&r.res.SoldOut, 1)
			r.mu.Lock()
			r.res.SoldOutAt = append(r.res.SoldOutAt, a.received)
			r.mu.Unlock()
			return
		default:
			return // ended, limit_exceeded, …
		}
		break
	}
	if b == Retry {
		var again client.Bought
		if a, ok := r.call(ctx, i, "buy", token, time.Time{}, func(c *client.Client) (err error) {
			again, err = c.Buy(ctx, path.Path, 1, key)
			return err
		}); ok && a.err == nil && again.Replayed {
			atomic.AddInt64(&r.res.Replays, 1)
			if again.ID != res.ID {
				atomic.AddInt64(&r.res.ReplayMismatch, 1)
			}
		}
	}
	if res.Status == "queued" {
		tr.set(phaseQueue)
		if !r.waitForGrant(ctx, i, token, &res) {
			return
		}
		atomic.AddInt64(&r.res.Handoffs, 1)
	}
	if res.Status != "held" {
		return // a replay of something that moved on already
	}
	atomic.AddInt64(&r.res.Held, 1)
	tr.set(phaseHold)
	if r.cfg.Stripe != nil && b != Cancel {
		r.stripeBuyer(ctx, i, user, token, b, res, tr)
		return
	}
	switch b {
	case Cancel:
		if a, ok := r.call(ctx, i, "cancel", token, time.Time{}, func(c *client.Client) error {
			_, err := c.Cancel(ctx, res.ID)
			return err
		}); ok && a.err == nil {
			atomic.AddInt64(&r.res.Cancelled, 1)
		}
		return
	case Abandon:
		atomic.AddInt64(&r.res.Abandoned, 1)
		r.waitForEnd(ctx, i, token, res)
		return
	}
	tr.set(phasePay)
	if r.cfg.PaymentSecret == nil {
		// The target's own gateway pays (and, for late payers, pays late: see the demo).
		sent := time.Since(r.start) // the gateway pays after this
		a, ok := r.call(ctx, i, "pay", token, time.Time{}, func(c *client.Client) error {
			_, err := c.Pay(ctx, res.ID)
			return err
		})
		if ok && a.err == nil {
			atomic.AddInt64(&r.res.PaymentsBegun, 1)
		} else if r.noPaymentPath(a) {
			return
		}
		if r.waitForEnd(ctx, i, token, res) == "paid" {
			r.unsold(sent)
			r.mu.Lock()
			r.res.PaidUnits[user] += res.Quantity
			r.mu.Unlock()
		}
		return
	}
	if b == PayLate && res.ExpiresAt != nil {
		if !wait.Sleep(ctx, time.Until(*res.ExpiresAt)+r.cfg.LateBy) {
			atomic.AddInt64(&r.res.GaveUp, 1)
			return
		}
	} else {
		wait.Sleep(ctx, time.Duration(rand.IntN(100))*time.Millisecond) // the buyer at the gateway
	}
	r.deliver(ctx, i, user, "pay-"+res.ID, res)
}

// deliver is the gateway: the succeeded payment's signed webhook, to any target, retried
// until one answers 200.
func (r *runner) deliver(ctx context.Context, i int, user, pid string, res seckill.Reservation) {
	ev := payment.Event{PaymentID: pid, ReservationID: res.ID, AmountCents: res.AmountCents, Status: payment.StatusSucceeded}
	atomic.AddInt64(&r.res.PaymentsBegun, 1)
	sent := time.Since(r.start) // every attempt, so the one that paid, leaves after this
	if result, ok := r.notify(ctx, i, func(c *client.Client) (seckill.PaymentResult, error) {
		return c.Webhook(ctx, r.cfg.PaymentSecret, ev) // signed anew for every attempt
	}); ok {
		r.recordPayment(user, pid, result, res)
		if result == seckill.PaymentApplied || result == seckill.PaymentLateApplied {
			r.unsold(sent)
		}
	}
}

// notify is the gateway delivering a notification to any target with post, which signs it
// anew for every attempt: retried until a target answers 200 (whose result it returns) or
// refuses it for good (counted as an error), or retryFor has passed (counted as given up).
func (r *runner) notify(ctx context.Context, i int, post func(c *client.Client) (seckill.PaymentResult, error)) (seckill.PaymentResult, bool) {
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		var result seckill.PaymentResult
		a := r.do(i+attempt+1, "pay", "", time.Time{}, func(c *client.Client) (err error) {
			result, err = post(c)
			return err
		})
		if a.err == nil {
			return result, true
		}
		if a.problem != nil && a.status() != http.StatusServiceUnavailable {
			if a.status() < 500 { // do counted a 5xx
				r.fail("%v", a.err)
			}
			return "", false
		}
		transport := a.problem == nil
		if transport && ctx.Err() == nil && time.Now().After(deadline) {
			r.fail("payment notification: %v (still failing after %v of retries)", a.err, retryFor)
		}
		if time.Now().After(deadline) || !wait.Sleep(ctx, 100*time.Millisecond) {
			atomic.AddInt64(&r.res.GaveUp, 1)
			return "", false
		}
		if transport {
			atomic.AddInt64(&r.res.RetriedTransport, 1)
		}
	}
}

// recordPayment keeps what a target answered for a delivered payment: the first answer other
// than duplicate, and the units a paying one gave the user.
func (r *runner) recordPayment(user, pid string, result seckill.PaymentResult, res seckill.Reservation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.res.Payments[pid]; !ok || prev == "duplicate" {
		r.res.Payments[pid] = string(result)
	}
	if result == seckill.PaymentApplied || result == seckill.PaymentLateApplied {
		r.res.PaidUnits[user] += res.Quantity
	}
}

// unsold records that the sale still had a unit unsold at at (Result.UnsoldAt).
func (r *runner) unsold(at time.Duration) {
	r.mu.Lock()
	r.res.UnsoldAt = max(r.res.UnsoldAt, at)
	r.mu.Unlock()
}

// ErrNoPaymentPath stops a run whose targets cannot start a payment: nobody could ever pay,
// and holds would only expire in chains until the deadline.
var ErrNoPaymentPath = errors.New("the targets start no payments: POST /pay answers 503, no payment gateway is configured; " +
	"run them with --dev (the mock gateway) or --gateway stripe, or pass the bench --payment-secret " +
	"(the targets' SECKILL_PAYMENT_SECRET) so that it delivers signed payment webhooks itself")

// noPaymentPath reports whether a POST /pay answer says the target has no gateway, and if so
// stops the run with ErrNoPaymentPath.
func (r *runner) noPaymentPath(a answer) bool {
	if !noGateway(a) {
		return false
	}
	r.stop(ErrNoPaymentPath)
	return true
}

// noGateway reports whether an answer is the 503 of a target that has no payment gateway that
// starts payments (docs/API.md: its detail starts with "no payment gateway").
func noGateway(a answer) bool {
	return a.status() == http.StatusServiceUnavailable && strings.HasPrefix(a.problem.Detail, "no payment gateway")
}

// waitForGrant polls a queued reservation until it is held (true) or ends (false).
func (r *runner) waitForGrant(ctx context.Context, i int, token string, res *seckill.Reservation) bool {
	for wait.Sleep(ctx, 50*time.Millisecond) {
		cur, ok := r.poll(ctx, i, token, res.ID)
		if !ok {
			return false
		}
		switch cur.Status {
		case "queued":
			continue
		case "held":
			r.queued(QueuedBuyer{Seq: seqOf(res.ID), Granted: cur.ExpiresAt.Add(-r.cfg.Hold)})
			*res = cur
			return true
		case "rejected":
			atomic.AddInt64(&r.res.Rejected, 1)
			r.queued(QueuedBuyer{Seq: seqOf(res.ID), Rejected: true})
		}
		return false
	}
	atomic.AddInt64(&r.res.GaveUp, 1)
	return false
}

func (r *runner) queued(q QueuedBuyer) {
	r.mu.Lock()
	r.res.Queue = append(r.res.Queue, q)
	r.mu.Unlock()
}

// seqOf reads the arrival sequence out of a reservation id "<sale>-<16 hex seq><16 hex random>".
// Ids are opaque to clients; the generator knows the format of this project's engines so that
// it can check the order the engine saw, not one skewed by the network.
func seqOf(id string) uint64 {
	if len(id) < 32 {
		return 0
	}
	n, _ := strconv.ParseUint(id[len(id)-32:len(id)-16], 16, 64)
	return n
}

// waitForEnd polls a held reservation until it is no longer held and returns its status.
func (r *runner) waitForEnd(ctx context.Context, i int, token string, res seckill.Reservation) seckill.ReservationStatus {
	for wait.Sleep(ctx, 200*time.Millisecond) {
		cur, ok := r.poll(ctx, i, token, res.ID)
		if !ok {
			return ""
		}
		if cur.Status == seckill.StatusHeld {
			continue
		}
		if cur.Status == "expired" {
			atomic.AddInt64(&r.res.Expired, 1)
		}
		return cur.Status
	}
	return ""
}

// poll reads a reservation as it is now; false if it could not be read.
func (r *runner) poll(ctx context.Context, i int, token, id string) (seckill.Reservation, bool) {
	var cur seckill.Reservation
	a, ok := r.call(ctx, i, "poll", token, time.Time{}, func(c *client.Client) (err error) {
		cur, err = c.Reservation(ctx, id)
		return err
	})
	return cur, ok && a.err == nil
}

// purchasePath fetches the buyer's purchase path, waiting for the sale to start; false if the
// buyer gave up (counted) or the sale ended or is unknown.
func (r *runner) purchasePath(ctx context.Context, i int, token string, due time.Time) (client.PurchasePath, bool) {
	var path client.PurchasePath
	for {
		a, ok := r.call(ctx, i, "path", token, due, func(c *client.Client) (err error) {
			path, err = c.Path(ctx, r.cfg.SaleID)
			return err
		})
		due = time.Time{}
		switch {
		case !ok:
			atomic.AddInt64(&r.res.GaveUp, 1)
			return path, false
		case a.err == nil:
			return path, true
		case a.code() == seckill.CodeNotStarted:
			if !wait.Sleep(ctx, 20*time.Millisecond) {
				atomic.AddInt64(&r.res.GaveUp, 1)
				return path, false
			}
		default:
			return path, false // ended, not found
		}
	}
}
