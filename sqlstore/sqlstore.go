// Package sqlstore is the durable order store (seckill.OrderStore) over database/sql.
//
// It exists because money must touch the database synchronously (docs/API.md, payment webhook): the payment
// webhook answers the gateway only after one SQL transaction has incremented sales.sold,
// guarded by sold + qty <= stock - holdback, and written the paid reservation and the payment
// row. So even if the inventory engine loses its state, the database never records an
// oversell; the loser of the race is recorded as refund_required. Reservation events from the
// engine arrive asynchronously and are applied as idempotent, forward-only upserts.
//
// The SQL is kept plain so that one implementation serves SQLite (the embedded default, through
// the pure-Go modernc.org/sqlite driver), MySQL/MariaDB (github.com/go-sql-driver/mysql) and
// PostgreSQL (github.com/jackc/pgx/v5): what differs between them (placeholders, row locks,
// "insert unless present", error codes, isolation, the migration lock, the URL) lives in one
// dialect value, and each dialect has its own migrations under migrations/<dialect>/. Times are
// stored as BIGINT milliseconds since the Unix epoch, UTC (see the migrations).
//
// On the server databases, write transactions run at READ COMMITTED and are retried, a bounded
// number of times, when the database aborts them to break a deadlock or a serialization
// conflict; migrations run under an advisory lock so that instances starting together apply
// each one once. README.md in this directory has the operational details.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/wait"
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
	// inserts are the prepared multi-row INSERTs of reservations (dialect.preparedInserts).
	inserts preparedInserts
	// outbox makes ApplyEvents write every event to the export outbox (EnableOutbox).
	outbox atomic.Bool
	// deadlocks counts the attempts of this store's transactions that the database aborted to
	// break a deadlock. The lock order (docs/DECISIONS.md, "One lock order for the sale's row")
	// keeps it at 0; tests read it where the server's own counter is shared with other tests.
	deadlocks atomic.Int64
}

var _ seckill.OrderStore = (*Store)(nil)

// Open connects to the database named by dsn, creates or migrates its tables, and returns the
// store. Accepted forms:
//
//	sqlite://./relative/path.db   (a path relative to the working directory)
//	sqlite:///absolute/path.db
//	sqlite://:memory:             (one private in-memory database, gone on Close)
//	mysql://user:password@host:port/dbname     (also mariadb://; port defaults to 3306)
//	postgres://user:password@host:port/dbname  (also postgresql://)
//
// A server database must exist; Open creates its tables. Reserved characters in the user and
// password (@ : / ? # [ ] %) must be percent-encoded. A mysql:// URL accepts the parameters
// tls=true|false|skip-verify|preferred and timeout=<dial timeout> and refuses any other; a
// postgres:// URL goes to pgx as it is, so every parameter pgx accepts works (sslmode,
// connect_timeout, …). A malformed URL is invalid_argument; no error quotes the password.
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
		return openMySQL(ctx, dsn)
	case "postgres", "postgresql":
		return openPostgres(ctx, dsn)
	default:
		return nil, seckill.Errorf(seckill.CodeInvalidArgument,
			"unsupported database URL scheme %q; want sqlite, mysql or postgres", scheme)
	}
}

// redact hides a password in a URL so that error messages can quote it: everything before
// the last '@' (the scheme and the user info, which may contain an unencoded '?' or '@'), and
// the query, which may hold one too (pgx reads ?password=).
func redact(dsn string) string {
	prefix, rest := "", dsn
	if at := strings.LastIndex(dsn, "@"); at >= 0 {
		prefix, rest = "…", dsn[at:]
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest = rest[:q] + "?…"
	}
	return prefix + rest
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
	errs := []error{s.inserts.close()}
	if s.rdb != s.db {
		errs = append(errs, s.rdb.Close())
	}
	errs = append(errs, s.db.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlstore: close: %w", err)
	}
	return nil
}

// Retry policy of write transactions that the database aborted to break a deadlock or a
// serialization conflict (dialect.retryable). Such an abort means that nothing of the attempt
// was committed, so running it again is safe; backing off for a random time lets the
// transactions that collided go in a different order.
const (
	txMaxAttempts = 8
	txBackoffBase = 2 * time.Millisecond
	txBackoffMax  = 100 * time.Millisecond
)

// inTx runs fn in one write transaction, committing if fn returns nil and rolling back
// otherwise. If the database aborted the attempt to break a deadlock or a serialization
// conflict, fn runs again in a fresh transaction, up to txMaxAttempts times in all, so fn must
// be safe to re-run: it must derive everything it returns from what it reads in tx, and not
// carry results over from a failed attempt. fn must use tx only: on SQLite the write pool has
// one connection, so touching s.db (or s.rdb of a memory database) inside fn would wait for
// itself.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.runTx(ctx, fn)
		if !s.d.isRetryable(err) {
			return err
		}
		if s.d.isDeadlock(err) {
			s.deadlocks.Add(1)
		}
		if attempt == txMaxAttempts {
			return conflict(attempt, err)
		}
		if !wait.Sleep(ctx, txBackoff(attempt)) {
			return errors.Join(conflict(attempt, err), ctx.Err())
		}
	}
}

// conflict reports a transaction that the database aborted attempts times in a row to break a
// deadlock or a serialization conflict (or, on MySQL, a lock wait that timed out) and that
// inTx stopped retrying. The database answered every time: it is not down, and the caller is
// told so, rather than getting an uncoded error that the service reports as "the database is
// unavailable". The code is unavailable all the same, for what it makes callers do: the
// answer is 503 with Retry-After, and a payment gateway delivers the webhook again; the event
// pipeline retries its batch.
func conflict(attempts int, err error) error {
	return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeUnavailable,
		"the database aborted the transaction %d times in a row in a conflict with concurrent ones "+
			"(deadlock, serialization failure or lock wait timeout); retry shortly", attempts), err)
}

// runTx is one attempt of inTx.
func (s *Store) runTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, s.d.txOptions())
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

// txBackoff is the pause before attempt+1: "full jitter", uniformly random up to an
// exponentially growing cap. The randomness only spreads retries apart, so math/rand is enough.
func txBackoff(attempt int) time.Duration {
	limit := min(txBackoffBase<<min(attempt, 16), txBackoffMax)
	return rand.N(limit) + time.Millisecond/2
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
