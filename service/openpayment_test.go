package service_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// The service records every payment it starts (POST /pay) for closing at the gateway when its
// hold ends (seckill.OpenPaymentStore, package closer), before it hands the payment page out.
// These tests run the memory engine, the real SQLite store behind a switch and the mock
// gateway (whose webhook, an hour away, never comes) on a manual clock.

// openPayStore is the real store whose RecordOpenPayment and CloseSoon fail on demand.
type openPayStore struct {
	*sqlstore.Store
	mu                   sync.Mutex
	failRecord, failSoon bool
}

func (s *openPayStore) fails(which *bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *which
}

func (s *openPayStore) set(which *bool, v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*which = v
}

func (s *openPayStore) RecordOpenPayment(ctx context.Context, p seckill.OpenPayment, at time.Time) error {
	if s.fails(&s.failRecord) {
		return errStoreGone
	}
	return s.Store.RecordOpenPayment(ctx, p, at)
}

func (s *openPayStore) CloseSoon(ctx context.Context, reservationID string, at time.Time) error {
	if s.fails(&s.failSoon) {
		return errStoreGone
	}
	return s.Store.CloseSoon(ctx, reservationID, at)
}

type openPayRig struct {
	clock *seckilltest.ManualClock
	store *openPayStore
	gw    *payment.MockGateway
	svc   *service.Service
}

var openPayT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// newOpenPayRig starts a service selling sale s (two units, hold 10 s) through the mock.
func newOpenPayRig(t *testing.T) *openPayRig {
	t.Helper()
	return newOpenPayRigThrough(t, func(p seckill.Payments) seckill.Payments { return p })
}

// newOpenPayRigThrough is newOpenPayRig with the service's payments wrapped by through.
func newOpenPayRigThrough(t *testing.T, through func(seckill.Payments) seckill.Payments) *openPayRig {
	t.Helper()
	real, err := sqlstore.Open(t.Context(), "sqlite://:memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = real.Close() })
	store := &openPayStore{Store: real}
	clock := seckilltest.NewManualClock(openPayT0)
	gw := payment.NewMockGateway(payment.MockConfig{
		Secret: []byte("k"), Delay: func(seckill.Reservation) time.Duration { return time.Hour },
		Deliver: func(context.Context, []byte, string) (int, error) { return 200, nil },
	})
	t.Cleanup(func() { _ = gw.Close() })
	svc := service.New(service.Config{
		Inventory: memory.New(clock, memory.WithArchive(store)), Store: store, Payments: through(payment.ForService(gw)),
		Clock: clock, AuthSecret: []byte("k"),
	})
	price, stock, hold := int64(100), 2, 10
	if _, err := svc.CreateSale(t.Context(), seckill.SaleInput{ID: "s", PriceCents: &price, Stock: &stock, HoldSeconds: &hold}); err != nil {
		t.Fatal(err)
	}
	return &openPayRig{clock: clock, store: store, gw: gw, svc: svc}
}

func (r *openPayRig) hold(t *testing.T, user string) seckill.Reservation {
	t.Helper()
	b, err := r.svc.Buy(t.Context(), seckill.BuyRequest{SaleID: "s", UserID: user, Quantity: 1})
	if err != nil || b.Reservation.Status != seckill.StatusHeld || b.Reservation.ExpiresAt == nil {
		t.Fatalf("%s's buy: %+v, %v; want held", user, b.Reservation, err)
	}
	return b.Reservation
}

// due claims the mock's payments whose close is due at now (leasing them to a test owner).
func (r *openPayRig) due(t *testing.T, now time.Time) []seckill.OpenPayment {
	t.Helper()
	got, err := r.store.ClaimOpenPayments(t.Context(), payment.MockName, "inspector", now, time.Millisecond, 100)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Pay records the payment it started with the gateway's name, due for closing at the hold's
// expiry.
func TestPayRecordsOpenPayment(t *testing.T) {
	r := newOpenPayRig(t)
	res := r.hold(t, "alice")
	intent, err := r.svc.Pay(t.Context(), res.ID, "alice")
	if err != nil || intent.PaymentID == "" {
		t.Fatalf("Pay: %+v, %v", intent, err)
	}
	exp := *res.ExpiresAt
	if got := r.due(t, exp.Add(-time.Millisecond)); len(got) != 0 {
		t.Fatalf("due before the hold's expiry: %+v", got)
	}
	got := r.due(t, exp)
	if len(got) != 1 || got[0].PaymentID != intent.PaymentID || got[0].ReservationID != res.ID ||
		got[0].Gateway != payment.MockName || !got[0].CloseAt.Equal(exp) || got[0].Status != seckill.PaymentOpen {
		t.Fatalf("due at the hold's expiry: %+v; want %s of %s at the mock, due at %v", got, intent.PaymentID, res.ID, exp)
	}
}

// A payment that cannot be recorded is not handed out: Pay answers unavailable with no
// intent. Asked again once the store is back, the gateway starts no second payment and the
// first one is recorded.
func TestPayUnavailableWhenNotRecorded(t *testing.T) {
	r := newOpenPayRig(t)
	res := r.hold(t, "alice")
	r.store.set(&r.store.failRecord, true)
	intent, err := r.svc.Pay(t.Context(), res.ID, "alice")
	if seckill.ErrorCode(err) != seckill.CodeUnavailable || intent != (seckill.PaymentIntent{}) {
		t.Fatalf("Pay while the record fails: %+v, %v; want no intent, unavailable", intent, err)
	}
	r.store.set(&r.store.failRecord, false)
	if got := r.due(t, *res.ExpiresAt); len(got) != 0 {
		t.Fatalf("recorded though the record failed: %+v", got)
	}
	intent, err = r.svc.Pay(t.Context(), res.ID, "alice")
	if err != nil || intent.PaymentID == "" {
		t.Fatalf("Pay once the store is back: %+v, %v", intent, err)
	}
	if st := r.gw.Stats(); st.Created != 1 {
		t.Fatalf("the gateway started %d payments, want 1", st.Created)
	}
	if got := r.due(t, *res.ExpiresAt); len(got) != 1 || got[0].PaymentID != intent.PaymentID {
		t.Fatalf("due at the hold's expiry: %+v; want %s", got, intent.PaymentID)
	}
}

// Cancel makes the payment of the hold due for closing at once, and only that one; a cancel
// whose CloseSoon fails still stands (the close comes at the expiry recorded).
func TestCancelBringsCloseForward(t *testing.T) {
	r := newOpenPayRig(t)
	alice, bob := r.hold(t, "alice"), r.hold(t, "bob")
	ia, err := r.svc.Pay(t.Context(), alice.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ib, err := r.svc.Pay(t.Context(), bob.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(3 * time.Second)
	now := r.clock.Now()
	if got := r.due(t, now); len(got) != 0 {
		t.Fatalf("due before any cancel: %+v", got)
	}
	if _, err := r.svc.Cancel(t.Context(), alice.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	got := r.due(t, now)
	if len(got) != 1 || got[0].PaymentID != ia.PaymentID || !got[0].CloseAt.Equal(now) {
		t.Fatalf("due after alice's cancel: %+v; want %s, due at %v", got, ia.PaymentID, now)
	}

	r.store.set(&r.store.failSoon, true)
	if c, err := r.svc.Cancel(t.Context(), bob.ID, "bob"); err != nil || c.Status != seckill.StatusCancelled {
		t.Fatalf("bob's cancel while CloseSoon fails: %+v, %v; want cancelled", c, err)
	}
	// alice's payment, leased for a millisecond only, is due again: bob's is not.
	if got := r.due(t, now.Add(time.Second)); len(got) != 1 || got[0].PaymentID != ia.PaymentID {
		t.Fatalf("due after bob's failed CloseSoon: %+v; want alice's only, not bob's before his hold's expiry", got)
	}
	if got := r.due(t, *bob.ExpiresAt); len(got) != 2 || got[1].PaymentID != ib.PaymentID {
		t.Fatalf("due at bob's hold's expiry: %+v; want alice's and then bob's %s", got, ib.PaymentID)
	}
}

// countingPayments counts the payments asked of the gateway behind it.
type countingPayments struct {
	seckill.Payments
	starts atomic.Int64
}

func (c *countingPayments) CreatePaymentFor(ctx context.Context, r seckill.Reservation, sale seckill.Sale) (seckill.PaymentIntent, error) {
	c.starts.Add(1)
	return c.Payments.CreatePaymentFor(ctx, r, sale)
}

// A hold has one payment: while it is open, Pay answers its recorded page again without
// asking the gateway, so that one buyer calling /pay over and over spends none of the shop's
// gateway rate limit. Another hold still gets its own payment.
func TestPayAnswersOpenPaymentWithoutGateway(t *testing.T) {
	var counted *countingPayments
	r := newOpenPayRigThrough(t, func(p seckill.Payments) seckill.Payments {
		counted = &countingPayments{Payments: p}
		return counted
	})
	svc := r.svc
	res := r.hold(t, "alice")
	first, err := svc.Pay(t.Context(), res.ID, "alice")
	if err != nil || first.RedirectURL == "" {
		t.Fatalf("first Pay: %+v, %v", first, err)
	}
	for i := range 20 {
		again, err := svc.Pay(t.Context(), res.ID, "alice")
		if err != nil || again.PaymentID != first.PaymentID || again.RedirectURL != first.RedirectURL {
			t.Fatalf("Pay #%d: %+v, %v; want the first payment %+v", i+2, again, err, first)
		}
	}
	if n := counted.starts.Load(); n != 1 {
		t.Fatalf("21 Pays of one hold asked the gateway %d times, want 1", n)
	}
	if _, err := svc.Pay(t.Context(), r.hold(t, "bob").ID, "bob"); err != nil {
		t.Fatalf("bob's Pay: %v", err)
	}
	if n := counted.starts.Load(); n != 2 {
		t.Fatalf("another hold's Pay: the gateway was asked %d times in all, want 2", n)
	}
}

// gatedPayments holds every payment start until release is closed (or its context ends).
type gatedPayments struct {
	seckill.Payments
	entered chan struct{} // one value per start that reached the gateway
	release chan struct{}
}

func (g *gatedPayments) CreatePaymentFor(ctx context.Context, r seckill.Reservation, sale seckill.Sale) (seckill.PaymentIntent, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return seckill.PaymentIntent{}, ctx.Err()
	}
	return g.Payments.CreatePaymentFor(ctx, r, sale)
}

// TestPayJoinedSurvivesTheFirstCallerLeaving: two /pay calls of one hold share one gateway
// call; the first caller going away (its request cancelled) must not fail the second, which
// once got the first caller's "context canceled". (The second joins the call in flight during
// a pause of 50 ms: a slower machine can only make it start a call of its own, which passes
// too; the pause decides how often the old behaviour is caught, never whether this passes.)
func TestPayJoinedSurvivesTheFirstCallerLeaving(t *testing.T) {
	g := &gatedPayments{entered: make(chan struct{}, 4), release: make(chan struct{})}
	r := newOpenPayRigThrough(t, func(p seckill.Payments) seckill.Payments { g.Payments = p; return g })
	res := r.hold(t, "alice")
	firstCtx, leave := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { _, err := r.svc.Pay(firstCtx, res.ID, "alice"); first <- err }()
	<-g.entered
	second := make(chan error, 1)
	go func() { _, err := r.svc.Pay(t.Context(), res.ID, "alice"); second <- err }()
	time.Sleep(50 * time.Millisecond) // the second joins the call in flight
	leave()
	time.Sleep(10 * time.Millisecond)
	close(g.release)
	if err := <-second; err != nil {
		t.Fatalf("the second /pay failed when the first caller left: %v", err)
	}
	<-first // either way: its caller is gone
}
