package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill/internal/wait"
)

// migrationFiles holds the schema of every dialect, so a binary carries the migrations that
// match its code and `seckill serve` can create its tables with nothing else installed.
//
//go:embed migrations
var migrationFiles embed.FS

// migration is one NNNN_name.sql file.
type migration struct {
	version int
	name    string
	body    string
}

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// loadMigrations reads migrations/<dialect>/ from fsys, in version order. A file whose name
// does not fit NNNN_name.sql, or two files with one version, is an error: silently skipping a
// migration would leave a schema the code does not expect.
func loadMigrations(fsys fs.FS, dialect string) ([]migration, error) {
	dir := path.Join("migrations", dialect)
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: read migrations of %s: %w", dialect, err)
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("sqlstore: migration file %s/%s is not named NNNN_name.sql", dir, e.Name())
		}
		v, _ := strconv.Atoi(m[1]) // four digits always parse
		if v == 0 {
			return nil, fmt.Errorf("sqlstore: migration %s/%s: versions start at 0001", dir, e.Name())
		}
		if other, ok := seen[v]; ok {
			return nil, fmt.Errorf("sqlstore: migrations %s and %s share version %d", other, e.Name(), v)
		}
		seen[v] = e.Name()
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("sqlstore: read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: m[2], body: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// createMigrationsTable is written in SQL that SQLite, MySQL and PostgreSQL all accept; the
// dialect's tableOptions follow it.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    BIGINT       NOT NULL PRIMARY KEY,
	name       VARCHAR(255) NOT NULL,
	applied_at BIGINT       NOT NULL
)`

// Waiting for another instance's migration lock.
const (
	// migrateLockWait is how long Open waits for another instance to finish migrating: far
	// longer than creating the schema takes, short enough that a stuck holder is reported.
	migrateLockWait = time.Minute
	// migrateLockPoll is the pause between two tries of a lock that was held.
	migrateLockPoll = 50 * time.Millisecond
	// migrateUnlockTimeout bounds releasing the lock, which must happen even when the
	// context of Open is done.
	migrateUnlockTimeout = 5 * time.Second
)

// migrationConn is what migrations run on: the *sql.DB of SQLite, whose write pool has a single
// connection, or the one *sql.Conn that holds a server database's migration lock.
type migrationConn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// migrate applies the embedded migrations of d that db has not recorded in schema_migrations.
// It is idempotent: a second run finds every version recorded and does nothing. A database
// whose schema is newer than the newest embedded migration is refused rather than used by code
// that predates it.
//
// Concurrent runs (instances starting at once) are safe. SQLite's write lock serializes the
// migration transactions, and each version is re-checked inside its transaction. A server
// database's run happens, from creating schema_migrations to the last migration, on one
// connection that holds the dialect's advisory lock, so the runs take turns; that also
// covers MySQL, whose DDL cannot be part of a transaction (see applyMigration).
func migrate(ctx context.Context, db *sql.DB, d dialect, now func() time.Time) error {
	ms, err := loadMigrations(migrationFiles, d.name)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return fmt.Errorf("sqlstore: no migrations embedded for %s", d.name)
	}
	if d.migrationLock == nil {
		return runMigrations(ctx, db, d, ms, now)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlstore: migrate: connect: %w", err)
	}
	if err := lockMigrations(ctx, conn, d.migrationLock); err != nil {
		discardConn(conn)
		return err
	}
	err = runMigrations(ctx, conn, d, ms, now)
	unlockMigrations(ctx, conn, d.migrationLock)
	return err
}

// lockMigrations takes the migration lock on conn, waiting up to migrateLockWait for another
// instance to release it.
func lockMigrations(ctx context.Context, conn *sql.Conn, l *advisoryLock) error {
	deadline := time.Now().Add(migrateLockWait)
	for {
		var locked bool
		if err := conn.QueryRowContext(ctx, l.try).Scan(&locked); err != nil {
			return fmt.Errorf("sqlstore: migrate: take the migration lock: %w", err)
		}
		if locked {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sqlstore: migrate: another instance has held the migration lock for over %v", migrateLockWait)
		}
		if !wait.Sleep(ctx, migrateLockPoll) {
			return fmt.Errorf("sqlstore: migrate: wait for the migration lock: %w", ctx.Err())
		}
	}
}

// unlockMigrations releases the migration lock and returns conn to the pool. The lock belongs
// to the session, so if releasing fails the connection is discarded instead, which ends the
// session and frees the lock all the same; that is why a failure here is not an error of Open.
func unlockMigrations(ctx context.Context, conn *sql.Conn, l *advisoryLock) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), migrateUnlockTimeout)
	defer cancel()
	var released bool
	if err := conn.QueryRowContext(ctx, l.release).Scan(&released); err != nil || !released {
		discardConn(conn)
		return
	}
	_ = conn.Close() // back to the pool; nothing was lost if that fails
}

// discardConn closes conn's connection instead of returning it to the pool, so that session
// state (a lock that may still be held) dies with it.
func discardConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// runMigrations creates schema_migrations if needed and applies the migrations of ms that it
// does not record, in order.
func runMigrations(ctx context.Context, db migrationConn, d dialect, ms []migration, now func() time.Time) error {
	if _, err := db.ExecContext(ctx, createMigrationsTable+d.tableOptions); err != nil {
		return fmt.Errorf("sqlstore: create schema_migrations: %w", err)
	}
	var newest sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("sqlstore: read schema version: %w", err)
	}
	if latest := ms[len(ms)-1].version; newest.Valid && newest.Int64 > int64(latest) {
		return fmt.Errorf("sqlstore: database schema version %d is newer than this binary's %d; upgrade the binary",
			newest.Int64, latest)
	}
	for _, m := range ms {
		if err := applyMigration(ctx, db, d, m, now); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration applies m unless schema_migrations records it. Where DDL is transactional
// (SQLite, PostgreSQL), the migration and its schema_migrations row commit together, so a crash
// leaves it either fully applied and recorded or not at all.
func applyMigration(ctx context.Context, db migrationConn, d dialect, m migration, now func() time.Time) (err error) {
	if !d.transactionalDDL {
		return applyMigrationDirect(ctx, db, d, m, now)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: migration %04d_%s: begin: %w", m.version, m.name, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // err already says what went wrong
		}
	}()
	applied, err := migrationApplied(ctx, tx, d, m)
	if err != nil || applied {
		return errors.Join(err, tx.Rollback())
	}
	if err := execMigration(ctx, tx, m); err != nil {
		return err
	}
	if err := recordMigration(ctx, tx, d, m, now); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: migration %04d_%s: commit: %w", m.version, m.name, err)
	}
	return nil
}

// applyMigrationDirect applies m statement by statement, then records it: MySQL commits every
// DDL statement on its own (an implicit commit), so no transaction could hold them together.
// The caller holds the migration lock, so no other instance runs m meanwhile. A failure (or a
// crash) half way leaves the statements before it applied and m unrecorded; the error says
// which statement failed, and README.md says how to finish or undo it by hand.
func applyMigrationDirect(ctx context.Context, db migrationConn, d dialect, m migration, now func() time.Time) error {
	applied, err := migrationApplied(ctx, db, d, m)
	if err != nil || applied {
		return err
	}
	if err := execMigration(ctx, db, m); err != nil {
		return fmt.Errorf("%w; the statements before it stay applied (MySQL DDL is not transactional): "+
			"apply the rest by hand and record version %d in schema_migrations, or drop what was created, then restart",
			err, m.version)
	}
	return recordMigration(ctx, db, d, m, now)
}

// querier is a *sql.Tx or a migrationConn.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func migrationApplied(ctx context.Context, q querier, d dialect, m migration) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, d.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`),
		m.version).Scan(&n); err != nil {
		return false, fmt.Errorf("sqlstore: migration %04d_%s: %w", m.version, m.name, err)
	}
	return n > 0, nil
}

func execMigration(ctx context.Context, q querier, m migration) error {
	stmts, err := splitStatements(m.body)
	if err != nil {
		return fmt.Errorf("sqlstore: migration %04d_%s: %w", m.version, m.name, err)
	}
	for i, stmt := range stmts {
		if _, err := q.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("sqlstore: migration %04d_%s, statement %d: %w", m.version, m.name, i+1, err)
		}
	}
	return nil
}

func recordMigration(ctx context.Context, q querier, d dialect, m migration, now func() time.Time) error {
	if _, err := q.ExecContext(ctx,
		d.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
		m.version, m.name, toMillis(now())); err != nil {
		return fmt.Errorf("sqlstore: migration %04d_%s: record: %w", m.version, m.name, err)
	}
	return nil
}

// splitStatements cuts a migration into statements at the semicolons that are outside quotes
// and comments, so that no driver needs a multi-statement mode (MySQL's is off by default).
// Statements with nothing but comments and blanks are dropped.
func splitStatements(body string) ([]string, error) {
	var (
		stmts   []string
		cur     strings.Builder
		quote   rune // the open quote: ', " or `, or 0
		content bool // cur holds something besides blanks and comments
	)
	flush := func() {
		if content {
			stmts = append(stmts, strings.TrimSpace(cur.String()))
		}
		cur.Reset()
		content = false
	}
	rs := []rune(body)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			cur.WriteRune(r)
			if r == quote {
				quote = 0 // a doubled quote reopens at once on the next rune
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
			content = true
			cur.WriteRune(r)
		case r == '-' && i+1 < len(rs) && rs[i+1] == '-':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			cur.WriteByte('\n')
		case r == '/' && i+1 < len(rs) && rs[i+1] == '*':
			end := strings.Index(string(rs[i+2:]), "*/")
			if end < 0 {
				return nil, errors.New("unterminated /* comment")
			}
			i += 2 + len([]rune(string(rs[i+2:])[:end])) + 1
			cur.WriteByte(' ')
		case r == ';':
			flush()
		default:
			if !isSpace(r) {
				content = true
			}
			cur.WriteRune(r)
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	flush()
	return stmts, nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
