package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
)

// TestServeDevKeepsSecretsAcrossRestarts: the first `serve --dev` on a SQLite file generates the
// secrets, prints the file's path and writes them there (mode 0600); the second start on the
// same database reads them back, prints the path but no value, and accepts the admin token and
// a user's session made under the first. The log never holds a value.
func TestServeDevKeepsSecretsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "keep.db")
	file := filepath.Join(dir, "keep.db"+devSecretsSuffix)

	first := startServe(t, "--db", db)
	out := first.out.String()
	if !strings.Contains(out, "kept in "+file) {
		t.Fatalf("the first start does not name the secrets file %s:\n%s", file, out)
	}
	values := map[string]string{}
	for _, name := range devSecretNames {
		m := regexp.MustCompile(name + `=([0-9a-f]{64})`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("the first start does not print the generated %s:\n%s", name, out)
		}
		values[name] = m[1]
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatalf("no secrets file after the first start: %v", err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("secrets file mode %04o, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(file)
	for name, v := range values {
		if !strings.Contains(string(data), name+"="+v+"\n") {
			t.Errorf("the secrets file lacks the printed %s:\n%s", name, data)
		}
	}
	ctx := context.Background()
	jwt, err := httpapi.MintToken([]byte(values["SECKILL_AUTH_SECRET"]), "alice", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	first.stop(t)

	second := startServe(t, "--db", db)
	defer second.stop(t)
	out2 := second.out.String()
	if !strings.Contains(out2, "read from "+file) {
		t.Errorf("the second start does not say it read %s:\n%s", file, out2)
	}
	for name, v := range values {
		if strings.Contains(out2, v) {
			t.Errorf("the second start prints %s, which it read from the file", name)
		}
		assertNoSecret(t, "the log", first.log.String()+second.log.String(), v)
	}
	// The secrets message names the file once; the bench command printed once the server is
	// ready sources it (printDevReady), so that one names it too.
	secretsMsg, _, _ := strings.Cut(out2, "\nready:")
	if strings.Count(secretsMsg, file) != 1 {
		t.Errorf("the secrets file's path is printed %d times, want once:\n%s", strings.Count(secretsMsg, file), secretsMsg)
	}
	if _, err := client.New(second.url, client.WithToken(values["SECKILL_ADMIN_TOKEN"])).Refunds(ctx, "", 1); err != nil {
		t.Errorf("the first start's admin token after the restart: %v", err)
	}
	if _, err := client.New(second.url, client.WithToken(jwt)).Orders(ctx); err != nil {
		t.Errorf("a session signed before the restart: %v", err)
	}
	if after, _ := os.ReadFile(file); string(after) != string(data) {
		t.Errorf("the second start rewrote the secrets file:\n%s\nwas:\n%s", after, data)
	}
}

// TestDevSecretsFile: the file is read only with --dev and only next to a SQLite file; a secret
// set in the environment wins over it (and the file keeps its own); a file others may read is
// refused without quoting it; a broken line is refused without quoting it.
func TestDevSecretsFile(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "d.db")
	file := filepath.Join(dir, "d.db"+devSecretsSuffix)

	c := config{DB: db, Dev: true, AdminToken: "from-the-environment"}
	path, loaded, generated, saveErr, err := c.devSecrets()
	if err != nil || saveErr != nil || path != file || len(loaded) != 0 || len(generated) != 3 {
		t.Fatalf("first --dev start: path %q loaded %v generated %v: %v %v", path, loaded, generated, saveErr, err)
	}
	data, _ := os.ReadFile(file)
	if strings.Contains(string(data), "SECKILL_ADMIN_TOKEN") || !strings.Contains(string(data), "SECKILL_AUTH_SECRET="+c.AuthSecret) {
		t.Fatalf("the file keeps what was set in the environment, or lacks a generated secret:\n%s", data)
	}

	// The next start without the admin token in the environment generates one and adds it.
	c2 := config{DB: db, Dev: true}
	_, loaded, generated, _, err = c2.devSecrets()
	if err != nil || strings.Join(loaded, ",") != "SECKILL_AUTH_SECRET,SECKILL_PAYMENT_SECRET,SECKILL_EXPORT_SECRET" || strings.Join(generated, ",") != "SECKILL_ADMIN_TOKEN" {
		t.Fatalf("second start: loaded %v generated %v: %v", loaded, generated, err)
	}
	if c2.AuthSecret != c.AuthSecret || c2.PaymentSecret != c.PaymentSecret {
		t.Fatal("the second start did not reuse the kept secrets")
	}
	// The environment wins over the file, which keeps its value.
	c3 := config{DB: db, Dev: true, AdminToken: "again-from-the-environment"}
	if _, loaded, _, _, err = c3.devSecrets(); err != nil || c3.AdminToken != "again-from-the-environment" || len(loaded) != 3 {
		t.Fatalf("environment over file: admin token %q, loaded %v: %v", c3.AdminToken, loaded, err)
	}
	c4 := config{DB: db, Dev: true}
	if _, _, generated, _, _ = c4.devSecrets(); len(generated) != 0 || c4.AdminToken != c2.AdminToken {
		t.Fatalf("the file lost the admin token: generated %v", generated)
	}

	// Without --dev the file is not read: the secrets are missing.
	prod := config{DB: db}
	if path, _, _, _, err := prod.devSecrets(); err == nil || path != "" || !strings.Contains(err.Error(), "missing secrets") {
		t.Fatalf("without --dev: path %q, err %v; want the missing secrets refused", path, err)
	}

	// No file for an in-memory or server database.
	for _, other := range []string{"sqlite://:memory:", "mysql://root@127.0.0.1:3306/x", "postgres://u:p@h/x"} {
		c := config{DB: other, Dev: true}
		if path, _, generated, _, err := c.devSecrets(); err != nil || path != "" || len(generated) != len(devSecretNames) {
			t.Errorf("%s: path %q generated %v: %v", other, path, generated, err)
		}
	}

	if runtime.GOOS != "windows" {
		if err := os.Chmod(file, 0o644); err != nil {
			t.Fatal(err)
		}
		c := config{DB: db, Dev: true}
		_, _, _, _, err := c.devSecrets()
		if err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), c4.AuthSecret) {
			t.Errorf("a file others may read: %v, want refused with a hint", err)
		}
		_ = os.Chmod(file, 0o600)
	}
	if err := os.WriteFile(file, []byte("SECKILL_AUTH_SECRET "+c4.AuthSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c5 := config{DB: db, Dev: true}
	if _, _, _, _, err := c5.devSecrets(); err == nil || !strings.Contains(err.Error(), "line 1") || strings.Contains(err.Error(), c4.AuthSecret) {
		t.Errorf("a broken line: %v, want refused without quoting it", err)
	}
}
