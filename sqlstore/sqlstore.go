// Package sqlstore is the durable order store (seckill.OrderStore) over database/sql.
//
// It exists because money must touch the database synchronously (DESIGN.md §2): the payment
// webhook answers the gateway only after one SQL transaction has incremented sales.sold,
// guarded by sold + qty <= stock - holdback, and written the paid reservation and the payment
// row. So even if the inventory engine loses its state, the database never records an
// oversell; the loser of the race is recorded as refund_required. Reservation events from the
// engine arrive asynchronously and are applied as idempotent, forward-only upserts.
//
// The SQL is kept plain so that one implementation serves SQLite (the embedded default, through
// the pure-Go modernc.org/sqlite driver) and, later, MySQL and PostgreSQL: what differs between
// them (placeholders, row locks, "insert unless present", constraint error codes, the URL) lives
// in one dialect value, and each dialect has its own migrations under migrations/<dialect>/.
// Times are stored as BIGINT milliseconds since the Unix epoch, UTC (see the migrations).
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-go/seckill"

	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// Store is an OrderStore backed by a SQL database. It is safe for concurrent use.
type Store struct {
	// db runs every write transaction. On SQLite it holds a single connection, so writers queue
	// in Go instead of spinning on SQLITE_BUSY; SQLite serializes writers anyway.
	db *sql.DB
	// rdb runs reads outside transactions. On a SQLite file it is a separate pool of read-only
	// connections, which WAL lets run alongside the writer; elsewhere it is db itself.
	rdb *sql.DB
	d   dialect
	// now stamps rows only when the caller gave no time (zero Sale.CreatedAt, Event.At or
	// PaymentRecord.At); the store otherwise uses the times it is given, which come from the
	// injected clock.
	now func() time.Time
}

var _ seckill.OrderStore = (*Store)(nil)

// sqliteBusyTimeout is how long a SQLite connection waits for a lock held by another
// connection or process before failing with SQLITE_BUSY.
const sqliteBusyTimeout = 5 * time.Second

// sqliteReadConns bounds the read pool of a SQLite file database.
const sqliteReadConns = 4

// Open connects to the database named by dsn, creates or migrates its tables, and returns the
// store. Accepted forms:
//
//	sqlite://./relative/path.db   (a path relative to the working directory)
//	sqlite:///absolute/path.db
//	sqlite://:memory:             (one private in-memory database, gone on Close)
//
// mysql:// and postgres:// URLs are recognised but not built yet (invalid_argument).
func Open(ctx context.Context, dsn string) (*Store, error) {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument,
			"database URL %q has no scheme; want sqlite://path, mysql://… or postgres://…", redact(dsn))
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		return openSQLite(ctx, rest)
	case "mysql", "mariadb":
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "mysql support is not built yet")
	case "postgres", "postgresql":
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "postgres support is not built yet")
	default:
		return nil, seckill.Errorf(seckill.CodeInvalidArgument,
			"unsupported database URL scheme %q; want sqlite, mysql or postgres", scheme)
	}
}

// redact hides a password in a URL so that error messages can quote it.
func redact(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return dsn
	}
	return "…" + dsn[at:]
}

// sqlitePath validates the part of a sqlite:// URL after the scheme.
func sqlitePath(rest string) (path string, memory bool, err error) {
	switch {
	case rest == "":
		return "", false, seckill.Errorf(seckill.CodeInvalidArgument, "sqlite URL has no path; want sqlite://./file.db")
	case rest == ":memory:":
		return "", true, nil
	case strings.ContainsAny(rest, "?#"):
		// The driver reads everything after '?' as its own options; ours are fixed below.
		return "", false, seckill.Errorf(seckill.CodeInvalidArgument,
			"sqlite URL %q must not contain '?' or '#': the store sets its own options", rest)
	}
	return rest, false, nil
}

func openSQLite(ctx context.Context, rest string) (*Store, error) {
	path, memory, err := sqlitePath(rest)
	if err != nil {
		return nil, err
	}
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", sqliteBusyTimeout.Milliseconds())
	// _txlock=immediate makes BEGIN take the write lock at once. A deferred transaction that
	// reads and then writes can fail with SQLITE_BUSY at the write without waiting, because
	// upgrading a read snapshot cannot wait; an immediate one waits in busy_timeout instead.
	// synchronous stays at its FULL default: a commit that the gateway was told about must
	// survive a power cut.
	opts := busy + "&_pragma=foreign_keys(1)&_txlock=immediate"
	s := &Store{d: sqliteDialect, now: time.Now}
	if memory {
		// Every connection to ":memory:" is a different database, so the store keeps exactly
		// one connection for reads and writes, and never lets the pool close it.
		db, err := sql.Open("sqlite", ":memory:?"+opts)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: open sqlite memory database: %w", err)
		}
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		s.db, s.rdb = db, db
	} else {
		db, err := sql.Open("sqlite", path+"?"+opts)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: open sqlite %s: %w", path, err)
		}
		db.SetMaxOpenConns(1)
		s.db = db
	}
	// fail closes what was opened so far; the error that made Open give up is the one to report.
	fail := func(err error) (*Store, error) {
		_ = s.db.Close()
		return nil, err
	}
	if err := s.db.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("sqlstore: open sqlite %s: %w", rest, err))
	}
	if !memory {
		// WAL lets the read pool see committed data while a write transaction is open. The
		// mode is stored in the file, so setting it once suffices. Switching needs an exclusive
		// lock and SQLite does not wait for it in busy_timeout, so a process that starts while
		// another is opening the same new file retries.
		err := retryBusy(ctx, func() error {
			_, err := s.db.ExecContext(ctx, "PRAGMA journal_mode = WAL")
			return err
		})
		if err != nil {
			return fail(fmt.Errorf("sqlstore: open sqlite %s: set WAL mode: %w", path, err))
		}
	}
	// Migrating is idempotent, so a lock held by another process opening the file is retried.
	if err := retryBusy(ctx, func() error { return migrate(ctx, s.db, s.d, time.Now) }); err != nil {
		return fail(err)
	}
	if s.rdb == nil {
		// Opened after the migration so that the file exists and is already in WAL mode;
		// query_only turns an accidental write on the read pool into an error.
		rdb, err := sql.Open("sqlite", path+"?"+busy+"&_pragma=query_only(1)")
		if err != nil {
			return fail(fmt.Errorf("sqlstore: open sqlite %s for reading: %w", path, err))
		}
		rdb.SetMaxOpenConns(sqliteReadConns)
		s.rdb = rdb
	}
	return s, nil
}

// retryBusy calls fn until it does not fail with SQLITE_BUSY, for at most sqliteBusyTimeout.
func retryBusy(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(sqliteBusyTimeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := fn()
		var e *sqlite.Error
		if err == nil || !errors.As(err, &e) || e.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// Ping checks that the database answers, for readiness probes.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlstore: ping: %w", err)
	}
	if s.rdb != s.db {
		if err := s.rdb.PingContext(ctx); err != nil {
			return fmt.Errorf("sqlstore: ping read pool: %w", err)
		}
	}
	return nil
}

// Close releases every connection. An in-memory database is gone afterwards.
func (s *Store) Close() error {
	var errs []error
	if s.rdb != s.db {
		errs = append(errs, s.rdb.Close())
	}
	errs = append(errs, s.db.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlstore: close: %w", err)
	}
	return nil
}

// inTx runs fn in one write transaction, committing if fn returns nil and rolling back
// otherwise. fn must use tx only: on SQLite the write pool has one connection, so touching
// s.db (or s.rdb of a memory database) inside fn would wait for itself.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // the error from fn is the one worth reporting
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	return nil
}

// q adapts a query written with '?' placeholders to the dialect.
func (s *Store) q(query string) string { return s.d.rebind(query) }

// stamp returns t, or the current time when the caller left t zero.
func (s *Store) stamp(t time.Time) time.Time {
	if t.IsZero() {
		return s.now()
	}
	return t
}

// toMillis encodes a time for storage: milliseconds since the Unix epoch, UTC.
func toMillis(t time.Time) int64 { return t.UnixMilli() }

// fromMillis decodes a stored time.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
