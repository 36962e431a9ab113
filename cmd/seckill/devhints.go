package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// printDevReady tells a `serve --dev` user, once the server answers, where the storefront and
// the dashboard are, that the admin token goes into the dashboard, and a `seckill bench`
// command to paste into another terminal: the secrets ride in environment variables on the
// command line (bench reads SECKILL_ADMIN_TOKEN and SECKILL_AUTH_SECRET), and no payment flag
// is needed because the dev mock gateway pays every POST /pay.
func printDevReady(w io.Writer, cfg config, url string) {
	fmt.Fprintf(w, "\nready: storefront %s/ and dashboard %s/admin (paste the admin token, SECKILL_ADMIN_TOKEN below, into /admin)\n", url, url)
	self, where := selfCommand(), ""
	if strings.HasPrefix(self, "go run") {
		where = " (in this directory)"
	}
	fmt.Fprintf(w, "to send it a crowd of buyers, paste this into another terminal%s:\n", where)
	fmt.Fprintf(w, "  SECKILL_ADMIN_TOKEN=%s SECKILL_AUTH_SECRET=%s %s bench --target %s\n\n",
		shellQuote(cfg.AdminToken), shellQuote(cfg.AuthSecret), self, url)
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
