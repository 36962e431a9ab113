package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/seckill-go/seckill"
)

// TestSQLiteRefundsMigration: a database at the schema before the refunds migration, with a
// paid and a refund_required payment, is migrated by Open: the refund_required payment owes a
// refund in state refund_required, due at once; the paid one owes none.
func TestSQLiteRefundsMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	testRefundsMigration(t, db, sqliteDialect, "sqlite://"+path)
}

// TestRefundsMigrationServers is TestSQLiteRefundsMigration on MySQL/MariaDB and PostgreSQL.
func TestRefundsMigrationServers(t *testing.T) {
	t.Run("MySQL", func(t *testing.T) {
		dsn := freshMySQL(t)
		cfg, err := mysqlConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		testRefundsMigration(t, sql.OpenDB(connector), mysqlDialect, dsn)
	})
	t.Run("Postgres", func(t *testing.T) {
		dsn := freshPostgres(t)
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		testRefundsMigration(t, stdlib.OpenDB(*cfg), postgresDialect, dsn)
	})
}

// testRefundsMigration migrates db to the version before the refunds, stores a paid and a
// refund_required payment, closes db, and opens dsn (the same database) with Open.
func testRefundsMigration(t *testing.T, db *sql.DB, d dialect, dsn string) {
	ctx := context.Background()
	ms, err := loadMigrations(migrationFiles, d.name)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ms, func(m migration) bool { return m.name == "refunds" })
	if i < 1 {
		t.Fatalf("migrations of %s %v: no refunds migration", d.name, ms)
	}
	if err := runMigrations(ctx, db, d, ms[:i], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sales (id, name, price_cents, stock, starts_at, ends_at, per_user_limit, hold_seconds, queue_limit, created_at, sold)
			VALUES ('s', 'S', 100, 5, 1, 2, 1, 60, 10, 1, 1)`,
		`INSERT INTO payments (payment_id, reservation_id, sale_id, user_id, quantity, amount_cents, result, created_at)
			VALUES ('paid', 's-1', 's', 'alice', 1, 100, 'applied', 1000)`,
		`INSERT INTO payments (payment_id, reservation_id, sale_id, user_id, quantity, amount_cents, result, created_at)
			VALUES ('owed', 's-2', 's', 'alice', 1, 100, 'refund_required', 2000)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	defer s.Close()
	c, err := s.RefundCounts(ctx)
	if err != nil || c.Required != 1 || c.Pending+c.Refunded+c.Failed != 0 || !c.OldestOpen.Equal(time.UnixMilli(2000).UTC()) {
		t.Fatalf("RefundCounts after the migration = %+v, %v; want one refund_required", c, err)
	}
	if got, err := s.Counts(ctx, "s"); err != nil || got.Refunds != 1 || got.RefundsRequired != 1 {
		t.Fatalf("Counts after the migration = %+v, %v; want one refund, refund_required", got, err)
	}
	claimed, err := s.ClaimRefunds(ctx, "gw", "me", time.UnixMilli(2000), time.Minute, 10)
	if err != nil || len(claimed) != 1 || claimed[0].PaymentID != "owed" || claimed[0].AmountCents != 100 {
		t.Fatalf("claim after the migration = %+v, %v; want owed, 100 cents", claimed, err)
	}
	orders, err := s.Orders(ctx, "alice")
	if err != nil || len(orders) != 2 || orders[0].RefundStatus != seckill.RefundPending || orders[1].RefundStatus != "" {
		t.Fatalf("Orders = %+v, %v", orders, err)
	}
}
