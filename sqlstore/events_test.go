package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

var batchT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// randomEvent is an event for one of n reservations of sale "s", with everything an engine
// (or a confused one) could send varied: every status, times that go back and forth, identity
// fields that disagree with the first event of the reservation, a payment id on any status.
func randomEvent(rng *rand.Rand, n int) seckill.Event {
	i := rng.IntN(n)
	statuses := []seckill.ReservationStatus{seckill.StatusQueued, seckill.StatusHeld, seckill.StatusHeld,
		seckill.StatusCancelled, seckill.StatusExpired, seckill.StatusRejected, seckill.StatusPaid, seckill.StatusRefundRequired}
	q := 1 + rng.IntN(3)
	r := seckill.Reservation{
		ID: fmt.Sprintf("s-r%04d", i), SaleID: "s", UserID: fmt.Sprintf("u%d", i+rng.IntN(2)), Quantity: q,
		Status: statuses[rng.IntN(len(statuses))], AmountCents: int64(q) * 100,
		CreatedAt: batchT0.Add(time.Duration(rng.IntN(5)) * time.Millisecond), Seq: uint64(i + 1 + rng.IntN(2)),
		IdempotencyKey: []string{"", "k", "\xff\x00key"}[rng.IntN(3)],
	}
	if rng.IntN(4) == 0 {
		r.PaymentID = fmt.Sprintf("pay-%d", rng.IntN(3))
	}
	if r.Status == seckill.StatusHeld && rng.IntN(5) > 0 {
		e := batchT0.Add(time.Duration(rng.IntN(60000)) * time.Millisecond)
		r.ExpiresAt = &e
	}
	return seckill.Event{Reservation: r, At: batchT0.Add(time.Duration(rng.IntN(20)) * time.Millisecond)}
}

// storedRows returns every reservation row as stored, by id, and the sold count of sale "s".
func storedRows(t *testing.T, s *Store) ([]resRow, int) {
	t.Helper()
	rows, err := s.rdb.QueryContext(t.Context(), `SELECT `+resColumns+` FROM reservations ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []resRow
	for rows.Next() {
		var r resRow
		if err := r.scan(rows); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var sold int
	if err := s.rdb.QueryRowContext(t.Context(), s.q(`SELECT sold FROM sales WHERE id = ?`), "s").Scan(&sold); err != nil {
		t.Fatal(err)
	}
	return out, sold
}

// batchStores runs fn with two empty stores of each dialect (the server ones when their
// environment variables are set), each knowing sale "s", and the URL of the first.
func batchStores(t *testing.T, fn func(t *testing.T, a, b *Store, dsnA string)) {
	open := func(t *testing.T, fresh freshDB) {
		dsnA := fresh(t)
		a, b := openT(t, dsnA), openT(t, fresh(t))
		for _, s := range []*Store{a, b} {
			if err := s.CreateSale(t.Context(), testSale("s", 1_000_000, 0)); err != nil {
				t.Fatal(err)
			}
		}
		fn(t, a, b, dsnA)
	}
	t.Run("SQLite", func(t *testing.T) {
		open(t, func(*testing.T) string { return "sqlite://:memory:" })
	})
	t.Run("MySQL", func(t *testing.T) { open(t, func(t *testing.T) string { return freshMySQL(t) }) })
	t.Run("Postgres", func(t *testing.T) { open(t, func(t *testing.T) string { return freshPostgres(t) }) })
}

// TestApplyBatchMatchesOneByOne is the differential test of the set-wise path: random batches
// (repeated reservations within a batch, rows already stored, out-of-order times, payments in
// between, batches larger than one locking read or one INSERT) leave exactly the rows, every
// column of them, that applying the events one statement at a time leaves, and the set-wise
// path never needs its fallback when nothing runs concurrently.
func TestApplyBatchMatchesOneByOne(t *testing.T) {
	batchStores(t, func(t *testing.T, a, b *Store, _ string) {
		seed := time.Now().UnixNano()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		rounds := 40
		if testing.Short() {
			rounds = 10
		}
		fallbacks := 0
		defer func() {
			t.Logf("%d of %d batches started over, reading every row (a created row was there)", fallbacks, rounds)
		}()
		for round := range rounds {
			n, size := 40, 1+rng.IntN(60) // few reservations, so batches repeat them
			if round == 7 {
				n, size = 1200, 1500 // more than batchLockIDs ids and batchInsertRows new rows
			}
			events := make([]seckill.Event, size)
			for i := range events {
				events[i] = randomEvent(rng, n)
			}
			rows, err := a.eventRows(events)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := storedRows(t, a)
			err = a.inTx(t.Context(), func(tx *sql.Tx) error { return a.applyBatch(t.Context(), tx, rows, true) })
			if errors.Is(err, errBatchFallback) && redelivered(a, rows, before) {
				// The one case the set-wise path starts over with nothing running
				// concurrently, reading every row: what ApplyEvents does next.
				fallbacks++
				err = a.inTx(t.Context(), func(tx *sql.Tx) error { return a.applyBatch(t.Context(), tx, rows, false) })
			}
			if err != nil {
				t.Fatalf("round %d: applyBatch: %v", round, err)
			}
			if err := b.inTx(t.Context(), func(tx *sql.Tx) error { return b.applyOneByOne(t.Context(), tx, rows) }); err != nil {
				t.Fatalf("round %d: applyOneByOne: %v", round, err)
			}
			if rng.IntN(3) == 0 { // a payment makes a row final on both sides
				e := randomEvent(rng, n)
				e.Reservation.Status = seckill.StatusHeld
				p := seckill.PaymentRecord{PaymentID: fmt.Sprintf("p%d", round), Reservation: e.Reservation,
					AmountCents: e.Reservation.AmountCents, Result: seckill.PaymentApplied, At: e.At}
				ra, erra := a.RecordPayment(t.Context(), p)
				rb, errb := b.RecordPayment(t.Context(), p)
				if ra != rb || (erra == nil) != (errb == nil) {
					t.Fatalf("round %d: RecordPayment %s, %v and %s, %v", round, ra, erra, rb, errb)
				}
			}
			ga, sa := storedRows(t, a)
			gb, sb := storedRows(t, b)
			if !slices.Equal(ga, gb) || sa != sb {
				for i := range min(len(ga), len(gb)) {
					if ga[i] != gb[i] {
						t.Errorf("first difference: set-wise %+v, one by one %+v", ga[i], gb[i])
						break
					}
				}
				t.Fatalf("round %d: %d rows (sold %d) set-wise, %d rows (sold %d) one by one", round, len(ga), sa, len(gb), sb)
			}
		}
		// A rush: 333 new reservations, each created by its first event (most alone, some
		// followed by a later event in the batch), none of them stored: no fallback, every
		// prepared INSERT size used on MySQL (333 = 128 + 128 + 64 + 8 + 4 + 1).
		var rush []seckill.Event
		for i := range 333 {
			e := randomEvent(rng, 1)
			e.Reservation.ID = fmt.Sprintf("s-rush%04d", i)
			e.Reservation.Status = []seckill.ReservationStatus{seckill.StatusHeld, seckill.StatusQueued}[i%2]
			e.At = e.Reservation.CreatedAt
			rush = append(rush, e)
			if i%7 == 0 {
				later := randomEvent(rng, 1)
				later.Reservation.ID = e.Reservation.ID
				later.At = e.At.Add(time.Second)
				rush = append(rush, later)
			}
		}
		rows, err := a.eventRows(rush)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.inTx(t.Context(), func(tx *sql.Tx) error { return a.applyBatch(t.Context(), tx, rows, true) }); err != nil {
			t.Fatalf("rush: applyBatch: %v", err)
		}
		if err := b.inTx(t.Context(), func(tx *sql.Tx) error { return b.applyOneByOne(t.Context(), tx, rows) }); err != nil {
			t.Fatalf("rush: applyOneByOne: %v", err)
		}
		if ga, _ := storedRows(t, a); !slices.Equal(ga, mustStored(t, b)) {
			t.Fatal("rush: the set-wise path and the one-by-one path differ")
		}

		// ApplyEvents itself takes the set-wise path and agrees too.
		events := make([]seckill.Event, 300)
		for i := range events {
			events[i] = randomEvent(rng, 200)
		}
		if err := a.ApplyEvents(t.Context(), events); err != nil {
			t.Fatal(err)
		}
		rows, _ = b.eventRows(events)
		if err := b.inTx(t.Context(), func(tx *sql.Tx) error { return b.applyOneByOne(t.Context(), tx, rows) }); err != nil {
			t.Fatal(err)
		}
		ga, _ := storedRows(t, a)
		gb, _ := storedRows(t, b)
		if !slices.Equal(ga, gb) {
			t.Fatal("ApplyEvents and the one-by-one path differ")
		}
	})
}

func mustStored(t *testing.T, s *Store) []resRow {
	t.Helper()
	rows, _ := storedRows(t, s)
	return rows
}

// redelivered reports whether rows hold an event that insertWithoutRead sends straight to the
// INSERT for a reservation among stored: a creation event stored before.
func redelivered(s *Store, rows []resRow, stored []resRow) bool {
	ids := map[string]bool{}
	for _, r := range stored {
		ids[r.id] = true
	}
	for i, r := range rows {
		if (i == 0 || rows[i-1].id != r.id) && s.insertWithoutRead(r) && ids[r.id] {
			return true
		}
	}
	return false
}

// TestApplyBatchFallsBack: a reservation that another transaction inserts between the
// locking read and the INSERT, and an event for a sale the store does not know, are left to
// the one-by-one path, which merges the events into the row the other transaction wrote and
// names the event of the missing sale.
func TestApplyBatchFallsBack(t *testing.T) {
	batchStores(t, func(t *testing.T, a, _ *Store, dsn string) {
		ctx := t.Context()
		// insertReservations refuses to guess which rows an INSERT skipped.
		first := randomEvent(rand.New(rand.NewPCG(1, 2)), 1)
		first.Reservation.Status = seckill.StatusQueued
		if err := a.ApplyEvents(ctx, []seckill.Event{first}); err != nil {
			t.Fatal(err)
		}
		rows, _ := a.eventRows([]seckill.Event{first})
		err := a.inTx(ctx, func(tx *sql.Tx) error {
			var ins inserter
			defer ins.close()
			return a.insertReservations(ctx, tx, &ins, rows)
		})
		if !errors.Is(err, errBatchFallback) {
			t.Fatalf("inserting a stored row again: %v, want errBatchFallback", err)
		}

		// A buy's event stored twice (a consumer died between its commit and its
		// acknowledgement) with a later event of the same reservation: on a server database the
		// INSERT that skips the locking read finds the row, and the one-by-one path merges.
		bought := testRes("s", "s-again", "dave", 1, 4)
		boughtEv := seckill.Event{Reservation: bought, At: bought.CreatedAt}
		if err := a.ApplyEvents(ctx, []seckill.Event{boughtEv}); err != nil {
			t.Fatal(err)
		}
		cancelled := bought
		cancelled.Status, cancelled.ExpiresAt = seckill.StatusCancelled, nil
		cancelledEv := seckill.Event{Reservation: cancelled, At: bought.CreatedAt.Add(time.Second)}
		again, _ := a.eventRows([]seckill.Event{boughtEv, cancelledEv})
		if a.d.name != "sqlite" {
			err := a.inTx(ctx, func(tx *sql.Tx) error { return a.applyBatch(ctx, tx, again, true) })
			if !errors.Is(err, errBatchFallback) {
				t.Fatalf("a stored buy event again: applyBatch %v, want errBatchFallback", err)
			}
			// ApplyEvents' second attempt, reading every row first, needs no fallback.
			var second []resRow
			err = a.inTx(ctx, func(tx *sql.Tx) error {
				testHookBeforeInsert = func(fresh []resRow) { second = fresh }
				defer func() { testHookBeforeInsert = nil }()
				return a.applyBatch(ctx, tx, again, false)
			})
			if err != nil || len(second) != 0 {
				t.Fatalf("the attempt reading every row: %v, inserting %v; want the stored row merged", err, second)
			}
		}
		if err := a.ApplyEvents(ctx, []seckill.Event{boughtEv, cancelledEv}); err != nil {
			t.Fatal(err)
		}
		wantAgain := fold(mustRow(t, boughtEv), []resRow{mustRow(t, cancelledEv)})
		if got, err := a.lockReservationRO(ctx, "s-again"); err != nil || got != wantAgain || got.status != seckill.StatusCancelled {
			t.Fatalf("a stored buy event again, then a cancel: stored %+v, %v; want %+v", got, err, wantAgain)
		}

		// A missing sale: not_found, naming the reservation, and nothing of the batch stored.
		good := testRes("s", "s-a", "alice", 1, 1)
		ghost := testRes("ghost", "ghost-b", "bob", 1, 2)
		err = a.ApplyEvents(ctx, []seckill.Event{{Reservation: good, At: batchT0}, {Reservation: ghost, At: batchT0}})
		if seckill.ErrorCode(err) != seckill.CodeNotFound || !errorMentions(err, "ghost-b") {
			t.Fatalf("ApplyEvents with an unknown sale: %v; want not_found naming ghost-b", err)
		}
		if _, err := a.lockReservationRO(ctx, "s-a"); !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("a failed batch stored a reservation (%v)", err)
		}

		if a.d.name == "sqlite" {
			return // one writer at a time: no other transaction can insert in between
		}
		// A concurrent insert, through the other connection pool of a store on the same database.
		other := openT(t, dsn)
		held := testRes("s", "s-raced", "carol", 1, 3)
		heldEv := seckill.Event{Reservation: held, At: batchT0.Add(time.Second)}
		queuedEv := seckill.Event{Reservation: held, At: batchT0}
		queuedEv.Reservation.Status, queuedEv.Reservation.ExpiresAt = seckill.StatusQueued, nil
		expired := held
		expired.Status, expired.ExpiresAt = seckill.StatusExpired, nil
		expiredEv := seckill.Event{Reservation: expired, At: batchT0.Add(2 * time.Second)}
		testHookBeforeInsert = func(fresh []resRow) {
			testHookBeforeInsert = nil
			if err := other.ApplyEvents(ctx, []seckill.Event{heldEv}); err != nil {
				t.Errorf("concurrent insert: %v", err)
			}
		}
		defer func() { testHookBeforeInsert = nil }()
		if err := a.ApplyEvents(ctx, []seckill.Event{queuedEv, expiredEv}); err != nil {
			t.Fatal(err)
		}
		got, err := a.lockReservationRO(ctx, "s-raced")
		if err != nil {
			t.Fatal(err)
		}
		// held (the other transaction's) then queued (older: ignored) then expired (forward).
		want, _ := newResRow(held, heldEv.At)
		want, _ = merge(want, mustRow(t, queuedEv))
		want, _ = merge(want, mustRow(t, expiredEv))
		if got != want || got.status != seckill.StatusExpired {
			t.Fatalf("raced reservation stored as %+v, want %+v", got, want)
		}
	})
}

// creationEvent is the event that creates reservation s-c<i> of sale "s" with status st
// (held or queued): stamped at the moment the reservation was created.
func creationEvent(i int, st seckill.ReservationStatus) seckill.Event {
	r := testRes("s", fmt.Sprintf("s-c%04d", i), fmt.Sprintf("u%d", i), 1, uint64(i+1))
	r.Status, r.CreatedAt = st, batchT0.Add(time.Duration(i)*time.Millisecond)
	if st != seckill.StatusHeld {
		r.ExpiresAt = nil
	}
	return seckill.Event{Reservation: r, At: r.CreatedAt}
}

// TestApplyBatchCreationsFindStoredRows: a rush's creation events go to multi-row INSERTs
// without a read (on SQLite, INSERTs that fail on a stored id, the chunk then done row by row;
// on server databases, the attempt started over reading every row). Among 150 of them (on
// SQLite chunks of 64, 64, 16, 4 and 2), reservations stored already (paid by a payment that
// came first, cancelled, its creation stored before), duplicates within the batch and later
// events of some leave the rows of the one-by-one path; the stored rows are merged into, not
// overwritten (what an INSERT of them as new would write differs). On SQLite the batch needs
// no fallback. A creation event for an unknown sale among them is errBatchFallback, also in a
// chunk with a stored id, and ApplyEvents names it.
func TestApplyBatchCreationsFindStoredRows(t *testing.T) {
	batchStores(t, func(t *testing.T, a, b *Store, _ string) {
		ctx := t.Context()
		cancelled := creationEvent(70, seckill.StatusHeld)
		cancelled.Reservation.Status, cancelled.Reservation.ExpiresAt = seckill.StatusCancelled, nil
		cancelled.At = cancelled.At.Add(time.Second)
		before := []seckill.Event{creationEvent(5, seckill.StatusQueued), creationEvent(70, seckill.StatusHeld),
			cancelled, creationEvent(149, seckill.StatusHeld)}
		paid := creationEvent(40, seckill.StatusHeld).Reservation
		for _, s := range []*Store{a, b} {
			if err := s.ApplyEvents(ctx, before); err != nil {
				t.Fatal(err)
			}
			p := seckill.PaymentRecord{PaymentID: "p40", Reservation: paid, AmountCents: paid.AmountCents,
				Result: seckill.PaymentApplied, At: batchT0.Add(time.Second)}
			if _, err := s.RecordPayment(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		var batch []seckill.Event
		for i := range 150 {
			st := []seckill.ReservationStatus{seckill.StatusHeld, seckill.StatusQueued}[i%3/2]
			batch = append(batch, creationEvent(i, st))
			switch i {
			case 5: // queued, stored; granted its hold in this batch
				granted := creationEvent(i, seckill.StatusHeld)
				granted.At = granted.At.Add(time.Second)
				batch = append(batch, granted)
			case 10, 149: // the same creation twice (149: stored before too)
				batch = append(batch, creationEvent(i, st))
			case 11: // created and expired within the batch
				expired := creationEvent(i, seckill.StatusExpired)
				expired.At = expired.At.Add(time.Minute)
				batch = append(batch, expired)
			}
		}
		rows, err := a.eventRows(batch)
		if err != nil {
			t.Fatal(err)
		}
		err = a.inTx(ctx, func(tx *sql.Tx) error { return a.applyBatch(ctx, tx, rows, true) })
		if errors.Is(err, errBatchFallback) && a.d.name != sqliteDialect.name {
			err = a.inTx(ctx, func(tx *sql.Tx) error { return a.applyBatch(ctx, tx, rows, false) })
		}
		if err != nil {
			t.Fatalf("applyBatch: %v", err)
		}
		if err := b.inTx(ctx, func(tx *sql.Tx) error { return b.applyOneByOne(ctx, tx, rows) }); err != nil {
			t.Fatalf("applyOneByOne: %v", err)
		}
		ga, sa := storedRows(t, a)
		gb, sb := storedRows(t, b)
		if !slices.Equal(ga, gb) || sa != sb || len(ga) != 150 {
			t.Fatalf("%d rows (sold %d) set-wise, %d rows (sold %d) one by one; want 150 rows, equal", len(ga), sa, len(gb), sb)
		}
		for id, want := range map[string]seckill.ReservationStatus{"s-c0005": seckill.StatusHeld,
			"s-c0040": seckill.StatusPaid, "s-c0070": seckill.StatusCancelled, "s-c0011": seckill.StatusExpired} {
			got, err := a.lockReservationRO(ctx, id)
			if err != nil || got.status != want {
				t.Fatalf("%s stored as %+v, %v; want %s", id, got, err, want)
			}
		}

		// An unknown sale among the creations, alone in its chunk with new ids, and with a
		// stored id: nothing stored, the one-by-one path names the event.
		for _, with := range []int{-1, 149} {
			ghost := creationEvent(500, seckill.StatusHeld)
			ghost.Reservation.ID, ghost.Reservation.SaleID = "ghost-r1", "ghost"
			var events []seckill.Event
			for i := 200; i < 260; i++ {
				events = append(events, creationEvent(i, seckill.StatusHeld))
			}
			events = append(events, ghost)
			if with >= 0 {
				events = append(events, creationEvent(with, seckill.StatusHeld))
			}
			rows, err := a.eventRows(events)
			if err != nil {
				t.Fatal(err)
			}
			err = a.inTx(ctx, func(tx *sql.Tx) error { return a.applyBatch(ctx, tx, rows, true) })
			if !errors.Is(err, errBatchFallback) {
				t.Fatalf("an unknown sale (with stored id %d): applyBatch %v, want errBatchFallback", with, err)
			}
			err = a.ApplyEvents(ctx, events)
			if seckill.ErrorCode(err) != seckill.CodeNotFound || !errorMentions(err, "ghost-r1") {
				t.Fatalf("ApplyEvents with an unknown sale: %v; want not_found naming ghost-r1", err)
			}
			if got := mustStored(t, a); !slices.Equal(got, ga) {
				t.Fatalf("a failed batch changed the rows: %d rows, had %d", len(got), len(ga))
			}
		}
	})
}

// TestPreparedInsertsNeedNoSecondConnection: on MySQL the INSERTs of a batch are statements
// prepared when the store opened, so a batch's transaction never waits for a second
// connection to prepare one, even with a pool of one (when each was prepared on first use,
// from inside the transaction, this hung until the deadline).
func TestPreparedInsertsNeedNoSecondConnection(t *testing.T) {
	s := openT(t, freshMySQL(t))
	if err := s.CreateSale(t.Context(), testSale("s", 1_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	s.db.SetMaxOpenConns(1)
	var events []seckill.Event
	for i := range 255 { // every size from 128 down to 1
		r := testRes("s", fmt.Sprintf("s-p%03d", i), fmt.Sprintf("u%d", i), 1, uint64(i+1))
		events = append(events, seckill.Event{Reservation: r, At: r.CreatedAt})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.ApplyEvents(ctx, events); err != nil {
		t.Fatalf("ApplyEvents with a pool of one connection: %v", err)
	}
	if rows := mustStored(t, s); len(rows) != 255 {
		t.Fatalf("%d rows stored, want 255", len(rows))
	}
}

func mustRow(t *testing.T, e seckill.Event) resRow {
	t.Helper()
	r, err := newResRow(e.Reservation, e.At)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func errorMentions(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}

// lockReservationRO reads one reservation row outside any transaction.
func (s *Store) lockReservationRO(ctx context.Context, id string) (resRow, error) {
	var r resRow
	err := r.scan(s.rdb.QueryRowContext(ctx, s.q(`SELECT `+resColumns+` FROM reservations WHERE id = ?`), id))
	return r, err
}
