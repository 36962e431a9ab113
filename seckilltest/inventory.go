package seckilltest

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// NewInventory builds a fresh, empty engine that reads time from clock. TestInventory calls it
// once per scenario; register any cleanup (closing a client, stopping a sweeper) on t.
type NewInventory = func(t *testing.T, clock seckill.Clock) seckill.Inventory

// TestInventory is the conformance suite of seckill.Inventory (docs/MODEL.md). Every engine runs
// it from its own tests:
//
//	seckilltest.TestInventory(t, func(t *testing.T, c seckill.Clock) seckill.Inventory { return memory.New(c) })
//
// Subtests:
//   - Rules: one scenario per rule of docs/MODEL.md, with exact expected counts and statuses.
//   - Model: a pgregory.net/rapid state machine that drives the engine and a fresh Model side by
//     side with random sales and operations and requires identical answers after every step.
//   - Concurrency: thousands of buyers on 64 goroutines against a clock that keeps moving, with a
//     checker of the invariants of docs/MODEL.md that is sound under concurrency.
//   - SaleAdmin: seckill.SaleAdmin (listing a sale on and off, deleting one nobody reserved in,
//     also against racing buys), which every engine implements.
//
// The engine must take all its time from clock (a *ManualClock): the suite moves time by hand.
// A background sweeper may run; it must only do what a Reclaim call would do.
//
// Options adjust the effort: ModelRounds for a variant of an engine whose reference
// configuration already runs the full model comparison.
func TestInventory(t *testing.T, newEngine NewInventory, opts ...SuiteOption) {
	cfg := suiteConfig{modelRounds: modelRounds}
	for _, o := range opts {
		o(&cfg)
	}
	t.Run("Rules", func(t *testing.T) { testRules(t, newEngine) })
	t.Run("Model", func(t *testing.T) { testModel(t, newEngine, cfg.modelRounds) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, newEngine) })
	t.Run("SaleAdmin", func(t *testing.T) { testSaleAdmin(t, newEngine) })
}

// SuiteOption adjusts TestInventory.
type SuiteOption func(*suiteConfig)

type suiteConfig struct{ modelRounds int }

// ModelRounds sets how many rapid.Check rounds the Model subtest runs (5 by default, each of
// -rapid.checks cases). A configuration that differs from an engine's reference run only in
// how its calls reach the same code (a Redis Cluster instead of one server, local answers in
// front of the same scripts, replica acknowledgement after them) runs 1: the reference run
// carries the search for bugs in the shared code, the variant's round finds what the variant
// adds, and CI's time stays inside its limit.
func ModelRounds(n int) SuiteOption {
	return func(c *suiteConfig) { c.modelRounds = max(n, 1) }
}

// epoch is the suite's "now" at the start of every scenario: whole seconds, UTC, so that
// engines that keep milliseconds or seconds agree with the model exactly.
var epoch = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// saleOpt adjusts the sale a scenario loads.
type saleOpt func(*seckill.SaleInput)

func perUser(n int) saleOpt     { return func(in *seckill.SaleInput) { in.PerUserLimit = &n } }
func queueLimit(n int) saleOpt  { return func(in *seckill.SaleInput) { in.QueueLimit = &n } }
func holdback(n int) saleOpt    { return func(in *seckill.SaleInput) { in.Holdback = n } }
func holdSeconds(n int) saleOpt { return func(in *seckill.SaleInput) { in.HoldSeconds = &n } }
func saleID(id string) saleOpt  { return func(in *seckill.SaleInput) { in.ID = id } }
func startsIn(d time.Duration) saleOpt {
	return func(in *seckill.SaleInput) { in.StartsAt = ptr(epoch.Add(d)) }
}
func endsIn(d time.Duration) saleOpt {
	return func(in *seckill.SaleInput) { in.EndsAt = ptr(epoch.Add(d)) }
}

func inCurrency(c string) saleOpt {
	return func(in *seckill.SaleInput) { in.Currency = ptr(c) }
}

// rig is one scenario: an engine, its clock and the sale under test.
type rig struct {
	t     *testing.T
	ctx   context.Context
	clock *ManualClock
	inv   seckill.Inventory
	sale  seckill.Sale
}

// price is the unit price of every Rules sale.
const price = 100

// newRig loads a sale of stock units (price 100, per-user limit 1, hold 10 s, window
// [epoch, epoch+1h), queue limit omitted, id "s1") with the options applied and sold units sold.
func newRig(t *testing.T, newEngine NewInventory, stock, sold int, opts ...saleOpt) *rig {
	t.Helper()
	clock := NewManualClock(epoch)
	r := &rig{t: t, ctx: context.Background(), clock: clock, inv: newEngine(t, clock)}
	r.sale = r.load(stock, sold, opts...)
	return r
}

// load loads one more sale into the rig's engine.
func (r *rig) load(stock, sold int, opts ...saleOpt) seckill.Sale {
	r.t.Helper()
	in := seckill.SaleInput{
		ID: "s1", PriceCents: ptr(int64(price)), Stock: &stock,
		PerUserLimit: ptr(1), HoldSeconds: ptr(10), StartsAt: ptr(epoch),
	}
	for _, o := range opts {
		o(&in)
	}
	s, err := seckill.NewSale(in, r.clock.Now())
	if err != nil {
		r.t.Fatalf("NewSale: %v", err)
	}
	if err := r.inv.LoadSale(r.ctx, s, sold); err != nil {
		r.t.Fatalf("LoadSale(%s, sold %d): %v", s.ID, sold, err)
	}
	return s
}

func (r *rig) advance(d time.Duration) { r.clock.Advance(d) }

// at is epoch + d.
func at(d time.Duration) time.Time { return epoch.Add(d) }

func (r *rig) buyIn(saleID, user string, q int, key string) (seckill.BuyResult, error) {
	return r.inv.Buy(r.ctx, seckill.BuyRequest{SaleID: saleID, UserID: user, Quantity: q, IdempotencyKey: key})
}

// buy must succeed with a new (not replayed) reservation of user.
func (r *rig) buy(user string, q int, key string) seckill.Reservation {
	r.t.Helper()
	return r.buyNew(r.sale.ID, user, q, key)
}

func (r *rig) buyNew(saleID, user string, q int, key string) seckill.Reservation {
	r.t.Helper()
	res, err := r.buyIn(saleID, user, q, key)
	if err != nil {
		r.t.Fatalf("Buy(%s, %s, q=%d, key=%q): %v", saleID, user, q, key, err)
	}
	if res.Replayed {
		r.t.Fatalf("Buy(%s, %s, q=%d, key=%q): Replayed = true for a new reservation", saleID, user, q, key)
	}
	got := res.Reservation
	if got.ID == "" || got.SaleID != saleID || got.UserID != user || got.Quantity != q || got.IdempotencyKey != key {
		r.t.Fatalf("Buy(%s, %s, q=%d, key=%q) = %+v: wrong id, sale, user, quantity or key", saleID, user, q, key, got)
	}
	return got
}

// buyFails must fail with code.
func (r *rig) buyFails(user string, q int, key string, code seckill.Code) {
	r.t.Helper()
	r.buyFailsIn(r.sale.ID, user, q, key, code)
}

func (r *rig) buyFailsIn(saleID, user string, q int, key string, code seckill.Code) {
	r.t.Helper()
	res, err := r.buyIn(saleID, user, q, key)
	if got := seckill.ErrorCode(err); got != code {
		r.t.Fatalf("Buy(%s, %s, q=%d, key=%q) = %+v, %v; want error %s", saleID, user, q, key, res, err, code)
	}
}

// replay must return the reservation with id, marked Replayed.
func (r *rig) replay(saleID, user string, q int, key, id string) seckill.Reservation {
	r.t.Helper()
	res, err := r.buyIn(saleID, user, q, key)
	if err != nil {
		r.t.Fatalf("replayed Buy(%s, %s, key=%q): %v", saleID, user, key, err)
	}
	if !res.Replayed || res.Reservation.ID != id {
		r.t.Fatalf("replayed Buy(%s, %s, key=%q) = %s (Replayed %v), want %s (Replayed true)", saleID, user, key, res.Reservation.ID, res.Replayed, id)
	}
	return res.Reservation
}

func ss(sellable, available, held, sold, queued int) seckill.StockState {
	return seckill.StockState{Sellable: sellable, Available: available, Held: held, Sold: sold, Queued: queued}
}

// state must be want (of the rig's sale).
func (r *rig) state(want seckill.StockState) {
	r.t.Helper()
	r.stateOf(r.sale.ID, want)
}

func (r *rig) stateOf(saleID string, want seckill.StockState) seckill.Sale {
	r.t.Helper()
	s, got, err := r.inv.Sale(r.ctx, saleID)
	if err != nil {
		r.t.Fatalf("Sale(%s): %v", saleID, err)
	}
	if got != want {
		r.t.Fatalf("Sale(%s) at %s: stock state %+v, want %+v", saleID, r.clock.Now().Sub(epoch), got, want)
	}
	return s
}

func (r *rig) get(id string) seckill.Reservation {
	r.t.Helper()
	got, err := r.inv.Reservation(r.ctx, id)
	if err != nil {
		r.t.Fatalf("Reservation(%s): %v", id, err)
	}
	if got.ID != id {
		r.t.Fatalf("Reservation(%s) returned id %q", id, got.ID)
	}
	return got
}

// expect checks a reservation as returned by a call: its status, the live position (only while
// queued) and the expiry (only while held; a zero exp skips the comparison).
func (r *rig) expect(what string, got seckill.Reservation, status seckill.ReservationStatus, pos int, exp time.Time) {
	r.t.Helper()
	if got.Status != status {
		r.t.Fatalf("%s: status %q, want %q (%+v)", what, got.Status, status, got)
	}
	switch {
	case status == seckill.StatusHeld && got.ExpiresAt == nil:
		r.t.Fatalf("%s: held without expires_at", what)
	case status == seckill.StatusHeld && !exp.IsZero() && !got.ExpiresAt.Equal(exp):
		r.t.Fatalf("%s: expires_at %s, want %s", what, got.ExpiresAt.Sub(epoch), exp.Sub(epoch))
	case status != seckill.StatusHeld && got.ExpiresAt != nil:
		r.t.Fatalf("%s: status %s with expires_at %s; expires_at is only shown while held", what, status, got.ExpiresAt)
	}
	if status != seckill.StatusQueued {
		pos = 0
	}
	if got.Position != pos {
		r.t.Fatalf("%s: position %d, want %d", what, got.Position, pos)
	}
}

// is reads reservation id and checks it like expect.
func (r *rig) is(id string, status seckill.ReservationStatus, pos int, exp time.Time) seckill.Reservation {
	r.t.Helper()
	got := r.get(id)
	r.expect("Reservation("+id+")", got, status, pos, exp)
	return got
}

func (r *rig) held(id string, exp time.Time) { r.t.Helper(); r.is(id, seckill.StatusHeld, 0, exp) }
func (r *rig) queued(id string, pos int) {
	r.t.Helper()
	r.is(id, seckill.StatusQueued, pos, time.Time{})
}
func (r *rig) status(id string, st seckill.ReservationStatus) {
	r.t.Helper()
	r.is(id, st, 0, time.Time{})
}

// cancel must succeed and return the reservation with status want.
func (r *rig) cancel(id, user string, want seckill.ReservationStatus) {
	r.t.Helper()
	got, err := r.inv.Cancel(r.ctx, id, user)
	if err != nil {
		r.t.Fatalf("Cancel(%s, %s): %v", id, user, err)
	}
	if got.ID != id {
		r.t.Fatalf("Cancel(%s, %s) returned reservation %q", id, user, got.ID)
	}
	r.expect("Cancel("+id+")", got, want, 0, time.Time{})
}

func (r *rig) cancelFails(id, user string, code seckill.Code) {
	r.t.Helper()
	got, err := r.inv.Cancel(r.ctx, id, user)
	if c := seckill.ErrorCode(err); c != code {
		r.t.Fatalf("Cancel(%s, %s) = %+v, %v; want error %s", id, user, got, err, code)
	}
}

// pay delivers a succeeded payment of amount for reservation id and requires result want.
func (r *rig) pay(pid, id string, amount int64, want seckill.PaymentResult) seckill.Reservation {
	r.t.Helper()
	return r.payIn(pid, id, amount, "", want)
}

// payIn is pay with the currency the gateway reported ("" for none).
func (r *rig) payIn(pid, id string, amount int64, currency string, want seckill.PaymentResult) seckill.Reservation {
	r.t.Helper()
	res, got, err := r.inv.ConfirmPayment(r.ctx, seckill.PaymentConfirmation{PaymentID: pid, ReservationID: id, AmountCents: amount, Currency: currency})
	if err != nil {
		r.t.Fatalf("ConfirmPayment(%s, %s, %d %s): %v", pid, id, amount, currency, err)
	}
	if res != want {
		r.t.Fatalf("ConfirmPayment(%s, %s, %d %s) at %s = %q (reservation %+v), want %q", pid, id, amount, currency, r.clock.Now().Sub(epoch), res, got, want)
	}
	if res.Paid() && (got.Status != seckill.StatusPaid || got.PaymentID != pid) {
		r.t.Fatalf("ConfirmPayment(%s, %s) = %s but the reservation is %s with payment %q", pid, id, res, got.Status, got.PaymentID)
	}
	return got
}

// payFull pays the full amount (quantity × 100) of res.
func (r *rig) payFull(pid string, res seckill.Reservation, want seckill.PaymentResult) seckill.Reservation {
	r.t.Helper()
	return r.pay(pid, res.ID, int64(res.Quantity)*price, want)
}
