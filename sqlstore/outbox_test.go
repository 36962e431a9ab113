package sqlstore

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// outboxT opens a store with its outbox enabled, as the memory engine's deployment does.
func outboxT(t *testing.T, dsn string) seckilltest.OutboxUnderTest {
	s := openT(t, dsn)
	s.EnableOutbox()
	return seckilltest.OutboxUnderTest{Store: s, Outbox: s}
}

func TestOutboxSQLiteMemory(t *testing.T) {
	seckilltest.TestOutbox(t, func(t *testing.T) seckilltest.OutboxUnderTest { return outboxT(t, "sqlite://:memory:") })
}

// The file database has a read pool of its own (WAL): the follower reads while a writer commits.
func TestOutboxSQLiteFile(t *testing.T) {
	seckilltest.TestOutbox(t, func(t *testing.T) seckilltest.OutboxUnderTest {
		return outboxT(t, "sqlite://"+filepath.Join(t.TempDir(), "seckill.db"))
	})
}

func TestOutboxMySQL(t *testing.T) {
	testenv.MySQL(t)
	seckilltest.TestOutbox(t, func(t *testing.T) seckilltest.OutboxUnderTest { return outboxT(t, freshMySQL(t)) })
}

func TestOutboxPostgres(t *testing.T) {
	testenv.Postgres(t)
	seckilltest.TestOutbox(t, func(t *testing.T) seckilltest.OutboxUnderTest { return outboxT(t, freshPostgres(t)) })
}

func outboxIDs(t *testing.T, s *Store) []string {
	t.Helper()
	got, err := s.ReadOutbox(t.Context(), 0, maxOutboxList)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(got))
	for i, e := range got {
		ids[i] = e.Event.ID
	}
	return ids
}

// Without EnableOutbox (the Redis engine exports from its streams) ApplyEvents writes nothing
// to the outbox, while the payment transaction still writes refund_required.
func TestOutboxOffWritesRefundsOnly(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		ctx := t.Context()
		s := openT(t, fresh(t))
		if err := s.CreateSale(ctx, testSale("s", 0, 0)); err != nil {
			t.Fatal(err)
		}
		r := testRes("s", "s-r1", "alice", 1, 1)
		if err := s.ApplyEvents(ctx, []seckill.Event{{Reservation: r, At: testT0}}); err != nil {
			t.Fatal(err)
		}
		if ids := outboxIDs(t, s); len(ids) != 0 {
			t.Fatalf("outbox of a store without EnableOutbox = %v; want empty", ids)
		}
		got, err := s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: "p1", Reservation: r, AmountCents: testPrice,
			Result: seckill.PaymentApplied, At: testT0.Add(time.Second)})
		if err != nil || got != seckill.PaymentRefundRequired {
			t.Fatalf("RecordPayment = %s, %v; want refund_required (no stock)", got, err)
		}
		if ids := outboxIDs(t, s); !slices.Equal(ids, []string{"p1:refund_required"}) {
			t.Fatalf("outbox = %v; want p1:refund_required", ids)
		}
	})
}

// Whichever path of ApplyEvents commits (set-wise, set-wise reading every row, one by one),
// the batch's outbox entries commit with it once; a batch that fails writes none.
func TestOutboxFollowsApplyEventsPaths(t *testing.T) {
	batchStores(t, func(t *testing.T, a, _ *Store, dsn string) {
		ctx := t.Context()
		a.EnableOutbox()
		var attempts int
		testHookOutboxSeqs = func(first, last int64) { attempts++ }
		defer func() { testHookOutboxSeqs = nil }()

		// A missing sale fails the batch whole: not_found, nothing in the outbox.
		good := testRes("s", "s-a", "alice", 1, 1)
		ghost := testRes("ghost", "ghost-b", "bob", 1, 2)
		err := a.ApplyEvents(ctx, []seckill.Event{{Reservation: good, At: batchT0}, {Reservation: ghost, At: batchT0}})
		if seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("ApplyEvents with an unknown sale: %v; want not_found", err)
		}
		if ids := outboxIDs(t, a); len(ids) != 0 {
			t.Fatalf("a failed batch wrote %v to the outbox", ids)
		}

		// A batch of paid events only: no reservation row is written, the outbox still gets them.
		paid := testRes("s", "s-p", "carol", 1, 3)
		paid.Status, paid.ExpiresAt, paid.PaymentID = seckill.StatusPaid, nil, "pay-p"
		if err := a.ApplyEvents(ctx, []seckill.Event{{Reservation: paid, At: batchT0}}); err != nil {
			t.Fatal(err)
		}
		if ids := outboxIDs(t, a); !slices.Equal(ids, []string{"s-p:paid"}) {
			t.Fatalf("outbox after a paid-only batch = %v; want s-p:paid", ids)
		}

		if a.d.name == "sqlite" {
			return // one writer at a time: no other transaction can insert in between
		}
		// A reservation inserted by another transaction between the locking read and the
		// INSERT: the set-wise attempt falls back and is rolled back with its outbox rows.
		other := openT(t, dsn)
		held := testRes("s", "s-raced", "dave", 1, 4)
		queued := held
		queued.Status, queued.ExpiresAt = seckill.StatusQueued, nil
		expired := held
		expired.Status, expired.ExpiresAt = seckill.StatusExpired, nil
		testHookBeforeInsert = func(fresh []resRow) {
			testHookBeforeInsert = nil
			if err := other.ApplyEvents(ctx, []seckill.Event{{Reservation: held, At: batchT0.Add(time.Second)}}); err != nil {
				t.Errorf("concurrent insert: %v", err)
			}
		}
		defer func() { testHookBeforeInsert = nil }()
		attempts = 0
		batch := []seckill.Event{{Reservation: queued, At: batchT0}, {Reservation: expired, At: batchT0.Add(2 * time.Second)}}
		if err := a.ApplyEvents(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if ids := outboxIDs(t, a); !slices.Equal(ids, []string{"s-p:paid", "s-raced:queued", "s-raced:expired"}) {
			t.Fatalf("outbox after a batch that fell back = %v; want its two events once, after s-p:paid", ids)
		}
		if testHookBeforeInsert != nil {
			t.Fatal("the batch did not race the concurrent insert")
		}
		t.Logf("outbox written by %d attempt(s); the attempts that fell back ended before it", attempts)
	})
}

// The visibility contract on a real database, deterministically, with its negative control.
// Transaction T1 takes its seqs; while it is open, T2 writes a batch and a follower polls.
// Seqs taken as an auto-increment key would take them (testOutboxSeqsWithoutLock): T2 commits
// first, the follower reads T2's entries and moves past T1's seqs, T1 commits behind its
// cursor, and the detector must report T1's entries as never read. Seqs taken under the lock:
// T2 waits for T1 to commit, and the follower misses nothing.
func TestOutboxVisibilityNeedsTheLock(t *testing.T) {
	servers(t, func(t *testing.T, fresh freshDB) {
		for _, withoutLock := range []bool{true, false} {
			t.Run(fmt.Sprintf("withoutLock=%v", withoutLock), func(t *testing.T) {
				ctx := t.Context()
				s := openT(t, fresh(t))
				s.EnableOutbox()
				if err := s.CreateSale(ctx, testSale("s", 100, 0)); err != nil {
					t.Fatal(err)
				}
				ev := func(id string) []seckill.Event {
					return []seckill.Event{{Reservation: testRes("s", id, "u", 1, 1), At: testT0}}
				}
				var (
					f       seckilltest.OutboxFollower
					fired   atomic.Bool
					t2done  = make(chan error, 1)
					pollErr error
				)
				testOutboxSeqsWithoutLock = withoutLock
				testHookOutboxSeqs = func(first, last int64) {
					if fired.Swap(true) {
						return // T2's own call
					}
					go func() { t2done <- s.ApplyEvents(ctx, ev("s-t2")) }()
					if withoutLock {
						if err := <-t2done; err != nil { // T2 committed while T1 is open
							t.Errorf("T2: %v", err)
						}
					}
					_, pollErr = f.Poll(ctx, s.ReadOutbox, 100)
				}
				defer func() { testOutboxSeqsWithoutLock, testHookOutboxSeqs = false, nil }()
				if err := s.ApplyEvents(ctx, ev("s-t1")); err != nil {
					t.Fatalf("T1: %v", err)
				}
				if !withoutLock {
					if err := <-t2done; err != nil {
						t.Fatalf("T2: %v", err)
					}
				}
				if _, err := f.Poll(ctx, s.ReadOutbox, 100); err != nil || pollErr != nil {
					t.Fatal(err, pollErr)
				}
				all, err := s.ReadOutbox(ctx, 0, 100)
				if err != nil || len(all) != 2 {
					t.Fatalf("outbox = %+v, %v; want T1's and T2's entries", all, err)
				}
				problems := f.Missed(all)
				switch {
				case withoutLock && (len(problems) != 1 || !strings.Contains(problems[0], "s-t1:held")):
					t.Fatalf("seqs without the lock: the detector found %v; want s-t1:held never read", problems)
				case !withoutLock && len(problems) != 0:
					t.Fatalf("seqs under the lock: the follower missed %v", problems)
				}
			})
		}
	})
}

// BenchmarkApplyEventsOutbox measures what EnableOutbox costs ApplyEvents on a SQLite file: a
// rush's batches of 100 held events, with and without the outbox (reported, not asserted).
func BenchmarkApplyEventsOutbox(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("outbox=%v", on), func(b *testing.B) {
			s, err := Open(b.Context(), "sqlite://"+filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if on {
				s.EnableOutbox()
			}
			if err := s.CreateSale(b.Context(), testSale("s", 1_000_000, 0)); err != nil {
				b.Fatal(err)
			}
			const batch = 100
			n := 0
			b.ResetTimer()
			for b.Loop() {
				events := make([]seckill.Event, batch)
				for i := range events {
					n++
					r := testRes("s", fmt.Sprintf("s-%032d", n), "u", 1, uint64(n))
					events[i] = seckill.Event{Reservation: r, At: testT0}
				}
				if err := s.ApplyEvents(b.Context(), events); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

var _ events.Outbox = (*Store)(nil)
