package sqlstore

import (
	"database/sql"
	"strconv"
	"strings"
)

// violation is the kind of constraint a statement broke, read from the driver's error code.
type violation int

const (
	noViolation violation = iota
	uniqueViolation
	foreignKeyViolation
	checkViolation
)

// dialect is everything that differs between the SQL databases the store supports. The
// queries themselves are written once, in SQL that all of them accept. The values are
// sqliteDialect (sqlite.go), mysqlDialect (mysql.go) and postgresDialect (postgres.go).
type dialect struct {
	// name is also the migrations directory: migrations/<name>/NNNN_name.sql.
	name string
	// dollarParams is true when placeholders are $1, $2, … (PostgreSQL) instead of ?.
	dollarParams bool
	// preparedInserts sends the multi-row INSERTs of stored events as statements prepared on
	// the server (binary parameters) instead of SQL text with the values in it: true on MySQL,
	// where every other statement has its parameters interpolated into its text (one round
	// trip instead of prepare, execute and close), and MariaDB
	// spent about 40 % of its time storing a rush's events in its SQL parser. pgx already
	// prepares and caches every statement it runs.
	preparedInserts bool
	// forUpdate locks the rows a SELECT reads until the transaction ends: " FOR UPDATE" on
	// MySQL and PostgreSQL. SQLite has no row locks and needs none: a write transaction
	// (BEGIN IMMEDIATE) already excludes every other writer.
	forUpdate string
	// forNoKeyUpdate locks a row that the transaction will update without changing its key:
	// " FOR NO KEY UPDATE" on PostgreSQL, where a plain FOR UPDATE would also block inserting
	// rows that reference it (their foreign key check takes a KEY SHARE lock), and
	// " FOR UPDATE" on MySQL, which has nothing weaker that excludes other writers.
	forNoKeyUpdate string
	// forShare locks the rows a SELECT reads, shared, until the transaction ends: the lock a
	// foreign key check takes on the row an inserted row refers to. " FOR KEY SHARE" on
	// PostgreSQL, which excludes deleting the row or changing its key, but neither
	// forNoKeyUpdate nor other sharers; " LOCK IN SHARE MODE" on MySQL (MariaDB has no FOR
	// SHARE), which excludes forNoKeyUpdate and every write, but not other sharers. "" on
	// SQLite, as forUpdate.
	forShare string
	// insertIgnore turns "INSERT INTO t (…) VALUES (…)" into a statement that inserts nothing,
	// and reports zero rows affected, when the primary key pk already exists. It is how
	// concurrent upserts avoid a read-then-insert race on server databases.
	insertIgnore func(insert, pk string) string
	// classify reads a driver error's code (never its text) to tell which constraint failed.
	classify func(err error) violation
	// retryable reports whether err means the database rolled the transaction (or its last
	// statement) back to break a deadlock or a serialization conflict, so that running the
	// whole transaction again is safe and will likely succeed. nil: never.
	retryable func(err error) bool
	// deadlock reports whether err is the database breaking a deadlock (a retryable error
	// that ordering the locks avoids, unlike a serialization failure or a lock wait timeout).
	// nil: never.
	deadlock func(err error) bool
	// isolation is the level of write transactions. The transactions are written for READ
	// COMMITTED: every decision is taken from a row locked with forUpdate or inside a guarded
	// UPDATE, and every plain read must see what the transactions that held those locks
	// committed (see RecordPayment). LevelDefault leaves the driver's default (SQLite, whose
	// write transactions are serializable anyway).
	isolation sql.IsolationLevel
	// binaryKey converts an idempotency key to the argument its column takes. The key is a raw
	// HTTP header value, which need not be valid UTF-8, so server databases keep it in a binary
	// column (MySQL VARBINARY, PostgreSQL BYTEA) where any bytes round-trip; SQLite keeps
	// TEXT bytes as given.
	binaryKey func(key string) any
	// migrationLock, if not nil, is held around a whole migration run so that instances
	// starting at once migrate one after another. SQLite needs none: its write lock already
	// serializes the migration transactions.
	migrationLock *advisoryLock
	// transactionalDDL is true when CREATE/ALTER can be rolled back with the transaction that
	// ran them (SQLite, PostgreSQL). MySQL commits each DDL statement at once, so its
	// migrations run statement by statement under migrationLock instead.
	transactionalDDL bool
	// tableOptions ends the CREATE TABLE of schema_migrations (the migrations set their own).
	tableOptions string
}

// advisoryLock is a named lock of the database server that belongs to a session (one
// connection), taken and released with plain SELECTs.
type advisoryLock struct {
	// try takes the lock if it is free, waiting at most a second or so, and returns one row
	// with one boolean-ish column: true (1) if the session now holds the lock.
	try string
	// release gives it back and returns true (1) if the session held it.
	release string
}

// rebind rewrites the '?' placeholders of query for the dialect. Queries never contain a
// literal '?', so no quoting needs to be understood.
func (d dialect) rebind(query string) string {
	if !d.dollarParams || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// keyArg is the argument for an idempotency_key column.
func (d dialect) keyArg(key string) any {
	if d.binaryKey == nil {
		return key
	}
	return d.binaryKey(key)
}

// isRetryable reports whether the transaction that failed with err may be run again.
func (d dialect) isRetryable(err error) bool {
	return err != nil && d.retryable != nil && d.retryable(err)
}

// isDeadlock reports whether err is the database breaking a deadlock.
func (d dialect) isDeadlock(err error) bool {
	return err != nil && d.deadlock != nil && d.deadlock(err)
}

// txOptions are the options of write transactions.
func (d dialect) txOptions() *sql.TxOptions {
	if d.isolation == sql.LevelDefault {
		return nil
	}
	return &sql.TxOptions{Isolation: d.isolation}
}

// placeholders returns "?, ?, …" with n marks, for IN lists.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
