package redisinv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/sqlstore"
)

// TestRedisWentBackInTime simulates a failover to a replica that lagged, deterministically, on
// one Redis: units are sold and paid, the sale's keys are snapshotted (DUMP), more units are
// sold and paid and stored in the database, then the snapshot is put back (RESTORE): the keys
// are present but older than what the instance and the database have seen. A detector then
// compares the engine with the database after more buyers came: every reservation the
// database has as paid or held must be so in the engine, the engine's sold units must not be
// below the database's, the counts must add up (docs/MODEL.md), and no unit may be sold twice.
//
// With the version check the first buy after the restore is refused unavailable and the sale is
// rebuilt from the database, both on the instance that saw the newer state and on a fresh
// instance (which compares with the database's recorded version once). The negative control
// switches the check off: the stale state is served and the detector must report it.
func TestRedisWentBackInTime(t *testing.T) {
	url := testenv.Redis(t)
	for _, tc := range []struct {
		name         string
		check, fresh bool
	}{
		{"instance that saw the newer state", true, false},
		{"fresh instance compares with the database", true, true},
		{"negative control: check off", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, stale, first := wentBack(t, url, tc.check, tc.fresh)
			if !tc.check {
				if len(problems) == 0 {
					t.Fatal("negative control: with the check off the stale state was not observed; the detector cannot fail")
				}
				t.Logf("negative control, detector: %v", problems)
				return
			}
			if seckill.ErrorCode(first) != seckill.CodeUnavailable {
				t.Errorf("first buy after Redis went back: %v; want unavailable (503), not a stale answer", first)
			}
			if stale == 0 {
				t.Error("no reply was found stale")
			}
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}

// wentBack runs the scenario and returns the detector's findings, how many replies the engine
// that served it refused as stale, and the error of the first buy after the restore.
func wentBack(t *testing.T, url string, check, fresh bool) (problems []string, stale int64, first error) {
	ctx := t.Context()
	c := dialT(t, url)
	store := sqliteStoreT(t)
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	now := clock.Now()
	const id = "tb"
	def, locks, prefix := versionRig(t, c, store, id, now)
	newEngine := func() *Engine {
		opts := []Option{WithTestClock(clock), WithPrefix(prefix), WithRebuild(store, locks)}
		if !check {
			opts = append(opts, withoutVersionCheck())
		}
		e := New(c.Inventory, opts...)
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	e := newEngine()
	if err := e.LoadSale(ctx, def, 0); err != nil {
		t.Fatal(err)
	}
	buy := func(e *Engine, user string) (seckill.Reservation, error) {
		r, err := e.Buy(ctx, seckill.BuyRequest{SaleID: id, UserID: user, Quantity: 1})
		return r.Reservation, err
	}
	mustBuy := func(user string) seckill.Reservation {
		t.Helper()
		r, err := buy(e, user)
		if err != nil || r.Status != seckill.StatusHeld {
			t.Fatalf("Buy(%s): %+v %v", user, r, err)
		}
		return r
	}
	pay := func(r seckill.Reservation) {
		t.Helper()
		pid := "pay-" + r.UserID
		res, rr, err := e.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: pid, ReservationID: r.ID, AmountCents: r.AmountCents})
		if err != nil || res != seckill.PaymentApplied {
			t.Fatalf("pay %s: %v %v", r.ID, res, err)
		}
		if got, err := store.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: pid, Reservation: rr,
			AmountCents: r.AmountCents, Result: res, At: clock.Now()}); err != nil || got != seckill.PaymentApplied {
			t.Fatalf("record payment %s: %v %v", r.ID, got, err)
		}
	}
	// drain stores the sale's stream in the database, as the consumer does (ApplyEvents is
	// idempotent, so the whole stream each time).
	drain := func() {
		t.Helper()
		entries, err := c.Inventory.Do(ctx, c.Inventory.B().Xrange().Key(e.streamKey(id)).Start("-").End("+").Build()).AsXRangeSlices()
		if err != nil {
			t.Fatal(err)
		}
		var evs []seckill.Event
		for _, en := range entries {
			for _, fv := range en.FieldValues {
				ev, err := decodeEvent(id, fv)
				if err != nil {
					t.Fatalf("decode %s: %v", en.ID, err)
				}
				evs = append(evs, ev)
			}
		}
		if err := store.ApplyEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}

	for _, u := range []string{"u1", "u2", "u3"} {
		pay(mustBuy(u))
	}
	drain()
	snap := dumpKeys(t, c.Inventory, e.keys(id))
	for _, u := range []string{"u4", "u5", "u6"} {
		pay(mustBuy(u))
	}
	mustBuy("u7")
	mustBuy("u8")
	drain()
	if v, err := store.SaleVersion(ctx, id); err != nil || v == 0 {
		t.Fatalf("the database recorded version %d (%v); want the stream's", v, err)
	}
	restoreKeys(t, c.Inventory, e.keys(id), snap) // Redis went back in time

	served := e
	if fresh {
		served = newEngine()
	}
	// More buyers, each trying until the sale answers (unavailable while it is rebuilt).
	var got []seckill.Reservation
	for i := 9; i <= 16; i++ {
		user := fmt.Sprintf("u%d", i)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := buy(served, user)
			if i == 9 && first == nil { // the first answer after the restore
				first = err
				if err == nil {
					first = errServed
				}
			}
			if err == nil {
				got = append(got, r)
				break
			}
			if seckill.ErrorCode(err) != seckill.CodeUnavailable || time.Now().After(deadline) {
				t.Fatalf("Buy(%s) after Redis went back: %v", user, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return detectStale(t, served, store, id, got), served.versions.stale.Load(), first
}

// The order store is a source of versions.
var _ VersionSource = (*sqlstore.Store)(nil)

// errServed marks a first buy that was answered (not refused) after Redis went back.
var errServed = fmt.Errorf("served")

// detectStale compares the engine with the database (see TestRedisWentBackInTime); more are
// the reservations the engine gave after Redis went back, which the database may not have yet.
func detectStale(t *testing.T, e *Engine, store *sqlstore.Store, id string, more []seckill.Reservation) []string {
	ctx := t.Context()
	var problems []string
	def, dbSold, err := store.Sale(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	dbRes, err := store.Reservations(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := e.Sale(ctx, id)
	if err != nil {
		t.Fatalf("Sale: %v", err)
	}
	if st.Available+st.Held+st.Sold != st.Sellable {
		problems = append(problems, fmt.Sprintf("engine counts do not add up: %+v", st))
	}
	if st.Sold < dbSold {
		problems = append(problems, fmt.Sprintf("engine sold %d < database sold %d", st.Sold, dbSold))
	}
	units := map[string]int{} // reservation -> units it holds or paid for, engine's or database's
	for _, r := range dbRes {
		if r.Status != seckill.StatusPaid && r.Status != seckill.StatusHeld {
			continue
		}
		units[r.ID] = r.Quantity
		er, err := e.Reservation(ctx, r.ID)
		if err != nil || er.Status != r.Status {
			problems = append(problems, fmt.Sprintf("database has %s %s, engine: %s %v", r.ID, r.Status, er.Status, err))
		}
	}
	for _, r := range more {
		if r.Status == seckill.StatusPaid || r.Status == seckill.StatusHeld {
			units[r.ID] = r.Quantity
		}
	}
	total := 0
	for _, q := range units {
		total += q
	}
	if total > def.Sellable() {
		problems = append(problems, fmt.Sprintf("oversold: %d units held or paid, %d sellable", total, def.Sellable()))
	}
	return problems
}

// dumpKeys is DUMP of each key (nil for a missing one).
func dumpKeys(t *testing.T, rdb rueidis.Client, keys []string) map[string]*string {
	t.Helper()
	out := map[string]*string{}
	for _, k := range keys {
		s, err := rdb.Do(t.Context(), rdb.B().Dump().Key(k).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			out[k] = nil
			continue
		}
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out[k] = &s
	}
	return out
}

// restoreKeys puts keys back as dumpKeys saw them (a missing one is deleted).
func restoreKeys(t *testing.T, rdb rueidis.Client, keys []string, snap map[string]*string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keys {
		if err := rdb.Do(ctx, rdb.B().Del().Key(k).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if v := snap[k]; v != nil {
			if err := rdb.Do(ctx, rdb.B().Restore().Key(k).Ttl(0).SerializedValue(*v).Replace().Build()).Error(); err != nil {
				t.Fatalf("RESTORE %s: %v", k, err)
			}
		}
	}
}

// TestDecodeEventVersion: an entry's version prefix is read into Event.Version, and an entry
// without one (written before versions existed) decodes with version 0.
func TestDecodeEventVersion(t *testing.T) {
	const body = "0123456789abcdef0123456789abcdef|held|u1|1|1|100|5|6|7|0|"
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"v42|" + body, 42, true},
		{body, 0, true},
		{"vx|" + body, 0, false},
		{"v|" + body, 0, false},
	} {
		ev, err := decodeEvent("s", rueidis.XRangeFieldValue{Field: "e", Value: tc.in})
		if (err == nil) != tc.ok || (err == nil && ev.Version != tc.want) {
			t.Errorf("decodeEvent(%q) = version %d, %v; want %d, ok %v", tc.in, ev.Version, err, tc.want, tc.ok)
		}
	}
}

// TestNextEpoch: a rebuild's version is above every version known, at a multiple of 2^32.
func TestNextEpoch(t *testing.T) {
	for _, tc := range [][2]uint64{{0, epoch}, {1, epoch}, {epoch - 1, epoch}, {epoch, 2 * epoch}, {2*epoch + 5, 3 * epoch}} {
		if got := nextEpoch(tc[0]); got != tc[1] {
			t.Errorf("nextEpoch(%d) = %d; want %d", tc[0], got, tc[1])
		}
	}
}

// TestLoadReplacesOnlyAStaleSale: load.lua in rebuild mode with a stale version replaces a
// present sale only while the sale's version is below it (a sale already rebuilt, or a false
// alarm, is left alone), and starts the replaced sale at the version given. Every state-changing
// call raises the version by one; reads do not.
func TestLoadReplacesOnlyAStaleSale(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	ctx := t.Context()
	clock := seckilltest.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	now := clock.Now()
	def, err := seckill.NewSale(seckill.SaleInput{ID: "ls", PriceCents: ptr(int64(1)), Stock: ptr(5), StartsAt: &now}, now)
	if err != nil {
		t.Fatal(err)
	}
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	e := New(c.Inventory, WithTestClock(clock), WithPrefix(prefix))
	t.Cleanup(func() { _ = e.Close() })
	if err := e.LoadSale(ctx, def, 0); err != nil {
		t.Fatal(err)
	}
	key := e.keys("ls")[0]
	ver := func() int64 { return rawState(t, c.Inventory, key)["ver"] }
	if v := ver(); v != 1 {
		t.Fatalf("new sale: version %d; want 1", v)
	}
	for _, u := range []string{"a", "b"} {
		if _, err := e.Buy(ctx, seckill.BuyRequest{SaleID: "ls", UserID: u, Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.Sale(ctx, "ls"); err != nil {
		t.Fatal(err)
	}
	if v := ver(); v != 3 {
		t.Fatalf("after two buys and a read: version %d; want 3", v)
	}
	load := func(stale string) string {
		t.Helper()
		r, err := e.execRaw(ctx, e.scripts.load, "ls", append(loadArgs(def, 0, "rebuild", "7-aa"), fmt.Sprint(epoch), stale)...)
		if err != nil {
			t.Fatal(err)
		}
		return r.code()
	}
	if code := load("3"); code != "conflict" || ver() != 3 {
		t.Fatalf("stale version 3 on a sale at 3: %s, version %d; want conflict and the sale untouched", code, ver())
	}
	if code := load("4"); code != "ok" || ver() != epoch || rawState(t, c.Inventory, key)["loading"] != 1 {
		t.Fatalf("stale version 4 on a sale at 3: %s, %v; want ok, version 2^32, loading", code, rawState(t, c.Inventory, key))
	}
}

// versionRig is what both going-back scenarios start from: sale id (10 units, 10-minute holds,
// a queue of 100) in store, the rebuild's locks on c, and a fresh key prefix dropped at the end.
func versionRig(t *testing.T, c *Clients, store *sqlstore.Store, id string, now time.Time) (seckill.Sale, *lock.Client, string) {
	t.Helper()
	def, err := seckill.NewSale(seckill.SaleInput{
		ID: id, PriceCents: ptr(int64(100)), Stock: ptr(10), HoldSeconds: ptr(600), StartsAt: &now,
		QueueLimit: ptr(100), Listed: ptr(false),
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateSale(t.Context(), def); err != nil {
		t.Fatal(err)
	}
	locks := lock.New(c.Locks, &lock.Options{Lease: time.Second})
	t.Cleanup(func() { _ = locks.Close() })
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	return def, locks, prefix
}
