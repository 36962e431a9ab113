package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seckill-go/seckill"
)

// The error codes are read with errors.As, through any wrapping, never from the text.
func TestClassifyServerErrors(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("sqlstore: payment p1: %w", err) }
	my := func(n uint16) error {
		return wrap(&mysql.MySQLError{Number: n, Message: "duplicate entry, deadlock, whatever"})
	}
	pg := func(code string) error { return wrap(&pgconn.PgError{Code: code, Message: "duplicate key value"}) }
	for _, c := range []struct {
		name      string
		d         dialect
		err       error
		want      violation
		retryable bool
	}{
		{"mysql duplicate", mysqlDialect, my(1062), uniqueViolation, false},
		{"mysql duplicate with key name", mysqlDialect, my(1586), uniqueViolation, false},
		{"mysql no parent", mysqlDialect, my(1452), foreignKeyViolation, false},
		{"mysql parent referenced", mysqlDialect, my(1451), foreignKeyViolation, false},
		{"mysql old no parent", mysqlDialect, my(1216), foreignKeyViolation, false},
		{"mysql old parent referenced", mysqlDialect, my(1217), foreignKeyViolation, false},
		{"mysql check", mysqlDialect, my(3819), checkViolation, false},
		{"mariadb check", mysqlDialect, my(4025), checkViolation, false},
		{"mysql deadlock", mysqlDialect, my(1213), noViolation, true},
		{"mysql lock wait timeout", mysqlDialect, my(1205), noViolation, true},
		{"mysql other", mysqlDialect, my(1064), noViolation, false},
		{"mysql text only", mysqlDialect, errors.New("Error 1062: Duplicate entry; Deadlock found"), noViolation, false},
		{"mysql nil", mysqlDialect, nil, noViolation, false},
		{"postgres unique", postgresDialect, pg("23505"), uniqueViolation, false},
		{"postgres foreign key", postgresDialect, pg("23503"), foreignKeyViolation, false},
		{"postgres check", postgresDialect, pg("23514"), checkViolation, false},
		{"postgres serialization", postgresDialect, pg("40001"), noViolation, true},
		{"postgres deadlock", postgresDialect, pg("40P01"), noViolation, true},
		{"postgres not null", postgresDialect, pg("23502"), noViolation, false},
		{"postgres text only", postgresDialect, errors.New("ERROR: duplicate key value (SQLSTATE 23505)"), noViolation, false},
		{"postgres sees a mysql error", postgresDialect, my(1062), noViolation, false},
		{"mysql sees a postgres error", mysqlDialect, pg("40P01"), noViolation, false},
		{"sqlite never retries", sqliteDialect, my(1213), noViolation, false},
	} {
		if got := c.d.classify(c.err); got != c.want {
			t.Errorf("%s: classify = %v, want %v", c.name, got, c.want)
		}
		if got := c.d.isRetryable(c.err); got != c.retryable {
			t.Errorf("%s: isRetryable = %v, want %v", c.name, got, c.retryable)
		}
	}
}

func TestInsertIgnoreStatements(t *testing.T) {
	const ins = "INSERT INTO t (id, x) VALUES (?, ?)"
	for _, c := range []struct {
		d    dialect
		want string
	}{
		{sqliteDialect, ins + " ON CONFLICT (id) DO NOTHING"},
		{postgresDialect, ins + " ON CONFLICT (id) DO NOTHING"},
		// Never INSERT IGNORE, which would also swallow foreign key and CHECK violations.
		{mysqlDialect, ins + " ON DUPLICATE KEY UPDATE id = id"},
	} {
		if got := c.d.insertIgnore(ins, "id"); got != c.want {
			t.Errorf("%s: insertIgnore = %q, want %q", c.d.name, got, c.want)
		}
	}
	if got := postgresDialect.rebind(`SELECT a FROM t WHERE b = ? AND c IN (?, ?)`); got != `SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)` {
		t.Errorf("rebind = %q", got)
	}
}

var errFakeDeadlock = errors.New("fake deadlock")

// retryStore is an in-memory SQLite store whose dialect treats errFakeDeadlock as a deadlock.
func retryStore(t *testing.T) *Store {
	t.Helper()
	s := openT(t, "sqlite://:memory:")
	s.d.retryable = func(err error) bool { return errors.Is(err, errFakeDeadlock) }
	return s
}

// A transaction aborted by a deadlock runs again from the start, on a fresh transaction:
// nothing of the failed attempts is kept.
func TestInTxRetriesDeadlocks(t *testing.T) {
	s := retryStore(t)
	attempts := 0
	err := s.inTx(t.Context(), func(tx *sql.Tx) error {
		attempts++
		sale := seckill.Sale{ID: fmt.Sprintf("attempt%d", attempts), Name: "x", StartsAt: time.Unix(0, 0),
			EndsAt: time.Unix(60, 0), PerUserLimit: 1, HoldSeconds: 1}
		if _, err := tx.ExecContext(t.Context(), `INSERT INTO sales (id, name, price_cents, stock, holdback, starts_at,
			ends_at, per_user_limit, hold_seconds, queue_limit, created_at) VALUES (?, ?, 0, 1, 0, 0, 1, 1, 1, 0, 0)`,
			sale.ID, sale.Name); err != nil {
			return err
		}
		if attempts < 3 {
			return fmt.Errorf("sqlstore: wrapped: %w", errFakeDeadlock)
		}
		return nil
	})
	if err != nil || attempts != 3 {
		t.Fatalf("inTx = %v after %d attempts; want success on the third", err, attempts)
	}
	sales, _, err := s.Sales(t.Context())
	if err != nil || len(sales) != 1 || sales[0].ID != "attempt3" {
		t.Fatalf("Sales = %v, %v; want only the committed attempt's row", sales, err)
	}
}

func TestInTxGivesUp(t *testing.T) {
	s := retryStore(t)
	attempts := 0
	start := time.Now()
	err := s.inTx(t.Context(), func(*sql.Tx) error { attempts++; return errFakeDeadlock })
	if !errors.Is(err, errFakeDeadlock) || attempts != txMaxAttempts {
		t.Fatalf("inTx = %v after %d attempts; want the deadlock after %d", err, attempts, txMaxAttempts)
	}
	wantConflict(t, err)
	// The backoff is bounded: the worst case is the sum of the caps.
	if d := time.Since(start); d > time.Duration(txMaxAttempts)*txBackoffMax+time.Second {
		t.Fatalf("giving up took %v", d)
	}

	attempts = 0
	other := errors.New("not a deadlock")
	if err := s.inTx(t.Context(), func(*sql.Tx) error { attempts++; return other }); !errors.Is(err, other) || attempts != 1 {
		t.Fatalf("inTx = %v after %d attempts; want one attempt for an error that is not retryable", err, attempts)
	}
}

func TestInTxStopsWhenContextEnds(t *testing.T) {
	s := retryStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	attempts := 0
	err := s.inTx(ctx, func(*sql.Tx) error {
		attempts++
		cancel()
		return errFakeDeadlock
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errFakeDeadlock) || attempts != 1 {
		t.Fatalf("inTx = %v after %d attempts; want the deadlock and the cancellation after one", err, attempts)
	}
	wantConflict(t, err)
}

// wantConflict: a transaction that inTx gave up retrying is reported as the conflict it is,
// coded unavailable (503 with Retry-After: the gateway and the pipeline retry), not as an
// uncoded error that the service would call "the database is unavailable".
func wantConflict(t *testing.T, err error) {
	t.Helper()
	if seckill.ErrorCode(err) != seckill.CodeUnavailable || !strings.Contains(seckill.ErrorMessage(err), "conflict") {
		t.Fatalf("inTx = %v (code %s, message %q); want unavailable, naming the conflict", err,
			seckill.ErrorCode(err), seckill.ErrorMessage(err))
	}
}

func TestTxBackoff(t *testing.T) {
	for attempt := 1; attempt < txMaxAttempts+3; attempt++ {
		for range 100 {
			if d := txBackoff(attempt); d <= 0 || d > txBackoffMax+time.Millisecond {
				t.Fatalf("txBackoff(%d) = %v, want within (0, %v]", attempt, d, txBackoffMax)
			}
		}
	}
}

func TestCheckWidths(t *testing.T) {
	ctx := t.Context()
	s := openT(t, "sqlite://:memory:")
	sale := seckill.Sale{ID: "s", Name: "s", Stock: 5, StartsAt: time.Unix(0, 0), EndsAt: time.Unix(3600, 0),
		PerUserLimit: 5, HoldSeconds: 60}
	if err := s.CreateSale(ctx, sale); err != nil {
		t.Fatal(err)
	}
	long := func(n int) string { return string(make([]byte, n)) }
	res := seckill.Reservation{ID: "r", SaleID: "s", UserID: "u", Quantity: 1, Status: seckill.StatusHeld}
	for name, r := range map[string]seckill.Reservation{
		"id":              {ID: long(maxReservationIDBytes + 1), SaleID: "s", UserID: "u", Quantity: 1, Status: seckill.StatusHeld},
		"user id":         {ID: "r", SaleID: "s", UserID: long(maxUserIDBytes + 1), Quantity: 1, Status: seckill.StatusHeld},
		"idempotency key": {ID: "r", SaleID: "s", UserID: "u", Quantity: 1, Status: seckill.StatusHeld, IdempotencyKey: long(maxIdempotencyKeyBytes + 1)},
	} {
		err := s.ApplyEvents(ctx, []seckill.Event{{Reservation: r}})
		if seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
			t.Errorf("ApplyEvents with a long %s = %v; want invalid_argument", name, err)
		}
	}
	_, err := s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: long(maxPaymentIDBytes + 1), Reservation: res,
		Result: seckill.PaymentApplied})
	if seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
		t.Errorf("RecordPayment with a long payment id = %v; want invalid_argument", err)
	}
	_, err = s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: "p", Reservation: seckill.Reservation{ID: long(maxPaymentIDBytes + 1)},
		Result: seckill.PaymentApplied})
	if seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
		t.Errorf("RecordPayment with a long unknown reservation id = %v; want invalid_argument", err)
	}
}
