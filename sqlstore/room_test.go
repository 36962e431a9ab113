package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestWaitingRoomColumn: on every dialect, a row whose sales.waiting_room was never written
// (NULL, as every row stored before the column) reads back as a sale without a room, through
// Sale and Sales; and a value that is not a policy's JSON is an error, not a sale without a
// room (which would let its crowd past the room). The negative control: the same detector
// (Sale's error) stays quiet on a well-formed value.
func TestWaitingRoomColumn(t *testing.T) {
	allDialects(t, func(t *testing.T, fresh freshDB) {
		s := openT(t, fresh(t))
		ctx := t.Context()
		if _, err := s.db.ExecContext(ctx, `INSERT INTO sales (id, name, price_cents, stock, starts_at, ends_at,
			per_user_limit, hold_seconds, queue_limit, created_at) VALUES ('old', 'Old', 100, 5, 1000, 2000, 1, 60, 10, 1)`); err != nil {
			t.Fatal(err)
		}
		old, _, err := s.Sale(ctx, "old")
		if err != nil || old.Room != nil {
			t.Fatalf("a row without waiting_room: room %+v, %v; want none", old.Room, err)
		}
		sales, _, err := s.Sales(ctx)
		if err != nil || len(sales) != 1 || sales[0].Room != nil {
			t.Fatalf("Sales with a row without waiting_room: %+v, %v; want one sale without a room", sales, err)
		}

		for _, c := range []struct {
			value string
			bad   bool
		}{
			{`{"order":"fifo","opens_seconds":0,"admit_per_second":5,"max_active":0,"token_seconds":60,"pow_bits":0}`, false},
			{`not json`, true},
			{`{"order":`, true},
			{`{"order":"fifo","max_active":"many"}`, true},
		} {
			if _, err := s.db.ExecContext(ctx, s.q(`UPDATE sales SET waiting_room = ? WHERE id = 'old'`), c.value); err != nil {
				t.Fatal(err)
			}
			got, _, err := s.Sale(ctx, "old")
			if c.bad != (err != nil) {
				t.Fatalf("waiting_room %q: Sale answered room %+v, %v; want an error: %t", c.value, got.Room, err, c.bad)
			}
			if _, _, err := s.Sales(ctx); c.bad != (err != nil) {
				t.Fatalf("waiting_room %q: Sales answered %v; want an error: %t", c.value, err, c.bad)
			}
			if !c.bad && (got.Room == nil || *got.Room != (seckill.RoomPolicy{Order: seckill.RoomFIFO, AdmitPerSecond: 5, TokenSeconds: 60})) {
				t.Fatalf("waiting_room %q read back as %+v", c.value, got.Room)
			}
		}
	})
}

// TestSQLiteWaitingRoomMigration: a sale stored before sales.waiting_room (schema 14) reads
// back without a room once Open has migrated the database, and a sale created after keeps the
// room it was created with.
func TestSQLiteWaitingRoomMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrationFiles, sqliteDialect.name)
	if err != nil || len(ms) < 15 || ms[14].version != 15 || ms[14].name != "sale_waiting_room" {
		t.Fatalf("migrations %v, %v: want 0015_sale_waiting_room fifteenth", ms, err)
	}
	if err := runMigrations(ctx, db, sqliteDialect, ms[:14], time.Now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO sales (id, name, price_cents, stock, starts_at, ends_at,
		per_user_limit, hold_seconds, queue_limit, created_at, preheat_seconds) VALUES ('old', 'Old', 100, 5, 1000, 2000, 1, 60, 10, 1, 300)`); err != nil {
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
	if err != nil || old.Room != nil || old.PreheatSeconds != 300 {
		t.Fatalf("a sale stored before the column: room %+v, preheat %d, %v; want no room, 300", old.Room, old.PreheatSeconds, err)
	}
	price, stock, start, admit := int64(1), 1, time.UnixMilli(3_600_000).UTC(), 50
	def, err := seckill.NewSale(seckill.SaleInput{ID: "new", PriceCents: &price, Stock: &stock, StartsAt: &start,
		WaitingRoom: &seckill.RoomInput{AdmitPerSecond: admit}}, start)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSale(ctx, def); err != nil {
		t.Fatal(err)
	}
	want := seckill.RoomPolicy{Order: seckill.RoomDraw, OpensSeconds: seckill.DefaultPreheatSeconds, AdmitPerSecond: admit,
		TokenSeconds: seckill.DefaultTokenSeconds}
	sales, _, err := s.Sales(ctx)
	if err != nil || len(sales) != 2 || sales[0].Room != nil || sales[1].Room == nil || *sales[1].Room != want {
		t.Fatalf("Sales after the migration: %+v, %v; want no room, then %+v", sales, err, want)
	}
}
