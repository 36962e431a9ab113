package redisinv

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/seckilltest"
)

// fakeSource is the database as a rebuild sees it.
type fakeSource struct {
	mu    sync.Mutex
	sale  seckill.Sale
	sold  int
	res   []seckill.Reservation
	err   error
	reads atomic.Int64 // Reservations calls
	sales atomic.Int64 // Sale calls
}

func (f *fakeSource) Sale(_ context.Context, id string) (seckill.Sale, int, error) {
	f.sales.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return seckill.Sale{}, 0, f.err
	}
	if id != f.sale.ID {
		return seckill.Sale{}, 0, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", id)
	}
	return f.sale, f.sold, nil
}

func (f *fakeSource) Reservations(_ context.Context, saleID string, statuses ...seckill.ReservationStatus) ([]seckill.Reservation, error) {
	f.reads.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []seckill.Reservation
	for _, r := range f.res {
		if len(statuses) == 0 || slices.Contains(statuses, r.Status) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeSource) Reservation(_ context.Context, id string) (seckill.Reservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return seckill.Reservation{}, f.err
	}
	for _, r := range f.res {
		if r.ID == id {
			return r, nil
		}
	}
	return seckill.Reservation{}, seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
}

// waitReady polls Sale until the rebuilt sale answers (or fails the test after 5 s).
func waitReady(t *testing.T, e *Engine, id string) (seckill.Sale, seckill.StockState) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, st, err := e.Sale(t.Context(), id)
		if err == nil {
			return s, st
		}
		if seckill.ErrorCode(err) != seckill.CodeUnavailable || time.Now().After(deadline) {
			t.Fatalf("Sale(%s) while rebuilding: %v; want unavailable, then the sale", id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRebuildAfterKeysVanish: a sale whose keys are gone (a flushed Redis) answers unavailable
// on every instance until one of them has rebuilt it from the database, with the database's
// sold units, its held reservations (and their expiry), its queue in order and its
// idempotency keys; then it sells the rest.
func TestRebuildAfterKeysVanish(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	now := clock.Now()
	def, err := seckill.NewSale(seckill.SaleInput{
		ID: "rb", PriceCents: ptr(int64(100)), Stock: ptr(5), HoldSeconds: ptr(10), StartsAt: &now,
		Listed: ptr(false), Currency: ptr("eur"),
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	locks := lock.New(c.Locks, &lock.Options{Lease: time.Second})
	t.Cleanup(func() { _ = locks.Close() })
	src := &fakeSource{sale: def}
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	engines := make([]*Engine, 4)
	for i := range engines {
		engines[i] = New(c.Inventory, WithTestClock(clock), WithPrefix(prefix), WithRebuild(src, locks))
		t.Cleanup(func() { _ = engines[i].Close() })
	}
	a := engines[0]
	ctx := t.Context()
	if err := a.LoadSale(ctx, def, 0); err != nil {
		t.Fatal(err)
	}
	buy := func(e *Engine, user, key string) seckill.Reservation {
		t.Helper()
		r, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "rb", UserID: user, Quantity: 1, IdempotencyKey: key})
		if err != nil {
			t.Fatalf("Buy(%s): %v", user, err)
		}
		return r.Reservation
	}
	var held []seckill.Reservation
	for _, u := range []string{"u1", "u2", "u3", "u4", "u5"} {
		held = append(held, buy(a, u, "k-"+u))
	}
	q1, q2 := buy(a, "u6", ""), buy(a, "u7", "")
	if res, _, err := a.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: "p1", ReservationID: held[0].ID, AmountCents: 100}); err != nil || res != seckill.PaymentApplied {
		t.Fatalf("pay: %v %v", res, err)
	}
	paid, _ := a.Reservation(ctx, held[0].ID)

	// What the database knew when Redis lost everything: the paid one (synchronously), the
	// holds and the queue (from events), but not u5's hold, whose event never arrived.
	src.mu.Lock()
	src.sold = 1
	src.res = []seckill.Reservation{paid, held[1], held[2], held[3], q1, q2}
	src.mu.Unlock()
	dropPrefix(t, c.Inventory, prefix)

	// Every instance answers a read unavailable (a buy would wait for the rebuild: see
	// TestTouchedSaleFirst), and the rebuild runs once.
	var wg sync.WaitGroup
	for _, e := range engines {
		wg.Go(func() {
			_, _, err := e.Sale(ctx, "rb")
			if c := seckill.ErrorCode(err); c != seckill.CodeUnavailable && err != nil {
				t.Errorf("Sale during the rebuild: %v; want unavailable", err)
			}
		})
	}
	wg.Wait()
	rebuilt, st := waitReady(t, engines[3], "rb")
	if rebuilt.Listed || rebuilt.Currency != "eur" {
		t.Fatalf("rebuilt sale: listed %v, currency %q; want the source's false, eur", rebuilt.Listed, rebuilt.Currency)
	}
	// The free unit went to the head of the restored queue when the rebuild finished.
	if want := (seckill.StockState{Sellable: 5, Available: 0, Held: 4, Sold: 1, Queued: 1}); st != want {
		t.Fatalf("rebuilt state %+v, want %+v", st, want)
	}
	if n := src.reads.Load(); n < 1 {
		t.Fatalf("the source was read %d times", n)
	}
	if r, err := a.Reservation(ctx, held[1].ID); err != nil || r.Status != seckill.StatusHeld || !r.ExpiresAt.Equal(*held[1].ExpiresAt) {
		t.Fatalf("restored hold %+v, %v; want held until %s", r, err, held[1].ExpiresAt)
	}
	if r, err := a.Reservation(ctx, q1.ID); err != nil || r.Status != seckill.StatusHeld || !r.ExpiresAt.Equal(clock.Now().Add(10*time.Second)) {
		t.Fatalf("head of the restored queue %+v, %v; want held from the rebuild on", r, err)
	}
	if r, err := a.Reservation(ctx, q2.ID); err != nil || r.Status != seckill.StatusQueued || r.Position != 1 {
		t.Fatalf("restored queued %+v, %v; want position 1", r, err)
	}
	if r, err := a.Buy(ctx, seckill.BuyRequest{SaleID: "rb", UserID: "u2", Quantity: 1, IdempotencyKey: "k-u2"}); err != nil || !r.Replayed || r.Reservation.ID != held[1].ID {
		t.Fatalf("replay after the rebuild = %+v, %v; want %s replayed", r, err, held[1].ID)
	}
	// u5's hold is gone (the database never heard of it): its unit went to the queue's head.
	if r, err := a.Reservation(ctx, held[4].ID); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("a hold the database never knew = %+v, %v; want not_found", r, err)
	}
	r := buy(a, "u8", "")
	if r.Status != seckill.StatusQueued || r.Position != 2 {
		t.Fatalf("new buyer after the rebuild: %+v; want queued second", r)
	}
	clock.Advance(10 * time.Second) // every hold expires: units go to the queue in order
	for _, want := range []struct {
		id string
		st seckill.ReservationStatus
	}{{q1.ID, seckill.StatusExpired}, {q2.ID, seckill.StatusHeld}, {r.ID, seckill.StatusHeld}, {held[1].ID, seckill.StatusExpired}} {
		if got, err := a.Reservation(ctx, want.id); err != nil || got.Status != want.st {
			t.Fatalf("after the holds expired: %s = %+v, %v; want %s", want.id, got, err, want.st)
		}
	}
}

// TestRebuildFencing: a rebuild that lost its lock to a newer one cannot touch the sale.
func TestRebuildFencing(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	e := newTestEngine(t, c.Inventory, clock)
	now := clock.Now()
	def, _ := seckill.NewSale(seckill.SaleInput{ID: "fx", PriceCents: ptr(int64(1)), Stock: ptr(3), StartsAt: &now}, now)
	ctx := t.Context()
	load := func(token string) string {
		r, err := e.execRaw(ctx, e.scripts.load, "fx", loadArgs(def, 0, "rebuild", token)...)
		if err != nil {
			t.Fatal(err)
		}
		return r.code()
	}
	if got := load("1-aa"); got != "ok" {
		t.Fatalf("first rebuild load: %s", got)
	}
	if got := load("2-bb"); got != "ok" {
		t.Fatalf("a newer rebuild takes over a sale still loading: %s", got)
	}
	if got := load("1-cc"); got != "fenced" {
		t.Fatalf("an older rebuild (lower lock token) after a newer one took over: %s; want fenced", got)
	}
	res := seckill.Reservation{ID: seckill.ReservationID("fx", make([]byte, 16)), SaleID: "fx", UserID: "u1",
		Quantity: 1, Status: seckill.StatusPaid, AmountCents: 1, Seq: 1}
	args, err := restoreArgs(res, "1-aa")
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.execRaw(ctx, e.scripts.restore, "fx", args...)
	if err != nil || !errors.Is(restoreResult(res.ID, r), errFenced) {
		t.Fatalf("restore by the old rebuild = %v, %v; want fenced", r.code(), err)
	}
	if r, err := e.execRaw(ctx, e.scripts.ready, "fx", "1-aa"); err != nil || r.code() != "fenced" {
		t.Fatalf("ready by the old rebuild = %v, %v; want fenced", r.code(), err)
	}
	if _, _, err := e.Sale(ctx, "fx"); seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("Sale while loading = %v; want unavailable", err)
	}
	if r, err := e.execRaw(ctx, e.scripts.ready, "fx", "2-bb"); err != nil || r.code() != "ok" {
		t.Fatalf("ready by the new rebuild = %v, %v", r.code(), err)
	}
	if got := load("3-cc"); got != "conflict" {
		t.Fatalf("a rebuild after the sale is ready: %s; want conflict (nothing to do)", got)
	}
	if _, st, err := e.Sale(ctx, "fx"); err != nil || st.Available != 3 {
		t.Fatalf("Sale after the rebuild = %+v, %v", st, err)
	}
}

// TestRebuildUnknownOrUnreadable: a sale missing from Redis and from the database is not
// found; when the database cannot be read, the answer is unavailable, never a guess.
func TestRebuildUnknownOrUnreadable(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	locks := lock.New(c.Locks, nil)
	t.Cleanup(func() { _ = locks.Close() })
	src := &fakeSource{sale: seckill.Sale{ID: "known"}}
	e := newTestEngine(t, c.Inventory, seckill.SystemClock{}, WithRebuild(src, locks))
	ctx := t.Context()
	if _, _, err := e.Sale(ctx, "unknown"); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("Sale(unknown) = %v; want not_found", err)
	}
	if res, r, err := e.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: "p", ReservationID: seckill.ReservationID("unknown", make([]byte, 16)), AmountCents: 1}); err != nil || res != seckill.PaymentRefundRequired || r.ID != "" {
		t.Fatalf("payment for a sale nobody knows = %s, %+v, %v; want refund_required", res, r, err)
	}
	src.mu.Lock()
	src.err = errors.New("database down")
	src.mu.Unlock()
	if _, _, err := e.Sale(ctx, "known"); seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("Sale with the database down = %v; want unavailable", err)
	}
	if _, _, err := e.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: "p", ReservationID: seckill.ReservationID("known", make([]byte, 16)), AmountCents: 1}); seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("payment while the sale cannot be restored = %v; want unavailable (the gateway retries)", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestMissingHotSaleReadAsksOnce: a read of a hot sale whose keys are missing asks the database
// for the sale twice in all: once to find it hot (coldOf), once for the rebuild that puts it
// back; not a third time to learn that it exists, which coldOf has just shown. (Before, it
// asked three times; a change, which coldOf does not see, still asks before its rebuild.)
func TestMissingHotSaleReadAsksOnce(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	now := clock.Now()
	def, err := seckill.NewSale(seckill.SaleInput{ID: "hot", PriceCents: ptr(int64(100)), Stock: ptr(5), StartsAt: &now}, now)
	if err != nil {
		t.Fatal(err)
	}
	locks := lock.New(c.Locks, nil)
	t.Cleanup(func() { _ = locks.Close() })
	src := &fakeSource{sale: def}
	e := newTestEngine(t, c.Inventory, clock, WithRebuild(src, locks))
	waitReady(t, e, "hot") // the reads while it is rebuilt find it in coldOf's cache
	if n := src.sales.Load(); n != 2 {
		t.Fatalf("the read asked the database for the sale %d times; want 2 (coldOf, the rebuild)", n)
	}
}

// TestRebuildFailureBacksOff: a sale the database has but the scripts refuse (here a start
// before 1970, stored before sale times were bounded) cannot be rebuilt, however often it is
// tried. Calls on it answer unavailable, the rebuild is retried with a growing delay rather
// than on every call (the sweeper calls four times a second), and the failure is logged once.
func TestRebuildFailureBacksOff(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	locks := lock.New(c.Locks, nil)
	t.Cleanup(func() { _ = locks.Close() })
	start := time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)
	src := &fakeSource{sale: seckill.Sale{ID: "pre1970", Name: "x", PriceCents: 1, Stock: 1, StartsAt: start,
		EndsAt: start.Add(time.Hour), PerUserLimit: 1, HoldSeconds: 60, CreatedAt: start}}
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	e := newTestEngine(t, c.Inventory, seckill.SystemClock{}, WithRebuild(src, locks), WithLogger(log))
	deadline := time.Now().Add(time.Second)
	calls := 0
	for time.Now().Before(deadline) {
		// A restock, not a read or a buy: the sale ended long ago, so those are answered from
		// the database (a cold sale, cold.go) and rebuild nothing; a change needs it loaded.
		if _, _, err := e.AddStock(t.Context(), "pre1970", 1); seckill.ErrorCode(err) != seckill.CodeUnavailable {
			t.Fatalf("AddStock in a sale that cannot be rebuilt = %v; want unavailable", err)
		}
		calls++
		time.Sleep(10 * time.Millisecond)
	}
	// Retries at 0.25, 0.75 s and then 1.75 s after the first failure: at most 3 attempts in the
	// second of calls (a slow machine makes fewer), where one per call would be ~100.
	if n := src.reads.Load(); n < 1 || n > 3 {
		t.Fatalf("%d calls in 1 s started %d rebuilds; want 1 to 3 (backoff)", calls, n)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Fatalf("the failing rebuild logged %d errors; want exactly one:\n%s", n, logs.String())
	}
}

// lockedWriter serializes writes to a buffer shared with the test.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
