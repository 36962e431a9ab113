package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/retention"
)

// The retention bounds are read from the environment, overridden by flags, and a value that
// is no bound (0 rows, a zero or negative age) is refused, naming the setting.
func TestRetentionSettings(t *testing.T) {
	parse := func(env map[string]string, args ...string) (config, error) {
		fs := flag.NewFlagSet("worker", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c config
		bindStoreConfig(fs, func(k string) string { return env[k] }, &c)
		if err := fs.Parse(args); err != nil {
			return c, err
		}
		return c, c.envErr
	}
	c, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (retentionConfig{retention.DefaultOutboxKeep, retention.DefaultOutboxMaxRows, retention.DefaultDeadLetterKeep,
		retention.DefaultDeadLetterMaxRows, redisinv.DefaultStreamKeep, redisinv.DefaultStreamMost}); c.Retention != want {
		t.Fatalf("defaults = %+v; want %+v", c.Retention, want)
	}
	c, err = parse(map[string]string{"SECKILL_OUTBOX_KEEP": "48h", "SECKILL_OUTBOX_MAX_ROWS": "1000", "SECKILL_DEAD_LETTER_KEEP": "1h",
		"SECKILL_DEAD_LETTER_MAX_ROWS": "10", "SECKILL_STREAM_KEEP": "0", "SECKILL_STREAM_MAX_ENTRIES": "5000"},
		"--outbox-max-rows", "2000", "--dead-letter-keep", "2h")
	if err != nil {
		t.Fatal(err)
	}
	if want := (retentionConfig{48 * time.Hour, 2000, 2 * time.Hour, 10, -1, 5000}); c.Retention != want {
		t.Fatalf("from env and flags = %+v; want %+v (stream keep 0: none, kept as -1)", c.Retention, want)
	}
	for _, bad := range []struct{ env, value string }{
		{"SECKILL_OUTBOX_MAX_ROWS", "0"}, {"SECKILL_DEAD_LETTER_MAX_ROWS", "-5"}, {"SECKILL_STREAM_MAX_ENTRIES", "many"},
		{"SECKILL_OUTBOX_KEEP", "0s"}, {"SECKILL_DEAD_LETTER_KEEP", "-1h"}, {"SECKILL_STREAM_KEEP", "-1s"},
	} {
		if _, err := parse(map[string]string{bad.env: bad.value}); err == nil || !strings.Contains(err.Error(), bad.env) {
			t.Errorf("%s=%s: %v; want an error naming it", bad.env, bad.value, err)
		}
	}
	if _, err := parse(nil, "--outbox-max-rows", "0"); err == nil {
		t.Error("--outbox-max-rows 0: no error")
	}
}

// /metrics shows each bounded table's bound, and its rows once the first pass measured them.
func TestMetricsShowRetention(t *testing.T) {
	a := startMetricsApp(t, config{})
	var body string
	// The first pass runs as the service starts; wait for it (no timing is asserted).
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, body = scrape(t, a.url+"/metrics", "")
		if strings.Contains(body, `seckill_retention_rows{table="outbox"}`) || time.Now().After(deadline) {
			break
		}
		wait.Sleep(t.Context(), 20*time.Millisecond)
	}
	for _, want := range []string{
		`seckill_retention_rows{table="outbox"} 0`, `seckill_retention_rows{table="dead_letters"} 0`,
		`seckill_retention_max_rows{table="outbox"} 1e+07`, `seckill_retention_max_rows{table="dead_letters"} 1e+06`,
		`seckill_retention_max_age_seconds{table="outbox"} 604800`, `seckill_retention_lost_total{table="outbox"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%q", want, grepLines(body, "seckill_retention"))
		}
	}
}
