package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPprofRefusesNonLoopback: --pprof (or SECKILL_PPROF) with any address that is not
// loopback is a startup error that says so, and nothing is started: not even the database
// file is created.
func TestPprofRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{
		"0.0.0.0:6060", ":6060", "[::]:6060", "192.0.2.1:6060", "10.0.0.1:6060", "example.com:6060",
		"localhost.example.com:6060", "6060", "127.0.0.1", "[::1]",
	} {
		for _, viaEnv := range []bool{false, true} {
			name := addr
			if viaEnv {
				name += "/env"
			}
			t.Run(name, func(t *testing.T) {
				dbFile := filepath.Join(t.TempDir(), "x.db")
				args := []string{"serve", "--dev", "--addr", "127.0.0.1:0", "--db", "sqlite://" + dbFile}
				getenv := noEnv
				if viaEnv {
					getenv = func(k string) string {
						if k == "SECKILL_PPROF" {
							return addr
						}
						return ""
					}
				} else {
					args = append(args, "--pprof", addr)
				}
				var out, errb bytes.Buffer
				if code := run(context.Background(), args, getenv, &out, &errb); code != 1 {
					t.Fatalf("code %d, want 1; stderr %q", code, errb.String())
				}
				if msg := errb.String(); !strings.Contains(msg, "--pprof") || !strings.Contains(msg, "loopback") {
					t.Errorf("error %q does not name --pprof and loopback", msg)
				}
				if _, err := os.Stat(dbFile); !os.IsNotExist(err) {
					t.Errorf("the database was opened before the address was refused (%v)", err)
				}
			})
		}
	}
}

func TestCheckPprofAddr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:6060", "LOCALHOST:0", "127.0.0.2:6060"} {
		if err := checkPprofAddr(addr); err != nil {
			t.Errorf("checkPprofAddr(%q) = %v, want nil", addr, err)
		}
	}
}

// TestPprofServesOnItsOwnListener: with --pprof on loopback the profiles are served there,
// and not on the API's listener; without the flag there is no profiling listener at all.
func TestPprofServesOnItsOwnListener(t *testing.T) {
	a := startServe(t, "--pprof", "127.0.0.1:0")
	api := a.url
	var prof string
	if m := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)/debug/pprof/`).FindStringSubmatch(a.log.String()); m != nil {
		prof = m[1]
	}
	if prof == "" {
		t.Fatalf("pprof did not start: %s", a.log.String())
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(prof + "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index: %d %.200q", code, body)
	}
	if code, _ := get(prof + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK {
		t.Errorf("goroutine profile: %d", code)
	}
	if code, _ := get(api + "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("the API listener answers /debug/pprof/ with %d, want 404", code)
	}
	a.stop(t)
	if _, err := http.Get(prof + "/debug/pprof/"); err == nil {
		t.Error("the pprof listener still answers after shutdown")
	}
}
