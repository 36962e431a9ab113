// The concurrency checker's end-of-run checks (finish): the per-user limit, draining every
// hold, selling what is left, every payment accounted for once, idempotent buys.

package seckilltest

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/seckill-go/seckill"
)

// finish runs the end-of-run checks: the per-user limit, draining every hold, selling what is
// left one buyer at a time, every payment accounted for once, idempotent buys and sound
// limit_exceeded answers.
func (s *stress) finish() {
	s.checkUserLimit("after the crowd", s.readAll())
	s.drain()
	s.mopUp()
	final := s.readAll()
	s.checkUserLimit("at the end", final)
	st, ok := s.snapshot("at the end")
	if !ok {
		return
	}
	s.checkPayments(final, st)
	s.checkBuys(final)
}

// readAll reads every reservation that a buy created.
func (s *stress) readAll() map[string]seckill.Reservation {
	s.mu.Lock()
	buys := slices.Clone(s.buys)
	s.mu.Unlock()
	all := map[string]seckill.Reservation{}
	for _, b := range buys {
		if b.code != "" {
			continue
		}
		if _, ok := all[b.res.ID]; ok {
			continue
		}
		r, err := s.inv.Reservation(s.ctx, b.res.ID)
		if err != nil {
			s.violate("Reservation(%s) at the end: %v", b.res.ID, err)
			continue
		}
		s.checkView("Reservation at the end", r, b.res.ID, b.user)
		all[r.ID] = r
	}
	return all
}

// checkUserLimit checks invariant 3: per user, held + queued + paid ≤ per_user_limit.
func (s *stress) checkUserLimit(when string, all map[string]seckill.Reservation) {
	units := map[string]int{}
	for _, r := range all {
		switch r.Status {
		case seckill.StatusHeld, seckill.StatusQueued, seckill.StatusPaid:
			units[r.UserID] += r.Quantity
		}
	}
	for user, n := range units {
		if n > s.sale.PerUserLimit {
			s.violate("%s: user %s has %d units held+queued+paid, limit %d", when, user, n, s.sale.PerUserLimit)
		}
	}
}

// drain moves the clock past every hold until nothing is held or queued: every unpaid unit must
// come back to available.
func (s *stress) drain() {
	var st seckill.StockState
	for range s.cfg.QueueLimit + 5 {
		s.clock.Advance(s.hold + time.Second)
		if _, err := s.inv.Reclaim(s.ctx, s.sale.ID); err != nil {
			s.violate("Reclaim while draining: %v", err)
		}
		var ok bool
		if st, ok = s.snapshot("draining"); !ok {
			return
		}
		if st.Held == 0 && st.Queued == 0 {
			s.stats["sold by the crowd"] = st.Sold
			return
		}
	}
	s.violate("after every hold expired: held %d, queued %d (%+v): expired holds did not come back", st.Held, st.Queued, st)
}

// mopUp sells what is left one buyer at a time with the clock stopped: each buy must be held
// while a unit is available and paid at once, and sold_out must come exactly when sold ==
// sellable (no unit lost to an unpaid hold, none sold twice).
func (s *stress) mopUp() {
	for i := 0; i <= s.sellable+1; i++ {
		before, ok := s.snapshot("mop-up")
		if !ok {
			return
		}
		b := s.buy(fmt.Sprintf("mop%04d", i), "")
		switch {
		case b.code == "" && b.res.Status == seckill.StatusHeld:
			if before.Available < 1 {
				s.violate("mop-up: a buy was held although available was 0 (%+v): oversell", before)
			}
			if p := s.pay(b.res, s.newPID(), s.amount, true); p.result != seckill.PaymentApplied {
				s.violate("mop-up: paying a fresh hold = %s, want applied", p.result)
			}
		case b.code == seckill.CodeSoldOut:
			if before.Available > 0 || before.Held > 0 || before.Queued > 0 {
				s.violate("mop-up: false sell-out: sold_out with %+v", before)
			}
			if after, ok := s.snapshot("mop-up"); ok && after.Sold != s.sellable {
				s.violate("mop-up: sold out with sold %d of %d sellable (%+v)", after.Sold, s.sellable, after)
			}
			return
		default:
			s.violate("mop-up: with %+v and the clock stopped, Buy = %s %s, want a hold or sold_out", before, b.code, b.res.Status)
			return
		}
	}
	s.violate("mop-up: %d buys and paid holds without sold_out: more than %d units sold", s.sellable+2, s.sellable)
}

// checkPayments checks invariant 4 and the sold count: every payment id is exactly one paid
// reservation (one paying delivery, the others duplicate) or refund_required on every delivery;
// every paid reservation has exactly one paying payment; paid units == sold.
func (s *stress) checkPayments(final map[string]seckill.Reservation, st seckill.StockState) {
	groups := map[string][]*payRec{}
	var order []string
	for _, p := range s.pays {
		if _, ok := groups[p.pid]; !ok {
			order = append(order, p.pid)
		}
		groups[p.pid] = append(groups[p.pid], p)
	}
	payingByRes := map[string]int{}
	payingUnits := 0
	for _, pid := range order {
		recs := groups[pid]
		rid := recs[0].rid
		var paying []*payRec
		for _, p := range recs {
			if p.result.Paid() {
				paying = append(paying, p)
			}
		}
		fin := final[rid]
		switch len(paying) {
		case 0:
			for _, p := range recs {
				if p.result != seckill.PaymentRefundRequired {
					s.violate("payment %s for %s was never applied, yet a delivery answered %s", pid, rid, p.result)
				}
			}
			if fin.Status == seckill.StatusPaid && fin.PaymentID == pid {
				s.violate("payment %s for %s: reservation paid by it, but no delivery said so", pid, rid)
			}
		case 1:
			for _, p := range recs {
				if p != paying[0] && p.result != seckill.PaymentDuplicate {
					s.violate("payment %s for %s: %s, and another delivery %s (want duplicate)", pid, rid, paying[0].result, p.result)
				}
			}
			if fin.Status != seckill.StatusPaid || fin.PaymentID != pid {
				s.violate("payment %s for %s was %s, but the reservation ends %s with payment %q", pid, rid, paying[0].result, fin.Status, fin.PaymentID)
			}
			payingByRes[rid]++
			payingUnits += recs[0].q
		default:
			s.violate("payment %s for %s was applied %d times", pid, rid, len(paying))
		}
		if recs[0].mustApply && !recs[0].expiresAt.IsZero() {
			before := true
			for _, p := range recs {
				before = before && p.right && p.clockAfter.Before(p.expiresAt)
			}
			if before && (len(paying) != 1 || paying[0].result != seckill.PaymentApplied) {
				s.violate("payment %s for %s: every delivery ended before the hold expired at %s, yet none was applied (%s)",
					pid, rid, recs[0].expiresAt.Sub(epoch), recs[0].result)
			}
		}
	}
	paidUnits := 0
	for rid, r := range final {
		if r.Status == seckill.StatusPaid {
			paidUnits += r.Quantity
			if payingByRes[rid] != 1 {
				s.violate("reservation %s is paid, but %d payments were applied to it", rid, payingByRes[rid])
			}
		} else if payingByRes[rid] != 0 {
			s.violate("reservation %s ends %s, but a payment was applied to it", rid, r.Status)
		}
	}
	if paidUnits != st.Sold || payingUnits != st.Sold {
		s.violate("sold %d, but paid reservations hold %d units and applied payments %d", st.Sold, paidUnits, payingUnits)
	}
	s.stats["sold"] = st.Sold
}

// checkBuys checks idempotency (one reservation per user and key, created once) and that every
// limit_exceeded was deserved: the user had a reservation, created before the refusal ended,
// that was not provably cancelled, expired, rejected or refunded before the refusal started.
func (s *stress) checkBuys(final map[string]seckill.Reservation) {
	type uk struct{ user, key string }
	byKey := map[uk][]*buyRec{}
	created := map[string][]*buyRec{} // per user, non-replayed successes
	seen := map[string]bool{}
	for _, b := range s.buys {
		if b.code != "" {
			continue
		}
		if b.key != "" {
			byKey[uk{b.user, b.key}] = append(byKey[uk{b.user, b.key}], b)
		}
		if !b.replayed {
			if seen[b.res.ID] {
				s.violate("two buys created reservation %s", b.res.ID)
			}
			seen[b.res.ID] = true
			created[b.user] = append(created[b.user], b)
		}
	}
	keys := make([]uk, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].user+keys[i].key < keys[j].user+keys[j].key })
	for _, k := range keys {
		recs := byKey[k]
		fresh := 0
		for _, b := range recs {
			if b.res.ID != recs[0].res.ID {
				s.violate("user %s, key %q: two reservations %s and %s", k.user, k.key, recs[0].res.ID, b.res.ID)
			}
			if !b.replayed {
				fresh++
			}
		}
		if fresh != 1 {
			s.violate("user %s, key %q: %d of %d successful buys were not replays, want exactly 1", k.user, k.key, fresh, len(recs))
		}
	}
	for _, l := range s.buys {
		if l.code != seckill.CodeLimitExceeded || l.q > s.sale.PerUserLimit {
			continue
		}
		deserved := false
		for _, c := range created[l.user] {
			if c.start >= l.end {
				continue
			}
			dead, ok := s.deadAt[c.res.ID]
			if ok && dead < l.start && final[c.res.ID].Status != seckill.StatusPaid {
				continue
			}
			deserved = true
		}
		if !deserved {
			s.violate("false limit_exceeded: user %s had no live reservation while buying (ticks %d–%d)", l.user, l.start, l.end)
		}
	}
}
