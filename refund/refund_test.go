package refund_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/leasedjobtest"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/refund"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/sqlstore"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const price = 1999

// fakeGateway is a gateway as the seam describes it: a refund is keyed by its payment id, so a
// second request for one payment moves no money and answers with the refund already made.
// It counts the requests per payment, to tell a repeated request from a single one.
type fakeGateway struct {
	name     string // "" reads as "mock"
	mu       sync.Mutex
	calls    map[string]int   // Refund requests per payment id
	refunded map[string]int64 // money paid back per payment id
	// answer, if set, decides a request instead of refunding (n counts this payment's requests).
	answer func(req payment.RefundRequest, n int) (payment.RefundResult, error)
	// moved, if set, runs after the money moved and before the answer goes back.
	moved func(req payment.RefundRequest)
}

func newFake() *fakeGateway {
	return &fakeGateway{calls: map[string]int{}, refunded: map[string]int64{}}
}

func (g *fakeGateway) Name() string {
	if g.name == "" {
		return "mock"
	}
	return g.name
}

func (g *fakeGateway) Refund(ctx context.Context, req payment.RefundRequest) (payment.RefundResult, error) {
	if err := ctx.Err(); err != nil {
		return payment.RefundResult{}, err
	}
	g.mu.Lock()
	g.calls[req.PaymentID]++
	n := g.calls[req.PaymentID]
	answer, moved := g.answer, g.moved
	g.mu.Unlock()
	if answer != nil {
		if res, err := answer(req, n); err != nil || res.Status != payment.RefundSucceeded {
			return res, err
		}
	}
	g.mu.Lock()
	if _, done := g.refunded[req.PaymentID]; !done {
		g.refunded[req.PaymentID] = req.AmountCents
	}
	g.mu.Unlock()
	if moved != nil {
		moved(req)
	}
	return payment.RefundResult{RefundID: "re_" + req.PaymentID, Status: payment.RefundSucceeded}, nil
}

func (g *fakeGateway) snapshot() (map[string]int, map[string]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	calls, refunded := map[string]int{}, map[string]int64{}
	for k, v := range g.calls {
		calls[k] = v
	}
	for k, v := range g.refunded {
		refunded[k] = v
	}
	return calls, refunded
}

// owe opens a fresh SQLite store holding n refund_required payments p0..p<n-1> of one unit
// each (the sale has no stock, so none could be paid).
func owe(t *testing.T, n int) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(t.Context(), "sqlite://:memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	sale := seckill.Sale{ID: "s", Name: "S", PriceCents: price, StartsAt: t0, EndsAt: t0.Add(time.Hour),
		PerUserLimit: 5, HoldSeconds: 60, CreatedAt: t0}
	if err := s.CreateSale(t.Context(), sale); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		res, err := s.RecordPayment(t.Context(), seckill.PaymentRecord{
			PaymentID: fmt.Sprintf("p%d", i), AmountCents: price, Result: seckill.PaymentLateApplied, At: t0,
			Reservation: seckill.Reservation{ID: fmt.Sprintf("s-%d", i), SaleID: "s", UserID: "alice", Quantity: 1,
				Status: seckill.StatusPaid, AmountCents: price, CreatedAt: t0},
		})
		if err != nil || res != seckill.PaymentRefundRequired {
			t.Fatalf("payment %d: %s, %v; want refund_required", i, res, err)
		}
	}
	return s
}

func counts(t *testing.T, s *sqlstore.Store) seckill.RefundCounts {
	t.Helper()
	c, err := s.RefundCounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func only(t *testing.T, s *sqlstore.Store, status seckill.RefundStatus, n int) []seckill.Refund {
	t.Helper()
	list, err := s.Refunds(t.Context(), status, 100)
	if err != nil || len(list) != n {
		t.Fatalf("Refunds(%s) = %+v, %v; want %d", status, list, err, n)
	}
	return list
}

// wantExactlyOnce fails unless every one of the n payments was paid back exactly its amount,
// and calls (if not nil) says how many requests each payment may have taken.
func wantExactlyOnce(t *testing.T, g *fakeGateway, n int) map[string]int {
	t.Helper()
	calls, refunded := g.snapshot()
	if len(refunded) != n {
		t.Fatalf("%d payments refunded, want %d: %v", len(refunded), n, refunded)
	}
	for id, amount := range refunded {
		if amount != price {
			t.Fatalf("payment %s refunded %d, want %d", id, amount, price)
		}
	}
	return calls
}

// A refund whose refunder is killed after the gateway paid it back and before the record is
// neither lost nor paid twice: it stays refund_pending under the dead refunder's lease, and
// once the lease ends another refunder claims it, asks again with the same payment id, gets
// the same refund back, and records it.
func TestKilledBetweenGatewayAndRecord(t *testing.T) {
	s := owe(t, 1)
	clock := seckilltest.NewManualClock(t0)
	g := newFake()
	ctx, kill := context.WithCancel(t.Context())
	g.moved = func(payment.RefundRequest) { kill() } // the process dies right after the money moved
	first := refund.New(s, g, refund.Config{Lease: time.Minute, Clock: clock, Owner: "first"})
	if n, err := first.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("first pass claimed %d, %v; want 1", n, err)
	}
	only(t, s, seckill.RefundPending, 1) // not recorded: the record ran on a dead context

	g.moved = nil
	second := refund.New(s, g, refund.Config{Lease: time.Minute, Clock: clock, Owner: "second"})
	if n, err := second.RunOnce(t.Context()); n != 0 || err != nil {
		t.Fatalf("pass while the dead refunder's lease lives claimed %d, %v; want 0", n, err)
	}
	clock.Advance(time.Minute)
	if n, err := second.RunOnce(t.Context()); n != 1 || err != nil {
		t.Fatalf("pass after the lease claimed %d, %v; want 1", n, err)
	}
	done := only(t, s, seckill.Refunded, 1)
	if done[0].RefundID != "re_p0" || done[0].Attempts != 2 {
		t.Fatalf("refund = %+v; want re_p0 after 2 attempts", done[0])
	}
	calls := wantExactlyOnce(t, g, 1)
	if calls["p0"] != 2 {
		t.Fatalf("gateway asked %d times, want 2 (the killed attempt and the retry)", calls["p0"])
	}
	if c := counts(t, s); c.Refunded != 1 || c.Required+c.Pending+c.Failed != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// Two refunders on one store, passing at the same time, never ask the gateway twice for one
// payment, and together refund every payment.
func TestTwoRefundersNeverRefundTwice(t *testing.T) {
	const n = 60
	s := owe(t, n)
	clock := seckilltest.NewManualClock(t0)
	g := newFake()
	var refunders []leasedjobtest.Passer
	for i := range 2 {
		refunders = append(refunders, refund.New(s, g, refund.Config{Batch: 4, Clock: clock, Owner: fmt.Sprintf("instance-%d", i)}))
	}
	leasedjobtest.Race(t, refunders...)
	calls := wantExactlyOnce(t, g, n)
	for id, c := range calls {
		if c != 1 {
			t.Errorf("payment %s: the gateway was asked %d times, want once", id, c)
		}
	}
	only(t, s, seckill.Refunded, n)
}

// Transient errors are retried after a growing backoff, not before; the refund then succeeds.
func TestTransientErrorsBackOff(t *testing.T) {
	s := owe(t, 1)
	clock := seckilltest.NewManualClock(t0)
	g := newFake()
	g.answer = func(_ payment.RefundRequest, n int) (payment.RefundResult, error) {
		if n <= 3 {
			return payment.RefundResult{}, errors.New("gateway unreachable")
		}
		return payment.RefundResult{Status: payment.RefundSucceeded}, nil
	}
	r := refund.New(s, g, refund.Config{Clock: clock, BackoffBase: 10 * time.Second, BackoffMax: time.Hour, MaxAttempts: 5})
	prev := time.Duration(0)
	for attempt := 1; attempt <= 3; attempt++ {
		if n, err := r.RunOnce(t.Context()); n != 1 || err != nil {
			t.Fatalf("attempt %d: claimed %d, %v", attempt, n, err)
		}
		f := only(t, s, seckill.RefundPending, 1)[0]
		wait := f.NextAttemptAt.Sub(clock.Now())
		base := 10 * time.Second << (attempt - 1)
		if wait < base/2 || wait > base || f.LastError != "gateway unreachable" {
			t.Fatalf("attempt %d: next attempt in %v (want %v..%v), last error %q", attempt, wait, base/2, base, f.LastError)
		}
		if attempt > 1 && wait <= prev/2 {
			t.Fatalf("attempt %d: backoff %v did not grow from %v", attempt, wait, prev)
		}
		prev = wait
		clock.Set(f.NextAttemptAt.Add(-time.Millisecond))
		if n, _ := r.RunOnce(t.Context()); n != 0 {
			t.Fatalf("attempt %d: retried %d before its backoff ended", attempt, n)
		}
		clock.Set(f.NextAttemptAt)
	}
	if n, err := r.RunOnce(t.Context()); n != 1 || err != nil {
		t.Fatalf("last attempt: claimed %d, %v", n, err)
	}
	only(t, s, seckill.Refunded, 1)
	if calls := wantExactlyOnce(t, g, 1); calls["p0"] != 4 {
		t.Fatalf("gateway asked %d times, want 4", calls["p0"])
	}
}

// A refund the gateway refuses ends refund_failed at once; one that keeps erring ends
// refund_failed after MaxAttempts; both are listed with their reason and not tried again. A
// pending answer is asked about again and is never given up on.
func TestPermanentFailureEndsFailed(t *testing.T) {
	s := owe(t, 3)
	clock := seckilltest.NewManualClock(t0)
	g := newFake()
	g.answer = func(req payment.RefundRequest, n int) (payment.RefundResult, error) {
		switch req.PaymentID {
		case "p0":
			return payment.RefundResult{RefundID: "re_x", Status: payment.RefundFailed}, nil
		case "p1":
			return payment.RefundResult{}, errors.New("card account closed")
		}
		if n <= 5 {
			return payment.RefundResult{RefundID: "re_p2", Status: payment.RefundPending}, nil
		}
		return payment.RefundResult{Status: payment.RefundSucceeded}, nil
	}
	r := refund.New(s, g, refund.Config{Clock: clock, MaxAttempts: 3, BackoffBase: time.Second, BackoffMax: time.Second})
	for range 10 {
		if _, err := r.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	failed := only(t, s, seckill.RefundFailed, 2)
	if failed[0].PaymentID != "p0" || failed[0].Attempts != 1 || failed[0].RefundID != "re_x" || failed[0].LastError == "" {
		t.Fatalf("refused refund = %+v; want p0 failed after 1 attempt", failed[0])
	}
	if failed[1].PaymentID != "p1" || failed[1].Attempts != 3 || failed[1].LastError != "card account closed" {
		t.Fatalf("erring refund = %+v; want p1 failed after 3 attempts with its reason", failed[1])
	}
	if done := only(t, s, seckill.Refunded, 1); done[0].PaymentID != "p2" || done[0].Attempts != 6 {
		t.Fatalf("pending refund = %+v; want p2 refunded on the 6th attempt", done[0])
	}
	calls, _ := g.snapshot()
	if calls["p0"] != 1 || calls["p1"] != 3 {
		t.Fatalf("gateway calls %v; want p0 once, p1 three times", calls)
	}
}

// A refund is only started while at least half its lease is left, so that its gateway call
// ends while the lease lives: behind a slow gateway the rest of a batch waits for its leases to
// end and is claimed again, and no refund is ever worked on by two refunders at once.
func TestSlowGatewayLeavesTheRestToTheirLeases(t *testing.T) {
	s := owe(t, 2)
	clock := seckilltest.NewManualClock(t0)
	g := newFake()
	g.moved = func(payment.RefundRequest) { clock.Advance(31 * time.Second) } // each call takes 31 s
	r := refund.New(s, g, refund.Config{Clock: clock, Lease: time.Minute, Batch: 4, Owner: "slow"})
	if n, err := r.RunOnce(t.Context()); n != 2 || err != nil {
		t.Fatalf("claimed %d, %v; want both", n, err)
	}
	if calls, _ := g.snapshot(); len(calls) != 1 {
		t.Fatalf("gateway calls %v; want only the first refund started (the second's lease had 29 s left)", calls)
	}
	only(t, s, seckill.Refunded, 1)
	other := refund.New(s, g, refund.Config{Clock: clock, Lease: time.Minute, Owner: "other"})
	if n, _ := other.RunOnce(t.Context()); n != 0 {
		t.Fatalf("another refunder claimed %d while the lease lived", n)
	}
	clock.Set(t0.Add(time.Minute))
	if n, err := other.RunOnce(t.Context()); n != 1 || err != nil {
		t.Fatalf("after the lease: claimed %d, %v; want the second", n, err)
	}
	only(t, s, seckill.Refunded, 2)
	for id, c := range wantExactlyOnce(t, g, 2) {
		if c != 1 {
			t.Fatalf("payment %s asked %d times, want once", id, c)
		}
	}
}

// Run stops when its context ends, having refunded what was due.
func TestRunRefundsUntilStopped(t *testing.T) {
	s := owe(t, 3)
	g := newFake()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		refund.New(s, g, refund.Config{Interval: time.Millisecond, Clock: seckilltest.NewManualClock(t0)}).Run(ctx)
	}()
	for counts(t, s).Refunded != 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	wantExactlyOnce(t, g, 3)
}
