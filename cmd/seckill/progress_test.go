package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/loadgen"
)

func progressSample(at time.Duration) loadgen.Sample {
	return loadgen.Sample{At: at, BuyersDone: 177, TotalBuyers: 5000, RequestsPS: 2345, P99: 12300 * time.Microsecond,
		Available: 0, Held: 60, Sold: 28, Queued: 210, StockKnown: true,
		Crowd: loadgen.Crowd{Waiting: 4700, Path: 0, Buying: 3, InQueue: 210, Holding: 60, Paying: 40}}
}

func TestProgressLineShowsTheCrowd(t *testing.T) {
	line := progressLine(progressSample(3 * time.Second))
	for _, want := range []string{"177/5000 done", "4700 waiting", "3 buying", "210 in queue", "60 holding", "40 paying",
		"sold 28/88", "2345 req/s", "p99 12.3ms"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "at the door") {
		t.Errorf("progress line %q names an empty step", line)
	}
}

// TestProgressLineSaysWhyItStalls: during an outage (the target's Redis down) the line says
// that buyers are being answered 503 and retry, and that the stock could not be read, instead
// of repeating the last figures without a word.
func TestProgressLineSaysWhyItStalls(t *testing.T) {
	s := progressSample(9 * time.Second)
	if line := progressLine(s); strings.Contains(line, "retrying") || strings.Contains(line, "unknown") {
		t.Fatalf("a healthy sample's line %q speaks of trouble", line)
	}
	s.Retried, s.StockKnown = 470, false
	line := progressLine(s)
	for _, want := range []string{"470 answered 503/429, retrying", "stock unknown"} {
		if !strings.Contains(line, want) {
			t.Errorf("an outage's line %q lacks %q", line, want)
		}
	}
}

func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgressBar(&b)
	if p.tty {
		t.Fatal("a buffer is not a terminal")
	}
	for at := 250 * time.Millisecond; at <= 21*time.Second+500*time.Millisecond; at += 250 * time.Millisecond {
		p.update(progressSample(at))
	}
	p.finish()
	var times []string
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if strings.Contains(line, "\r") || strings.Contains(line, "\x1b") {
			t.Fatalf("plain output has terminal controls: %q", line)
		}
		times = append(times, strings.Fields(line)[0])
	}
	// A line at once, then every second for ten seconds, then every five, and the last sample.
	want := []string{"0.2s", "1.0s", "2.0s", "3.0s", "4.0s", "5.0s", "6.0s", "7.0s", "8.0s", "9.0s", "10.0s", "15.0s", "20.0s", "21.5s"}
	if strings.Join(times, " ") != strings.Join(want, " ") {
		t.Fatalf("plain lines at %v, want %v:\n%s", times, want, b.String())
	}
}

func TestProgressTerminalLineRedrawnAndFits(t *testing.T) {
	var b bytes.Buffer
	p := &progressBar{w: &b, tty: true, width: 60}
	for at := time.Second; at <= 3*time.Second; at += time.Second {
		p.update(progressSample(at))
	}
	p.finish()
	out := b.String()
	if strings.Count(out, "\r\x1b[K") != 3 || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("want 3 redraws of one line and a final newline, got %q", out)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\r\x1b[K")[1:] {
		if n := utf8.RuneCountInString(line); n > 59 {
			t.Errorf("line of %d characters on a 60-column terminal: %q", n, line)
		}
		if !strings.Contains(line, "[") || !strings.Contains(line, "177/5000 done") {
			t.Errorf("terminal line without its bar or count: %q", line)
		}
	}
}

// TestCrowdMovesInTheSamples runs a small crowd against a real server and checks that the
// samples show buyers in flight (buying, queued, holding, paying) while the finished count is
// still low, and none left in flight at the end.
func TestCrowdMovesInTheSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	ctx := context.Background()
	cfg := config{Addr: "127.0.0.1:0", Engine: "memory", DB: "sqlite://" + filepath.Join(t.TempDir(), "p.db"), Dev: true,
		HTTP: httpLimits{}.withoutPerAddr()} // the crowd: one address
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	a, err := startApp(ctx, cfg, appOptions{gatewayDelay: func(seckill.Reservation) time.Duration { return 100 * time.Millisecond }, buyRate: -1}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer a.close(ctx)
	start := time.Now().UTC().Add(300 * time.Millisecond)
	if _, err := client.New(a.url, client.WithToken(cfg.AdminToken)).CreateSale(ctx, client.NewSale{ID: "p", PriceCents: 500, Stock: 10,
		StartsAt: start, EndsAt: start.Add(time.Hour), HoldSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	var samples []loadgen.Sample
	res, err := loadgen.Run(ctx, loadgen.Config{Targets: []string{a.url}, SaleID: "p", Buyers: 150, Concurrency: 32, Hold: time.Second,
		Mix: loadgen.DefaultMix, Seed: 3, Sample: 100 * time.Millisecond, Deadline: time.Minute,
		Token: func(u string) (string, error) {
			return httpapi.MintToken([]byte(cfg.AuthSecret), u, time.Now(), time.Hour)
		},
		Progress: func(s loadgen.Sample) { samples = append(samples, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) < 3 {
		t.Fatalf("only %d samples", len(samples))
	}
	moving := false
	for _, s := range samples[:len(samples)-1] {
		c := s.Crowd
		if s.BuyersDone < s.TotalBuyers && c.Buying+c.InQueue+c.Holding+c.Paying > 0 {
			moving = true
		}
		if c.Waiting+c.Path+c.Buying+c.InQueue+c.Holding+c.Paying+s.BuyersDone > s.TotalBuyers {
			t.Errorf("sample at %v counts more buyers than the crowd: %+v, %d done", s.At, c, s.BuyersDone)
		}
	}
	if !moving {
		t.Errorf("no sample shows a buyer buying, queued, holding or paying: %+v", samples)
	}
	last := samples[len(samples)-1]
	if last.Crowd != (loadgen.Crowd{}) || last.BuyersDone != res.Buyers {
		t.Errorf("last sample: crowd %+v, %d/%d done; want nobody left in flight", last.Crowd, last.BuyersDone, res.Buyers)
	}
}

// TestDemoShowsProgressAndWritesASelfDescribingReport runs the demo with a report: its plain
// progress lines name the crowd's steps, it says what it waits for after the crowd, and the
// report names the target, the sale, the date and the version.
func TestDemoShowsProgressAndWritesASelfDescribingReport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	report := filepath.Join(t.TempDir(), "demo.md")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"demo", "--units", "10", "--buyers", "200", "--hold", "1s", "--concurrency", "32", "--report", report}, noEnv, &out, &errb)
	if code != 0 {
		t.Fatalf("demo exited %d:\n%s\n%s", code, out.String(), errb.String())
	}
	progress := errb.String()
	if !regexp.MustCompile(`(?m)^ *[0-9.]+s  \d+/200 done`).MatchString(progress) {
		t.Errorf("no progress line on stderr:\n%s", progress)
	}
	for _, want := range []string{"crowd done in", "auditing the sale on 1 instance(s)"} {
		if !strings.Contains(progress, want) {
			t.Errorf("stderr does not say %q:\n%s", want, progress)
		}
	}
	md, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC().Format("2006-01-02")
	for _, want := range []string{"**target(s):** http://127.0.0.1:", "**sale:** demo", "**date:** " + today, " UTC", "**seckill version:** ", "| figure | value |", "Refunds owed are"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if svg, err := os.ReadFile(strings.TrimSuffix(report, ".md") + ".svg"); err != nil || !strings.Contains(string(svg), ">buyers<") {
		t.Errorf("chart missing or without its crowd panel: %v", err)
	}
}

// TestServeDevPrintsABenchCommandThatWorks starts `serve --dev`, takes the bench command it
// prints once ready, and runs it (smaller) as a shell would: the dev secrets file it sources
// and the assignments in front of bench are bench's environment.
func TestServeDevPrintsABenchCommandThatWorks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale over HTTP")
	}
	a := startServe(t)
	var line string
	for deadline := time.Now().Add(10 * time.Second); line == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := regexp.MustCompile(`(?m)^  (.* bench --target .*)$`).FindStringSubmatch(a.out.String()); m != nil {
			line = m[1]
		}
	}
	if line == "" {
		t.Fatalf("serve --dev printed no bench command:\n%s", a.out.String())
	}
	if !strings.Contains(a.out.String(), a.url+"/admin") || !strings.Contains(a.out.String(), "admin token") {
		t.Errorf("serve --dev does not say the admin token goes into %s/admin:\n%s", a.url, a.out.String())
	}
	env, cmd := benchEnv(t, line)
	if env["SECKILL_ADMIN_TOKEN"] == "" || env["SECKILL_AUTH_SECRET"] == "" {
		t.Fatalf("bench command %q gives bench no admin token or auth secret", line)
	}
	fields := strings.Fields(cmd)
	i := slices.Index(fields, "bench")
	if i < 0 {
		t.Fatalf("no bench in %q", line)
	}
	args := append(fields[i:], "--buyers", "60", "--units", "5", "--hold", "1s", "--concurrency", "16")
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb); code != 0 {
		t.Fatalf("%v exited %d:\n%s\n%s", args, code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), a.url) || !strings.Contains(out.String(), "invariants") {
		t.Errorf("bench output:\n%s", out.String())
	}
	a.stop(t)
}

// benchEnv is the environment a POSIX shell gives bench in a printed command line,
// "(set -a; . FILE; set +a; K=V … cmd …)" or "K=V … cmd …", and the command after the
// assignments.
func benchEnv(t *testing.T, line string) (map[string]string, string) {
	t.Helper()
	env := map[string]string{}
	if m := regexp.MustCompile(`^\(set -a; \. (\S+); set \+a; (.*)\)$`).FindStringSubmatch(line); m != nil {
		b, err := os.ReadFile(strings.Trim(m[1], "'"))
		if err != nil {
			t.Fatalf("the command sources %s: %v", m[1], err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
				env[k] = v
			}
		}
		line = m[2]
	}
	fields := strings.Fields(line)
	for len(fields) > 0 {
		k, v, ok := strings.Cut(fields[0], "=")
		if !ok || strings.HasPrefix(fields[0], "-") {
			break
		}
		env[k] = strings.Trim(v, "'")
		fields = fields[1:]
	}
	return env, strings.Join(fields, " ")
}

// TestDevReadyShowsOnlySecretsJustPrinted: a secret kept in the dev secrets file is sourced
// from it, one generated for this run alone is written inline (it was printed just above), and
// one the user gave is never shown.
func TestDevReadyShowsOnlySecretsJustPrinted(t *testing.T) {
	cfg := config{AdminToken: "admin-secret-value", AuthSecret: "auth-secret-value"}
	all := []string{"SECKILL_AUTH_SECRET", "SECKILL_ADMIN_TOKEN"}
	for _, c := range []struct {
		name              string
		file              string
		loaded, generated []string
		want, wantNot     []string
	}{
		{"kept in the file", "/x/seckill.db.dev-secrets", all, nil, []string{"(set -a; . /x/seckill.db.dev-secrets; set +a; ", "bench --target http://h:1)", "(in the dev secrets file named above) into /admin"}, []string{"admin-secret-value", "auth-secret-value"}},
		{"generated for this run", "", nil, all, []string{"SECKILL_ADMIN_TOKEN=admin-secret-value SECKILL_AUTH_SECRET=auth-secret-value ", "(printed above) into /admin"}, []string{"set -a"}},
		{"given by the user", "/x/seckill.db.dev-secrets", nil, nil, []string{"  " + selfCommand() + " bench --target http://h:1\n", "as you gave"}, []string{"admin-secret-value", "auth-secret-value", "set -a"}},
	} {
		var b bytes.Buffer
		printDevReady(&b, cfg, "http://h:1", c.file, c.loaded, c.generated, nil)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", c.name, w, b.String())
			}
		}
		for _, w := range c.wantNot {
			if strings.Contains(b.String(), w) {
				t.Errorf("%s: output shows %q:\n%s", c.name, w, b.String())
			}
		}
	}
}
