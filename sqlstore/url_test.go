package sqlstore

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

func TestMySQLConfig(t *testing.T) {
	// Every reserved character, percent-encoded, in the user and the password.
	const user, password = "shop@eu:1", "p@ss:w/rd?#%[]&= é"
	encoded := url.UserPassword(user, password).String()
	for _, c := range []struct {
		dsn            string
		user, password string
		addr, db, tls  string
		timeout        time.Duration
	}{
		{dsn: "mysql://root@127.0.0.1:3306/test", user: "root", addr: "127.0.0.1:3306", db: "test", timeout: serverDialTimeout},
		{dsn: "mariadb://" + encoded + "@db.example/shop", user: user, password: password, addr: "db.example:3306", db: "shop",
			timeout: serverDialTimeout},
		{dsn: "MySQL://u:p@[::1]:3307/d%2Dx", user: "u", password: "p", addr: "[::1]:3307", db: "d-x", timeout: serverDialTimeout},
		{dsn: "mysql://u:p@h/d?tls=true&timeout=2s", user: "u", password: "p", addr: "h:3306", db: "d", tls: "true",
			timeout: 2 * time.Second},
	} {
		cfg, err := mysqlConfig(c.dsn)
		if err != nil {
			t.Errorf("mysqlConfig(%q): %v", c.dsn, err)
			continue
		}
		if cfg.User != c.user || cfg.Passwd != c.password || cfg.Net != "tcp" || cfg.Addr != c.addr ||
			cfg.DBName != c.db || cfg.TLSConfig != c.tls || cfg.Timeout != c.timeout {
			t.Errorf("mysqlConfig(%q) = user %q password %q net %q addr %q db %q tls %q timeout %v; want %q %q tcp %q %q %q %v",
				c.dsn, cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName, cfg.TLSConfig, cfg.Timeout,
				c.user, c.password, c.addr, c.db, c.tls, c.timeout)
		}
		// What the store relies on, whatever the URL says.
		if !cfg.InterpolateParams || cfg.MultiStatements || cfg.ClientFoundRows || cfg.ParseTime ||
			cfg.ReadTimeout != mysqlReadTimeout || cfg.WriteTimeout != mysqlWriteTimeout ||
			cfg.Params["sql_mode"] != mysqlSQLMode || cfg.Params["innodb_lock_wait_timeout"] != mysqlLockWaitSeconds {
			t.Errorf("mysqlConfig(%q) = %+v; the fixed settings differ", c.dsn, cfg)
		}
	}
}

// No error of Open quotes the password, however the URL is malformed and wherever the
// connection fails. Port 1 refuses connections at once on any usual machine.
func TestOpenNeverQuotesThePassword(t *testing.T) {
	const pw = "S3cr3tXyz"
	for _, dsn := range []string{
		"mysql://root:" + pw + "@127.0.0.1:1/db",
		"mysql://root:" + url.QueryEscape("S3cr3t/Xyz") + "@127.0.0.1:1/db",
		"mysql://root:S3cr/3tXyz@127.0.0.1:1/db",
		"mysql://root:S3cr#3tXyz@127.0.0.1:1/db",
		"mysql://root:S3cr%zz3tXyz@127.0.0.1:1/db",
		"mysql://root:S3cr3tXyz@127.0.0.1:1",
		"mysql://root:S3cr3tXyz@127.0.0.1:1/db?password=S3cr3tXyz",
		"mysql://root:S3c/r3tXyz@127.0.0.1:1", // the "path" /r3tXyz@127.0.0.1:1 would be a database name
		"postgres://postgres:" + pw + "@127.0.0.1:1/db",
		"postgres://postgres:S3cr/3tXyz@127.0.0.1:1/db",
		"postgres://postgres:S3cr%zz3tXyz@127.0.0.1:1/db",
		"postgres://postgres:S3c/r3tXyz@127.0.0.1:1",
		"postgres://postgres:" + pw + "@127.0.0.1:1/db?sslmode=bogus",
		"postgres://postgres@127.0.0.1:1/db?password=" + pw,
		"postgresql://postgres:" + pw + "@127.0.0.1:1/db?connect_timeout=x",
	} {
		_, err := Open(t.Context(), dsn)
		if err == nil {
			t.Errorf("Open(%s) succeeded", redact(dsn))
			continue
		}
		for _, piece := range []string{"S3cr", "3tXyz", "r3tX", "%zz"} {
			if strings.Contains(err.Error(), piece) || strings.Contains(seckill.ErrorMessage(err), piece) {
				t.Errorf("Open(%s) = %v: quotes %q of the password", redact(dsn), err, piece)
			}
		}
	}
}

func TestRedact(t *testing.T) {
	for dsn, want := range map[string]string{
		"mysql://root:pw@h:3306/db":              "…@h:3306/db",
		"mysql://root:p@w?d@h/db?tls=true":       "…@h/db?…",
		"postgres://h/db?password=pw":            "postgres://h/db?…",
		"postgres://u@h/db?application_name=a@b": "…@b",
		"sqlite://./x.db":                        "sqlite://./x.db",
	} {
		if got := redact(dsn); got != want {
			t.Errorf("redact(%q) = %q, want %q", dsn, got, want)
		}
	}
}

func TestMask(t *testing.T) {
	inner := seckill.Errorf(seckill.CodeUnavailable, "dial")
	err := mask(errors.Join(inner, errors.New("auth with hunter 2/x (hunter+2%2Fx, hunter%202%2Fx) failed")), "hunter 2/x")
	if strings.Contains(err.Error(), "hunter") || !strings.Contains(err.Error(), "xxxxx") {
		t.Fatalf("mask = %q; want the password and its encoding replaced", err)
	}
	if seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("mask lost the wrapped error: code %q", seckill.ErrorCode(err))
	}
	plain := errors.New("no password here")
	if mask(plain, "hunter 2/x") != plain || mask(plain, "") != plain || mask(nil, "x") != nil {
		t.Fatal("mask changed an error that does not quote the password")
	}
}

// A context that ends while Open waits for a server is reported, not hung on.
func TestOpenHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, dsn := range []string{"mysql://u:p@192.0.2.1/db", "postgres://u:p@192.0.2.1/db"} {
		start := time.Now()
		if _, err := Open(ctx, dsn); err == nil {
			t.Errorf("Open(%s) with a cancelled context succeeded", dsn)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Open(%s) with a cancelled context took %v", dsn, d)
		}
	}
}
