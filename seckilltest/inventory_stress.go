package seckilltest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
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
