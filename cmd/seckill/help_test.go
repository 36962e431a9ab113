package main

import (
	"bytes"
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// helpOf runs `seckill <cmd...> -h` and returns what it printed; it must exit 0.
func helpOf(t *testing.T, getenv func(string) string, cmd ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), append(cmd, "-h"), getenv, &out, &errb); code != 0 {
		t.Fatalf("%v -h: exit %d, stderr %q", cmd, code, errb.String())
	}
	return out.String() + errb.String()
}

// helpFlags are the flags a -h text lists, as written there (--name, or -v).
func helpFlags(help string) []string {
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  (--?[a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(help, -1) {
		flags = append(flags, m[1])
	}
	return flags
}

var helpCommands = [][]string{{"serve"}, {"worker"}, {"bench"}, {"bench", "strategies"}, {"demo"}, {"stripe-rehearse"}}

func TestHelpShowsDoubleDashFlags(t *testing.T) {
	for _, cmd := range helpCommands {
		help := helpOf(t, noEnv, cmd...)
		name := strings.Join(cmd, " ")
		if !strings.HasPrefix(help, "usage: seckill "+name+" ") {
			t.Errorf("%s -h does not start with its usage line:\n%s", name, help)
		}
		if !strings.Contains(help, "\nflags:\n") {
			t.Errorf("%s -h lists no flags:\n%s", name, help)
		}
		flags := helpFlags(help)
		if len(flags) == 0 {
			t.Errorf("%s -h: no flag found in\n%s", name, help)
		}
		for _, f := range flags {
			if !strings.HasPrefix(f, "--") && len(f) != 2 {
				t.Errorf("%s -h shows %s with one dash; the README writes --%s", name, f, f[1:])
			}
		}
	}
}

func TestWorkerHelpListsOnlyWhatItUses(t *testing.T) {
	flags := helpFlags(helpOf(t, noEnv, "worker"))
	if want := []string{"--db", "--dead-letter-keep", "--dead-letter-max-rows", "--engine", "--export", "--export-give-up", "--export-secret", "--outbox-keep", "--outbox-max-rows", "--redis-url", "--stream-keep", "--stream-max-entries"}; !slices.Equal(flags, want) {
		t.Fatalf("worker -h lists %v, want %v: the worker has no HTTP, no gateway and no secret but the export's; it trims as serve does", flags, want)
	}
}

func TestBenchHelpDescribesAndNamesStrategies(t *testing.T) {
	help := helpOf(t, noEnv, "bench")
	for _, want := range []string{"crowd of buyers", "seckill bench strategies", "--calibrate", "invariants"} {
		if !strings.Contains(help, want) {
			t.Errorf("bench -h does not say %q:\n%s", want, help)
		}
	}
}

func TestHelpShowsNoSecret(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef-secret"
	env := func(k string) string {
		switch k {
		case "SECKILL_AUTH_SECRET", "SECKILL_ADMIN_TOKEN", "SECKILL_PAYMENT_SECRET", "SECKILL_EXPORT_SECRET", "SECKILL_STRIPE_SECRET_KEY", "SECKILL_STRIPE_WEBHOOK_SECRET":
			return secret
		}
		return ""
	}
	for _, cmd := range [][]string{{"serve"}, {"bench"}} {
		help := helpOf(t, env, cmd...)
		if strings.Contains(help, secret) {
			t.Errorf("%v -h shows a secret from the environment:\n%s", cmd, help)
		}
		if !strings.Contains(help, "set from the environment") {
			t.Errorf("%v -h does not say that the secrets are set:\n%s", cmd, help)
		}
	}
}

func TestBadFlagIsReportedOnce(t *testing.T) {
	for _, cmd := range helpCommands {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(slices.Clone(cmd), "--bogus"), noEnv, &out, &errb)
		if code != 2 {
			t.Errorf("%v --bogus: exit %d, want 2", cmd, code)
		}
		all := out.String() + errb.String()
		if n := strings.Count(all, "bogus"); n != 1 {
			t.Errorf("%v --bogus: the error is printed %d times, want once:\n%s", cmd, n, all)
		}
		if !strings.Contains(all, "-h") {
			t.Errorf("%v --bogus: no pointer to -h:\n%s", cmd, all)
		}
	}
}

// TestHelpAgreesWithReadme checks that every flag the README gives a command exists in that
// command's -h: on command lines in code blocks (seckill serve --dev, seckill bench --target
// …), in the Configuration table (serve), in "Load test any deployment" (bench) and in the
// paragraph that points to `seckill demo -h`; and that no flag the README writes anywhere is
// unknown to every command. The other way round, every flag of serve, worker and demo is in
// the README (bench's many tuning flags are left to `seckill bench -h`).
func TestHelpAgreesWithReadme(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]map[string]bool{}
	all := map[string]bool{}
	for _, cmd := range helpCommands {
		name := strings.Join(cmd, " ")
		has[name] = map[string]bool{}
		for _, f := range helpFlags(helpOf(t, noEnv, cmd...)) {
			has[name][f], all[f] = true, true
		}
	}
	flagRE := regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	checked := 0
	need := func(cmd, where, text string) {
		for _, f := range flagRE.FindAllString(text, -1) {
			checked++
			if !has[cmd][f] {
				t.Errorf("README (%s) gives %s the flag %s, which `seckill %s -h` does not list", where, cmd, f, cmd)
			}
		}
	}
	cmdRE := regexp.MustCompile(`seckill (serve|worker|demo|bench strategies|bench)\b`)
	var section string
	inCode := false
	lines := strings.Split(string(readme), "\n")
	var para []string
	endPara := func() {
		p := strings.Join(para, " ")
		para = nil
		if strings.Contains(p, "`seckill demo -h`") {
			need("demo", "the demo's paragraph", p)
		}
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			endPara()
			continue
		}
		if inCode {
			// A command line, with its continuation lines.
			for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, `\`) + " " + lines[i]
			}
			locs := cmdRE.FindAllStringSubmatchIndex(line, -1)
			for j, loc := range locs {
				end := len(line)
				if j+1 < len(locs) {
					end = locs[j+1][0]
				}
				need(line[loc[2]:loc[3]], "code: "+strings.TrimSpace(line), line[loc[1]:end])
			}
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section = strings.TrimPrefix(line, "## ")
		}
		switch {
		case section == "Configuration" && strings.HasPrefix(line, "| `--"):
			need("serve", "Configuration table", line)
		case section == "Load test any deployment":
			need("bench", section, strings.ReplaceAll(line, "`seckill bench strategies`", ""))
		}
		for _, f := range flagRE.FindAllString(line, -1) {
			if !all[f] {
				t.Errorf("README writes %s, which no command's -h lists: %q", f, strings.TrimSpace(line))
			}
		}
		if strings.TrimSpace(line) == "" {
			endPara()
		} else {
			para = append(para, line)
		}
	}
	endPara()
	if checked < 30 {
		t.Fatalf("only %d flags of the README checked: the README's layout changed under this test", checked)
	}
	for _, cmd := range []string{"serve", "worker", "demo"} {
		for f := range has[cmd] {
			written := "`" + f
			if !strings.Contains(string(readme), written) {
				t.Errorf("`seckill %s -h` lists %s, which the README does not mention", cmd, f)
			}
		}
	}
}

func TestVersionLine(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/seckill-go/seckill", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "78e6625abc"},
			{Key: "vcs.time", Value: "2026-12-03T22:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := formatVersion("", bi), "v1.2.3, revision 78e6625abc of 2026-12-03T22:00:00Z, with local changes, go1.26.8"; got != want {
		t.Errorf("formatVersion = %q, want %q", got, want)
	}
	bi.Settings[3].Value = "false"
	if got := formatVersion("v9", bi); !strings.HasPrefix(got, "v9, revision 78e6625abc") || strings.Contains(got, "local changes") {
		t.Errorf("formatVersion with -X main.version, clean tree = %q", got)
	}
	bi.Main.Version, bi.Settings = "(devel)", nil
	if got := formatVersion("", bi); !strings.HasPrefix(got, "(devel), no VCS revision") {
		t.Errorf("formatVersion without VCS = %q", got)
	}
	if got := formatVersion("", nil); !strings.HasPrefix(got, "(devel)") {
		t.Errorf("formatVersion without build info = %q", got)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version"}, noEnv, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "seckill ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("seckill version: exit %d, %q", code, out.String())
	}
	// -h is help, as for every command, not the version (it printed the version once).
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"version", "-h"}, noEnv, &out, &errb); code != 0 ||
		!strings.HasPrefix(out.String()+errb.String(), "usage: seckill version\n") || strings.Contains(out.String(), "go1.") {
		t.Errorf("seckill version -h: exit %d, %q; want its usage", code, out.String()+errb.String())
	}
	if code := run(context.Background(), []string{"version", "stray"}, noEnv, &out, &errb); code != 2 {
		t.Errorf("seckill version stray: exit %d; want 2", code)
	}
}

func TestHelpCommandAndStrayArguments(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"help", "worker"}, noEnv, &out, &errb); code != 0 ||
		!strings.HasPrefix(out.String()+errb.String(), "usage: seckill worker ") {
		t.Errorf("seckill help worker: exit %d, %q", code, out.String()+errb.String())
	}
	out.Reset()
	errb.Reset()
	code := run(context.Background(), []string{"serve", "--dev", "stray"}, noEnv, &out, &errb)
	if code != 2 || strings.Count(errb.String(), "stray") != 1 || !strings.Contains(errb.String(), `"seckill serve -h"`) {
		t.Errorf("serve with a stray argument: exit %d, %q; want exit 2 and one line pointing to -h", code, errb.String())
	}
}

func TestBenchSaysWhenNoServerAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"bench", "--target", url, "--admin-token", "x", "--auth-secret", "y"}, noEnv, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "no server answers at "+url) || !strings.Contains(errb.String(), "seckill serve --dev") {
		t.Errorf("bench against nothing: exit %d, %q", code, errb.String())
	}
}

func TestHelpFitsEightyColumns(t *testing.T) {
	for _, cmd := range append([][]string{{"help"}}, helpCommands...) {
		var help string
		if cmd[0] == "help" {
			var out, errb bytes.Buffer
			run(context.Background(), cmd, noEnv, &out, &errb)
			help = out.String()
		} else {
			help = helpOf(t, noEnv, cmd...)
		}
		for _, line := range strings.Split(help, "\n") {
			if n := utf8.RuneCountInString(strings.ReplaceAll(line, "\t", "    ")); n > 80 {
				t.Errorf("%v -h: a line of %d columns: %q", cmd, n, line)
			}
		}
	}
	if got := wrapWords("a bb ccc dddd", 6); !slices.Equal(got, []string{"a bb", "ccc", "dddd"}) {
		t.Errorf("wrapWords = %q", got)
	}
}

// TestReadmeLayoutNamesEveryPackageTree checks that the README's Layout table has a row for
// every top-level directory that holds Go code, so a new package is not left out of it.
func TestReadmeLayoutNamesEveryPackageTree(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	entries, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || name == "docs" || name == "testdata" {
			continue
		}
		hasGo := false
		_ = filepath.WalkDir(filepath.Join("../..", name), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
				hasGo = true
				return filepath.SkipAll
			}
			return nil
		})
		if hasGo && !strings.Contains(layout, "`"+name+"/") {
			t.Errorf("README's Layout table has no row for %s/", name)
		}
	}
}
