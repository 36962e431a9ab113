package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestSQLiteRefundsMigration: a database at schema version 3, with a paid and a
// refund_required payment, is migrated by Open: the refund_required payment owes a refund in
// state refund_required, due at once; the paid one owes none.
func TestSQLiteRefundsMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrationFiles, sqliteDialect.name)
	if err != nil || len(ms) < 4 || ms[3].name != "refunds" {
		t.Fatalf("migrations %v, %v: want 0004_refunds fourth", ms, err)
	}
	if err := runMigrations(ctx, db, sqliteDialect, ms[:3], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sales (id, name, price_cents, stock, starts_at, ends_at, per_user_limit, hold_seconds, queue_limit, created_at, sold)
			VALUES ('s', 'S', 100, 5, 1, 2, 1, 60, 10, 1, 1)`,
		`INSERT INTO payments VALUES ('paid', 's-1', 's', 'alice', 1, 100, 'applied', 1000)`,
		`INSERT INTO payments VALUES ('owed', 's-2', 's', 'alice', 1, 100, 'refund_required', 2000)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	defer s.Close()
	c, err := s.RefundCounts(ctx)
	if err != nil || c.Required != 1 || c.Pending+c.Refunded+c.Failed != 0 || !c.OldestOpen.Equal(time.UnixMilli(2000).UTC()) {
		t.Fatalf("RefundCounts after the migration = %+v, %v; want one refund_required", c, err)
	}
	claimed, err := s.ClaimRefunds(ctx, "me", time.UnixMilli(2000), time.Minute, 10)
	if err != nil || len(claimed) != 1 || claimed[0].PaymentID != "owed" || claimed[0].AmountCents != 100 {
		t.Fatalf("claim after the migration = %+v, %v; want owed, 100 cents", claimed, err)
	}
	orders, err := s.Orders(ctx, "alice")
	if err != nil || len(orders) != 2 || orders[0].RefundStatus != seckill.RefundPending || orders[1].RefundStatus != "" {
		t.Fatalf("Orders = %+v, %v", orders, err)
	}
}
