package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// postgresDialect is PostgreSQL ≥ 14 (the versions pgx supports) through github.com/jackc/pgx/v5/stdlib.
var postgresDialect = dialect{
	name:           "postgres",
	dollarParams:   true,
	forUpdate:      " FOR UPDATE",
	forNoKeyUpdate: " FOR NO KEY UPDATE",
	forShare:       " FOR KEY SHARE",
	insertIgnore: func(insert, pk string) string {
		return insert + " ON CONFLICT (" + pk + ") DO NOTHING"
	},
	classify:  classifyPostgres,
	retryable: retryablePostgres,
	deadlock:  func(err error) bool { return pgCode(err) == pgDeadlockDetected },
	// READ COMMITTED is PostgreSQL's default; it is set anyway so that a server whose
	// default_transaction_isolation is higher does not turn every lock wait into a
	// serialization failure (and a retry).
	isolation: sql.LevelReadCommitted,
	binaryKey: func(key string) any { return []byte(key) },
	migrationLock: &advisoryLock{
		try:     `SELECT pg_try_advisory_lock(` + strconv.FormatInt(postgresMigrateLockKey, 10) + `)`,
		release: `SELECT pg_advisory_unlock(` + strconv.FormatInt(postgresMigrateLockKey, 10) + `)`,
	},
	transactionalDDL: true,
}

// postgresMigrateLockKey is the advisory lock key of migrations: "seckillm" in ASCII.
// Advisory locks are per database, so stores of different databases do not wait for each
// other.
const postgresMigrateLockKey int64 = 0x7365636b696c6c6d

// SQLSTATE codes the store acts on.
const (
	pgUniqueViolation      = "23505"
	pgForeignKeyViolation  = "23503"
	pgCheckViolation       = "23514"
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
)

// classifyPostgres reads the SQLSTATE of a *pgconn.PgError anywhere in err's chain.
func classifyPostgres(err error) violation {
	var e *pgconn.PgError
	if !errors.As(err, &e) {
		return noViolation
	}
	switch e.Code {
	case pgUniqueViolation:
		return uniqueViolation
	case pgForeignKeyViolation:
		return foreignKeyViolation
	case pgCheckViolation:
		return checkViolation
	}
	return noViolation
}

// retryablePostgres: both errors abort the whole transaction, which inTx then runs again.
func retryablePostgres(err error) bool {
	code := pgCode(err)
	return code == pgSerializationFailure || code == pgDeadlockDetected
}

// pgCode is the SQLSTATE of a *pgconn.PgError in err's chain, "" if there is none.
func pgCode(err error) string {
	var e *pgconn.PgError
	if !errors.As(err, &e) {
		return ""
	}
	return e.Code
}

// openPostgres hands the URL to pgx as it is, so every libpq-style parameter pgx knows
// (sslmode, connect_timeout, application_name, …) works, as do the PG* environment variables
// and the password file. Only a missing connect_timeout is set, to serverDialTimeout.
func openPostgres(ctx context.Context, dsn string) (*Store, error) {
	u, err := parseServerURL(dsn)
	if err != nil {
		return nil, err
	}
	urlPassword, _ := u.User.Password()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, mask(invalidURL(dsn, err), urlPassword)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = serverDialTimeout
	}
	s, err := openServer(ctx, stdlib.OpenDB(*cfg), postgresDialect, redact(dsn))
	return s, mask(mask(err, cfg.Password), urlPassword)
}
