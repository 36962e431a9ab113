package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestSQLiteStatusCheckMigration: a database at schema version 2 (the status CHECK as IN)
// with stored rows is migrated by Open to version 3: every row keeps every column, the CHECK
// still refuses a status outside the seven, and the index is there.
func TestSQLiteStatusCheckMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrationFiles, sqliteDialect.name)
	if err != nil || len(ms) < 3 || ms[2].version != 3 {
		t.Fatalf("migrations %v, %v: want 0003 third", ms, err)
	}
	if err := runMigrations(ctx, db, sqliteDialect, ms[:2], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sales (id, name, price_cents, stock, starts_at, ends_at, per_user_limit, hold_seconds, queue_limit, created_at)
			VALUES ('s', 'S', 100, 5, 1, 2, 1, 60, 10, 1)`,
		`INSERT INTO reservations VALUES ('s-1', 's', 'alice', 1, 'held', 99, 100, NULL, 'k', 1, 10, 11)`,
		`INSERT INTO reservations VALUES ('s-2', 's', 'bob', 2, 'paid', NULL, 200, 'p1', '', 2, 12, 13)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := dumpReservations(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	defer s.Close()
	if after := dumpReservations(t, s.db); len(after) != 2 || after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("rows before %v, after %v", before, after)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO reservations VALUES ('s-3', 's', 'carl', 1, 'bogus', NULL, 0, NULL, '', 3, 1, 1)`)
	if s.d.classify(err) != checkViolation {
		t.Fatalf("a status outside the seven: %v, want a CHECK violation", err)
	}
	var idx int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'reservations_sale_status'`).Scan(&idx); err != nil || idx != 1 {
		t.Fatalf("index reservations_sale_status: %d, %v", idx, err)
	}
	// And the store works on the migrated table.
	rs, err := s.Reservations(ctx, "s", seckill.StatusHeld)
	if err != nil || len(rs) != 1 || rs[0].ID != "s-1" {
		t.Fatalf("Reservations after the migration: %+v, %v", rs, err)
	}
}

func dumpReservations(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT id, sale_id, user_id, quantity, status, COALESCE(expires_at, -1), amount_cents,
		COALESCE(payment_id, '<null>'), idempotency_key, seq, created_at, updated_at FROM reservations ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, sale, user, status, pid, key string
		var q, exp, amount, seq, created, updated int64
		if err := rows.Scan(&id, &sale, &user, &q, &status, &exp, &amount, &pid, &key, &seq, &created, &updated); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(id, sale, user, status, pid, key, q, exp, amount, seq, created, updated))
	}
	return out
}

// TestSQLitePreheatMigration: a sale stored before sales.preheat_seconds (schema 13) reads back
// with PreheatSeconds 0 (hot from its start, docs/DECISIONS.md "A sale's preheat") once Open
// has migrated the database, and a sale created after keeps the value it was created with.
func TestSQLitePreheatMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrationFiles, sqliteDialect.name)
	if err != nil || len(ms) < 14 || ms[13].version != 14 || ms[13].name != "sale_preheat" {
		t.Fatalf("migrations %v, %v: want 0014_sale_preheat fourteenth", ms, err)
	}
	if err := runMigrations(ctx, db, sqliteDialect, ms[:13], time.Now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO sales (id, name, price_cents, stock, starts_at, ends_at,
		per_user_limit, hold_seconds, queue_limit, created_at) VALUES ('old', 'Old', 100, 5, 1000, 2000, 1, 60, 10, 1)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	defer s.Close()
	old, _, err := s.Sale(ctx, "old")
	if err != nil || old.PreheatSeconds != 0 {
		t.Fatalf("a sale stored before the column: preheat_seconds %d, %v; want 0", old.PreheatSeconds, err)
	}
	price, stock, start := int64(1), 1, time.UnixMilli(3000).UTC()
	def, err := seckill.NewSale(seckill.SaleInput{ID: "new", PriceCents: &price, Stock: &stock, StartsAt: &start}, start)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSale(ctx, def); err != nil {
		t.Fatal(err)
	}
	sales, _, err := s.Sales(ctx)
	if err != nil || len(sales) != 2 || sales[0].PreheatSeconds != 0 || sales[1].PreheatSeconds != seckill.DefaultPreheatSeconds {
		t.Fatalf("Sales after the migration: %+v, %v; want preheat 0 then %d", sales, err, seckill.DefaultPreheatSeconds)
	}
}
