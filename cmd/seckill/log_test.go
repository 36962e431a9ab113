package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

func discardLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// captureLogger logs every level, Debug included, to w.
func captureLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// assertNoSecret fails if any of secrets appears in out (every line the process wrote).
func assertNoSecret(t *testing.T, what, out string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, out)
		}
	}
}

// dbSecrets are the secret values the serve tests put in the database and Redis URLs.
var dbSecrets = []string{"pw-in-query-9d1c", "sslpw-in-query-7b2e", "redis-pw-5f3a", "token-in-query-11aa"}

// withSecrets adds the test's secret parameters to a postgres URL.
func withSecrets(base string) string {
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "password=" + dbSecrets[0] + "&sslpassword=" + dbSecrets[1] + "&sslmode=disable&application_name=seckill-log-test"
}

// TestServeLogsNoSecretOfItsURLs: `seckill serve` with a postgres URL that carries
// ?password= and sslpassword=, and a Redis URL with a password, logs its configuration and,
// when the database cannot be reached, its startup error, without any of them.
func TestServeLogsNoSecretOfItsURLs(t *testing.T) {
	var out, errb testenv.Buffer
	db := withSecrets("postgres://nobody@127.0.0.1:1/seckill") + "&connect_timeout=1"
	redis := "redis://user:" + dbSecrets[2] + "@127.0.0.1:1/0?token=" + dbSecrets[3]
	code := run(context.Background(), []string{"serve", "--dev", "--addr", "127.0.0.1:0", "--db", db, "--redis-url", redis}, noEnv, &out, &errb)
	if code != 1 {
		t.Fatalf("serve on an unreachable database exited %d, want 1:\n%s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "msg=config") || !strings.Contains(errb.String(), "open database postgres://nobody@127.0.0.1:1/seckill?password=****") {
		t.Errorf("want the masked configuration and the database error:\n%s", errb.String())
	}
	assertNoSecret(t, "serve's log and error", out.String()+errb.String(), dbSecrets...)
}

// TestServeOnPostgresLogsNoSecret runs `seckill serve` on PostgreSQL with ?password= in its
// URL, buys through the purchase path, asks for unknown and wrong-method paths that carry a
// token-like segment and query, and checks that no line it logged shows a secret or a token.
func TestServeOnPostgresLogsNoSecret(t *testing.T) {
	db := withSecrets(freshPostgres(t))
	a := startServeDB(t, db, "--redis-url", "redis://:"+dbSecrets[2]+"@127.0.0.1:1")
	ctx := context.Background()
	secret := strings.TrimPrefix(regexpFind(t, a.out.String(), `SECKILL_AUTH_SECRET=[0-9a-f]+`), "SECKILL_AUTH_SECRET=")
	admin := strings.TrimPrefix(regexpFind(t, a.out.String(), `SECKILL_ADMIN_TOKEN=[0-9a-f]+`), "SECKILL_ADMIN_TOKEN=")
	if _, err := client.New(a.url, client.WithToken(admin)).CreateSale(ctx, client.NewSale{ID: "logs", PriceCents: 1, Stock: 5, HoldSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	jwt, err := httpapi.MintToken([]byte(secret), "alice", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	alice := client.New(a.url, client.WithToken(jwt))
	p, err := alice.Path(ctx, "logs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Buy(ctx, p.Path, 1, ""); err != nil {
		t.Fatal(err)
	}
	token := p.Path[strings.LastIndex(p.Path, "/")+1:]
	probeTokenPaths(t, a.url, token)
	a.stop(t)
	assertNoSecret(t, "serve's log", a.log.String(), append([]string{token, "tok-in-404-path", "q-secret-1"}, dbSecrets...)...)
	if !strings.Contains(a.log.String(), "password=****") {
		t.Errorf("the logged configuration does not show the masked database URL:\n%s", a.log.String())
	}
}

// probeTokenPaths asks for paths that carry a token: an unknown one (404), a wrong method on a
// buy path (405 or 404), and a buy with a token that is not valid (400/403), each with a
// secret-looking query.
func probeTokenPaths(t *testing.T, base, token string) {
	t.Helper()
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/v1/nope/tok-in-404-path?token=q-secret-1"},
		{"GET", "/api/v1/sales/logs/buy/" + token + "?password=q-secret-1"},
		{"PUT", "/api/v1/sales/logs/buy/tok-in-404-path"},
		{"POST", "/api/v1/sales/logs/buy/tok-in-404-path?token=q-secret-1"},
	} {
		req, _ := http.NewRequest(r.method, base+r.path, strings.NewReader(`{"quantity":1}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("%s %s: %d, want an error", r.method, r.path, resp.StatusCode)
		}
	}
}

// unavailableBuys is an engine whose buys fail as if Redis were down: every buy is logged.
type unavailableBuys struct{ seckill.Inventory }

func (unavailableBuys) Buy(context.Context, seckill.BuyRequest) (seckill.BuyResult, error) {
	return seckill.BuyResult{}, seckill.Errorf(seckill.CodeUnavailable, "engine unreachable")
}

// TestBuyFailureLogsRouteNotToken: a buy that fails on the engine is logged (503), with its
// route pattern and without the purchase token of its path; 404 and 405 answers to paths with
// a token-like segment log nothing of it either.
func TestBuyFailureLogsRouteNotToken(t *testing.T) {
	var logs testenv.Buffer
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: "sqlite://" + filepath.Join(t.TempDir(), "l.db"), Dev: true}
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	a, err := startApp(context.Background(), cfg, appOptions{buyRate: -1, wrapInventory: func(inv seckill.Inventory) seckill.Inventory {
		return unavailableBuys{inv}
	}}, captureLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close(context.Background())
	ctx := context.Background()
	if _, err := client.New(a.url, client.WithToken(cfg.AdminToken)).CreateSale(ctx, client.NewSale{ID: "logs", PriceCents: 1, Stock: 5, HoldSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	jwt, _ := httpapi.MintToken([]byte(cfg.AuthSecret), "alice", time.Now(), time.Hour)
	alice := client.New(a.url, client.WithToken(jwt))
	p, err := alice.Path(ctx, "logs")
	if err != nil {
		t.Fatal(err)
	}
	_, err = alice.Buy(ctx, p.Path+"?token=q-secret-1", 1, "")
	if e, ok := errors.AsType[*client.Error](err); !ok || e.Status != 503 {
		t.Fatalf("buy on an unavailable engine: %v, want 503", err)
	}
	token := p.Path[strings.LastIndex(p.Path, "/")+1:]
	probeTokenPaths(t, a.url, token)
	if err := a.close(ctx); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, `route="POST /api/v1/sales/{id}/buy/{token}"`) {
		t.Errorf("the failed buy is not logged with its route pattern:\n%s", out)
	}
	assertNoSecret(t, "the log", out, token, "tok-in-404-path", "q-secret-1", cfg.AuthSecret, cfg.AdminToken, cfg.PaymentSecret, jwt)
}

// startServeDB is startServe on the given database URL.
func startServeDB(t *testing.T, db string, args ...string) *servedApp {
	t.Helper()
	return startServe(t, append([]string{"--db", db}, args...)...)
}

// regexpFind returns the first match of expr in s, or fails.
func regexpFind(t *testing.T, s, expr string) string {
	t.Helper()
	m := regexp.MustCompile(expr).FindString(s)
	if m == "" {
		t.Fatalf("no %s in %q", expr, s)
	}
	return m
}

// freshPostgres creates an empty database on the test PostgreSQL and returns its URL.
func freshPostgres(t *testing.T) string {
	t.Helper()
	base := testenv.Postgres(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "seckill_log_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		_ = admin.Close()
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		_ = admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String()
}

var _ = stdlib.GetDefaultDriver // registers the "pgx" database/sql driver

// TestSecretsMinimumLength: outside --dev a secret shorter than 32 bytes stops the start with
// a message that names it, says how to make one and does not quote it; --dev still generates
// the missing ones (long enough for production too).
func TestSecretsMinimumLength(t *testing.T) {
	long := strings.Repeat("k", minSecretLen)
	c := config{AuthSecret: long, AdminToken: "a", PaymentSecret: "x"}
	_, err := c.secrets()
	if err == nil {
		t.Fatal("a 1-byte admin token was accepted outside --dev")
	}
	for _, want := range []string{"SECKILL_ADMIN_TOKEN (1 byte)", "SECKILL_PAYMENT_SECRET (1 byte)", "openssl rand -hex 32", "32 bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "SECKILL_AUTH_SECRET") {
		t.Errorf("error %q names the secret that is long enough", err)
	}
	c = config{AuthSecret: long, AdminToken: long[1:], PaymentSecret: long}
	if _, err := c.secrets(); err == nil || !strings.Contains(err.Error(), "SECKILL_ADMIN_TOKEN (31 bytes)") {
		t.Errorf("31 bytes: %v, want too short", err)
	}
	c = config{AuthSecret: long, AdminToken: long, PaymentSecret: long}
	if _, err := c.secrets(); err != nil {
		t.Errorf("32-byte secrets: %v", err)
	}

	dev := config{Dev: true, AdminToken: "a"}
	generated, err := dev.secrets()
	if err != nil || len(generated) != 3 || dev.AdminToken != "a" {
		t.Fatalf("--dev: generated %v, %v (admin token %q kept?)", generated, err, dev.AdminToken)
	}
	prod := config{AuthSecret: dev.AuthSecret, AdminToken: dev.PaymentSecret, PaymentSecret: dev.PaymentSecret}
	if _, err := prod.secrets(); err != nil {
		t.Errorf("generated secrets would not pass outside --dev: %v", err)
	}
}

// TestServeRefusesShortSecret: the check runs in `seckill serve`, before anything starts.
func TestServeRefusesShortSecret(t *testing.T) {
	env := map[string]string{"SECKILL_AUTH_SECRET": strings.Repeat("s", 40), "SECKILL_ADMIN_TOKEN": "short-admin", "SECKILL_PAYMENT_SECRET": strings.Repeat("p", 40)}
	var out, errb testenv.Buffer
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, func(k string) string { return env[k] }, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "SECKILL_ADMIN_TOKEN (11 bytes)") || !strings.Contains(errb.String(), "openssl rand -hex 32") {
		t.Fatalf("serve with an 11-byte admin token: exit %d:\n%s", code, errb.String())
	}
	assertNoSecret(t, "serve's output", out.String()+errb.String(), "short-admin")
}

func TestMask(t *testing.T) {
	for s, want := range map[string]string{"": "(unset)", "a": "(1 byte)", "abcd": "(4 bytes)", strings.Repeat("0123456789abcdef", 4): "(64 bytes)"} {
		if got := mask(s); got != want {
			t.Errorf("mask(%q) = %q, want %q", s, got, want)
		}
	}
	if got := mask("s3cr3t-value"); got != "(12 bytes)" {
		t.Errorf("mask(%q) = %q: want the length only", "s3cr3t-value", got)
	}
}

func TestMaskURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"sqlite://./seckill.db", "sqlite://./seckill.db"},
		{"", ""},
		{"postgres://u:pw1@h:5432/db", "postgres://u:****@h:5432/db"},
		{"postgres://u@h/db?password=pw1&sslmode=disable", "postgres://u@h/db?password=****&sslmode=disable"},
		{"postgres://u@h/db?sslmode=require&sslpassword=pw1", "postgres://u@h/db?sslmode=require&sslpassword=****"},
		{"postgres://u@h/db?PassWord=pw1", "postgres://u@h/db?PassWord=****"},
		{"postgres://u@h/db?my_secret=pw1&api_token=pw2&x=1", "postgres://u@h/db?my_secret=****&api_token=****&x=1"},
		{"postgres://u@h/db?pass%77ord=pw1", "postgres://u@h/db?pass%77ord=****"},
		{"postgres://u@h/db?password=p@w1", "postgres://****@w1"},
		{"postgres://u:p/w1@h/db", "postgres://****@h/db"},
		{"postgres://u@h/db#pw1", "postgres://u@h/db#****"},
		{"mysql://root:pw1@127.0.0.1:3306/s?tls=true", "mysql://root:****@127.0.0.1:3306/s?tls=true"},
		{"redis://:pw1@127.0.0.1:6379/0", "redis://:****@127.0.0.1:6379/0"},
		{"redis://user:pw1@h1:7001,h2:7002?cluster=1", "redis://user:****@h1:7001,h2:7002?cluster=1"},
		{"redis://user@h:6379", "redis://user@h:6379"},
		{"host=h password=pw1", "****"},
	} {
		got := maskURL(c.in)
		if got != c.want {
			t.Errorf("maskURL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "pw1") || strings.Contains(got, "pw2") {
			t.Errorf("maskURL(%q) = %q shows the secret", c.in, got)
		}
	}
}

// TestScrubError: whatever a driver quotes of its URL, the error that reaches the terminal
// holds none of the URL's secrets, and still unwraps.
func TestScrubError(t *testing.T) {
	raw := "postgres://u:p%40ss@h/db?password=pw1&sslpassword=pw2"
	inner := fmt.Errorf("dial %s: refused (password p@ss, pw1, pw2)", raw)
	err := scrubError(fmt.Errorf("open database: %w", inner), urlSecrets(raw)...)
	for _, s := range []string{"p@ss", "p%40ss", "pw1", "pw2"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("scrubbed error %q shows %q", err, s)
		}
	}
	if !errors.Is(err, inner) {
		t.Error("the scrubbed error does not unwrap to the driver's")
	}
}

// TestServeRedisURLErrorsQuoteNoPassword: a Redis or database URL whose password holds an
// unencoded '/', '?' or '#' (which moves the '@' out of the authority) stops the start without
// any piece of the password in the log or the error; so does an unreachable Redis.
func TestServeRedisURLErrorsQuoteNoPassword(t *testing.T) {
	for _, redis := range []string{
		"redis://:pw-a1/pw-b2@127.0.0.1:1",
		"redis://user:pw-a1?pw-b2@127.0.0.1:1/0",
		"redis://:pw-a1%zzpw-b2@127.0.0.1:1",
		"redis://:pw-a1pw-b2@127.0.0.1:1/0",
	} {
		var out, errb testenv.Buffer
		db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
		code := run(context.Background(), []string{"serve", "--dev", "--engine", "redis", "--addr", "127.0.0.1:0", "--db", db, "--redis-url", redis}, noEnv, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "seckill: connect to redis") {
			t.Errorf("serve on %s: exit %d, want a Redis error:\n%s", redis, code, errb.String())
		}
		assertNoSecret(t, "serve's log and error", out.String()+errb.String(), "pw-a1", "pw-b2")
	}
	for _, db := range []string{
		"postgres://u:pw-a1/pw-b2@127.0.0.1:1/db",
		"postgres://u:pw-a1?pw-b2@127.0.0.1:1/db",
		"mysql://u:pw-a1/pw-b2@127.0.0.1:1/db",
		"mysql://u:pw-a1#pw-b2@127.0.0.1:1/db",
	} {
		var out, errb testenv.Buffer
		code := run(context.Background(), []string{"serve", "--dev", "--addr", "127.0.0.1:0", "--db", db}, noEnv, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "seckill: open database") {
			t.Errorf("serve on %s: exit %d, want a database error:\n%s", db, code, errb.String())
		}
		assertNoSecret(t, "serve's log and error", out.String()+errb.String(), "pw-a1", "pw-b2")
	}
}
