// The engine conformance suite's Restore cases. TestInventory in inventory.go runs them.

package seckilltest

import (
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// testRestore rebuilds a sale after a restart: LoadSale with the database's sold units, then
// the held, queued and paid reservations the order store knew.
func testRestore(t *testing.T, newEngine NewInventory) {
	r := newRig(t, newEngine, 5, 2, perUser(2))
	id := func(n byte) string {
		b := make([]byte, 16)
		b[0], b[15] = 0xab, n
		return seckill.ReservationID("s1", b)
	}
	mk := func(n byte, user string, q int, st seckill.ReservationStatus, seq uint64) seckill.Reservation {
		return seckill.Reservation{
			ID: id(n), SaleID: "s1", UserID: user, Quantity: q, Status: st, AmountCents: int64(q) * price,
			CreatedAt: epoch.Add(-time.Minute + time.Duration(seq)*time.Second), Seq: seq,
		}
	}
	p := mk(1, "u1", 2, seckill.StatusPaid, 1)
	p.PaymentID = "pay-p"
	h1 := mk(2, "u2", 1, seckill.StatusHeld, 2)
	h1.ExpiresAt = ptr(at(5 * time.Second))
	h1.IdempotencyKey = "kh"
	q1 := mk(3, "u4", 1, seckill.StatusQueued, 3)
	h2 := mk(4, "u3", 2, seckill.StatusHeld, 4)
	h2.ExpiresAt = ptr(at(8 * time.Second))
	q2 := mk(5, "u5", 2, seckill.StatusQueued, 6)
	q3 := mk(6, "u6", 1, seckill.StatusQueued, 7)
	// Queued reservations come in Seq order (as an order store lists them), mixed with others.
	for _, res := range []seckill.Reservation{p, q1, h1, q2, h2, q3} {
		if err := r.inv.RestoreReservation(r.ctx, res); err != nil {
			t.Fatalf("RestoreReservation(%s %s): %v", res.Status, res.ID, err)
		}
	}
	if err := r.inv.RestoreReservation(r.ctx, p); err == nil {
		t.Fatalf("RestoreReservation of a known id: nil error")
	}
	bad := mk(7, "u7", 1, seckill.StatusQueued, 8)
	bad.SaleID = "nope"
	bad.ID = seckill.ReservationID("nope", make([]byte, 16))
	if err := r.inv.RestoreReservation(r.ctx, bad); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("RestoreReservation into an unknown sale = %v, want not_found", err)
	}

	// sold 2 (from the database, the paid reservation's units) + held 3 = 5: nothing free.
	r.state(ss(5, 0, 3, 2, 4))
	got := r.is(p.ID, seckill.StatusPaid, 0, time.Time{})
	if got.PaymentID != "pay-p" || got.UserID != "u1" || got.Quantity != 2 || got.Seq != 1 {
		t.Fatalf("restored paid reservation = %+v", got)
	}
	r.held(h1.ID, at(5*time.Second))
	r.held(h2.ID, at(8*time.Second))
	r.queued(q1.ID, 1)
	r.queued(q2.ID, 2)
	r.queued(q3.ID, 3)
	n := r.buy("u7", 1, "")
	r.expect("Buy after the restore", n, seckill.StatusQueued, 4, time.Time{})
	if n.Seq <= q3.Seq {
		t.Fatalf("new reservation Seq %d, want more than the restored %d", n.Seq, q3.Seq)
	}
	r.payFull("pay-p", p, seckill.PaymentDuplicate)
	r.payFull("pay-x", p, seckill.PaymentRefundRequired)
	r.buyFails("u1", 1, "", seckill.CodeLimitExceeded) // u1's 2 paid units count
	r.replay("s1", "u2", 1, "kh", h1.ID)

	r.advance(5 * time.Second) // h1 expires: its unit goes to the head, q1
	r.status(h1.ID, seckill.StatusExpired)
	r.held(q1.ID, at(15*time.Second))
	r.queued(q2.ID, 1)
	r.state(ss(5, 0, 3, 2, 4))
	r.advance(3 * time.Second) // h2 expires: 2 units for q2
	r.held(q2.ID, at(18*time.Second))
	r.queued(q3.ID, 1)
	r.queued(n.ID, 2)
	r.state(ss(5, 0, 3, 2, 2))
}
