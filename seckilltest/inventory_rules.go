// The engine conformance suite's rules (docs/MODEL.md, case by case). TestInventory in
// inventory.go runs them.

package seckilltest

import (
	"fmt"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// testRules runs one scenario per rule of docs/MODEL.md, grouped by rule family; the subtest
// names (Rules/Hold, Rules/ConfirmPayment/LateApplied, …) are the suite's contract.
func testRules(t *testing.T, newEngine NewInventory) {
	testRulesHold(t, newEngine)
	testRulesQueue(t, newEngine)
	testRulesLimits(t, newEngine)
	testRulesRetries(t, newEngine)
	testRulesPayment(t, newEngine)
	testRulesAdmin(t, newEngine)
	testRulesEdges(t, newEngine)
}

// testRulesHold covers Hold, Bounds, CloseBeforeStart: a buy with stock free holds it, at the exact
// amount, and a sale that is closed or not yet open refuses it.
func testRulesHold(t *testing.T, newEngine NewInventory) {
	held := seckill.StatusHeld

	t.Run("Hold", func(t *testing.T) {
		r := newRig(t, newEngine, 3, 0, perUser(2))
		r.state(ss(3, 3, 0, 0, 0))
		a := r.buy("u1", 1, "")
		r.expect("Buy", a, held, 0, at(10*time.Second))
		if a.AmountCents != price {
			t.Fatalf("amount_cents %d, want %d", a.AmountCents, price)
		}
		if !a.CreatedAt.Equal(epoch) {
			t.Fatalf("created_at %s, want %s", a.CreatedAt, epoch)
		}
		r.state(ss(3, 2, 1, 0, 0))
		got := r.is(a.ID, held, 0, at(10*time.Second))
		if got.UserID != "u1" || got.SaleID != "s1" || got.Quantity != 1 || got.AmountCents != price {
			t.Fatalf("Reservation = %+v, want u1's 1 unit of s1 for %d", got, price)
		}
		r.advance(2 * time.Second)
		b := r.buy("u2", 2, "")
		r.expect("Buy q=2", b, held, 0, at(12*time.Second))
		if b.AmountCents != 2*price {
			t.Fatalf("amount_cents %d, want %d", b.AmountCents, 2*price)
		}
		if b.Seq <= a.Seq {
			t.Fatalf("Seq %d after %d: Seq must grow with arrival", b.Seq, a.Seq)
		}
		r.state(ss(3, 0, 3, 0, 0))
	})

	// Bounds: the largest sale the bounds allow (seckill.Validate) sells with exact amounts,
	// and a quantity beyond any limit is refused as over the limit, never wrapped.
	t.Run("Bounds", func(t *testing.T) {
		limit := int(seckill.MaxAmountCents / seckill.MaxPriceCents)
		r := newRig(t, newEngine, seckill.MaxQuantity, 0, perUser(limit), func(in *seckill.SaleInput) {
			in.PriceCents = ptr(int64(seckill.MaxPriceCents))
		})
		for _, q := range []int{limit + 1, seckill.MaxQuantity, 1 << 62} {
			r.buyFails("u1", q, "", seckill.CodeLimitExceeded)
		}
		a := r.buy("u1", limit, "")
		if want := int64(limit) * seckill.MaxPriceCents; a.AmountCents != want || want > seckill.MaxAmountCents {
			t.Fatalf("amount_cents %d, want %d (≤ %d)", a.AmountCents, want, int64(seckill.MaxAmountCents))
		}
		r.pay("p1", a.ID, a.AmountCents, seckill.PaymentApplied)
		r.state(ss(seckill.MaxQuantity, seckill.MaxQuantity-limit, 0, limit, 0))
	})

	// CloseBeforeStart: a sale closed before it starts has ended (closed means ended): buys
	// answer ended, not not_started, also once the start has passed.
	t.Run("CloseBeforeStart", func(t *testing.T) {
		r := newRig(t, newEngine, 2, 0, startsIn(time.Hour), endsIn(2*time.Hour))
		r.buyFails("u1", 1, "", seckill.CodeNotStarted)
		sale, _, err := r.inv.CloseSale(r.ctx, r.sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st := sale.Status(r.clock.Now(), seckill.StockState{Sellable: 2, Available: 2}); st != seckill.SaleEnded {
			t.Fatalf("status of a sale closed before its start = %s, want ended", st)
		}
		r.buyFails("u1", 1, "", seckill.CodeEnded)
		r.advance(90 * time.Minute)
		r.buyFails("u1", 1, "", seckill.CodeEnded)
		r.state(ss(2, 2, 0, 0, 0))
	})
}

// testRulesQueue covers Queue, FIFOOnCancel, FIFOOnExpiry, QueueRejectedWhenSoldOut,
// HeadOfLineBlocking, BlockedHeadLeaves, NeverServableHead: who waits, in which order, and when a
// waiting buyer is served or rejected.
func testRulesQueue(t *testing.T, newEngine NewInventory) {
	queued := seckill.StatusQueued

	t.Run("Queue", func(t *testing.T) {
		r := newRig(t, newEngine, 1, 0)
		r.buy("u1", 1, "")
		b := r.buy("u2", 1, "")
		r.expect("Buy with every unit held", b, queued, 1, time.Time{})
		c := r.buy("u3", 1, "")
		r.expect("second queued Buy", c, queued, 2, time.Time{})
		r.state(ss(1, 0, 1, 0, 2))
		r.queued(b.ID, 1)
		r.queued(c.ID, 2)
	})

	t.Run("FIFOOnCancel", func(t *testing.T) {
		r := newRig(t, newEngine, 1, 0)
		a := r.buy("u1", 1, "")
		b := r.buy("u2", 1, "")
		c := r.buy("u3", 1, "")
		r.advance(3 * time.Second)
		r.cancel(a.ID, "u1", seckill.StatusCancelled)
		// The freed unit goes to the earliest queued buyer, whose hold starts at the grant.
		r.held(b.ID, at(13*time.Second))
		r.queued(c.ID, 1)
		r.state(ss(1, 0, 1, 0, 1))
		r.cancel(c.ID, "u3", seckill.StatusCancelled) // a queued buyer leaves the queue
		r.state(ss(1, 0, 1, 0, 0))
		r.held(b.ID, at(13*time.Second))
	})

	t.Run("FIFOOnExpiry", func(t *testing.T) {
		r := newRig(t, newEngine, 1, 0)
		a := r.buy("u1", 1, "")
		b := r.buy("u2", 1, "")
		c := r.buy("u3", 1, "")
		r.advance(10*time.Second - time.Millisecond)
		r.held(a.ID, at(10*time.Second))
		r.queued(b.ID, 1)
		r.advance(time.Millisecond) // now == expires_at: the hold has expired
		// The first call after the expiry is a read: it must show the truth.
		r.status(a.ID, seckill.StatusExpired)
		r.held(b.ID, at(20*time.Second))
		r.queued(c.ID, 1)
		r.state(ss(1, 0, 1, 0, 1))
		r.advance(12 * time.Second)
		// This time the first call is Sale().
		r.state(ss(1, 0, 1, 0, 0))
		r.status(b.ID, seckill.StatusExpired)
		r.held(c.ID, at(32*time.Second))
		r.advance(time.Minute)
		if n, err := r.inv.Reclaim(r.ctx, r.sale.ID); err != nil || n > 1 {
			t.Fatalf("Reclaim = %d, %v; want at most the 1 hold that expired", n, err)
		}
		r.state(ss(1, 1, 0, 0, 0))
		r.status(c.ID, seckill.StatusExpired)
		if n, err := r.inv.Reclaim(r.ctx, r.sale.ID); err != nil || n != 0 {
			t.Fatalf("second Reclaim = %d, %v; want 0, nil", n, err)
		}
		r.buy("u4", 1, "")
	})

	t.Run("QueueRejectedWhenSoldOut", func(t *testing.T) {
		r := newRig(t, newEngine, 1, 0)
		a := r.buy("u1", 1, "")
		b := r.buy("u2", 1, "")
		c := r.buy("u3", 1, "")
		r.payFull("p1", a, seckill.PaymentApplied)
		// available == 0 && held == 0: sold out, so nobody in the queue can ever be served.
		r.status(b.ID, seckill.StatusRejected)
		r.status(c.ID, seckill.StatusRejected)
		r.state(ss(1, 0, 0, 1, 0))
		r.buyFails("u4", 1, "", seckill.CodeSoldOut)
	})

	t.Run("HeadOfLineBlocking", func(t *testing.T) {
		r := newRig(t, newEngine, 3, 0, perUser(2))
		a := r.buy("u1", 1, "")
		b := r.buy("u2", 1, "")
		r.buy("u3", 1, "")
		d := r.buy("u4", 2, "")
		r.expect("Buy q=2", d, queued, 1, time.Time{})
		e := r.buy("u5", 1, "")
		r.expect("Buy behind", e, queued, 2, time.Time{})
		r.cancel(a.ID, "u1", seckill.StatusCancelled)
		// One unit is free but the head wants two: it waits, and u5 behind it waits too.
		r.queued(d.ID, 1)
		r.queued(e.ID, 2)
		r.state(ss(3, 1, 2, 0, 3))
		f := r.buy("u6", 1, "") // a unit is free, but the queue is not empty: join its tail
		r.expect("Buy while the head waits", f, queued, 3, time.Time{})
		r.advance(time.Second)
		r.cancel(b.ID, "u2", seckill.StatusCancelled)
		r.held(d.ID, at(11*time.Second))
		r.queued(e.ID, 1)
		r.queued(f.ID, 2)
		r.state(ss(3, 0, 3, 0, 2))
	})

	t.Run("BlockedHeadLeaves", func(t *testing.T) {
		r := newRig(t, newEngine, 2, 0, perUser(2))
		a := r.buy("u1", 1, "")
		r.buy("u2", 1, "")
		c := r.buy("u3", 2, "")
		d := r.buy("u4", 1, "")
		e := r.buy("u5", 1, "")
		r.cancel(a.ID, "u1", seckill.StatusCancelled)
		r.queued(c.ID, 1) // wants 2, 1 is free: blocks the queue
		r.state(ss(2, 1, 1, 0, 4))
		r.advance(time.Second)
		r.cancel(c.ID, "u3", seckill.StatusCancelled)
		// The blocking head left: the next buyer gets the free unit at once.
		r.held(d.ID, at(11*time.Second))
		r.queued(e.ID, 1)
		r.state(ss(2, 0, 2, 0, 1))
	})

	t.Run("NeverServableHead", func(t *testing.T) {
		r := newRig(t, newEngine, 3, 0, perUser(3))
		a := r.buy("u1", 2, "")
		b := r.buy("u2", 1, "")
		c := r.buy("u3", 3, "") // free + held = 3: it may be served one day
		r.expect("Buy q=3", c, queued, 1, time.Time{})
		d := r.buy("u4", 1, "")
		r.payFull("p1", a, seckill.PaymentApplied)
		// Now free + held = 1 < 3: the head can never be served and is rejected; u4 is next.
		r.status(c.ID, seckill.StatusRejected)
		r.queued(d.ID, 1)
		r.state(ss(3, 0, 1, 2, 1))
		r.buyFails("u5", 2, "", seckill.CodeSoldOut) // free + held = 1 < 2: never servable
		r.cancel(b.ID, "u2", seckill.StatusCancelled)
		r.held(d.ID, at(10*time.Second))
		r.state(ss(3, 0, 1, 2, 0))
		r.buyFails("u6", 2, "", seckill.CodeSoldOut)
		g := r.buy("u7", 1, "")
		r.expect("Buy of the last held unit", g, queued, 1, time.Time{})
	})
}

// testRulesLimits covers QueueLimit, PerUserLimit, Holdback: the three limits a sale sets on its
// buyers.
func testRulesLimits(t *testing.T, newEngine NewInventory) {
	queued := seckill.StatusQueued

	t.Run("QueueLimit", func(t *testing.T) {
		t.Run("Omitted", func(t *testing.T) {
			r := newRig(t, newEngine, 2, 0, holdback(1))
			if r.sale.QueueLimit != 10 {
				t.Fatalf("NewSale: queue_limit %d, want 10 × sellable = 10", r.sale.QueueLimit)
			}
			s := r.stateOf("s1", ss(1, 1, 0, 0, 0))
			if s.QueueLimit != 10 {
				t.Fatalf("Sale().QueueLimit = %d, want 10", s.QueueLimit)
			}
			r.buy("u0", 1, "")
			for i := 1; i <= 10; i++ {
				got := r.buy(fmt.Sprintf("u%d", i), 1, "")
				r.expect("queued Buy", got, queued, i, time.Time{})
			}
			r.buyFails("u11", 1, "", seckill.CodeQueueFull)
			r.state(ss(1, 0, 1, 0, 10))
		})
		t.Run("Zero", func(t *testing.T) {
			r := newRig(t, newEngine, 1, 0, queueLimit(0))
			r.buy("u1", 1, "")
			r.buyFails("u2", 1, "", seckill.CodeQueueFull) // not sold_out: the unit is only held
			r.state(ss(1, 0, 1, 0, 0))
		})
		t.Run("Two", func(t *testing.T) {
			r := newRig(t, newEngine, 2, 0, queueLimit(2), perUser(2))
			r.buy("u1", 2, "")
			r.buy("u2", 1, "")
			c := r.buy("u3", 2, "")
			r.buyFails("u4", 1, "", seckill.CodeQueueFull) // the limit counts buyers, not units
			r.cancel(c.ID, "u3", seckill.StatusCancelled)
			d := r.buy("u4", 1, "")
			r.expect("Buy after a queued buyer left", d, queued, 2, time.Time{})
		})
	})

	t.Run("PerUserLimit", func(t *testing.T) {
		r := newRig(t, newEngine, 5, 0, perUser(2))
		r.buyFails("u1", 3, "", seckill.CodeLimitExceeded)
		r.buyFails("u1", 0, "", seckill.CodeInvalidArgument)
		r.buyFails("u1", -1, "", seckill.CodeInvalidArgument)
		a := r.buy("u1", 1, "")
		b := r.buy("u1", 1, "")
		r.buyFails("u1", 1, "", seckill.CodeLimitExceeded) // held counts
		r.payFull("p1", a, seckill.PaymentApplied)
		r.buyFails("u1", 1, "", seckill.CodeLimitExceeded) // paid counts
		r.cancel(b.ID, "u1", seckill.StatusCancelled)
		c := r.buy("u1", 1, "") // cancelled does not count
		r.buyFails("u1", 1, "", seckill.CodeLimitExceeded)
		r.advance(10 * time.Second)
		r.status(c.ID, seckill.StatusExpired)
		r.buy("u1", 1, "") // expired does not count
		r.buy("u2", 2, "")
		r.state(ss(5, 1, 3, 1, 0))

		// Queued units count too.
		r2 := newRig(t, newEngine, 1, 0, perUser(2))
		r2.buy("u1", 1, "")
		q := r2.buy("u1", 1, "")
		r2.expect("the user's second Buy", q, queued, 1, time.Time{})
		r2.buyFails("u1", 1, "", seckill.CodeLimitExceeded)
		r2.state(ss(1, 0, 1, 0, 1))
	})

	t.Run("Holdback", func(t *testing.T) {
		r := newRig(t, newEngine, 5, 0, holdback(2), queueLimit(0))
		s := r.stateOf("s1", ss(3, 3, 0, 0, 0))
		if s.Stock != 5 || s.Holdback != 2 {
			t.Fatalf("Sale() = stock %d holdback %d, want 5 and 2", s.Stock, s.Holdback)
		}
		var rs []seckill.Reservation
		for _, u := range []string{"u1", "u2", "u3"} {
			rs = append(rs, r.buy(u, 1, ""))
		}
		r.buyFails("u4", 1, "", seckill.CodeQueueFull)
		for i, res := range rs {
			r.payFull(fmt.Sprintf("p%d", i), res, seckill.PaymentApplied)
		}
		r.buyFails("u4", 1, "", seckill.CodeSoldOut) // the 2 held back units are not for sale
		r.state(ss(3, 0, 0, 3, 0))
	})
}

// testRulesRetries covers Idempotency, Cancel: a buy replayed under its key and a buyer who leaves,
// both safe to retry.
func testRulesRetries(t *testing.T, newEngine NewInventory) {
	held, queued := seckill.StatusHeld, seckill.StatusQueued

	t.Run("Idempotency", func(t *testing.T) {
		r := newRig(t, newEngine, 4, 0, perUser(2))
		r.load(4, 0, saleID("s2"), perUser(2))
		a := r.buy("u1", 1, "k")
		r.state(ss(4, 3, 1, 0, 0))
		got := r.replay("s1", "u1", 1, "k", a.ID)
		r.expect("replay", got, held, 0, *a.ExpiresAt)
		r.replay("s1", "u1", 2, "k", a.ID) // the stored reservation, whatever the quantity asked
		r.state(ss(4, 3, 1, 0, 0))
		b := r.buy("u2", 1, "k") // another user's key is another reservation
		c := r.buyNew("s2", "u1", 1, "k")
		d := r.buy("u1", 1, "")
		if len(map[string]bool{a.ID: true, b.ID: true, c.ID: true, d.ID: true}) != 4 {
			t.Fatalf("ids %s %s %s %s: want 4 different reservations", a.ID, b.ID, c.ID, d.ID)
		}
		r.state(ss(4, 1, 3, 0, 0))
		r.replay("s1", "u1", 1, "k", a.ID) // at the limit: the replay still answers
		r.cancel(a.ID, "u1", seckill.StatusCancelled)
		got = r.replay("s1", "u1", 1, "k", a.ID)
		r.expect("replay of a cancelled reservation", got, seckill.StatusCancelled, 0, time.Time{})
		r.state(ss(4, 2, 2, 0, 0))

		// A failed buy does not use up its key.
		r.load(0, 0, saleID("s3"))
		r.buyFailsIn("s3", "u1", 1, "x", seckill.CodeSoldOut)
		if _, _, err := r.inv.AddStock(r.ctx, "s3", 1); err != nil {
			t.Fatalf("AddStock: %v", err)
		}
		r.buyNew("s3", "u1", 1, "x")

		// A replayed queued reservation shows its live position; after the end, ended wins.
		r.load(1, 0, saleID("s4"))
		r.buyNew("s4", "u1", 1, "")
		e := r.buyNew("s4", "u2", 1, "q")
		f := r.buyNew("s4", "u3", 1, "q")
		r.expect("queued", f, queued, 2, time.Time{})
		r.cancel(e.ID, "u2", seckill.StatusCancelled)
		got = r.replay("s4", "u3", 1, "q", f.ID)
		r.expect("replay of a queued reservation", got, queued, 1, time.Time{})
		if _, _, err := r.inv.CloseSale(r.ctx, "s4"); err != nil {
			t.Fatalf("CloseSale: %v", err)
		}
		r.buyFailsIn("s4", "u3", 1, "q", seckill.CodeEnded)
	})

	t.Run("Cancel", func(t *testing.T) {
		r := newRig(t, newEngine, 3, 0)
		a := r.buy("u1", 1, "")
		r.cancelFails(a.ID, "u2", seckill.CodeNotFound) // another user's id is not found
		r.cancelFails("no-such-reservation", "u1", seckill.CodeNotFound)
		r.cancelFails(seckill.ReservationID("s1", make([]byte, 16)), "u1", seckill.CodeNotFound)
		r.cancel(a.ID, "u1", seckill.StatusCancelled)
		r.state(ss(3, 3, 0, 0, 0))
		r.cancel(a.ID, "u1", seckill.StatusCancelled) // harmless retry
		r.state(ss(3, 3, 0, 0, 0))

		b := r.buy("u2", 1, "")
		r.advance(10 * time.Second)
		r.cancel(b.ID, "u2", seckill.StatusExpired) // expired: returned unchanged
		r.state(ss(3, 3, 0, 0, 0))

		c := r.buy("u3", 1, "")
		r.payFull("p3", c, seckill.PaymentApplied)
		r.cancelFails(c.ID, "u3", seckill.CodeConflict)
		r.status(c.ID, seckill.StatusPaid)

		d := r.buy("u4", 1, "")
		e := r.buy("u5", 1, "")
		f := r.buy("u6", 1, "")
		r.expect("queued", f, queued, 1, time.Time{})
		r.payFull("p4", d, seckill.PaymentApplied)
		r.payFull("p5", e, seckill.PaymentApplied)
		r.status(f.ID, seckill.StatusRejected)
		r.cancel(f.ID, "u6", seckill.StatusRejected) // rejected: returned unchanged
		r.state(ss(3, 0, 0, 3, 0))
	})
}

// testRulesPayment covers ConfirmPayment: a payment in time, twice, late, in the wrong amount or
// currency, after the end or the close.
func testRulesPayment(t *testing.T, newEngine NewInventory) {
	held := seckill.StatusHeld

	t.Run("ConfirmPayment", func(t *testing.T) {
		t.Run("AppliedDuplicateSecondPayment", func(t *testing.T) {
			r := newRig(t, newEngine, 2, 0)
			a := r.buy("u1", 1, "")
			got := r.pay("p0", a.ID, price-1, seckill.PaymentRefundRequired) // wrong amount
			r.expect("wrong amount", got, held, 0, *a.ExpiresAt)
			r.state(ss(2, 1, 1, 0, 0))
			r.pay("p0", a.ID, price+1, seckill.PaymentRefundRequired)
			r.payFull("p1", a, seckill.PaymentApplied)
			r.state(ss(2, 1, 0, 1, 0))
			r.payFull("p1", a, seckill.PaymentDuplicate)
			r.state(ss(2, 1, 0, 1, 0))
			got = r.payFull("p2", a, seckill.PaymentRefundRequired) // a second payment id
			r.expect("second payment", got, seckill.StatusPaid, 0, time.Time{})
			if got := r.get(a.ID); got.PaymentID != "p1" {
				t.Fatalf("payment_id %q after a second payment, want p1", got.PaymentID)
			}
			r.state(ss(2, 1, 0, 1, 0))
		})
		// Amount and currency must both be the sale's: money in another currency is owed back
		// and changes nothing, in time or late, like a wrong amount (issue 26, "Currency is never
		// compared"). A payment that names no currency is in the sale's own.
		t.Run("OtherCurrency", func(t *testing.T) {
			r := newRig(t, newEngine, 2, 0, inCurrency("usd"))
			a := r.buy("u1", 1, "")
			got := r.payIn("p0", a.ID, price, "vnd", seckill.PaymentRefundRequired)
			r.expect("payment in vnd", got, held, 0, *a.ExpiresAt)
			r.payIn("p1", a.ID, price, "eur", seckill.PaymentRefundRequired)
			r.state(ss(2, 1, 1, 0, 0))
			r.payIn("p2", a.ID, price, "USD", seckill.PaymentApplied)
			r.payIn("p2", a.ID, price, "usd", seckill.PaymentDuplicate)
			b := r.buy("u2", 1, "")
			r.advance(10 * time.Second) // b expired: a late payment
			r.payIn("p3", b.ID, price, "jpy", seckill.PaymentRefundRequired)
			r.status(b.ID, seckill.StatusExpired)
			r.state(ss(2, 1, 0, 1, 0))
			r.payIn("p4", b.ID, price, "", seckill.PaymentLateApplied)
			r.state(ss(2, 0, 0, 2, 0))

			e := newRig(t, newEngine, 1, 0, inCurrency("jpy"))
			c := e.buy("u1", 1, "")
			e.payIn("p5", c.ID, price, "usd", seckill.PaymentRefundRequired)
			e.payIn("p5", c.ID, price, "jpy", seckill.PaymentApplied)
		})
		t.Run("Unknown", func(t *testing.T) {
			r := newRig(t, newEngine, 1, 0)
			for _, id := range []string{"no-such-reservation", seckill.ReservationID("s1", make([]byte, 16))} {
				res, got, err := r.inv.ConfirmPayment(r.ctx, seckill.PaymentConfirmation{PaymentID: "p1", ReservationID: id, AmountCents: price})
				if err != nil || res != seckill.PaymentRefundRequired || got.ID != "" {
					t.Fatalf("ConfirmPayment(unknown %s) = %q, %+v, %v; want refund_required, zero reservation, nil", id, res, got, err)
				}
			}
			r.state(ss(1, 1, 0, 0, 0))
		})
		t.Run("QueuedAndRejected", func(t *testing.T) {
			r := newRig(t, newEngine, 1, 0)
			a := r.buy("u1", 1, "")
			b := r.buy("u2", 1, "")
			r.payFull("p1", b, seckill.PaymentRefundRequired)
			r.queued(b.ID, 1)
			r.state(ss(1, 0, 1, 0, 1))
			r.payFull("p2", a, seckill.PaymentApplied)
			r.status(b.ID, seckill.StatusRejected)
			r.payFull("p3", b, seckill.PaymentRefundRequired)
			r.status(b.ID, seckill.StatusRejected)
			r.state(ss(1, 0, 0, 1, 0))
		})
		t.Run("LateApplied", func(t *testing.T) {
			r := newRig(t, newEngine, 2, 0)
			a := r.buy("u1", 1, "")
			r.advance(10 * time.Second)
			r.payFull("p1", a, seckill.PaymentLateApplied) // expired, a unit is free, u1 under the limit
			r.state(ss(2, 1, 0, 1, 0))
			b := r.buy("u2", 1, "")
			r.cancel(b.ID, "u2", seckill.StatusCancelled)
			r.payFull("p2", b, seckill.PaymentLateApplied) // cancelled, a unit is free
			r.state(ss(2, 0, 0, 2, 0))
			r.payFull("p2", b, seckill.PaymentDuplicate)
			r.buyFails("u3", 1, "", seckill.CodeSoldOut)
		})
		t.Run("LateNoFreeUnit", func(t *testing.T) {
			r := newRig(t, newEngine, 1, 0)
			a := r.buy("u1", 1, "")
			r.advance(10 * time.Second)
			b := r.buy("u2", 1, "") // takes the unit a's expiry freed
			got := r.payFull("p1", a, seckill.PaymentRefundRequired)
			r.expect("late payment, no unit", got, seckill.StatusRefundRequired, 0, time.Time{})
			r.status(a.ID, seckill.StatusRefundRequired)
			r.held(b.ID, at(20*time.Second))
			r.state(ss(1, 0, 1, 0, 0))
			r.payFull("p1", a, seckill.PaymentRefundRequired) // not "duplicate": nothing was paid
			r.payFull("p9", a, seckill.PaymentRefundRequired)
			r.cancel(a.ID, "u1", seckill.StatusRefundRequired) // returned unchanged
			r.cancel(b.ID, "u2", seckill.StatusCancelled)
			r.buy("u1", 1, "") // a refund_required reservation does not count toward the limit
			r.state(ss(1, 0, 1, 0, 0))
		})
		t.Run("LateUserAtLimit", func(t *testing.T) {
			r := newRig(t, newEngine, 2, 0)
			a := r.buy("u1", 1, "")
			r.cancel(a.ID, "u1", seckill.StatusCancelled)
			b := r.buy("u1", 1, "")
			r.payFull("p1", a, seckill.PaymentRefundRequired) // a unit is free, but u1 holds b
			r.status(a.ID, seckill.StatusRefundRequired)
			r.held(b.ID, at(10*time.Second))
			r.state(ss(2, 1, 1, 0, 0))
		})
		t.Run("AfterEnd", func(t *testing.T) {
			r := newRig(t, newEngine, 3, 0, endsIn(20*time.Second))
			a := r.buy("u1", 1, "")
			r.advance(12 * time.Second)
			b := r.buy("u2", 1, "")
			r.advance(9 * time.Second) // 21 s: ended; a expired at 10 s, b holds until 22 s
			r.held(b.ID, at(22*time.Second))
			r.payFull("p2", b, seckill.PaymentApplied) // a hold may be paid after the end
			r.payFull("p1", a, seckill.PaymentRefundRequired)
			r.status(a.ID, seckill.StatusRefundRequired)
			r.state(ss(3, 2, 0, 1, 0)) // free units are not resold after the end
		})
		t.Run("AfterClose", func(t *testing.T) {
			r := newRig(t, newEngine, 2, 0)
			a := r.buy("u1", 1, "")
			b := r.buy("u2", 1, "")
			c := r.buy("u3", 1, "")
			if _, _, err := r.inv.CloseSale(r.ctx, "s1"); err != nil {
				t.Fatalf("CloseSale: %v", err)
			}
			r.status(c.ID, seckill.StatusRejected)
			r.payFull("p1", a, seckill.PaymentApplied)
			r.cancel(b.ID, "u2", seckill.StatusCancelled)
			r.buyFails("u4", 1, "", seckill.CodeEnded)
			r.payFull("p2", b, seckill.PaymentRefundRequired) // closed: the freed unit is not resold
			r.status(b.ID, seckill.StatusRefundRequired)
			r.state(ss(2, 1, 0, 1, 0))
		})
	})
}

// testRulesAdmin covers AddStock, CloseSale, ClosedHoldExpires: what the operator does to a running
// sale.
func testRulesAdmin(t *testing.T, newEngine NewInventory) {
	t.Run("AddStock", func(t *testing.T) {
		r := newRig(t, newEngine, 1, 0)
		a := r.buy("u1", 1, "")
		b := r.buy("u2", 1, "")
		c := r.buy("u3", 1, "")
		r.advance(time.Second)
		s, st, err := r.inv.AddStock(r.ctx, "s1", 1)
		if err != nil {
			t.Fatalf("AddStock: %v", err)
		}
		if s.Stock != 2 || st != ss(2, 0, 2, 0, 1) {
			t.Fatalf("AddStock(1) = stock %d, %+v; want 2, %+v", s.Stock, st, ss(2, 0, 2, 0, 1))
		}
		r.held(b.ID, at(11*time.Second)) // the queue is served first
		r.queued(c.ID, 1)
		for _, add := range []int{0, -1} {
			if _, _, err := r.inv.AddStock(r.ctx, "s1", add); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
				t.Fatalf("AddStock(%d) = %v, want invalid_argument", add, err)
			}
		}
		if _, _, err := r.inv.AddStock(r.ctx, "nope", 1); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("AddStock(unknown sale) = %v, want not_found", err)
		}
		r.payFull("p1", a, seckill.PaymentApplied)
		r.payFull("p2", b, seckill.PaymentApplied)
		r.status(c.ID, seckill.StatusRejected)
		r.buyFails("u4", 1, "", seckill.CodeSoldOut)
		if _, _, err := r.inv.AddStock(r.ctx, "s1", 2); err != nil {
			t.Fatalf("AddStock after the sell-out: %v", err)
		}
		r.state(ss(4, 2, 0, 2, 0))
		r.buy("u4", 1, "")
		r.state(ss(4, 1, 1, 2, 0))
	})

	t.Run("CloseSale", func(t *testing.T) {
		r := newRig(t, newEngine, 2, 0)
		a := r.buy("u1", 1, "")
		b := r.buy("u2", 1, "")
		c := r.buy("u3", 1, "")
		d := r.buy("u4", 1, "")
		r.advance(time.Second)
		s, st, err := r.inv.CloseSale(r.ctx, "s1")
		if err != nil {
			t.Fatalf("CloseSale: %v", err)
		}
		if !s.EndsAt.Equal(at(time.Second)) || st != ss(2, 0, 2, 0, 0) {
			t.Fatalf("CloseSale = ends_at %s, %+v; want %s, %+v", s.EndsAt, st, at(time.Second), ss(2, 0, 2, 0, 0))
		}
		r.status(c.ID, seckill.StatusRejected)
		r.status(d.ID, seckill.StatusRejected)
		r.buyFails("u5", 1, "", seckill.CodeEnded)
		r.cancel(a.ID, "u1", seckill.StatusCancelled)
		r.state(ss(2, 1, 1, 0, 0))
		r.buyFails("u5", 1, "", seckill.CodeEnded) // the freed unit is not resold
		r.payFull("p2", b, seckill.PaymentApplied) // holds may still be paid
		r.state(ss(2, 1, 0, 1, 0))
		r.advance(time.Minute)
		s, _, err = r.inv.CloseSale(r.ctx, "s1")
		if err != nil || !s.EndsAt.Equal(at(time.Second)) {
			t.Fatalf("second CloseSale = ends_at %s, %v; want %s, nil", s.EndsAt, err, at(time.Second))
		}
		if _, _, err := r.inv.CloseSale(r.ctx, "nope"); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("CloseSale(unknown) = %v, want not_found", err)
		}
	})

	t.Run("ClosedHoldExpires", func(t *testing.T) {
		r := newRig(t, newEngine, 1, 0)
		a := r.buy("u1", 1, "")
		if _, _, err := r.inv.CloseSale(r.ctx, "s1"); err != nil {
			t.Fatalf("CloseSale: %v", err)
		}
		r.advance(10 * time.Second)
		r.status(a.ID, seckill.StatusExpired)
		r.payFull("p1", a, seckill.PaymentRefundRequired)
		r.state(ss(1, 1, 0, 0, 0))
	})
}

// testRulesEdges covers Window, StockZeroAndOne, UnknownAndLoad, RestoreReservation: the sale's
// window to the millisecond, the smallest stocks, unknown ids and a reservation restored from the
// order store.
func testRulesEdges(t *testing.T, newEngine NewInventory) {
	t.Run("Window", func(t *testing.T) {
		r := newRig(t, newEngine, 2, 0, startsIn(10*time.Second), endsIn(20*time.Second), holdSeconds(15))
		r.buyFails("u1", 1, "", seckill.CodeNotStarted)
		r.buyFails("u1", 5, "", seckill.CodeNotStarted) // the window is checked before the limit
		r.state(ss(2, 2, 0, 0, 0))
		r.advance(10*time.Second - time.Millisecond)
		r.buyFails("u1", 1, "", seckill.CodeNotStarted)
		r.advance(time.Millisecond) // now == starts_at: open
		a := r.buy("u1", 1, "")
		r.buy("u2", 1, "")
		c := r.buy("u3", 1, "")
		r.advance(10*time.Second - time.Millisecond)
		r.queued(c.ID, 1)
		r.advance(time.Millisecond) // now == ends_at: ended
		r.status(c.ID, seckill.StatusRejected)
		r.buyFails("u4", 1, "", seckill.CodeEnded)
		r.state(ss(2, 0, 2, 0, 0))
		r.payFull("p1", a, seckill.PaymentApplied)
		r.advance(5 * time.Second) // b expired at 25 s; its unit is not resold
		r.state(ss(2, 1, 0, 1, 0))
		r.buyFails("u4", 1, "", seckill.CodeEnded)
	})

	t.Run("StockZeroAndOne", func(t *testing.T) {
		r := newRig(t, newEngine, 0, 0)
		r.buyFails("u1", 1, "", seckill.CodeSoldOut)
		r.state(ss(0, 0, 0, 0, 0))
		r.load(1, 0, saleID("s2"), holdback(1))
		r.buyFailsIn("s2", "u1", 1, "", seckill.CodeSoldOut)
		r.stateOf("s2", ss(0, 0, 0, 0, 0))
		r.load(3, 3, saleID("s3"))
		r.buyFailsIn("s3", "u1", 1, "", seckill.CodeSoldOut)
		r.stateOf("s3", ss(3, 0, 0, 3, 0))

		// Stock 1: never sell 2.
		r = newRig(t, newEngine, 1, 0, queueLimit(0))
		a := r.buy("u1", 1, "")
		r.state(ss(1, 0, 1, 0, 0))
		r.buyFails("u2", 1, "", seckill.CodeQueueFull)
		r.payFull("p1", a, seckill.PaymentApplied)
		r.buyFails("u2", 1, "", seckill.CodeSoldOut)
		r.buyFails("u3", 1, "", seckill.CodeSoldOut)
		r.state(ss(1, 0, 0, 1, 0))

		// Stock 1, the first hold expires, the unit is sold to the second buyer; the first
		// buyer's late payment must not sell a second unit.
		r = newRig(t, newEngine, 1, 0)
		a = r.buy("u1", 1, "")
		r.advance(10 * time.Second)
		b := r.buy("u2", 1, "")
		r.payFull("p2", b, seckill.PaymentApplied)
		r.payFull("p1", a, seckill.PaymentRefundRequired)
		r.state(ss(1, 0, 0, 1, 0))
		r.buyFails("u3", 1, "", seckill.CodeSoldOut)
	})

	t.Run("UnknownAndLoad", func(t *testing.T) {
		r := newRig(t, newEngine, 2, 0)
		err := r.inv.LoadSale(r.ctx, r.sale, 0)
		if seckill.ErrorCode(err) != seckill.CodeConflict {
			t.Fatalf("LoadSale twice = %v, want conflict", err)
		}
		s := r.stateOf("s1", ss(2, 2, 0, 0, 0))
		if s.ID != r.sale.ID || s.Name != r.sale.Name || s.PriceCents != r.sale.PriceCents || s.Stock != r.sale.Stock ||
			s.PerUserLimit != r.sale.PerUserLimit || s.HoldSeconds != r.sale.HoldSeconds || s.QueueLimit != r.sale.QueueLimit ||
			!s.StartsAt.Equal(r.sale.StartsAt) || !s.EndsAt.Equal(r.sale.EndsAt) {
			t.Fatalf("Sale() = %+v, want the loaded definition %+v", s, r.sale)
		}
		if _, _, err := r.inv.Sale(r.ctx, "nope"); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("Sale(unknown) = %v, want not_found", err)
		}
		r.buyFailsIn("nope", "u1", 1, "", seckill.CodeNotFound)
		if _, err := r.inv.Reclaim(r.ctx, "nope"); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("Reclaim(unknown) = %v, want not_found", err)
		}
		if _, err := r.inv.Reservation(r.ctx, "nope"); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("Reservation(unknown) = %v, want not_found", err)
		}
		if _, err := r.inv.Reservation(r.ctx, seckill.ReservationID("s1", make([]byte, 16))); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("Reservation(unknown id of s1) = %v, want not_found", err)
		}
	})

	t.Run("RestoreReservation", func(t *testing.T) { testRestore(t, newEngine) })
}
