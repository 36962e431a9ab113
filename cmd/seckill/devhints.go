package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// printDevReady tells a `serve --dev` user, once the server answers, where the storefront and
// the dashboard are, that the admin token goes into the dashboard, and a `seckill bench`
// command to paste into another terminal. Bench reads SECKILL_ADMIN_TOKEN and
// SECKILL_AUTH_SECRET from its environment; the command sets them without showing a secret that
// was not just printed: from the dev secrets file (sourced in a subshell) when the secrets are
// kept there, inline only when they were generated for this run alone (and so printed above),
// and not at all when the user gave them (the environment or a flag). No payment flag is
// needed: the sourced file gives bench the payment secret too (it then delivers signed
// webhooks itself), and without it the dev mock gateway pays every POST /pay.
func printDevReady(w io.Writer, cfg config, url, secretsFile string, loaded, generated []string, saveErr error) {
	file := secretsFile
	if abs, err := filepath.Abs(file); err == nil && file != "" {
		file = abs
	}
	self := selfCommand()
	cmd := fmt.Sprintf("%s bench --target %s", self, url)
	var inline, given []string
	fromFile := false
	adminWhere := ""
	for _, name := range []string{"SECKILL_ADMIN_TOKEN", "SECKILL_AUTH_SECRET"} {
		where := ""
		switch {
		case secretsFile != "" && saveErr == nil && (slices.Contains(loaded, name) || slices.Contains(generated, name)):
			fromFile, where = true, "in the dev secrets file named above"
		case slices.Contains(generated, name):
			inline, where = append(inline, name+"="+shellQuote(secretValue(cfg, name))), "printed above"
		default:
			given, where = append(given, name), "as you gave it to serve"
		}
		if name == "SECKILL_ADMIN_TOKEN" {
			adminWhere = where
		}
	}
	fmt.Fprintf(w, "\nready: storefront %s/ and dashboard %s/admin\n", url, url)
	fmt.Fprintf(w, "  the dashboard asks for the admin token: paste SECKILL_ADMIN_TOKEN's value (%s) into /admin\n", adminWhere)
	if len(inline) > 0 {
		cmd = strings.Join(inline, " ") + " " + cmd
	}
	if fromFile {
		cmd = fmt.Sprintf("(set -a; . %s; set +a; %s)", shellQuote(file), cmd)
	}
	where := ""
	if strings.HasPrefix(self, "go run") {
		where = " (in this directory)"
	}
	fmt.Fprintf(w, "to send it a crowd of buyers, paste this into another terminal%s:\n  %s\n", where, cmd)
	if len(given) > 0 {
		fmt.Fprintf(w, "  with %s set as you gave them to serve\n", strings.Join(given, " and "))
	}
	fmt.Fprintln(w)
}

// selfCommand is how the user started this binary, to start it again: "go run ./cmd/seckill"
// for a binary that go run built in its temporary directory, the path typed (./seckill),
// else "seckill" from the PATH.
func selfCommand() string {
	if exe, err := os.Executable(); err == nil && strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/seckill"
	}
	if len(os.Args) > 0 && strings.ContainsRune(os.Args[0], '/') {
		return shellQuote(os.Args[0])
	}
	return "seckill"
}

// shellQuote quotes s for a POSIX shell when it holds anything but letters, digits and
// -_./:=@%+,.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
