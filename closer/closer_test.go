package closer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/closer"
	"github.com/seckill-go/seckill/internal/testkit/leasedjobtest"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/sqlstore"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const gwName = "fake"

// fakeGateway closes payments as the seam describes it: closing an open payment makes it
// unpayable, closing it again is nil, a paid one answers ErrAlreadyPaid, an unknown one
// not_found. It counts the Close calls per payment, and how many run at once for one payment.
type fakeGateway struct {
	mu      sync.Mutex
	paid    map[string]bool // payments the buyer paid before the close
	unknown map[string]bool // payments the gateway does not know
	closed  map[string]bool
	calls   map[string]int
	running map[string]int // Close calls under way per payment
	overlap []string       // payments closed by two calls at once
	// answer, if set, may fail a call instead (n counts this payment's calls).
	answer func(id string, n int) error
}

func newFake() *fakeGateway {
	return &fakeGateway{paid: map[string]bool{}, unknown: map[string]bool{}, closed: map[string]bool{},
		calls: map[string]int{}, running: map[string]int{}}
}

func (g *fakeGateway) Name() string { return gwName }

func (g *fakeGateway) ClosePayment(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	g.calls[id]++
	n := g.calls[id]
	g.running[id]++
	if g.running[id] > 1 {
		g.overlap = append(g.overlap, id)
	}
	answer := g.answer
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running[id]--
		g.mu.Unlock()
	}()
	runtime.Gosched() // a call takes a while: give a second closer the chance to overlap it
	if answer != nil {
		if err := answer(id, n); err != nil {
			return err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.unknown[id]:
		return seckill.Errorf(seckill.CodeNotFound, "payment %s is unknown", id)
	case g.paid[id]:
		return payment.ErrAlreadyPaid
	}
	g.closed[id] = true
	return nil
}

func (g *fakeGateway) snapshot() (calls map[string]int, closed map[string]bool, overlap []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	calls, closed = map[string]int{}, map[string]bool{}
	for k, v := range g.calls {
		calls[k] = v
	}
	for k, v := range g.closed {
		closed[k] = v
	}
	return calls, closed, append([]string(nil), g.overlap...)
}

// recordingStore is the real SQLite store that remembers every close recorded, and can be
// made to fail records (a closer killed between the gateway's answer and the record).
type recordingStore struct {
	*sqlstore.Store
	mu       sync.Mutex
	recorded map[string]seckill.CloseOutcome // the last recorded outcome per payment
	failNext int                             // records to fail before the next goes through
}

func (s *recordingStore) RecordClose(ctx context.Context, o seckill.CloseOutcome) error {
	s.mu.Lock()
	if s.failNext > 0 {
		s.failNext--
		s.mu.Unlock()
		return errors.New("recording store: the closer died before its record")
	}
	s.mu.Unlock()
	if err := s.Store.RecordClose(ctx, o); err != nil {
		return err
	}
	s.mu.Lock()
	s.recorded[o.PaymentID] = o
	s.mu.Unlock()
	return nil
}

func (s *recordingStore) outcome(id string) (seckill.CloseOutcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.recorded[id]
	return o, ok
}

// openStore returns a fresh SQLite store holding n open payments p0..p<n-1> of the fake
// gateway, due for closing at t0.
func openStore(t *testing.T, n int) *recordingStore {
	t.Helper()
	s, err := sqlstore.Open(t.Context(), "sqlite://:memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for i := range n {
		err := s.RecordOpenPayment(t.Context(), seckill.OpenPayment{PaymentID: fmt.Sprintf("p%d", i),
			ReservationID: fmt.Sprintf("r%d", i), Gateway: gwName, Status: seckill.PaymentOpen, CloseAt: t0}, t0.Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
	}
	return &recordingStore{Store: s, recorded: map[string]seckill.CloseOutcome{}}
}

// stillOpen returns the ids of the payments a claim at a time when everything is due finds
// open (and leaves them leased to a test owner).
func stillOpen(t *testing.T, s *recordingStore) []string {
	t.Helper()
	got, err := s.ClaimOpenPayments(t.Context(), gwName, "inspector", t0.Add(24*time.Hour), time.Minute, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range got {
		ids = append(ids, p.PaymentID)
	}
	return ids
}

func wantOutcome(t *testing.T, s *recordingStore, id string, want seckill.OpenPaymentStatus) seckill.CloseOutcome {
	t.Helper()
	o, ok := s.outcome(id)
	if !ok || o.Status != want {
		t.Fatalf("payment %s: recorded %+v (recorded: %v), want %s", id, o, ok, want)
	}
	return o
}

func runOnce(t *testing.T, c *closer.Closer, want int) {
	t.Helper()
	if n, err := c.RunOnce(t.Context()); n != want || err != nil {
		t.Fatalf("pass claimed %d, %v; want %d", n, err, want)
	}
}

// Due payments are closed once each and recorded closed; one not yet due is left alone until
// it is due; a second pass finds nothing.
func TestClosesDuePaymentsOnce(t *testing.T) {
	s := openStore(t, 2)
	if err := s.RecordOpenPayment(t.Context(), seckill.OpenPayment{PaymentID: "later", ReservationID: "r-later",
		Gateway: gwName, CloseAt: t0.Add(time.Minute)}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordOpenPayment(t.Context(), seckill.OpenPayment{PaymentID: "other-gw", ReservationID: "r-other",
		Gateway: "other", CloseAt: t0}, t0); err != nil {
		t.Fatal(err)
	}
	clock := seckilltest.NewManualClock(t0)
	g := newFake()
	c := closer.New(s, g, closer.Config{Clock: clock, Owner: "c1"})
	runOnce(t, c, 2)
	runOnce(t, c, 0)
	calls, closed, _ := g.snapshot()
	if len(calls) != 2 || calls["p0"] != 1 || calls["p1"] != 1 || !closed["p0"] || !closed["p1"] {
		t.Fatalf("Close calls %v, closed %v; want p0 and p1 once each", calls, closed)
	}
	for _, id := range []string{"p0", "p1"} {
		if o := wantOutcome(t, s, id, seckill.PaymentClosed); o.Owner != "c1" || !o.At.Equal(t0) {
			t.Fatalf("payment %s: outcome %+v; want by c1 at %v", id, o, t0)
		}
	}
	clock.Advance(time.Minute)
	runOnce(t, c, 1)
	wantOutcome(t, s, "later", seckill.PaymentClosed)
	if calls, _, _ := g.snapshot(); len(calls) != 3 || calls["other-gw"] != 0 {
		t.Fatalf("Close calls %v; want p0, p1, later, never another gateway's payment", calls)
	}
	if open := stillOpen(t, s); len(open) != 0 {
		t.Fatalf("still open: %v", open)
	}
}

// A payment the buyer paid before the close landed (ErrAlreadyPaid) is recorded paid; one
// the gateway does not know (not_found) is recorded closed. Neither is tried again.
func TestAlreadyPaidAndUnknown(t *testing.T) {
	s := openStore(t, 2)
	g := newFake()
	g.paid["p0"], g.unknown["p1"] = true, true
	clock := seckilltest.NewManualClock(t0)
	c := closer.New(s, g, closer.Config{Clock: clock})
	runOnce(t, c, 2)
	wantOutcome(t, s, "p0", seckill.PaymentPaid)
	wantOutcome(t, s, "p1", seckill.PaymentClosed)
	clock.Advance(time.Hour)
	runOnce(t, c, 0)
	if calls, closed, _ := g.snapshot(); calls["p0"] != 1 || calls["p1"] != 1 || len(closed) != 0 {
		t.Fatalf("Close calls %v, closed %v; want one call each, nothing closed", calls, closed)
	}
}

// A gateway that fails is retried after a growing backoff, never before, and once it answers
// the payment is closed.
func TestFailingGatewayBacksOff(t *testing.T) {
	s := openStore(t, 1)
	g := newFake()
	g.answer = func(_ string, n int) error {
		if n <= 3 {
			return errors.New("gateway unreachable")
		}
		return nil
	}
	clock := seckilltest.NewManualClock(t0)
	const base = 10 * time.Second
	c := closer.New(s, g, closer.Config{Clock: clock, Owner: "c1", BackoffBase: base, BackoffMax: time.Hour})
	for attempt := 1; attempt <= 3; attempt++ {
		runOnce(t, c, 1)
		o := wantOutcome(t, s, "p0", seckill.PaymentOpen)
		wait, ceiling := o.NextAttemptAt.Sub(clock.Now()), base<<(attempt-1)
		if wait < ceiling/2 || wait > ceiling || o.Error != "gateway unreachable" {
			t.Fatalf("attempt %d: next attempt in %v (want %v..%v), error %q", attempt, wait, ceiling/2, ceiling, o.Error)
		}
		clock.Set(o.NextAttemptAt.Add(-time.Millisecond))
		runOnce(t, c, 0) // not before its backoff ended
		clock.Set(o.NextAttemptAt)
	}
	runOnce(t, c, 1)
	wantOutcome(t, s, "p0", seckill.PaymentClosed)
	if calls, closed, _ := g.snapshot(); calls["p0"] != 4 || !closed["p0"] {
		t.Fatalf("Close calls %v, closed %v; want 4 calls, closed", calls, closed)
	}
	if open := stillOpen(t, s); len(open) != 0 {
		t.Fatalf("still open: %v", open)
	}
}

// Two closers on one store, passing at the same time, never close one payment at the same
// time (nor twice at all, as no lease ends meanwhile), and together close every payment.
func TestTwoClosersNeverOverlap(t *testing.T) {
	const n = 60
	s := openStore(t, n)
	g := newFake()
	clock := seckilltest.NewManualClock(t0)
	var closers []leasedjobtest.Passer
	for i := range 2 {
		closers = append(closers, closer.New(s, g, closer.Config{Batch: 4, Clock: clock, Owner: fmt.Sprintf("instance-%d", i)}))
	}
	leasedjobtest.Race(t, closers...)
	calls, closed, overlap := g.snapshot()
	if len(overlap) > 0 {
		t.Fatalf("payments closed by two closers at once: %v", overlap)
	}
	if len(closed) != n {
		t.Fatalf("%d of %d payments closed", len(closed), n)
	}
	for id, c := range calls {
		if c != 1 {
			t.Errorf("payment %s: Close called %d times, want once", id, c)
		}
	}
	for i := range n {
		wantOutcome(t, s, fmt.Sprintf("p%d", i), seckill.PaymentClosed)
	}
	if open := stillOpen(t, s); len(open) != 0 {
		t.Fatalf("still open: %v", open)
	}
}

// A closer killed between the gateway's answer and its record leaves the payment open under
// its lease: no other closer takes it while the lease lives; after it, another closes it
// again, harmlessly (closing is idempotent), and records it closed.
func TestKilledBetweenCloseAndRecord(t *testing.T) {
	s := openStore(t, 1)
	s.failNext = 1
	g := newFake()
	clock := seckilltest.NewManualClock(t0)
	first := closer.New(s, g, closer.Config{Clock: clock, Owner: "first", Lease: time.Minute})
	runOnce(t, first, 1)
	if _, ok := s.outcome("p0"); ok {
		t.Fatal("the failed record was recorded")
	}
	if _, closed, _ := g.snapshot(); !closed["p0"] {
		t.Fatal("the gateway did not close p0")
	}
	second := closer.New(s, g, closer.Config{Clock: clock, Owner: "second", Lease: time.Minute})
	clock.Advance(time.Minute - time.Millisecond)
	runOnce(t, second, 0) // the dead closer's lease lives
	clock.Advance(time.Millisecond)
	runOnce(t, second, 1)
	if o := wantOutcome(t, s, "p0", seckill.PaymentClosed); o.Owner != "second" {
		t.Fatalf("outcome %+v; want recorded by second", o)
	}
	if calls, _, _ := g.snapshot(); calls["p0"] != 2 {
		t.Fatalf("Close called %d times, want 2 (the killed attempt and the retry)", calls["p0"])
	}
	if open := stillOpen(t, s); len(open) != 0 {
		t.Fatalf("still open: %v", open)
	}
}

// A gateway that never confirms a close (a bare stripe-mock forgets every session and answers
// it open after expiring it) is not retried forever: after MaxAttempts the payment is recorded
// closed with the reason in its error, and never claimed again; the log warns once when the
// close first fails and once when it is given up, the retries in between at debug level.
func TestGivesUpOnAGatewayThatNeverConfirms(t *testing.T) {
	s := openStore(t, 2)
	g := newFake()
	g.answer = func(id string, _ int) error {
		if id == "p0" {
			return errors.New("stripegw: checkout session p0 is still \"open\" after expiring it")
		}
		return nil
	}
	var logs bytes.Buffer // RunOnce logs from the test's goroutine
	clock := seckilltest.NewManualClock(t0)
	const maxAttempts = 5
	c := closer.New(s, g, closer.Config{Clock: clock, Owner: "c1", MaxAttempts: maxAttempts, BackoffMax: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for range 3 * maxAttempts {
		if _, err := c.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
	}
	if calls, _, _ := g.snapshot(); calls["p0"] != maxAttempts || calls["p1"] != 1 {
		t.Fatalf("Close calls %v; want p0 %d times (then given up), p1 once", calls, maxAttempts)
	}
	o := wantOutcome(t, s, "p0", seckill.PaymentClosed)
	if !strings.Contains(o.Error, "gave up after 5 attempts") || !strings.Contains(o.Error, "still \"open\"") {
		t.Fatalf("p0 recorded with error %q; want the attempts and the gateway's last answer", o.Error)
	}
	wantOutcome(t, s, "p1", seckill.PaymentClosed)
	if open := stillOpen(t, s); len(open) != 0 {
		t.Fatalf("still open: %v", open)
	}
	text := logs.String()
	if warns, debugs := strings.Count(text, "level=WARN"), strings.Count(text, "level=DEBUG"); warns != 2 || debugs != maxAttempts-2 {
		t.Fatalf("%d warnings and %d debug lines; want 2 (the first failure, giving up) and %d:\n%s", warns, debugs, maxAttempts-2, text)
	}
}
