package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// devSecretsSuffix names the file that keeps `serve --dev`'s generated secrets next to its
// SQLite database: ./seckill.db keeps them in ./seckill.db.dev-secrets.
const devSecretsSuffix = ".dev-secrets"

// devSecretNames are the secrets --dev generates when they are missing, in the file's order.
var devSecretNames = []string{"SECKILL_AUTH_SECRET", "SECKILL_ADMIN_TOKEN", "SECKILL_PAYMENT_SECRET", "SECKILL_EXPORT_SECRET"}

// devSecretsPath is the file that keeps the dev secrets of database URL db: next to a SQLite
// file, so that the secrets live and die with the data they signed (users' sessions, the
// dashboard's saved admin token, purchase links). "" for an in-memory SQLite database or a
// database server, whose secrets last one run.
func devSecretsPath(db string) string {
	scheme, rest, ok := strings.Cut(db, "://")
	if !ok || !strings.EqualFold(scheme, "sqlite") || rest == "" || rest == ":memory:" || strings.ContainsAny(rest, "?#") {
		return ""
	}
	return rest + devSecretsSuffix
}

// devSecrets is secrets for `serve`: with --dev and a SQLite file database, a missing secret is
// first read from the dev secrets file, and the ones still missing are generated and written
// there (mode 0600), so a restart keeps shoppers signed in and the dashboard's token valid. A
// secret set in the environment or a flag wins over the file (which keeps its own value).
// It returns the file's path ("" when none is used), the secrets read from it and those
// generated. A file that cannot be written is reported in saveErr: the server still starts,
// with secrets for this run only. Without --dev the file is never read.
func (c *config) devSecrets() (path string, loaded, generated []string, saveErr, err error) {
	if c.envErr != nil || !c.Dev {
		generated, err = c.secrets()
		return "", nil, generated, nil, err
	}
	path = devSecretsPath(c.DB)
	var kept map[string]string
	if path != "" {
		if kept, err = readDevSecrets(path); err != nil {
			return "", nil, nil, nil, err
		}
		for _, f := range c.secretFields() {
			if v := kept[f.name]; f.used && *f.v == "" && v != "" {
				*f.v = v
				loaded = append(loaded, f.name)
			}
		}
	}
	if generated, err = c.secrets(); err != nil {
		return "", nil, nil, nil, err
	}
	if path == "" || len(generated) == 0 {
		return path, loaded, generated, nil, nil
	}
	if kept == nil {
		kept = map[string]string{}
	}
	for _, f := range c.secretFields() {
		if slices.Contains(generated, f.name) {
			kept[f.name] = *f.v
		}
	}
	if err := writeDevSecrets(path, kept); err != nil {
		return "", loaded, generated, err, nil
	}
	return path, loaded, generated, nil, nil
}

// secretField is one of the secrets --dev may generate, by its environment name. used: this
// configuration needs it (--dev generates it, its length is checked); required: outside --dev
// the server does not start without it (SECKILL_EXPORT_SECRET is required only by the HTTP
// sinks that use it, which say so when they open).
type secretField struct {
	name           string
	v              *string
	used, required bool
}

// secretFields are the secrets of c that --dev may generate, in devSecretNames' order.
func (c *config) secretFields() []secretField {
	builtIn := c.builtInWebhook()
	return []secretField{
		{"SECKILL_AUTH_SECRET", &c.AuthSecret, true, true},
		{"SECKILL_ADMIN_TOKEN", &c.AdminToken, true, true},
		{"SECKILL_PAYMENT_SECRET", &c.PaymentSecret, builtIn, builtIn},
		{"SECKILL_EXPORT_SECRET", &c.ExportSecret, true, false},
	}
}

// readDevSecrets reads NAME=value lines (# comments and blank lines skipped). A missing file
// is empty. A file that others may read is refused, as ssh refuses a private key: these
// secrets sign every session of the dev server.
func readDevSecrets(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dev secrets file: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("dev secrets file %s may be read by other users (mode %04o): chmod 600 it, or delete it to generate new secrets",
			path, st.Mode().Perm())
	}
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || !slices.Contains(devSecretNames, name) || value == "" {
			// The line is not quoted: it may hold a secret.
			return nil, fmt.Errorf("dev secrets file %s, line %d: want NAME=value with NAME one of %s; fix it or delete the file to generate new secrets",
				path, n, strings.Join(devSecretNames, ", "))
		}
		out[name] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dev secrets file %s: %w", path, err)
	}
	return out, nil
}

// writeDevSecrets replaces the file with the given secrets, mode 0600, through a temporary
// file in the same folder and a rename: a crash leaves the old file or the new one, never half
// of one. The format is a shell environment file: `set -a; . ./seckill.db.dev-secrets` gives a
// shell (and `seckill bench`) the same secrets.
func writeDevSecrets(path string, secrets map[string]string) error {
	var b bytes.Buffer
	b.WriteString("# Secrets generated by `seckill serve --dev` for the database next to this file, kept so\n")
	b.WriteString("# that a restart keeps users signed in and the dashboard's admin token valid. For\n")
	b.WriteString("# development only; delete this file to generate new ones.\n")
	for _, name := range devSecretNames {
		if v := secrets[name]; v != "" {
			fmt.Fprintf(&b, "%s=%s\n", name, v)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("dev secrets file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing left to remove
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return fmt.Errorf("dev secrets file: %w", err)
	}
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("dev secrets file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("dev secrets file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("dev secrets file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("dev secrets file: %w", err)
	}
	return nil
}

// printDevSecrets tells, once at the start, where the dev secrets come from: the file's path
// (never the values it read), and the values of the secrets generated now, which the person
// starting the server needs (the admin token goes into the dashboard).
func printDevSecrets(w io.Writer, cfg config, path string, loaded, generated []string, saveErr error) {
	if len(loaded) == 0 && len(generated) == 0 {
		return
	}
	switch {
	case saveErr != nil:
		fmt.Fprintf(w, "dev mode: generated secrets for this run only (%v):\n", saveErr)
	case path == "":
		fmt.Fprintln(w, "dev mode: generated secrets for this run only (the database is not a SQLite file; set them in the environment to keep them):")
	case len(generated) == 0:
		note := ""
		if slices.Contains(loaded, "SECKILL_ADMIN_TOKEN") {
			note = "the admin token for /admin is there; "
		}
		fmt.Fprintf(w, "dev mode: secrets %s read from %s, kept across restarts (%sdelete the file for new ones)\n",
			strings.Join(loaded, ", "), path, note)
	default:
		fmt.Fprintf(w, "dev mode: generated secrets, kept in %s across restarts (delete the file for new ones):\n", path)
	}
	for _, name := range generated {
		fmt.Fprintf(w, "  %s=%s\n", name, secretValue(cfg, name))
	}
	if len(loaded) > 0 && len(generated) > 0 {
		fmt.Fprintf(w, "  %s read from the same file\n", strings.Join(loaded, ", "))
	}
}
