package sqlstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
)

// The retention calls (retention.go) on every dialect: each bound trims oldest first, never
// more than its batch, counts what nobody had, and touches nothing but its own table.

// untouched are the tables retention must never change: orders, money, the sale's
// bookkeeping and the export's cursors.
var untouched = []string{"sales", "reservations", "payments", "refunds", "gateway_payments", "sale_versions", "export_cursors"}

// retentionRig is a store with 11 outbox entries (seqs in the order of their at: ten held
// events a minute apart from testT0+1m, then the refund_required of a payment at testT0+11m),
// and a payment with its refund.
type retentionRig struct {
	s      *Store
	seqs   []int64          // every outbox seq, oldest first
	others map[string]int64 // rows of each untouched table before any trim
}

func newRetentionRig(t *testing.T, dsn string) *retentionRig {
	t.Helper()
	ctx := t.Context()
	s := openT(t, dsn)
	s.EnableOutbox()
	if err := s.CreateSale(ctx, testSale("s", 0, 0)); err != nil {
		t.Fatal(err)
	}
	var first seckill.Reservation
	for i := 1; i <= 10; i++ {
		r := testRes("s", fmt.Sprintf("s-r%d", i), fmt.Sprintf("u%d", i), 1, uint64(i))
		if i == 1 {
			first = r
		}
		if err := s.ApplyEvents(ctx, []seckill.Event{{Reservation: r, At: testT0.Add(time.Duration(i) * time.Minute)}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: "p1", Reservation: first, AmountCents: testPrice,
		Result: seckill.PaymentApplied, At: testT0.Add(11 * time.Minute)})
	if err != nil || got != seckill.PaymentRefundRequired {
		t.Fatalf("RecordPayment = %s, %v; want refund_required (no stock)", got, err)
	}
	rig := &retentionRig{s: s, seqs: rig0Seqs(t, s)}
	if len(rig.seqs) != 11 {
		t.Fatalf("the rig's outbox holds %d entries; want 11", len(rig.seqs))
	}
	// Two cursors: "slow" at the fourth entry, leased an hour after testT0 (a sink being
	// exported), and "gone" at the first, last leased two days before testT0 (a sink removed
	// from the configuration).
	rig.cursor(t, "gone", rig.seqs[0], testT0.Add(-48*time.Hour), false)
	rig.cursor(t, "slow", rig.seqs[3], testT0.Add(time.Hour), false)
	rig.others = rig.count(t)
	if rig.others["payments"] != 1 || rig.others["refunds"] != 1 || rig.others["reservations"] != 10 || rig.others["export_cursors"] != 2 {
		t.Fatalf("the rig's tables hold %v", rig.others)
	}
	return rig
}

func rig0Seqs(t *testing.T, s *Store) []int64 {
	t.Helper()
	got, err := s.ReadOutbox(t.Context(), 0, maxOutboxList)
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]int64, len(got))
	for i, e := range got {
		seqs[i] = e.Seq
	}
	return seqs
}

// cursor sets sink's position, leased at now; release ends the lease as a clean stop does.
func (r *retentionRig) cursor(t *testing.T, sink string, pos int64, now time.Time, release bool) {
	t.Helper()
	ctx := t.Context()
	if _, ok, err := r.s.ClaimExportCursor(ctx, sink, "owner-"+sink, now, time.Minute); err != nil || !ok {
		t.Fatalf("ClaimExportCursor(%s) = %v, %v", sink, ok, err)
	}
	if err := r.s.SaveExportCursor(ctx, sink, "owner-"+sink, pos, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	if release {
		if err := r.s.ReleaseExportCursor(ctx, sink, "owner-"+sink); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *retentionRig) count(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range untouched {
		var n int64
		if err := r.s.db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

// kept is the detector: an error unless the outbox holds exactly the seqs want and every
// untouched table as many rows as before.
func (r *retentionRig) kept(t *testing.T, want []int64) error {
	t.Helper()
	if got := rig0Seqs(t, r.s); !slices.Equal(got, want) {
		return fmt.Errorf("the outbox holds seqs %v; want %v", got, want)
	}
	for table, n := range r.count(t) {
		if n != r.others[table] {
			return fmt.Errorf("%s holds %d rows; it held %d before the trim: retention touched it", table, n, r.others[table])
		}
	}
	return nil
}

func TestRetentionOutboxOverCount(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		r := newRetentionRig(t, fresh(t))
		ctx := t.Context()
		readers := testT0 // "slow" was leased after it, "gone" before
		// Keep the newest 3 of 11: 8 go, oldest first, 3 per call; of them, those after
		// "slow"'s position (the 5th to the 8th) are lost to it.
		var deleted, lost int64
		for i, want := range []struct{ n, lost int64 }{{3, 0}, {3, 2}, {2, 2}, {0, 0}} {
			n, l, err := r.s.TrimOutboxOverCount(ctx, 3, readers, 3)
			if err != nil || n != want.n || l != want.lost {
				t.Fatalf("call %d: TrimOutboxOverCount(3) = %d, %d lost, %v; want %d, %d lost", i+1, n, l, err, want.n, want.lost)
			}
			deleted, lost = deleted+n, lost+l
			if err := r.kept(t, r.seqs[deleted:]); err != nil {
				t.Fatalf("after call %d: %v", i+1, err)
			}
		}
		if deleted != 8 || lost != 4 {
			t.Fatalf("deleted %d, lost %d; want 8, 4", deleted, lost)
		}
		if rows, err := r.s.OutboxRows(ctx); err != nil || rows != 3 {
			t.Fatalf("OutboxRows = %d, %v; want 3", rows, err)
		}
		// With no reader leased since (readers after every lease), nothing counts as lost.
		n, l, err := r.s.TrimOutboxOverCount(ctx, 1, testT0.Add(2*time.Hour), 10)
		if err != nil || n != 2 || l != 0 {
			t.Fatalf("TrimOutboxOverCount(1) without readers = %d, %d lost, %v; want 2, 0", n, l, err)
		}
		if err := r.kept(t, r.seqs[10:]); err != nil {
			t.Fatal(err)
		}
		// Negative control: the detector sees one entry too many trimmed...
		if _, err := r.s.db.ExecContext(ctx, `DELETE FROM export_outbox`); err != nil {
			t.Fatal(err)
		}
		if err := r.kept(t, r.seqs[10:]); err == nil {
			t.Fatal("the detector did not see an outbox trimmed past its bound")
		}
		// ...and a row of another table gone.
		if _, err := r.s.db.ExecContext(ctx, `DELETE FROM export_cursors WHERE sink = 'gone'`); err != nil {
			t.Fatal(err)
		}
		if err := r.kept(t, nil); err == nil {
			t.Fatal("the detector did not see a cursor deleted")
		}
	})
}

func TestRetentionOutboxByAgeKeepsWhatASinkHasNot(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		r := newRetentionRig(t, fresh(t))
		ctx := t.Context()
		// Entries before testT0+8m are old (the first seven), but "slow" has only the first
		// four: those go, two per call; "gone" (last leased before testT0) holds nothing back.
		for i, want := range []int64{2, 2, 0} {
			n, err := r.s.TrimOutboxAcknowledged(ctx, testT0.Add(8*time.Minute), testT0, 2)
			if err != nil || n != want {
				t.Fatalf("call %d: TrimOutboxAcknowledged = %d, %v; want %d", i+1, n, err, want)
			}
		}
		if err := r.kept(t, r.seqs[4:]); err != nil {
			t.Fatal(err)
		}
		// A clean stop releases "slow"'s lease: it is still a reader (its lease is dated).
		r.cursor(t, "slow", r.seqs[5], testT0.Add(time.Hour), true)
		if n, err := r.s.TrimOutboxAcknowledged(ctx, testT0.Add(8*time.Minute), testT0, 100); err != nil || n != 2 {
			t.Fatalf("TrimOutboxAcknowledged after a release = %d, %v; want 2 (up to slow's position)", n, err)
		}
		r.others = r.count(t) // the cursor's move is the test's
		if err := r.kept(t, r.seqs[6:]); err != nil {
			t.Fatal(err)
		}
		// Once no reader was leased since, every old entry goes, and only the old ones.
		if n, err := r.s.TrimOutboxAcknowledged(ctx, testT0.Add(8*time.Minute), testT0.Add(2*time.Hour), 100); err != nil || n != 1 {
			t.Fatalf("TrimOutboxAcknowledged without readers = %d, %v; want 1", n, err)
		}
		if err := r.kept(t, r.seqs[7:]); err != nil {
			t.Fatal(err)
		}
		// Negative control: the detector sees an entry a reader had not acknowledged trimmed.
		if _, err := r.s.TrimOutbox(ctx, testT0.Add(9*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := r.kept(t, r.seqs[7:]); err == nil {
			t.Fatal("the detector did not see an entry past the age bound trimmed")
		}
	})
}

func TestRetentionDeadLetters(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		r := newRetentionRig(t, fresh(t))
		ctx := t.Context()
		s := r.s
		// Ten dead letters, a minute apart; the first two replayed.
		for i := 1; i <= 10; i++ {
			ev := events.Event{ID: fmt.Sprintf("d%d:held", i), Type: events.TypeHeld, SaleID: "s", At: testT0}
			if err := s.AddDeadLetters(ctx, "https://sink.example/hook", []events.Event{ev}, "refused", testT0.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		ids := deadIDs(t, s)
		if len(ids) != 10 {
			t.Fatalf("%d dead letters; want 10", len(ids))
		}
		if err := s.MarkDeadLettersReplayed(ctx, ids[:2], testT0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		r.others = r.count(t)
		check := func(want []int64) error {
			if got := deadIDs(t, s); !slices.Equal(got, want) {
				return fmt.Errorf("dead letters %v; want %v", got, want)
			}
			return r.kept(t, r.seqs)
		}
		// Count: keep the newest 7 (3 go); age: before testT0+5m (the first four). Four go,
		// oldest first, three per call; two of them were never replayed.
		var deleted, unreplayed int64
		for i, want := range []int64{3, 1, 0} {
			n, u, err := s.TrimDeadLetters(ctx, testT0.Add(5*time.Minute), 7, 3)
			if err != nil || n != want {
				t.Fatalf("call %d: TrimDeadLetters = %d, %d, %v; want %d", i+1, n, u, err, want)
			}
			deleted, unreplayed = deleted+n, unreplayed+u
			if err := check(ids[deleted:]); err != nil {
				t.Fatalf("after call %d: %v", i+1, err)
			}
		}
		if unreplayed != 2 {
			t.Fatalf("%d unreplayed deleted; want 2", unreplayed)
		}
		// The count alone: keep 2 of the 6 left.
		if n, u, err := s.TrimDeadLetters(ctx, testT0, 2, 100); err != nil || n != 4 || u != 4 {
			t.Fatalf("TrimDeadLetters(keep 2) = %d, %d, %v; want 4, 4", n, u, err)
		}
		if err := check(ids[8:]); err != nil {
			t.Fatal(err)
		}
		if rows, err := s.DeadLetterRows(ctx); err != nil || rows != 2 {
			t.Fatalf("DeadLetterRows = %d, %v; want 2", rows, err)
		}
		// Negative control: one more gone is seen.
		if _, _, err := s.TrimDeadLetters(ctx, testT0, 1, 100); err != nil {
			t.Fatal(err)
		}
		if err := check(ids[8:]); err == nil {
			t.Fatal("the detector did not see a dead letter trimmed past its bound")
		}
	})
}

func TestRetentionRefusesBadBounds(t *testing.T) {
	s := openT(t, "sqlite://:memory:")
	ctx := t.Context()
	if _, _, err := s.TrimOutboxOverCount(ctx, 0, testT0, 10); err == nil {
		t.Error("TrimOutboxOverCount with a bound of 0: no error")
	}
	if _, _, err := s.TrimDeadLetters(ctx, testT0, 0, 10); err == nil {
		t.Error("TrimDeadLetters with a bound of 0: no error")
	}
	if _, err := s.TrimOutboxAcknowledged(ctx, testT0, testT0, 0); err == nil {
		t.Error("TrimOutboxAcknowledged with a batch of 0: no error")
	}
}

func deadIDs(t *testing.T, s *Store) []int64 {
	t.Helper()
	list, err := s.DeadLetters(t.Context(), "", 0, maxOutboxList, true)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(list))
	for i, d := range list {
		ids[i] = d.ID
	}
	return ids
}

// Two instances that picked the same batch (they trim at once, without a leader) delete it
// once between them, and count each row, and each lost row, once: the counts of every
// instance add up to what went.
func TestRetentionOverlappingTrimsCountOnce(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		dsn := fresh(t)
		r := newRetentionRig(t, dsn)
		other := openT(t, dsn)
		ctx := t.Context()
		slowest := r.seqs[3]
		keys := make([]any, 0, 8)
		for _, seq := range r.seqs[:8] {
			keys = append(keys, seq)
		}
		// counted is the detector: the instances' counts against what went (8 entries, the 4
		// after the slowest reader's position lost).
		counted := func(deleted, lost int64) error {
			if deleted != 8 || lost != 4 {
				return fmt.Errorf("the instances counted %d deleted, %d lost; 8 and 4 went", deleted, lost)
			}
			return nil
		}
		var deleted, lost int64
		for _, s := range []*Store{r.s, other, r.s} {
			n, l, err := s.deleteKeys(ctx, "test", "export_outbox", "seq", keys, "seq > ?", slowest)
			if err != nil {
				t.Fatal(err)
			}
			deleted, lost = deleted+n, lost+l
		}
		if err := counted(deleted, lost); err != nil {
			t.Fatal(err)
		}
		if err := r.kept(t, r.seqs[8:]); err != nil {
			t.Fatal(err)
		}
		// Negative control: counting the batch each picked, not the rows each deleted, is seen.
		if err := counted(3*int64(len(keys)), 3*4); err == nil {
			t.Fatal("the detector did not see rows counted by every instance that picked them")
		}
	})
}
