package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill"
)

// mysqlDialect is MySQL ≥ 8.0.16 and MariaDB ≥ 10.2.1 (the first versions that enforce CHECK
// constraints) through github.com/go-sql-driver/mysql, with the InnoDB engine.
var mysqlDialect = dialect{
	name:            "mysql",
	forUpdate:       " FOR UPDATE",
	preparedInserts: true,
	forNoKeyUpdate:  " FOR UPDATE",
	forShare:        " LOCK IN SHARE MODE",
	insertIgnore: func(insert, pk string) string {
		// Not INSERT IGNORE: it turns every error of the statement into a warning, so a
		// foreign key or CHECK violation would pass as "already present". This no-op update
		// fires only on a duplicate key, and with CLIENT_FOUND_ROWS off (mysqlConfig) an
		// update that changes nothing reports 0 rows affected, a fresh insert 1.
		// A key of several columns ("a, b") needs only its first for the no-op.
		first, _, _ := strings.Cut(pk, ",")
		return insert + " ON DUPLICATE KEY UPDATE " + first + " = " + first
	},
	classify:  classifyMySQL,
	retryable: retryableMySQL,
	deadlock: func(err error) bool {
		var e *mysql.MySQLError
		return errors.As(err, &e) && e.Number == mysqlLockDeadlock
	},
	// InnoDB defaults to REPEATABLE READ, where a plain SELECT reads the snapshot taken at
	// the transaction's first read and can miss a payment committed while the transaction
	// waited for a row lock (see RecordPayment).
	isolation: sql.LevelReadCommitted,
	binaryKey: func(key string) any { return []byte(key) },
	migrationLock: &advisoryLock{
		try:     `SELECT GET_LOCK(` + mysqlLockName + `, 1)`,
		release: `SELECT RELEASE_LOCK(` + mysqlLockName + `)`,
	},
	tableOptions: " ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin",
}

// mysqlLockName names the migration lock. GET_LOCK names are global to the server, so the
// name carries the database (hashed: names are limited to 64 characters) and stores of
// different databases on one server do not wait for each other.
const mysqlLockName = `CONCAT('seckill_migrate:', LEFT(SHA2(DATABASE(), 256), 40))`

// MySQL and MariaDB error numbers the store acts on.
const (
	mysqlDupEntry            = 1062 // ER_DUP_ENTRY
	mysqlDupEntryWithKeyName = 1586 // ER_DUP_ENTRY_WITH_KEY_NAME
	mysqlNoReferencedRow     = 1216 // ER_NO_REFERENCED_ROW (old servers)
	mysqlRowIsReferenced     = 1217 // ER_ROW_IS_REFERENCED (old servers)
	mysqlRowIsReferenced2    = 1451 // ER_ROW_IS_REFERENCED_2
	mysqlNoReferencedRow2    = 1452 // ER_NO_REFERENCED_ROW_2
	mysqlCheckViolated       = 3819 // ER_CHECK_CONSTRAINT_VIOLATED (MySQL)
	mariadbConstraintFailed  = 4025 // ER_CONSTRAINT_FAILED (MariaDB)
	mysqlLockWaitTimeout     = 1205 // ER_LOCK_WAIT_TIMEOUT
	mysqlLockDeadlock        = 1213 // ER_LOCK_DEADLOCK
)

// classifyMySQL reads the error number of a *mysql.MySQLError anywhere in err's chain.
func classifyMySQL(err error) violation {
	var e *mysql.MySQLError
	if !errors.As(err, &e) {
		return noViolation
	}
	switch e.Number {
	case mysqlDupEntry, mysqlDupEntryWithKeyName:
		return uniqueViolation
	case mysqlNoReferencedRow, mysqlRowIsReferenced, mysqlRowIsReferenced2, mysqlNoReferencedRow2:
		return foreignKeyViolation
	case mysqlCheckViolated, mariadbConstraintFailed:
		return checkViolation
	}
	return noViolation
}

// retryableMySQL: InnoDB rolls back the whole transaction of a deadlock victim, and only the
// statement that timed out waiting for a lock (innodb_rollback_on_timeout is off by default);
// inTx rolls back the rest before running the transaction again.
func retryableMySQL(err error) bool {
	var e *mysql.MySQLError
	return errors.As(err, &e) && (e.Number == mysqlLockDeadlock || e.Number == mysqlLockWaitTimeout)
}

// Connection settings of MySQL stores.
const (
	mysqlDefaultPort = "3306"
	// mysqlReadTimeout and mysqlWriteTimeout bound each network read and write, and so each
	// statement, migrations included: a server that stops answering fails the call instead of
	// hanging it.
	mysqlReadTimeout  = 30 * time.Second
	mysqlWriteTimeout = 30 * time.Second
	// mysqlLockWaitSeconds is innodb_lock_wait_timeout: a statement waiting this long for a row
	// lock fails with 1205 (and is retried) well before mysqlReadTimeout would cut the
	// connection with the transaction's outcome unknown to the driver.
	mysqlLockWaitSeconds = "10"
	// mysqlSQLMode makes an over-long or ill-typed value an error instead of a silent
	// truncation, and an unavailable InnoDB an error instead of another engine, whatever
	// the server's global sql_mode says.
	mysqlSQLMode = "'TRADITIONAL'"
)

// openMySQL opens a mysql:// or mariadb:// URL; see mysqlConfig for what it accepts.
func openMySQL(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return nil, err
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, mask(invalidURL(dsn, err), cfg.Passwd)
	}
	s, err := openServer(ctx, sql.OpenDB(connector), mysqlDialect, redact(dsn))
	return s, mask(err, cfg.Passwd)
}

// mysqlConfig converts mysql://user:pass@host[:port]/dbname[?tls=…&timeout=…] (or
// mariadb://…) to the driver's configuration. The user and password are percent-decoded.
// Only tls (true, false, skip-verify, preferred) and timeout (the dial timeout, a Go
// duration) are accepted as parameters: the others would change what the store relies on
// (clientFoundRows the rows-affected counts, parseTime and charset the types, multiStatements
// the attack surface), so they are refused rather than passed through.
func mysqlConfig(dsn string) (*mysql.Config, error) {
	u, err := parseServerURL(dsn)
	if err != nil {
		return nil, err
	}
	const want = "want mysql://user:password@host:port/dbname"
	if u.Hostname() == "" {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "mysql URL %s has no host; %s", redact(dsn), want)
	}
	if u.User == nil || u.User.Username() == "" {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "mysql URL %s has no user; %s", redact(dsn), want)
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	if dbName == "" || strings.Contains(dbName, "/") {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument,
			"mysql URL %s must name one database; %s", redact(dsn), want)
	}
	port := u.Port()
	if port == "" {
		port = mysqlDefaultPort
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(u.Hostname(), port)
	cfg.DBName = dbName
	cfg.Timeout = serverDialTimeout
	cfg.ReadTimeout = mysqlReadTimeout
	cfg.WriteTimeout = mysqlWriteTimeout
	// One round trip per statement instead of prepare, execute and close. Safe: the
	// connection charset is utf8mb4, which the driver escapes correctly.
	cfg.InterpolateParams = true
	cfg.MultiStatements = false // splitStatements runs migrations one statement at a time
	cfg.ClientFoundRows = false // insertReservation reads 0 rows affected as "already there"
	cfg.Params = map[string]string{
		"sql_mode":                 mysqlSQLMode,
		"innodb_lock_wait_timeout": mysqlLockWaitSeconds,
	}
	if err := mysqlParams(cfg, u.RawQuery, dsn); err != nil {
		return nil, err
	}
	return cfg, nil
}

// mysqlParams applies the query parameters of a mysql:// URL to cfg.
func mysqlParams(cfg *mysql.Config, rawQuery, dsn string) error {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return seckill.Errorf(seckill.CodeInvalidArgument, "mysql URL %s has a malformed query", redact(dsn))
	}
	for key, values := range q {
		if len(values) != 1 {
			return seckill.Errorf(seckill.CodeInvalidArgument, "mysql URL %s gives %s more than once", redact(dsn), key)
		}
		v := values[0]
		switch key {
		case "tls":
			switch v {
			case "true", "false", "skip-verify", "preferred":
				cfg.TLSConfig = v
			default:
				return seckill.Errorf(seckill.CodeInvalidArgument,
					"mysql URL %s: tls=%q; want true, false, skip-verify or preferred", redact(dsn), v)
			}
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return seckill.Errorf(seckill.CodeInvalidArgument,
					"mysql URL %s: timeout=%q; want a positive Go duration such as 5s", redact(dsn), v)
			}
			cfg.Timeout = d
		default:
			return seckill.Errorf(seckill.CodeInvalidArgument,
				"mysql URL %s: parameter %q is not supported; the store accepts tls and timeout only", redact(dsn), key)
		}
	}
	return nil
}
