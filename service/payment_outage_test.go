package service_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// The database goes away while buyers pay. These tests run on both engines with the real
// SQLite store behind a switch (outageStore), on a manual clock, and check that a payment
// delivered before its hold expired is honoured once the database is back, whatever the
// engine did meanwhile (docs/DECISIONS.md "Payments").

// Store modes of an outageStore.
const (
	storeUp          int32 = iota
	storeDown              // every call fails at once, as with a server that is gone
	storeRecordFails       // everything works but the payment transaction
	storeHangs             // reads and the payment transaction wait until their context ends
)

// errStoreGone is how a driver reports a server that is gone: an uncoded error.
var errStoreGone = errors.New("outage store: dial tcp 127.0.0.1:3306: connect: connection refused")

// outageStore is the real store with a switch that makes it fail on demand.
type outageStore struct {
	seckill.OrderStore
	mu      sync.Mutex
	mode    int32
	changed chan struct{} // closed when the mode changes
}

// set switches the mode; calls hanging in storeHangs then fail, as on a connection that broke.
func (s *outageStore) set(mode int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = mode
	if s.changed != nil {
		close(s.changed)
	}
	s.changed = make(chan struct{})
}

// fail is what a call gets in the current mode: nil to go through to the store. payment
// marks the payment transaction.
func (s *outageStore) fail(ctx context.Context, payment bool) error {
	s.mu.Lock()
	mode, changed := s.mode, s.changed
	s.mu.Unlock()
	switch mode {
	case storeDown:
		return errStoreGone
	case storeRecordFails:
		if payment {
			return errStoreGone
		}
	case storeHangs:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			return errStoreGone
		}
	}
	return nil
}

func (s *outageStore) PaymentResult(ctx context.Context, id string) (seckill.PaymentResult, error) {
	if err := s.fail(ctx, false); err != nil {
		return "", err
	}
	return s.OrderStore.PaymentResult(ctx, id)
}

func (s *outageStore) RecordPayment(ctx context.Context, p seckill.PaymentRecord) (seckill.PaymentResult, error) {
	if err := s.fail(ctx, true); err != nil {
		return "", err
	}
	return s.OrderStore.RecordPayment(ctx, p)
}

func (s *outageStore) ApplyEvents(ctx context.Context, events []seckill.Event) error {
	if err := s.fail(ctx, false); err != nil {
		return err
	}
	return s.OrderStore.ApplyEvents(ctx, events)
}

func (s *outageStore) Ping(ctx context.Context) error {
	if err := s.fail(ctx, false); err != nil {
		return err
	}
	return s.OrderStore.Ping(ctx)
}

func (s *outageStore) Sales(ctx context.Context) ([]seckill.Sale, []int, error) {
	if err := s.fail(ctx, false); err != nil {
		return nil, nil, err
	}
	return s.OrderStore.Sales(ctx)
}

func (s *outageStore) Orders(ctx context.Context, user string) ([]seckill.Order, error) {
	if err := s.fail(ctx, false); err != nil {
		return nil, err
	}
	return s.OrderStore.Orders(ctx, user)
}

func (s *outageStore) Counts(ctx context.Context, saleID string) (seckill.DBCounts, error) {
	if err := s.fail(ctx, false); err != nil {
		return seckill.DBCounts{}, err
	}
	return s.OrderStore.Counts(ctx, saleID)
}

// outageRig is one engine behind a Service whose store fails on demand. flush moves the
// engine's events into the store as far as the store takes them (memory: now, from the
// engine's channel; Redis: a stream consumer does it in the background, and flush waits).
type outageRig struct {
	clock *seckilltest.ManualClock
	store *outageStore
	svc   *service.Service
	inv   seckill.Inventory
	flush func()
}

// outageEngines are the engines the tests run on; Redis only with SECKILL_TEST_REDIS.
var outageEngines = []struct {
	name string
	rig  func(t *testing.T) *outageRig
}{
	{"memory", memoryRig},
	{"redis", redisRig},
}

func openOutageStore(t *testing.T) *outageStore {
	t.Helper()
	real, err := sqlstore.Open(t.Context(), "sqlite://"+t.TempDir()+"/seckill.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = real.Close() })
	s := &outageStore{OrderStore: real}
	s.set(storeUp)
	return s
}

func newRig(t *testing.T, inv seckill.Inventory, store *outageStore, clock *seckilltest.ManualClock, flush func()) *outageRig {
	svc := service.New(service.Config{Inventory: inv, Store: store, Clock: clock, AuthSecret: []byte("k")})
	return &outageRig{clock: clock, store: store, svc: svc, inv: inv, flush: flush}
}

func memoryRig(t *testing.T) *outageRig {
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	events := make(chan seckill.Event, 1024)
	store := openOutageStore(t)
	var pending []seckill.Event
	flush := func() {
		for more := true; more; {
			select {
			case ev := <-events:
				pending = append(pending, ev)
			default:
				more = false
			}
		}
		if len(pending) > 0 && store.ApplyEvents(t.Context(), pending) == nil {
			pending = nil
		}
	}
	return newRig(t, memory.New(clock, memory.WithEvents(events)), store, clock, flush)
}

func redisRig(t *testing.T) *outageRig {
	url := testenv.Redis(t)
	clients, err := redisinv.Dial(t.Context(), url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = clients.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "seckilltest:" + hex.EncodeToString(b[:]) + ":"
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	engine := redisinv.New(clients.Inventory, redisinv.WithTestClock(clock), redisinv.WithPrefix(prefix))
	store := openOutageStore(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	consumer := engine.NewConsumer(store, redisinv.ConsumerConfig{RetryDelay: 10 * time.Millisecond,
		List: func(context.Context) ([]string, error) { return []string{"s"}, nil }})
	go func() {
		defer close(done)
		_ = consumer.Run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
		_ = engine.Close()
		rdb := clients.Inventory
		for _, part := range []string{"sale", "res", "holds", "queue", "users", "idem", "events"} {
			_ = rdb.Do(context.Background(), rdb.B().Del().Key(prefix+"{sale:s}:"+part).Build()).Error()
		}
	})
	return newRig(t, engine, store, clock, func() {})
}

// waitStored flushes events until ok holds (the consumer of the Redis engine stores them in
// the background), for up to 10 s.
func (r *outageRig) waitStored(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.flush()
		if ok() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events never reached the database: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stored reads a reservation's row from the database (the store behind the switch).
func (r *outageRig) stored(t *testing.T, id string) seckill.ReservationStatus {
	t.Helper()
	rs, err := r.store.OrderStore.Reservations(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range rs {
		if x.ID == id {
			return x.Status
		}
	}
	return ""
}

// holdAndQueue creates sale s (one unit, hold 10 s, price 100) and has alice hold the unit
// and bob queue behind her; their events are stored.
func (r *outageRig) holdAndQueue(t *testing.T) (alice, bob seckill.Reservation) {
	t.Helper()
	ctx := t.Context()
	price, stock, hold := int64(100), 1, 10
	if _, err := r.svc.CreateSale(ctx, seckill.SaleInput{ID: "s", PriceCents: &price, Stock: &stock, HoldSeconds: &hold}); err != nil {
		t.Fatal(err)
	}
	a, err := r.svc.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: "alice", Quantity: 1})
	if err != nil || a.Reservation.Status != seckill.StatusHeld {
		t.Fatalf("alice's buy: %+v %v", a, err)
	}
	b, err := r.svc.Buy(ctx, seckill.BuyRequest{SaleID: "s", UserID: "bob", Quantity: 1})
	if err != nil || b.Reservation.Status != seckill.StatusQueued {
		t.Fatalf("bob's buy: %+v %v", b, err)
	}
	r.waitStored(t, "alice held, bob queued", func() bool {
		return r.stored(t, a.Reservation.ID) == seckill.StatusHeld && r.stored(t, b.Reservation.ID) == seckill.StatusQueued
	})
	return a.Reservation, b.Reservation
}

// pay delivers alice's payment as the webhook does.
func (r *outageRig) pay(ctx context.Context, pid string, res seckill.Reservation) (seckill.PaymentResult, error) {
	return r.svc.ApplyPayment(ctx, seckill.PaymentConfirmation{PaymentID: pid, ReservationID: res.ID, AmountCents: 100}, true)
}

// settled checks the end state: alice paid once (one paid order, no refund), bob rejected
// (the unit is sold), and the audit ok.
func (r *outageRig) settled(t *testing.T, alice, bob seckill.Reservation) {
	t.Helper()
	ctx := t.Context()
	if got, err := r.inv.Reservation(ctx, alice.ID); err != nil || got.Status != seckill.StatusPaid {
		t.Errorf("alice's reservation in the engine: %+v %v; want paid", got, err)
	}
	if got, err := r.inv.Reservation(ctx, bob.ID); err != nil || got.Status != seckill.StatusRejected {
		t.Errorf("bob's reservation in the engine: %+v %v; want rejected (the unit is sold)", got, err)
	}
	orders, err := r.svc.Orders(ctx, "alice")
	if err != nil || len(orders) != 1 || orders[0].Status != seckill.StatusPaid {
		t.Errorf("alice's orders: %+v %v; want one paid order", orders, err)
	}
	r.waitStored(t, "bob rejected", func() bool { return r.stored(t, bob.ID) == seckill.StatusRejected })
	a, err := r.svc.Audit(ctx, "s")
	if err != nil || !a.OK || a.Database.Sold != 1 || a.Database.PaidOrders != 1 || a.Database.Refunds != 0 {
		t.Errorf("audit: %+v %v; want ok, 1 sold, 1 paid order, no refund", a, err)
	}
}

// TestPaymentDuringDatabaseOutage: alice's payment is delivered while the database is down
// and answered 503; her hold then expires (bob is queued for the unit); the database comes
// back with the payment transaction still failing (503 again, while the engine's events,
// her paid event among them, reach the database first); then it works, and the retry is
// applied: alice paid, no refund, bob rejected, the audit ok. Before the fix the first
// delivery never reached the engine, the hold expired and passed to bob, and the retry was
// refund_required.
func TestPaymentDuringDatabaseOutage(t *testing.T) {
	for _, eng := range outageEngines {
		t.Run(eng.name, func(t *testing.T) {
			r := eng.rig(t)
			ctx := t.Context()
			alice, bob := r.holdAndQueue(t)

			r.store.set(storeDown)
			if err := r.svc.Ready(ctx); err == nil {
				t.Error("Ready: nil while the database is down")
			}
			res, err := r.pay(ctx, "pay-a", alice)
			if seckill.ErrorCode(err) != seckill.CodeUnavailable {
				t.Fatalf("payment while the database is down: %q %v; want unavailable (503, the gateway retries)", res, err)
			}
			r.clock.Advance(11 * time.Second) // alice's hold would have expired by now
			if _, err := r.svc.Sale(ctx, "s"); err != nil {
				t.Fatal(err)
			}

			r.store.set(storeRecordFails)
			res, err = r.pay(ctx, "pay-a", alice)
			if seckill.ErrorCode(err) != seckill.CodeUnavailable {
				t.Fatalf("payment while its transaction fails: %q %v; want unavailable", res, err)
			}
			// The engine's events, alice's paid one included, reach the database before the
			// payment record; they do not make her row paid (only the payment transaction does).
			r.waitStored(t, "bob's next change", func() bool { return r.stored(t, bob.ID) != seckill.StatusQueued })
			if got := r.stored(t, alice.ID); got == seckill.StatusPaid {
				t.Fatalf("alice's row is %s before her payment is recorded", got)
			}

			r.store.set(storeUp)
			if err := r.svc.Ready(ctx); err != nil {
				t.Errorf("Ready once the database is back: %v", err)
			}
			if res, err = r.pay(ctx, "pay-a", alice); err != nil || res != seckill.PaymentApplied {
				t.Fatalf("retried payment once the database is back: %q %v; want applied", res, err)
			}
			if res, err = r.pay(ctx, "pay-a", alice); err != nil || res != seckill.PaymentDuplicate {
				t.Fatalf("payment delivered once more: %q %v; want duplicate", res, err)
			}
			r.settled(t, alice, bob)
		})
	}
}

// TestPaymentWhileDatabaseHangs: a database that hangs instead of refusing (a stopped server,
// a partition) does not keep a payment from the engine: the look-up of an earlier record is
// cut short, the engine settles the hold, and the delivery fails when its context ends (the
// gateway gave up waiting). The retry once the database answers is applied. Before the fix the
// look-up waited as long as the delivery did, and the engine never saw the payment.
func TestPaymentWhileDatabaseHangs(t *testing.T) {
	for _, eng := range outageEngines {
		t.Run(eng.name, func(t *testing.T) {
			r := eng.rig(t)
			alice, bob := r.holdAndQueue(t)

			r.store.set(storeHangs)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second) // the gateway's patience
			res, err := r.pay(ctx, "pay-a", alice)
			cancel()
			if err == nil {
				t.Fatalf("payment while the database hangs: %q; want an error (no 200 without the record)", res)
			}
			if got, err := r.inv.Reservation(t.Context(), alice.ID); err != nil || got.Status != seckill.StatusPaid {
				t.Fatalf("alice's reservation after a delivery the database hung on: %+v %v; want paid in the engine", got, err)
			}
			r.clock.Advance(11 * time.Second)

			r.store.set(storeUp)
			if res, err = r.pay(t.Context(), "pay-a", alice); err != nil || res != seckill.PaymentApplied {
				t.Fatalf("retried payment: %q %v; want applied", res, err)
			}
			r.settled(t, alice, bob)
		})
	}
}

// TestRecordedRefundStaysFinal: the look-up ApplyPayment makes before the engine keeps a
// recorded result final. A payment for a queued reservation is refund_required; when the
// reservation is later granted a hold, the same payment delivered again (its 200 was lost) is
// a duplicate, and does not pay the hold that the database has already refunded.
func TestRecordedRefundStaysFinal(t *testing.T) {
	for _, eng := range outageEngines {
		t.Run(eng.name, func(t *testing.T) {
			r := eng.rig(t)
			ctx := t.Context()
			alice, bob := r.holdAndQueue(t)
			if res, err := r.pay(ctx, "pay-b", bob); err != nil || res != seckill.PaymentRefundRequired {
				t.Fatalf("payment for a queued reservation: %q %v; want refund_required", res, err)
			}
			if _, err := r.svc.Cancel(ctx, alice.ID, "alice"); err != nil {
				t.Fatal(err)
			}
			if got, err := r.inv.Reservation(ctx, bob.ID); err != nil || got.Status != seckill.StatusHeld {
				t.Fatalf("bob after alice cancelled: %+v %v; want held", got, err)
			}
			if res, err := r.pay(ctx, "pay-b", bob); err != nil || res != seckill.PaymentDuplicate {
				t.Fatalf("the refunded payment delivered again: %q %v; want duplicate", res, err)
			}
			if got, err := r.inv.Reservation(ctx, bob.ID); err != nil || got.Status != seckill.StatusHeld {
				t.Fatalf("bob after the refunded payment came again: %+v %v; want still held", got, err)
			}
			if a, err := r.svc.Audit(ctx, "s"); err != nil || !a.OK || a.Database.Refunds != 1 || a.Database.Sold != 0 {
				t.Fatalf("audit: %+v %v; want ok, one refund, nothing sold", a, err)
			}
		})
	}
}
