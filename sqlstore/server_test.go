package sqlstore

// Integration tests against real MySQL/MariaDB and PostgreSQL servers, named by
// SECKILL_TEST_MYSQL and SECKILL_TEST_POSTGRES (internal/testenv: skipped when unset, failed
// under CI=true). Each store gets a database of its own, created on the server of the URL
// (through the URL's database, which must exist) and dropped when the test ends, so tests leave
// nothing behind and may run side by side.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// freshDB returns the URL of a new, empty database for one test.
type freshDB func(t *testing.T) string

func TestOrderStoreMySQL(t *testing.T) {
	testenv.MySQL(t) // skip once, not in every subtest
	seckilltest.TestOrderStore(t, func(t *testing.T) seckill.OrderStore { return openT(t, freshMySQL(t)) })
}

func TestOrderStorePostgres(t *testing.T) {
	testenv.Postgres(t)
	seckilltest.TestOrderStore(t, func(t *testing.T) seckill.OrderStore { return openT(t, freshPostgres(t)) })
}

// servers runs fn against each server database.
func servers(t *testing.T, fn func(t *testing.T, fresh freshDB)) {
	t.Run("MySQL", func(t *testing.T) { fn(t, func(t *testing.T) string { return freshMySQL(t) }) })
	t.Run("Postgres", func(t *testing.T) { fn(t, func(t *testing.T) string { return freshPostgres(t) }) })
}

// allDialects runs fn against SQLite as well as each server database: the behaviour it checks
// is the contract of every dialect.
func allDialects(t *testing.T, fn func(t *testing.T, fresh freshDB)) {
	t.Run("SQLite", func(t *testing.T) {
		fn(t, func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "seckill.db") })
	})
	servers(t, fn)
}

// freshMySQL creates a database on the server of SECKILL_TEST_MYSQL.
func freshMySQL(t testing.TB) string {
	t.Helper()
	base := testenv.MySQL(t)
	cfg, err := mysqlConfig(base)
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQLVar, err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQLVar, err)
	}
	return freshDatabase(t, base, sql.OpenDB(connector), "`%s`", "")
}

// freshPostgres creates a database on the server of SECKILL_TEST_POSTGRES.
func freshPostgres(t testing.TB) string {
	t.Helper()
	base := testenv.Postgres(t)
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatalf("%s: %v", testenv.PostgresVar, err)
	}
	// WITH (FORCE) ends sessions a failed test left open (PostgreSQL ≥ 13).
	return freshDatabase(t, base, stdlib.OpenDB(*cfg), `"%s"`, " WITH (FORCE)")
}

// freshDatabase creates a uniquely named database through admin, schedules dropping it (and
// closing admin) when the test ends, and returns base with its database replaced.
func freshDatabase(t testing.TB, base string, admin *sql.DB, quote, dropOptions string) string {
	t.Helper()
	random := make([]byte, 8)
	_, _ = rand.Read(random)
	name := "seckill_t_" + hex.EncodeToString(random)
	ident := fmt.Sprintf(quote, name)
	if _, err := admin.ExecContext(t.Context(), "CREATE DATABASE "+ident); err != nil {
		_ = admin.Close()
		t.Fatalf("create test database on %s: %v", redact(base), err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+ident+dropOptions); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
		_ = admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", redact(base), err)
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String()
}

// Instances started together on a new database migrate it once between them, without error.
func TestServerConcurrentOpenMigratesOnce(t *testing.T) {
	servers(t, func(t *testing.T, fresh freshDB) {
		dsn := fresh(t)
		const n = 8
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			errs   = make([]error, n)
			stores = make([]*Store, n)
		)
		for i := range n {
			wg.Go(func() {
				<-start
				stores[i], errs[i] = Open(t.Context(), dsn)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("concurrent Open %d: %v", i, err)
			}
			if stores[i] != nil {
				t.Cleanup(func() { _ = stores[i].Close() })
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		s := stores[0]
		ms, err := loadMigrations(migrationFiles, s.d.name)
		if err != nil {
			t.Fatal(err)
		}
		var count, versions int
		if err := s.db.QueryRowContext(t.Context(),
			`SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&count, &versions); err != nil {
			t.Fatal(err)
		}
		if count != len(ms) || versions != len(ms) {
			t.Fatalf("schema_migrations has %d rows of %d versions, want %d", count, versions, len(ms))
		}
		// Every instance works on the same schema.
		sale := testSale("shared", 3, 0)
		if err := stores[1].CreateSale(t.Context(), sale); err != nil {
			t.Fatal(err)
		}
		if _, _, err := stores[n-1].Sale(t.Context(), "shared"); err != nil {
			t.Fatalf("a sale created by one instance is not seen by another: %v", err)
		}
		// Reopening finds everything applied and keeps the data.
		again := openT(t, dsn)
		if _, _, err := again.Sale(t.Context(), "shared"); err != nil {
			t.Fatalf("sale lost after reopening: %v", err)
		}
	})
}

func TestServerNewerSchemaRefused(t *testing.T) {
	servers(t, func(t *testing.T, fresh freshDB) {
		dsn := fresh(t)
		s := openT(t, dsn)
		if _, err := s.db.ExecContext(t.Context(),
			`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)`); err != nil {
			t.Fatal(err)
		}
		_, err := Open(t.Context(), dsn)
		if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
			t.Fatalf("Open of a newer schema = %v; want a refusal", err)
		}
		// The refused Open released the migration lock: another Open gets as far as the check.
		if _, err := Open(t.Context(), dsn); err == nil || !strings.Contains(err.Error(), "newer than this binary") {
			t.Fatalf("second Open of a newer schema = %v; want the same refusal, not a lock timeout", err)
		}
	})
}

// A migration that fails half way: PostgreSQL rolls all of it back; MySQL keeps the statements
// before the failing one (its DDL commits at once), records nothing, and says so.
func TestServerFailedMigration(t *testing.T) {
	servers(t, func(t *testing.T, fresh freshDB) {
		ctx := t.Context()
		dsn := fresh(t)
		// A foreign table in the way of the last CREATE TABLE of 0001_init.
		db := rawDB(t, dsn)
		if _, err := db.ExecContext(ctx, `CREATE TABLE payments (x INT)`); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, dsn)
		if err == nil {
			t.Fatal("Open over a foreign payments table succeeded")
		}
		var sales, recorded int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
			WHERE table_name = 'sales' AND table_schema = `+currentSchema(dsn)).Scan(&sales); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&recorded); err != nil {
			t.Fatal(err)
		}
		if recorded != 0 {
			t.Fatalf("a failed migration was recorded (%d rows)", recorded)
		}
		if strings.HasPrefix(dsn, "mysql") {
			if sales != 1 || !strings.Contains(err.Error(), "statement 3") || !strings.Contains(err.Error(), "not transactional") {
				t.Fatalf("MySQL: sales tables %d, error %v; want the earlier tables kept and the failing statement named", sales, err)
			}
		} else if sales != 0 {
			t.Fatalf("PostgreSQL: a failed migration left %d sales tables behind", sales)
		}
	})
}

// rawDB opens dsn with the driver alone, closed when the test ends.
func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	var db *sql.DB
	if strings.HasPrefix(dsn, "mysql") {
		cfg, err := mysqlConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db = sql.OpenDB(connector)
	} else {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		db = stdlib.OpenDB(*cfg)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// currentSchema is the SQL for the schema that holds the store's tables.
func currentSchema(dsn string) string {
	if strings.HasPrefix(dsn, "mysql") {
		return "DATABASE()"
	}
	return "current_schema()"
}

// The session settings the MySQL store relies on are in force whatever the server's defaults.
func TestMySQLSessionSettings(t *testing.T) {
	ctx := t.Context()
	s := openT(t, freshMySQL(t))
	var mode string
	var lockWait int
	if err := s.db.QueryRowContext(ctx, `SELECT @@SESSION.sql_mode, @@SESSION.innodb_lock_wait_timeout`).Scan(&mode, &lockWait); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(mode, "STRICT_ALL_TABLES") || !strings.Contains(mode, "NO_ENGINE_SUBSTITUTION") ||
		fmt.Sprint(lockWait) != mysqlLockWaitSeconds {
		t.Fatalf("sql_mode %q, innodb_lock_wait_timeout %d; want strict and %s", mode, lockWait, mysqlLockWaitSeconds)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT table_name, engine FROM information_schema.tables WHERE table_schema = DATABASE()`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			t.Fatal(err)
		}
		if engine != "InnoDB" {
			t.Errorf("table %s uses %s, want InnoDB", name, engine)
		}
		n++
	}
	if err := rows.Err(); err != nil || n != 13 {
		t.Fatalf("%d tables (%v); want sales, reservations, payments, refunds, gateway_payments, the four export_ tables, sale_versions, the two room_ tables and schema_migrations", n, err)
	}
	// An over-long value is refused, not truncated (the Go checks normally stop it first).
	_, err = s.db.ExecContext(ctx, `INSERT INTO payments (payment_id, result, created_at) VALUES (?, 'applied', 0)`,
		strings.Repeat("p", maxPaymentIDBytes+1))
	if err == nil {
		t.Fatal("an over-long payment id was stored")
	}
}

// Driver errors become domain codes through their numbers: duplicate → conflict, missing
// parent → not_found, CHECK → invalid_argument or conflict.
func TestServerErrorTranslation(t *testing.T) {
	servers(t, func(t *testing.T, fresh freshDB) {
		ctx := t.Context()
		s := openT(t, fresh(t))
		sale := testSale("s", 10, 2)
		if err := s.CreateSale(ctx, sale); err != nil {
			t.Fatal(err)
		}
		if code := seckill.ErrorCode(s.CreateSale(ctx, sale)); code != seckill.CodeConflict {
			t.Errorf("duplicate CreateSale: code %q, want conflict", code)
		}
		bad := testSale("bad", 3, 4)
		if code := seckill.ErrorCode(s.CreateSale(ctx, bad)); code != seckill.CodeInvalidArgument {
			t.Errorf("CreateSale with holdback > stock: code %q, want invalid_argument", code)
		}
		ghost := seckill.Reservation{ID: "r", SaleID: "no-such-sale", UserID: "u", Quantity: 1, Status: seckill.StatusHeld}
		if code := seckill.ErrorCode(s.ApplyEvents(ctx, []seckill.Event{{Reservation: ghost}})); code != seckill.CodeNotFound {
			t.Errorf("ApplyEvents for an unknown sale: code %q, want not_found", code)
		}
		// The last line of defence, below the guarded UPDATE: sold can reach sellable, not pass it.
		if _, err := s.db.ExecContext(ctx, `UPDATE sales SET sold = 8 WHERE id = 's'`); err != nil {
			t.Fatalf("sold = sellable refused: %v", err)
		}
		_, err := s.db.ExecContext(ctx, `UPDATE sales SET sold = 9 WHERE id = 's'`)
		if s.d.classify(err) != checkViolation {
			t.Errorf("sold above sellable: error %v, want a CHECK violation (sales_sold_within_sellable)", err)
		}
		if err == nil || !strings.Contains(err.Error(), "sales_sold_within_sellable") {
			t.Errorf("sold above sellable: error %v does not name sales_sold_within_sellable", err)
		}
		shrunk := sale
		shrunk.Stock = 9 // sellable 7 < 8 sold
		if code := seckill.ErrorCode(s.UpdateSale(ctx, shrunk)); code != seckill.CodeConflict {
			t.Errorf("UpdateSale below the units sold: code %q, want conflict", code)
		}
		r := seckill.Reservation{ID: "r1", SaleID: "s", UserID: "u", Quantity: 1, Status: seckill.StatusHeld}
		if err := s.ApplyEvents(ctx, []seckill.Event{{Reservation: r}}); err != nil {
			t.Fatal(err)
		}
		_, err = s.db.ExecContext(ctx, `DELETE FROM sales WHERE id = 's'`)
		if s.d.classify(err) != foreignKeyViolation {
			t.Errorf("deleting a sale with reservations: error %v, want a foreign key violation", err)
		}
		_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO reservations (id, sale_id, user_id, quantity, status,
			created_at, updated_at) VALUES ('r2', 's', 'u', 1, 'lost', 0, 0)`))
		if s.d.classify(err) != checkViolation {
			t.Errorf("unknown status: error %v, want a CHECK violation", err)
		}
	})
}

// 64 buyers pay for distinct reservations of a 10-unit sale at once: exactly 10 are paid, the
// rest are refunds, and sales.sold is 10. In the second round no event has arrived before the
// payments, so each payment also creates its reservation row.
func TestOversellGuardUnderConcurrency(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		for _, eventsFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("eventsFirst=%v", eventsFirst), func(t *testing.T) {
				s := openT(t, fresh(t))
				oversellRound(t, s, eventsFirst)
			})
		}
	})
}

func oversellRound(t *testing.T, s *Store, eventsFirst bool) {
	t.Helper()
	const n, stock = 64, 10
	ctx := t.Context()
	if err := s.CreateSale(ctx, testSale("hot", stock, 0)); err != nil {
		t.Fatal(err)
	}
	rs := make([]seckill.Reservation, n)
	var events []seckill.Event
	for i := range rs {
		rs[i] = testRes("hot", fmt.Sprintf("hot-%02d", i), fmt.Sprintf("user%02d", i), 1, uint64(i+1))
		events = append(events, seckill.Event{Reservation: rs[i], At: testT0})
	}
	if eventsFirst {
		if err := s.ApplyEvents(ctx, events); err != nil {
			t.Fatal(err)
		}
	}
	results := seckilltest.RacePayments(t, n, func(i int) (seckill.PaymentResult, error) {
		return s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: fmt.Sprintf("pay-%02d", i), Reservation: rs[i],
			AmountCents: testPrice, Result: seckill.PaymentApplied, At: testT0.Add(time.Second)})
	})
	if results[seckill.PaymentApplied] != stock || results[seckill.PaymentRefundRequired] != n-stock || len(results) != 2 {
		t.Fatalf("%d payments for %d units: %v; want %d applied, %d refund_required", n, stock, results, stock, n-stock)
	}
	wantCounts(t, s, "hot", seckill.DBCounts{Sold: stock, PaidUnits: stock, Refunds: n - stock, PaidOrders: stock})
}

// Different payments for one reservation arrive at once: one pays for it, the others are
// refunds, and its units are sold once. This is what READ COMMITTED is for on the server
// databases: under InnoDB's default REPEATABLE READ, a payment that waited for the
// reservation's row lock would read payments from a snapshot taken before the first payment
// committed, and pay the units a second time.
func TestOnePaymentPerReservationUnderConcurrency(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		for _, eventsFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("eventsFirst=%v", eventsFirst), func(t *testing.T) {
				ctx := t.Context()
				s := openT(t, fresh(t))
				if err := s.CreateSale(ctx, testSale("s", 100, 0)); err != nil {
					t.Fatal(err)
				}
				r := testRes("s", "r1", "alice", 2, 1)
				if eventsFirst {
					if err := s.ApplyEvents(ctx, []seckill.Event{{Reservation: r, At: testT0}}); err != nil {
						t.Fatal(err)
					}
				}
				const n = 24
				var mu sync.Mutex
				winners := map[string]bool{}
				results := seckilltest.RacePayments(t, n, func(i int) (seckill.PaymentResult, error) {
					id := fmt.Sprintf("p%02d", i)
					res, err := s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: id, Reservation: r,
						AmountCents: 2 * testPrice, Result: seckill.PaymentApplied, At: testT0})
					if res == seckill.PaymentApplied {
						mu.Lock()
						winners[id] = true
						mu.Unlock()
					}
					return res, err
				})
				if results[seckill.PaymentApplied] != 1 || results[seckill.PaymentRefundRequired] != n-1 {
					t.Fatalf("%d payments for one reservation: %v; want 1 applied, %d refund_required", n, results, n-1)
				}
				wantCounts(t, s, "s", seckill.DBCounts{Sold: 2, PaidUnits: 2, Refunds: n - 1, PaidOrders: 1})
				rs, err := s.Reservations(ctx, "s")
				if err != nil || len(rs) != 1 || rs[0].Status != seckill.StatusPaid || !winners[rs[0].PaymentID] {
					t.Fatalf("Reservations = %+v, %v; want r1 paid by the one applied payment %v", rs, err, winners)
				}
			})
		}
	})
}

// A real deadlock: two transactions lock two rows in opposite orders. The database aborts one,
// inTx runs it again, and both commit.
func TestServerDeadlockRetried(t *testing.T) {
	servers(t, func(t *testing.T, fresh freshDB) {
		ctx := t.Context()
		s := openT(t, fresh(t))
		for _, id := range []string{"a", "b"} {
			if err := s.CreateSale(ctx, testSale(id, 1, 0)); err != nil {
				t.Fatal(err)
			}
		}
		var (
			mu       sync.Mutex
			attempts int
			holding  sync.WaitGroup // both hold their first row
			wg       sync.WaitGroup
			errs     [2]error
		)
		holding.Add(2)
		lock := func(tx *sql.Tx, id string) error {
			var one int
			return tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM sales WHERE id = ?`+s.d.forUpdate), id).Scan(&one)
		}
		for i, order := range [2][2]string{{"a", "b"}, {"b", "a"}} {
			wg.Go(func() {
				first := true
				errs[i] = s.inTx(ctx, func(tx *sql.Tx) error {
					mu.Lock()
					attempts++
					mu.Unlock()
					if err := lock(tx, order[0]); err != nil {
						return err
					}
					if first {
						first = false
						holding.Done()
						holding.Wait()
					}
					if err := lock(tx, order[1]); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, s.q(`UPDATE sales SET name = ? WHERE id = ?`), "by "+order[0], order[1])
					return err
				})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("transaction %d: %v", i, err)
			}
		}
		if attempts < 3 {
			t.Errorf("%d attempts in all; want at least 3 (one transaction retried after the deadlock)", attempts)
		}
	})
}

// Ids are compared byte for byte on every dialect (MySQL's utf8mb4_bin would take "p1" and
// "p1 " for one id), and idempotency keys, raw header bytes, round-trip whatever they hold.
// The widest value of every column fits.
func TestExactIDsAndKeys(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		ctx := t.Context()
		s := openT(t, fresh(t))
		if err := s.CreateSale(ctx, testSale("s", 10, 0)); err != nil {
			t.Fatal(err)
		}
		wideSale := strings.Repeat("W", maxSaleIDBytes)
		if err := s.CreateSale(ctx, testSale(wideSale, 10, 0)); err != nil {
			t.Fatal(err)
		}
		keys := map[string]string{
			"r1":  "\xff\xfe not UTF-8",
			"R1":  "Ünïcødé 🔑",
			"r1 ": "",
		}
		var events []seckill.Event
		for id, key := range keys {
			r := testRes("s", id, "alice", 1, 1)
			r.IdempotencyKey = key
			events = append(events, seckill.Event{Reservation: r, At: testT0})
		}
		wide := testRes(wideSale, strings.Repeat("r", maxReservationIDBytes), strings.Repeat("u", maxUserIDBytes), 1, 2)
		wide.IdempotencyKey = strings.Repeat("\xff", maxIdempotencyKeyBytes)
		events = append(events, seckill.Event{Reservation: wide, At: testT0})
		if err := s.ApplyEvents(ctx, events); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Reservations(ctx, "s")
		if err != nil || len(rs) != 3 {
			t.Fatalf("Reservations = %v, %v; want r1, R1 and \"r1 \" apart", rs, err)
		}
		for _, r := range rs {
			if want := keys[r.ID]; r.IdempotencyKey != want {
				t.Errorf("reservation %q: idempotency key %q, want %q", r.ID, r.IdempotencyKey, want)
			}
		}
		if ws, err := s.Reservations(ctx, wideSale); err != nil || len(ws) != 1 || ws[0].ID != wide.ID ||
			ws[0].IdempotencyKey != wide.IdempotencyKey || ws[0].UserID != wide.UserID {
			t.Fatalf("the widest reservation did not round-trip: %+v, %v", ws, err)
		}

		// Three payment ids that differ only in case or a trailing space, all at one instant:
		// three payments, listed newest first and then by payment id descending, byte order.
		for i, id := range []string{"p1", "p1 ", "P1"} {
			r := testRes("s", []string{"r1", "R1", "r1 "}[i], "alice", 1, 1)
			got, err := s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: id, Reservation: r,
				AmountCents: testPrice, Result: seckill.PaymentApplied, At: testT0})
			if err != nil || got != seckill.PaymentApplied {
				t.Fatalf("RecordPayment(%q) = %s, %v; want applied", id, got, err)
			}
		}
		widePay := strings.Repeat("p", maxPaymentIDBytes)
		if got, err := s.RecordPayment(ctx, seckill.PaymentRecord{PaymentID: widePay, Reservation: wide,
			AmountCents: testPrice, Result: seckill.PaymentApplied, At: testT0}); err != nil || got != seckill.PaymentApplied {
			t.Fatalf("RecordPayment(widest id) = %s, %v; want applied", got, err)
		}
		orders, err := s.Orders(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, o := range orders {
			ids = append(ids, o.PaymentID)
		}
		if want := []string{"p1 ", "p1", "P1"}; fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Fatalf("Orders(alice) payment ids = %q, want %q", ids, want)
		}
		wantCounts(t, s, "s", seckill.DBCounts{Sold: 3, PaidUnits: 3, PaidOrders: 3})
	})
}

// The password never appears in an error, here with a server that refuses it. (The test
// PostgreSQL trusts local connections, so only MySQL can refuse one.)
func TestMySQLWrongPasswordNotQuoted(t *testing.T) {
	const pw = "Wr0ngPassw0rd"
	base := testenv.MySQL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	_, err = Open(t.Context(), u.String())
	if err == nil {
		t.Skip("the server accepts any password for this user")
	}
	if strings.Contains(err.Error(), pw) {
		t.Fatalf("Open with a wrong password = %v: quotes it", err)
	}
}

// testT0 and testPrice mirror the conformance suite's reference values.
var testT0 = time.Date(2030, 1, 2, 3, 4, 5, 123_000_000, time.UTC)

const testPrice = 1999

func testSale(id string, stock, holdback int) seckill.Sale {
	return seckill.Sale{ID: id, Name: "Sale " + id, PriceCents: testPrice, Stock: stock, Holdback: holdback,
		StartsAt: testT0, EndsAt: testT0.Add(time.Hour), PerUserLimit: 5, HoldSeconds: 60,
		QueueLimit: 10 * (stock - holdback), CreatedAt: testT0}
}

func testRes(saleID, id, user string, q int, seq uint64) seckill.Reservation {
	exp := testT0.Add(time.Minute)
	return seckill.Reservation{ID: id, SaleID: saleID, UserID: user, Quantity: q, Status: seckill.StatusHeld,
		ExpiresAt: &exp, AmountCents: int64(q) * testPrice, CreatedAt: testT0, Seq: seq}
}

func wantCounts(t *testing.T, s *Store, saleID string, want seckill.DBCounts) {
	t.Helper()
	got, err := s.Counts(t.Context(), saleID)
	if err == nil && want.RefundsRequired+want.RefundsPending+want.Refunded+want.RefundsFailed == 0 {
		// Nothing refunded yet: every refund_required payment's refund is refund_required.
		want.RefundsRequired = want.Refunds
	}
	if err != nil || got != want {
		t.Fatalf("Counts(%s) = %+v, %v; want %+v", saleID, got, err, want)
	}
}
