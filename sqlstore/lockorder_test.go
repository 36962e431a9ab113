package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// The lock order of the transactions that touch a sale's row (docs/DECISIONS.md, "One lock
// order for the sale's row"): a consumer's ApplyEvents and a payment's RecordPayment never
// deadlock. Each test counts the deadlocks of its own store's transactions (Store.deadlocks:
// MariaDB's Innodb_deadlocks is global to a server that other tests share) and, on
// PostgreSQL, reads the server's counter of the test's own database as well.

// TestConsumerAndPaymentDoNotDeadlock runs the interleaving that deadlocked: a consumer's
// transaction holds the rows of the reservations it stores when a payment of one of them
// takes the sale's row; the payment then waits for the reservation, and the consumer went on
// to the sale's row to raise its version. With one lock order, either the payment waits for
// the sale's row until the consumer commits (MySQL: the consumer holds it shared from its
// start), or nothing the consumer still needs is held by the payment (PostgreSQL: the
// consumer's share lock does not exclude the payment's, and the version is not on the row).
func TestConsumerAndPaymentDoNotDeadlock(t *testing.T) {
	servers(t, func(t *testing.T, fresh freshDB) {
		ctx := t.Context()
		s := openDeadlockT(t, fresh(t))
		if err := s.CreateSale(ctx, testSale("s", 10, 0)); err != nil {
			t.Fatal(err)
		}
		held := testRes("s", "s-1", "alice", 1, 1)
		if err := s.ApplyEvents(ctx, []seckill.Event{{Reservation: held, At: testT0, Version: 1}}); err != nil {
			t.Fatal(err)
		}
		// The consumer stores a later event of the reservation (its hold re-granted), so its
		// transaction locks the stored row, and a newer version of the sale.
		later := held
		exp := testT0.Add(2 * time.Minute)
		later.ExpiresAt = &exp

		consumerHolds := make(chan struct{})
		paymentHoldsSale := make(chan struct{})
		var consumerOnce, paymentOnce sync.Once
		testHookEventsApplied = func() {
			consumerOnce.Do(func() {
				close(consumerHolds)
				// Wait for the payment to take the sale's row: it cannot while this
				// transaction holds the row shared (MySQL), so the wait is bounded; either way
				// the outcome checked below is the same.
				select {
				case <-paymentHoldsSale:
				case <-time.After(2 * time.Second):
				}
			})
		}
		testHookSaleLocked = func() { paymentOnce.Do(func() { close(paymentHoldsSale) }) }
		t.Cleanup(func() { testHookEventsApplied, testHookSaleLocked = nil, nil })

		var wg sync.WaitGroup
		var consumerErr, paymentErr error
		var result seckill.PaymentResult
		wg.Go(func() {
			consumerErr = s.ApplyEvents(ctx, []seckill.Event{{Reservation: later, At: testT0.Add(time.Second), Version: 2}})
		})
		<-consumerHolds
		wg.Go(func() {
			result, paymentErr = s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: "pay-1", Reservation: held,
				AmountCents: testPrice, Result: seckill.PaymentApplied, At: testT0.Add(time.Second)})
		})
		wg.Wait()
		if consumerErr != nil || paymentErr != nil || result != seckill.PaymentApplied {
			t.Fatalf("consumer: %v; payment: %s, %v; want both stored, the payment applied", consumerErr, result, paymentErr)
		}
		if v, err := s.SaleVersion(ctx, "s"); err != nil || v != 2 {
			t.Fatalf("SaleVersion = %d, %v; want 2", v, err)
		}
		wantCounts(t, s, "s", seckill.DBCounts{Sold: 1, PaidUnits: 1, PaidOrders: 1})
		wantNoDeadlock(t, s)
	})
}

// TestRushDoesNotDeadlock is a rush in miniature: consumers store the events of many buyers
// (each reservation's creation, then for some a re-granted hold or an expiry), in batches of
// interleaved ids and ascending versions, while the buyers pay. No transaction deadlocks.
func TestRushDoesNotDeadlock(t *testing.T) {
	servers(t, func(t *testing.T, fresh freshDB) {
		ctx := t.Context()
		s := openDeadlockT(t, fresh(t))
		const buyers, consumers, batch, stock = 400, 4, 25, 300
		for _, id := range []string{"a", "b"} {
			if err := s.CreateSale(ctx, testSale(id, stock, 0)); err != nil {
				t.Fatal(err)
			}
		}
		rs := make([]seckill.Reservation, buyers)
		for i := range rs {
			rs[i] = testRes([]string{"a", "b"}[i%2], fmt.Sprintf("%s-%03d", []string{"a", "b"}[i%2], i),
				fmt.Sprintf("u%03d", i), 1, uint64(i+1))
		}
		// Consumer c stores the creations of the buyers i ≡ c (mod consumers) and the later
		// events of the buyers i ≡ c+1, so two consumers touch each reservation.
		var wg sync.WaitGroup
		errs := make(chan error, consumers+buyers)
		for c := range consumers {
			wg.Go(func() {
				var events []seckill.Event
				for i, r := range rs {
					switch i % consumers {
					case c:
						events = append(events, seckill.Event{Reservation: r, At: testT0, Version: uint64(i + 1)})
					case (c + 1) % consumers:
						next := r
						at := testT0.Add(time.Second)
						if i%3 == 0 {
							next.Status, next.ExpiresAt = seckill.StatusExpired, nil
						} else {
							exp := testT0.Add(2 * time.Minute)
							next.ExpiresAt = &exp
						}
						events = append(events, seckill.Event{Reservation: next, At: at, Version: uint64(buyers + i + 1)})
					}
				}
				for len(events) > 0 {
					n := min(batch, len(events))
					if err := s.ApplyEvents(ctx, events[:n]); err != nil {
						errs <- fmt.Errorf("consumer %d: %w", c, err)
						return
					}
					events = events[n:]
				}
			})
		}
		for i, r := range rs {
			wg.Go(func() {
				if _, err := s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: fmt.Sprintf("pay-%03d", i),
					Reservation: r, AmountCents: testPrice, Result: seckill.PaymentApplied, At: testT0.Add(time.Second)}); err != nil {
					errs <- fmt.Errorf("payment %d: %w", i, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for _, id := range []string{"a", "b"} {
			wantCounts(t, s, id, seckill.DBCounts{Sold: buyers / 2, PaidUnits: buyers / 2, PaidOrders: buyers / 2})
			if v, err := s.SaleVersion(ctx, id); err != nil || v < buyers+1 {
				t.Errorf("SaleVersion(%s) = %d, %v; want the last events' version", id, v, err)
			}
		}
		wantNoDeadlock(t, s)
	})
}

// openDeadlockT opens a store on dsn whose pool keeps every connection it opens for the
// test's length, so that wantNoDeadlock can have each one report its statistics.
func openDeadlockT(t *testing.T, dsn string) *Store {
	t.Helper()
	s := openT(t, dsn)
	s.db.SetMaxIdleConns(serverMaxOpenConns)
	s.db.SetConnMaxIdleTime(0)
	s.db.SetConnMaxLifetime(0)
	return s
}

// wantNoDeadlock fails the test if a transaction of s was aborted to break a deadlock and, on
// PostgreSQL, if the server counted one in s's database. A PostgreSQL backend reports its
// counters some time after its transactions: pg_stat_force_next_flush makes each of the
// pool's connections report before its next statement returns.
func wantNoDeadlock(t *testing.T, s *Store) {
	t.Helper()
	if n := s.deadlocks.Load(); n != 0 {
		t.Errorf("%d transactions aborted by a deadlock; want none", n)
	}
	if s.d.name != postgresDialect.name {
		return
	}
	ctx := t.Context()
	open := s.db.Stats().OpenConnections
	conns := make([]*sql.Conn, 0, open)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range open {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.ExecContext(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
	}
	if len(conns) == 0 {
		t.Fatal("no connection open after the test's transactions")
	}
	n, err := pgDeadlocks(ctx, conns[0])
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("pg_stat_database.deadlocks = %d for the test's database; want 0", n)
	}
}

// pgDeadlocks is the server's count of deadlocks in c's database, as of now.
func pgDeadlocks(ctx context.Context, c *sql.Conn) (int64, error) {
	if _, err := c.ExecContext(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return 0, err
	}
	var n int64
	err := c.QueryRowContext(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}
