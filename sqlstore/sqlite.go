package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/wait"

	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteDialect is SQLite through modernc.org/sqlite.
var sqliteDialect = dialect{
	name: "sqlite",
	insertIgnore: func(insert, pk string) string {
		return insert + " ON CONFLICT (" + pk + ") DO NOTHING"
	},
	classify: func(err error) violation {
		var e *sqlite.Error
		if !errors.As(err, &e) {
			return noViolation
		}
		// The driver turns on extended result codes, so the code names the constraint kind.
		switch e.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return uniqueViolation
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return foreignKeyViolation
		case sqlite3.SQLITE_CONSTRAINT_CHECK:
			return checkViolation
		}
		return noViolation
	},
	transactionalDDL: true,
}

// sqliteBusyTimeout is how long a SQLite connection waits for a lock held by another
// connection or process before failing with SQLITE_BUSY.
const sqliteBusyTimeout = 5 * time.Second

// sqliteReadConns bounds the read pool of a SQLite file database.
const sqliteReadConns = 4

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
		_ = s.inserts.close()
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
	if err := s.inserts.prepare(ctx, s, sqliteInsertRows, s.insertNewSQL); err != nil {
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
		if !wait.Sleep(ctx, delay) {
			return errors.Join(err, ctx.Err())
		}
	}
}
