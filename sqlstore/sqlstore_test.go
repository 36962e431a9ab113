package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/seckilltest"
)

func openT(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open(%s): %v", dsn, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestOrderStoreSQLiteMemory(t *testing.T) {
	seckilltest.TestOrderStore(t, func(t *testing.T) seckill.OrderStore {
		return openT(t, "sqlite://:memory:")
	})
}

// The file database runs the suite too: it has a separate read pool and WAL, which the
// in-memory one does not.
func TestOrderStoreSQLiteFile(t *testing.T) {
	seckilltest.TestOrderStore(t, func(t *testing.T) seckill.OrderStore {
		return openT(t, "sqlite://"+filepath.Join(t.TempDir(), "seckill.db"))
	})
}

func TestOpenRejects(t *testing.T) {
	for _, c := range []struct{ dsn, msg string }{
		{"redis://127.0.0.1", "unsupported database URL scheme"},
		{"./seckill.db", "has no scheme"},
		{"sqlite://", "no path"},
		{"sqlite://./x.db?_pragma=foo", "must not contain"},
		{"mysql://root:secret@/seckill", "has no host"},
		{"mysql://127.0.0.1/seckill", "has no user"},
		{"mysql://root:secret@127.0.0.1:3306", "must name one database"},
		{"mysql://root:secret@127.0.0.1:3306/a/b", "must name one database"},
		{"mysql://root:secret@127.0.0.1/seckill?parseTime=true", "not supported"},
		{"mysql://root:secret@127.0.0.1/seckill?clientFoundRows=true", "not supported"},
		{"mysql://root:secret@127.0.0.1/seckill?multiStatements=true", "not supported"},
		{"mysql://root:secret@127.0.0.1/seckill?tls=custom", "want true, false"},
		{"mysql://root:secret@127.0.0.1/seckill?timeout=soon", "positive Go duration"},
		{"mysql://root:secret@127.0.0.1/seckill?tls=true&tls=false", "more than once"},
		{"mariadb://root:sec/ret@127.0.0.1/seckill", "malformed"},
		{"postgres://postgres:sec#ret@127.0.0.1/seckill", "malformed"},
		{"postgresql://postgres:secret@127.0.0.1/seckill?sslmode=sometimes", "not valid"},
	} {
		_, err := Open(context.Background(), c.dsn)
		if seckill.ErrorCode(err) != seckill.CodeInvalidArgument || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Open(%q) = %v; want invalid_argument containing %q", c.dsn, err, c.msg)
		}
		if err != nil && (strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "sec/ret") ||
			strings.Contains(err.Error(), "ret@")) {
			t.Errorf("Open(%q) leaks the password: %v", c.dsn, err)
		}
	}
}

func TestOpenRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	openT(t, "sqlite://./rel.db")
	if _, err := os.Stat("rel.db"); err != nil {
		t.Fatalf("sqlite://./rel.db did not create rel.db in the working directory: %v", err)
	}
}

// Opening an existing database again applies nothing and keeps the data; each migration is
// recorded once.
func TestMigrationsIdempotent(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "m.db")
	s1, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	sale := seckill.Sale{ID: "keep", Name: "keep", Stock: 3, StartsAt: time.Unix(0, 0), EndsAt: time.Unix(3600, 0),
		PerUserLimit: 1, HoldSeconds: 60}
	if err := s1.CreateSale(t.Context(), sale); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openT(t, dsn)
	s3 := openT(t, dsn) // two stores on one file at once, as two processes would be
	for _, s := range []*Store{s2, s3} {
		if _, _, err := s.Sale(t.Context(), "keep"); err != nil {
			t.Fatalf("sale lost after reopening: %v", err)
		}
	}
	ms, err := loadMigrations(migrationFiles, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	var versions []int
	rows, err := s2.rdb.QueryContext(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.version)
	}
	if !slices.Equal(versions, want) {
		t.Fatalf("schema_migrations = %v, want %v", versions, want)
	}
}

// Several processes may start at once on a new file; each migration is still applied once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "race.db")
	const n = 4
	errs := make(chan error, n)
	stores := make(chan *Store, n)
	for range n {
		go func() {
			s, err := Open(t.Context(), dsn)
			errs <- err
			stores <- s
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
		if s := <-stores; s != nil {
			t.Cleanup(func() { s.Close() })
		}
	}
	s := openT(t, dsn)
	var count int
	if err := s.rdb.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&count); err != nil {
		t.Fatal(err)
	}
	ms, _ := loadMigrations(migrationFiles, "sqlite")
	if count != len(ms) {
		t.Fatalf("schema_migrations has %d rows, want %d", count, len(ms))
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	s := openT(t, "sqlite://"+path)
	if _, err := s.db.ExecContext(t.Context(),
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), "sqlite://"+path)
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("Open of a newer schema = %v; want a refusal", err)
	}
}

// The CHECK on sales is the last line of defence: even a statement that skips the guarded
// UPDATE cannot record more sold units than sellable.
func TestSoldCheckConstraint(t *testing.T) {
	s := openT(t, "sqlite://:memory:")
	sale := seckill.Sale{ID: "c", Name: "c", Stock: 10, Holdback: 2, StartsAt: time.Unix(0, 0),
		EndsAt: time.Unix(3600, 0), PerUserLimit: 1, HoldSeconds: 60}
	if err := s.CreateSale(t.Context(), sale); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(t.Context(), `UPDATE sales SET sold = 8 WHERE id = 'c'`); err != nil {
		t.Fatalf("sold = sellable refused: %v", err)
	}
	_, err := s.db.ExecContext(t.Context(), `UPDATE sales SET sold = 9 WHERE id = 'c'`)
	if s.d.classify(err) != checkViolation {
		t.Fatalf("sold above sellable: error %v, want a CHECK violation", err)
	}
	bad := sale
	bad.ID, bad.Holdback = "bad", 11
	if code := seckill.ErrorCode(s.CreateSale(t.Context(), bad)); code != seckill.CodeInvalidArgument {
		t.Fatalf("CreateSale with holdback > stock: code %q, want invalid_argument", code)
	}
}

func TestTimesKeepMilliseconds(t *testing.T) {
	in := time.Date(2031, 5, 6, 7, 8, 9, 987_654_321, time.FixedZone("X", 3600))
	got := fromMillis(toMillis(in))
	if want := in.Truncate(time.Millisecond).UTC(); !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("round trip of %v = %v, want %v", in, got, want)
	}
	if !fromMillis(toMillis(time.Time{})).IsZero() {
		t.Fatal("the zero time does not survive a round trip")
	}
}

func TestSplitStatements(t *testing.T) {
	got, err := splitStatements(`
-- a comment; with a semicolon
CREATE TABLE a (x TEXT DEFAULT 'a;b'); /* block; comment */
CREATE INDEX "odd;name" ON a (x);
-- trailing comment only
;;
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`CREATE TABLE a (x TEXT DEFAULT 'a;b')`, `CREATE INDEX "odd;name" ON a (x)`}
	if !slices.Equal(got, want) {
		t.Fatalf("splitStatements = %q, want %q", got, want)
	}
	if _, err := splitStatements(`SELECT 'open`); err == nil {
		t.Fatal("an unterminated quote was accepted")
	}
	if _, err := splitStatements(`SELECT 1 /* open`); err == nil {
		t.Fatal("an unterminated comment was accepted")
	}
}

func TestLoadMigrationsRejectsBadNames(t *testing.T) {
	for name, files := range map[string]fstest.MapFS{
		"bad name":      {"migrations/x/init.sql": {Data: []byte("SELECT 1;")}},
		"version zero":  {"migrations/x/0000_init.sql": {Data: []byte("SELECT 1;")}},
		"same version":  {"migrations/x/0001_a.sql": {}, "migrations/x/0001_b.sql": {}},
		"missing dir":   {"migrations/y/0001_a.sql": {}},
		"upper-case id": {"migrations/x/0001_Init.sql": {}},
	} {
		if _, err := loadMigrations(files, "x"); err == nil {
			t.Errorf("%s: loadMigrations accepted it", name)
		}
	}
	ms, err := loadMigrations(fstest.MapFS{
		"migrations/x/0002_b.sql": {Data: []byte("B")},
		"migrations/x/0001_a.sql": {Data: []byte("A")},
	}, "x")
	if err != nil || len(ms) != 2 || ms[0].version != 1 || ms[1].name != "b" {
		t.Fatalf("loadMigrations = %+v, %v; want 0001_a then 0002_b", ms, err)
	}
}

func TestMergeForwardOnly(t *testing.T) {
	base := resRow{id: "r", status: seckill.StatusHeld, quantity: 1, updatedAt: 10}
	for _, c := range []struct {
		name    string
		cur, in resRow
		want    seckill.ReservationStatus
		changed bool
	}{
		{"forward", base, with(base, seckill.StatusExpired, 5), seckill.StatusExpired, true},
		{"backward", with(base, seckill.StatusExpired, 10), with(base, seckill.StatusHeld, 20), seckill.StatusExpired, false},
		{"same rank, other end", with(base, seckill.StatusCancelled, 10), with(base, seckill.StatusExpired, 20), seckill.StatusCancelled, false},
		{"final paid", with(base, seckill.StatusPaid, 10), with(base, seckill.StatusRefundRequired, 20), seckill.StatusPaid, false},
		{"same, older", base, with(base, seckill.StatusHeld, 5), seckill.StatusHeld, false},
	} {
		c.in.quantity = 2 // so that an accepted change is visible
		got, changed := merge(c.cur, c.in)
		if got.status != c.want || changed != c.changed {
			t.Errorf("%s: merge = %s, %v; want %s, %v", c.name, got.status, changed, c.want, c.changed)
		}
	}
}

func with(r resRow, st seckill.ReservationStatus, at int64) resRow {
	r.status, r.updatedAt = st, at
	return r
}
