package sqlstore

import (
	"context"
	"database/sql"
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

// createMigrationsTable is written in SQL that SQLite, MySQL and PostgreSQL all accept.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    BIGINT       NOT NULL PRIMARY KEY,
	name       VARCHAR(255) NOT NULL,
	applied_at BIGINT       NOT NULL
)`

// migrate applies the embedded migrations of d that db has not recorded in schema_migrations,
// each in its own transaction together with its schema_migrations row, so that a crash leaves
// every migration either fully applied and recorded or not at all (on databases with
// transactional DDL: SQLite and PostgreSQL). It is idempotent: a second run finds every version
// recorded and does nothing. Each version is re-checked inside its transaction, so two
// processes starting at once do not apply one migration twice. A database whose schema is newer
// than the newest embedded migration is refused rather than used by code that predates it.
func migrate(ctx context.Context, db *sql.DB, d dialect, now func() time.Time) error {
	ms, err := loadMigrations(migrationFiles, d.name)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return fmt.Errorf("sqlstore: no migrations embedded for %s", d.name)
	}
	if _, err := db.ExecContext(ctx, createMigrationsTable); err != nil {
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

func applyMigration(ctx context.Context, db *sql.DB, d dialect, m migration, now func() time.Time) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: migration %04d_%s: begin: %w", m.version, m.name, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // err already says what went wrong
		}
	}()
	var applied int
	if err := tx.QueryRowContext(ctx, d.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`),
		m.version).Scan(&applied); err != nil {
		return fmt.Errorf("sqlstore: migration %04d_%s: %w", m.version, m.name, err)
	}
	if applied > 0 {
		return tx.Rollback()
	}
	stmts, err := splitStatements(m.body)
	if err != nil {
		return fmt.Errorf("sqlstore: migration %04d_%s: %w", m.version, m.name, err)
	}
	for i, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("sqlstore: migration %04d_%s, statement %d: %w", m.version, m.name, i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx,
		d.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
		m.version, m.name, toMillis(now())); err != nil {
		return fmt.Errorf("sqlstore: migration %04d_%s: record: %w", m.version, m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: migration %04d_%s: commit: %w", m.version, m.name, err)
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
