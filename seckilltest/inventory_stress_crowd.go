// The concurrency checker's crowd: the behaviours a buyer of runStress picks from (pay, pay
// late, cancel, abandon, retry, double-click, pay the wrong amount).

package seckilltest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seckill-go/seckill"
)

// buyer plays one user with one of several behaviours.
func (s *stress) buyer(i int) {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, uint64(i)))
	user := fmt.Sprintf("u%05d", i)
	switch pick := rng.IntN(100); {
	case pick < 4:
		s.payer(user, rng, 1)
	case pick < 7:
		s.payer(user, rng, 2)
	case pick < 17:
		s.latePayer(user)
	case pick < 32:
		s.canceller(user, rng)
	case pick < 65:
		s.abandoner(user, rng)
	case pick < 75:
		s.retrier(user, rng)
	case pick < 90:
		s.doubleClicker(user, rng)
	default:
		s.wrongAmount(user, rng)
	}
}

// payer keeps trying until it has paid or the sale is sold out; each payment is delivered
// deliveries times at once, and sometimes once more afterwards.
func (s *stress) payer(user string, rng *rand.Rand, deliveries int) {
	for attempt := range 10 {
		key := ""
		if rng.IntN(2) == 0 {
			key = fmt.Sprintf("a%d", attempt)
		}
		b := s.buy(user, key)
		switch b.code {
		case "":
		case seckill.CodeSoldOut:
			return
		default: // queue_full, limit_exceeded: try again a little later
			s.sleepUntil(s.clock.Now().Add(500 * time.Millisecond))
			continue
		}
		r := s.waitHeld(b.res)
		if r.Status != seckill.StatusHeld {
			continue
		}
		pid := s.newPID()
		recs := s.payN(r, pid, deliveries, true)
		if rng.IntN(4) == 0 {
			recs = append(recs, s.pay(r, pid, s.amount, true))
		}
		for _, p := range recs {
			if p.result.Paid() {
				return
			}
		}
	}
	s.count("payer gave up")
}

// latePayer pays only after its hold has expired.
func (s *stress) latePayer(user string) {
	b := s.buy(user, "")
	if b.code != "" {
		return
	}
	r := s.waitHeld(b.res)
	if r.Status != seckill.StatusHeld {
		return
	}
	s.sleepUntil(r.ExpiresAt.Add(time.Millisecond))
	s.pay(r, s.newPID(), s.amount, false)
}

// canceller cancels (sometimes after its grant), retries the cancel, and sometimes buys again.
func (s *stress) canceller(user string, rng *rand.Rand) {
	b := s.buy(user, rngKey(rng, "c"))
	if b.code != "" {
		return
	}
	r := b.res
	if rng.IntN(2) == 0 {
		r = s.waitHeld(r)
	}
	if rng.IntN(5) == 0 {
		if got, err := s.inv.Cancel(s.ctx, r.ID, user+"-intruder"); seckill.ErrorCode(err) != seckill.CodeNotFound {
			s.violate("Cancel(%s) by another user = %+v, %v; want not_found", r.ID, got, err)
		}
	}
	first := s.cancel(r)
	if again := s.cancel(r); again.Status != first.Status {
		s.violate("Cancel(%s) retried: status %s, first %s", r.ID, again.Status, first.Status)
	}
	if rng.IntN(5) == 0 {
		s.buy(user, "")
	}
}

// abandoner buys and never pays.
func (s *stress) abandoner(user string, rng *rand.Rand) {
	b := s.buy(user, rngKey(rng, "x"))
	if b.code == "" && rng.IntN(3) == 0 {
		s.read(b.res)
	}
}

// retrier sends its buy twice with one idempotency key, at once or one after the other.
func (s *stress) retrier(user string, rng *rand.Rand) {
	key := "r"
	var recs [2]*buyRec
	if rng.IntN(2) == 0 {
		var wg sync.WaitGroup
		for i := range recs {
			wg.Go(func() { recs[i] = s.buy(user, key) })
		}
		wg.Wait()
	} else {
		recs[0] = s.buy(user, key)
		recs[1] = s.buy(user, key)
	}
	var r seckill.Reservation
	for _, b := range recs {
		if b.code == "" {
			r = b.res
		}
	}
	if r.ID == "" {
		return
	}
	r = s.waitHeld(r)
	if r.Status == seckill.StatusHeld && rng.IntN(10) < 3 {
		s.pay(r, s.newPID(), s.amount, true)
		s.buy(user, key) // a replay after the payment
	}
}

// doubleClicker sends two different buys at once; at most one may ever be paid (limit 1).
func (s *stress) doubleClicker(user string, rng *rand.Rand) {
	keys := [2]string{rngKey(rng, "d1"), rngKey(rng, "d2")}
	pays := [2]bool{rng.IntN(10) < 3, rng.IntN(10) < 3} // rng is not for concurrent use
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Go(func() {
			b := s.buy(user, key)
			if b.code != "" {
				return
			}
			if r := s.waitHeld(b.res); r.Status == seckill.StatusHeld && pays[i] {
				s.pay(r, s.newPID(), s.amount, true)
			}
		})
	}
	wg.Wait()
}

// wrongAmount pays the wrong amount first (refund_required, the hold stays), then sometimes the
// right one.
func (s *stress) wrongAmount(user string, rng *rand.Rand) {
	b := s.buy(user, "")
	if b.code != "" {
		return
	}
	r := s.waitHeld(b.res)
	if r.Status != seckill.StatusHeld {
		return
	}
	s.pay(r, s.newPID(), s.amount+int64(rng.IntN(2)*2-1), false)
	if rng.IntN(10) < 3 {
		s.pay(r, s.newPID(), s.amount, true)
	}
}

func rngKey(rng *rand.Rand, key string) string {
	if rng.IntN(2) == 0 {
		return ""
	}
	return key
}
