package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/seckill-go/seckill"
)

// Pool and connection settings shared by the server databases (MySQL, PostgreSQL).
const (
	// serverMaxOpenConns bounds the connections of one instance. Payments of one sale
	// serialize on its sales row anyway, so more connections would only queue inside the
	// database; several instances share the server's max_connections (100 on PostgreSQL, 151
	// on MySQL by default).
	serverMaxOpenConns = 32
	// serverMaxIdleConns keeps half the pool warm between bursts.
	serverMaxIdleConns = 16
	// serverConnMaxLifetime recycles connections before proxies, load balancers and server
	// timeouts (wait_timeout) cut them, and so that a failover's new primary gets traffic.
	serverConnMaxLifetime = 3 * time.Minute
	// serverConnMaxIdleTime closes idle connections left over from a burst.
	serverConnMaxIdleTime = time.Minute
	// serverDialTimeout bounds establishing a connection, TLS and authentication included.
	serverDialTimeout = 5 * time.Second
)

// openServer finishes opening a MySQL or PostgreSQL store on db: it sizes the pool, checks
// that the server answers, and migrates the schema. where names the database in errors (the
// redacted URL). db is closed if Open fails.
func openServer(ctx context.Context, db *sql.DB, d dialect, where string) (*Store, error) {
	db.SetMaxOpenConns(serverMaxOpenConns)
	db.SetMaxIdleConns(serverMaxIdleConns)
	db.SetConnMaxLifetime(serverConnMaxLifetime)
	db.SetConnMaxIdleTime(serverConnMaxIdleTime)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlstore: open %s %s: %w", d.name, where, err)
	}
	if err := migrate(ctx, db, d, time.Now); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w (database %s)", err, where)
	}
	// One pool serves reads and writes: unlike SQLite, a server database runs writers
	// concurrently, so there is no single writer connection to keep reads away from.
	s := &Store{db: db, rdb: db, d: d, now: time.Now}
	if d.preparedInserts {
		if err := s.inserts.prepare(ctx, s, preparedInsertRows, s.insertRowsSQL); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("%w (database %s)", err, where)
		}
	}
	return s, nil
}

// parseServerURL parses a mysql:// or postgres:// URL. Its errors never quote the URL or the
// parser's reason, which for a password with an unencoded '/', '#' or '%' would quote a piece
// of the password.
func parseServerURL(dsn string) (*url.URL, error) {
	const hint = "percent-encode the reserved characters @ : / ? # [ ] % in the user and password"
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "database URL %s is malformed; %s", redact(dsn), hint)
	}
	if u.Fragment != "" || strings.Contains(u.EscapedPath(), "@") {
		// A '#' or '/' in an unencoded password moves the rest of it into the fragment or the
		// path (then still holding the real '@host'); the host and port parsed from what is
		// left would be pieces of the password, and must not reach a dial error.
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "database URL %s is malformed; %s", redact(dsn), hint)
	}
	return u, nil
}

// invalidURL reports a URL the driver refused.
func invalidURL(dsn string, err error) error {
	return fmt.Errorf("%w: %w", seckill.Errorf(seckill.CodeInvalidArgument, "database URL %s is not valid", redact(dsn)), err)
}

// maskedError is a driver error whose message had the password in it, with the password
// replaced. It keeps the original for errors.Is and errors.As.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// mask hides password, raw or percent-encoded, in err's message. The drivers are not known to
// quote passwords, but their messages end up in logs, so this is checked rather than hoped.
func mask(err error, password string) error {
	if err == nil || password == "" {
		return err
	}
	msg := err.Error()
	masked := msg
	for _, form := range []string{password, url.QueryEscape(password), url.PathEscape(password)} {
		masked = strings.ReplaceAll(masked, form, "xxxxx")
	}
	if masked == msg {
		return err
	}
	return &maskedError{msg: masked, err: err}
}
