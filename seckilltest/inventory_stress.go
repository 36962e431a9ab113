// The concurrency checker (TestInventory's Concurrency subtest): its rig and the calls it checks.
// The crowd's behaviours are in inventory_stress_crowd.go, the end-of-run checks in
// inventory_stress_checks.go.

package seckilltest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// stressConfig shapes one run of the concurrency checker.
type stressConfig struct {
	Buyers      int           // buyers, each a different user
	Workers     int           // goroutines that serve the buyers
	Stock       int           // the sale's stock
	Holdback    int           // units held back: sellable = Stock - Holdback
	HoldSeconds int           // hold duration
	QueueLimit  int           // queue limit in buyers
	Step        time.Duration // manual time the clock goroutine adds per tick
	Tick        time.Duration // real time between ticks
	Monitors    int           // goroutines taking Sale() snapshots all along
	Seed        uint64        // buyers' behaviour; 0 picks one
}

func defaultStressConfig() stressConfig {
	return stressConfig{
		Buyers: 3000, Workers: 64, Stock: 110, Holdback: 10, HoldSeconds: 2, QueueLimit: 50,
		Step: 200 * time.Millisecond, Tick: 2 * time.Millisecond, Monitors: 2,
	}
}

// stressReport is what one run found. The checker reports instead of failing a test so that a
// test can also assert that it catches a broken engine (inventory_test.go).
type stressReport struct {
	Violations []string
	Stats      map[string]int
	Seed       uint64
}

// testConcurrency sells 100 units (stock 110, holdback 10, per-user limit 1, hold 2 s, queue
// limit 50) to 3 000 buyers on 64 goroutines while a goroutine moves the clock 200 ms every 2 ms
// and two more take Sale() snapshots. Buyers pay at once (some deliver the payment twice),
// pay after their hold expired, cancel, abandon, retry with one idempotency key, click twice,
// or pay a wrong amount first. Every check is sound under concurrency: it fails only on a
// state that no serial order of the calls could produce.
func testConcurrency(t *testing.T, newEngine NewInventory) {
	for _, v := range ConcurrencyViolations(t, newEngine) {
		t.Error(v)
	}
}

// ConcurrencyViolations runs the concurrency checker of TestInventory once against a fresh
// engine and returns what it found instead of failing t. It is for an engine's negative
// controls: a deliberately broken variant of the engine must make it report violations, which
// shows that the checker can fail against that engine (a test that cannot fail proves nothing).
func ConcurrencyViolations(t *testing.T, newEngine NewInventory) []string {
	clock := NewManualClock(epoch)
	inv := newEngine(t, clock)
	cfg := defaultStressConfig()
	if testing.Short() {
		cfg.Buyers = 1000
	}
	rep := runStress(inv, clock, cfg)
	t.Logf("seed %d, %v", rep.Seed, rep.Stats)
	return rep.Violations
}

// buyRec is one Buy call. start and end are ticks of one global counter taken just before the
// call and just after it returned, so "a started before b ended" is a.start < b.end.
type buyRec struct {
	user, key   string
	q           int
	start, end  int64
	clockBefore time.Time
	clockAfter  time.Time
	res         seckill.Reservation
	replayed    bool
	code        seckill.Code
}

// payRec is one delivery of a payment.
type payRec struct {
	pid, rid    string
	q           int
	amount      int64
	right       bool // amount == q × price
	mustApply   bool // the first right-amount payment of a hold its buyer saw and never cancelled
	expiresAt   time.Time
	start, end  int64
	clockAfter  time.Time
	clockBefore time.Time
	result      seckill.PaymentResult
	res         seckill.Reservation
}

type stress struct {
	cfg      stressConfig
	inv      seckill.Inventory
	clock    *ManualClock
	ctx      context.Context
	sale     seckill.Sale
	sellable int
	hold     time.Duration
	amount   int64

	tick      atomic.Int64
	pids      atomic.Int64
	snapshots atomic.Int64

	mu         sync.Mutex
	violations []string
	kinds      map[string]int
	dropped    int
	stats      map[string]int
	buys       []*buyRec
	pays       []*payRec
	deadAt     map[string]int64 // reservation → end tick of the first call that saw it cancelled, expired, rejected or refund_required
}

// A run reports at most maxPerKind violations of one kind (one format string) and maxViolations
// in all, and counts the rest, so that one broken rule does not hide the others.
const (
	maxPerKind    = 3
	maxViolations = 40
)

func (s *stress) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kinds[format]++
	if s.kinds[format] > maxPerKind || len(s.violations) >= maxViolations {
		s.dropped++
		return
	}
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

func (s *stress) count(name string) {
	s.mu.Lock()
	s.stats[name]++
	s.mu.Unlock()
}

// runStress sells cfg.Stock-cfg.Holdback units to cfg.Buyers buyers on cfg.Workers goroutines
// while the clock moves on its own, then drains the sale and sells what is left one buyer at a
// time, and returns every violation of the invariants of docs/MODEL.md it could prove.
func runStress(inv seckill.Inventory, clock *ManualClock, cfg stressConfig) stressReport {
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	s := &stress{
		cfg: cfg, inv: inv, clock: clock, ctx: context.Background(),
		stats: map[string]int{}, deadAt: map[string]int64{}, kinds: map[string]int{},
	}
	now := clock.Now()
	sale, err := seckill.NewSale(seckill.SaleInput{
		ID: "stress", PriceCents: ptr(int64(500)), Stock: &cfg.Stock, Holdback: cfg.Holdback,
		StartsAt: &now, EndsAt: ptr(now.Add(24 * time.Hour)), PerUserLimit: ptr(1),
		HoldSeconds: &cfg.HoldSeconds, QueueLimit: &cfg.QueueLimit,
	}, now)
	if err == nil {
		err = inv.LoadSale(s.ctx, sale, 0)
	}
	if err != nil {
		return stressReport{Violations: []string{"loading the sale: " + err.Error()}, Seed: cfg.Seed}
	}
	s.sale, s.sellable, s.hold, s.amount = sale, sale.Sellable(), sale.HoldDuration(), sale.PriceCents

	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		ticker := time.NewTicker(cfg.Tick)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
				clock.Advance(cfg.Step)
			}
		}
	})
	for range cfg.Monitors {
		bg.Go(func() { s.monitor(stop) })
	}
	jobs := make(chan int)
	var workers sync.WaitGroup
	for range cfg.Workers {
		workers.Go(func() {
			for i := range jobs {
				s.buyer(i)
			}
		})
	}
	for i := range cfg.Buyers {
		jobs <- i
	}
	close(jobs)
	workers.Wait()
	close(stop)
	bg.Wait()

	s.finish()
	s.stats["snapshots"] = int(s.snapshots.Load())
	if s.dropped > 0 {
		s.violations = append(s.violations, fmt.Sprintf("… and %d more violations of the kinds above", s.dropped))
	}
	if len(s.violations) > 0 {
		s.violations = append(s.violations, fmt.Sprintf("(seed %d, stats %v)", cfg.Seed, s.stats))
	}
	return stressReport{Violations: s.violations, Stats: s.stats, Seed: cfg.Seed}
}

// monitor takes Sale() snapshots until stop: each must satisfy invariants 1 and 2, and sold,
// which only payments change, never goes down.
func (s *stress) monitor(stop <-chan struct{}) {
	last := 0
	for {
		select {
		case <-stop:
			return
		default:
		}
		st, ok := s.snapshot("snapshot")
		if !ok {
			return
		}
		if st.Sold < last {
			s.violate("snapshot: sold went down from %d to %d", last, st.Sold)
		}
		last = st.Sold
		s.snapshots.Add(1)
		time.Sleep(200 * time.Microsecond)
	}
}

// snapshot reads the sale's counts and checks invariants 1 and 2 on them.
func (s *stress) snapshot(where string) (seckill.StockState, bool) {
	_, st, err := s.inv.Sale(s.ctx, s.sale.ID)
	if err != nil {
		s.violate("%s: Sale: %v", where, err)
		return st, false
	}
	if msg := stockViolation(st); msg != "" {
		s.violate("%s: %s", where, msg)
	}
	if st.Sellable != s.sellable {
		s.violate("%s: sellable %d, want %d", where, st.Sellable, s.sellable)
	}
	return st, true
}

// observe notes a reservation seen in a state it cannot leave except by a payment of its own
// buyer (docs/MODEL.md), for the limit_exceeded check.
func (s *stress) observe(r seckill.Reservation, end int64) {
	switch r.Status {
	case seckill.StatusCancelled, seckill.StatusExpired, seckill.StatusRejected, seckill.StatusRefundRequired:
		s.mu.Lock()
		if at, ok := s.deadAt[r.ID]; !ok || end < at {
			s.deadAt[r.ID] = end
		}
		s.mu.Unlock()
	}
}

// checkView checks what any reservation read must look like.
func (s *stress) checkView(what string, r seckill.Reservation, id, user string) {
	if r.ID != id || r.UserID != user || r.SaleID != s.sale.ID || r.Quantity != 1 {
		s.violate("%s: reservation %+v, want %s of %s, 1 unit of %s", what, r, id, user, s.sale.ID)
		return
	}
	switch r.Status {
	case seckill.StatusHeld:
		if r.ExpiresAt == nil || r.Position != 0 {
			s.violate("%s: held with expires_at %v and position %d", what, r.ExpiresAt, r.Position)
		}
	case seckill.StatusQueued:
		if r.ExpiresAt != nil || r.Position < 1 || r.Position > s.cfg.QueueLimit {
			s.violate("%s: queued with expires_at %v and position %d (queue limit %d)", what, r.ExpiresAt, r.Position, s.cfg.QueueLimit)
		}
	default:
		if !r.Status.Valid() || r.ExpiresAt != nil || r.Position != 0 {
			s.violate("%s: status %q with expires_at %v and position %d", what, r.Status, r.ExpiresAt, r.Position)
		}
	}
}

func (s *stress) buy(user, key string) *buyRec {
	b := &buyRec{user: user, key: key, q: 1}
	b.clockBefore = s.clock.Now()
	b.start = s.tick.Add(1)
	res, err := s.inv.Buy(s.ctx, seckill.BuyRequest{SaleID: s.sale.ID, UserID: user, Quantity: 1, IdempotencyKey: key})
	b.end = s.tick.Add(1)
	b.clockAfter = s.clock.Now()
	b.code, b.res, b.replayed = seckill.ErrorCode(err), res.Reservation, res.Replayed
	s.mu.Lock()
	s.buys = append(s.buys, b)
	s.mu.Unlock()
	switch b.code {
	case "":
		r := b.res
		s.checkView("Buy", r, r.ID, user)
		s.observe(r, b.end)
		if b.replayed {
			s.count("buy replayed")
			break
		}
		s.count("buy " + string(r.Status))
		switch r.Status {
		case seckill.StatusHeld:
			// The engine read the clock once during the call, and the clock only moves forward.
			if r.ExpiresAt != nil {
				if start := r.ExpiresAt.Add(-s.hold); start.Before(b.clockBefore) || start.After(b.clockAfter) {
					s.violate("Buy: hold expires at %s, but the call ran between %s and %s (hold %s)",
						r.ExpiresAt.Sub(epoch), b.clockBefore.Sub(epoch), b.clockAfter.Sub(epoch), s.hold)
				}
			}
		case seckill.StatusQueued:
		default:
			s.violate("Buy: a new reservation with status %s", r.Status)
		}
	case seckill.CodeSoldOut:
		s.count("buy sold_out")
		// sold_out means that at some instant during the call sold + q > sellable (no unit free
		// and none held, or fewer than q). sold never goes down, so it still holds now.
		if st, ok := s.snapshot("after sold_out"); ok && st.Sold+b.q <= s.sellable {
			s.violate("false sell-out: Buy of %d answered sold_out, but sold is %d of %d afterwards (%+v)", b.q, st.Sold, s.sellable, st)
		}
	case seckill.CodeQueueFull, seckill.CodeLimitExceeded:
		s.count("buy " + string(b.code))
	default:
		s.violate("Buy(%s, key %q): unexpected error code %s", user, key, b.code)
	}
	return b
}

func (s *stress) read(r seckill.Reservation) seckill.Reservation {
	got, err := s.inv.Reservation(s.ctx, r.ID)
	end := s.tick.Add(1)
	if err != nil {
		s.violate("Reservation(%s): %v", r.ID, err)
		return r
	}
	s.checkView("Reservation", got, r.ID, r.UserID)
	s.observe(got, end)
	return got
}

// cancel cancels a reservation its buyer never paid.
func (s *stress) cancel(r seckill.Reservation) seckill.Reservation {
	got, err := s.inv.Cancel(s.ctx, r.ID, r.UserID)
	end := s.tick.Add(1)
	if err != nil {
		s.violate("Cancel(%s) of an unpaid reservation: %v", r.ID, err)
		return r
	}
	s.checkView("Cancel", got, r.ID, r.UserID)
	switch got.Status {
	case seckill.StatusCancelled, seckill.StatusExpired, seckill.StatusRejected:
	default:
		s.violate("Cancel(%s) of an unpaid reservation: status %s", r.ID, got.Status)
	}
	s.observe(got, end)
	s.count("cancel " + string(got.Status))
	return got
}

// waitHeld polls a queued reservation until it leaves the queue, or gives up and cancels it.
func (s *stress) waitHeld(r seckill.Reservation) seckill.Reservation {
	deadline := s.clock.Now().Add(10 * time.Second)
	realDeadline := time.Now().Add(5 * time.Second)
	for r.Status == seckill.StatusQueued {
		if s.clock.Now().After(deadline) || time.Now().After(realDeadline) {
			s.count("gave up waiting")
			return s.cancel(r)
		}
		time.Sleep(time.Millisecond)
		r = s.read(r)
	}
	return r
}

// sleepUntil waits until the manual clock reaches t (or 5 s of real time have passed).
func (s *stress) sleepUntil(t time.Time) {
	realDeadline := time.Now().Add(5 * time.Second)
	for s.clock.Now().Before(t) && time.Now().Before(realDeadline) {
		time.Sleep(time.Millisecond)
	}
}

func (s *stress) newPID() string { return fmt.Sprintf("pay-%d", s.pids.Add(1)) }

// pay delivers one payment for r, which the caller last saw as it is.
func (s *stress) pay(r seckill.Reservation, pid string, amount int64, mustApply bool) *payRec {
	p := &payRec{pid: pid, rid: r.ID, q: r.Quantity, amount: amount, right: amount == int64(r.Quantity)*s.amount, mustApply: mustApply}
	if r.Status == seckill.StatusHeld && r.ExpiresAt != nil {
		p.expiresAt = *r.ExpiresAt
	}
	p.clockBefore = s.clock.Now()
	p.start = s.tick.Add(1)
	res, got, err := s.inv.ConfirmPayment(s.ctx, seckill.PaymentConfirmation{PaymentID: pid, ReservationID: r.ID, AmountCents: amount})
	p.end = s.tick.Add(1)
	p.clockAfter = s.clock.Now()
	p.result, p.res = res, got
	s.mu.Lock()
	s.pays = append(s.pays, p)
	s.mu.Unlock()
	s.count("pay " + string(res))
	if err != nil {
		s.violate("ConfirmPayment(%s, %s): %v", pid, r.ID, err)
		return p
	}
	s.checkView("ConfirmPayment", got, r.ID, r.UserID)
	s.observe(got, p.end)
	switch res {
	case seckill.PaymentApplied, seckill.PaymentLateApplied, seckill.PaymentDuplicate, seckill.PaymentRefundRequired:
	default:
		s.violate("ConfirmPayment(%s, %s) = %q", pid, r.ID, res)
	}
	if res.Paid() && (got.Status != seckill.StatusPaid || got.PaymentID != pid) {
		s.violate("ConfirmPayment(%s, %s) = %s, but the reservation is %s with payment %q", pid, r.ID, res, got.Status, got.PaymentID)
	}
	if !p.right {
		if res != seckill.PaymentRefundRequired {
			s.violate("ConfirmPayment(%s, %s) of a wrong amount %d = %s, want refund_required", pid, r.ID, amount, res)
		}
		if got.Status == seckill.StatusPaid || got.Status == seckill.StatusRefundRequired {
			s.violate("ConfirmPayment(%s, %s) of a wrong amount changed the reservation to %s", pid, r.ID, got.Status)
		}
	}
	// The engine read the clock at or after clockBefore: if that is past the expiry, the hold
	// had expired and cannot be applied (late_applied at most).
	if res == seckill.PaymentApplied && !p.expiresAt.IsZero() && !p.clockBefore.Before(p.expiresAt) {
		s.violate("ConfirmPayment(%s, %s) = applied at %s, but the hold expired at %s",
			pid, r.ID, p.clockBefore.Sub(epoch), p.expiresAt.Sub(epoch))
	}
	return p
}

// payN delivers the same payment n times at once, as a gateway retrying too early does.
func (s *stress) payN(r seckill.Reservation, pid string, n int, mustApply bool) []*payRec {
	recs := make([]*payRec, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { recs[i] = s.pay(r, pid, s.amount, mustApply) })
	}
	wg.Wait()
	return recs
}
