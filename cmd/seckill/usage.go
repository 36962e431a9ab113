package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// commandHelp is what `seckill <command> -h` says above a command's flags, by flag set name.
// Every subcommand's flag set is printed by printUsage, so that all of them show flags the
// way the README writes them (--flag) and none is left without a description.
var commandHelp = map[string]struct{ args, about string }{
	"serve": {"[flags]", `Serve the HTTP API, the storefront (/) and the dashboard (/admin). Flags
override the environment (SECKILL_*), which overrides the defaults.

--dev makes a playground: missing secrets generated, printed and kept next to the database,
the mock payment gateway, and a ready-to-paste "seckill bench" command once the server is up.`},
	"worker": {"[flags]", `Redis engine only: store every sale's event stream in the database and sweep
expired holds, without HTTP, for shops that run the API instances with --consume=false. Any
number of workers may run; they share the streams through one consumer group.`},
	"bench": {"[flags]\n       seckill bench strategies [flags]", `Drive running seckill instances with a crowd of buyers: create a sale on the
target(s), mint the buyers' tokens from the auth secret, buy, pay, cancel, abandon, pay late
and retry (--mix), then audit every instance and check the invariants (exit 1 on a
violation). Prints a live progress line, per-step latencies, and with --report a Markdown
report with an SVG chart.

--segments N splits the sale's stock into N segments (Redis engine; on a Redis Cluster
they spread one sale over its nodes). --calibrate instead compares the buy path's rate with
a bare net/http handler. --sales N runs a flash-sale day instead: N sales, their starts
spread over --spread, the crowd shared over them by a Zipf law (--zipf), a verdict per
sale and overall.

"seckill bench strategies -h": the five ways of taking stock against one Redis, side by side.`},
	"bench strategies": {"[flags]", `Run the ways of taking stock that flash-sale write-ups walk through (no lock,
SETNX, the lock package, the Lua script, the embedded engine) on one load against one Redis,
and print them in one table. The no-lock strategy must oversell: it is the negative control.`},
	"version": {"", `Print the version: the release, the commit and its time, and whether the build had local
changes.`},
	"demo": {"[flags]", `Run a complete flash sale in process: a real server on a loopback port (memory
engine, SQLite in a temp dir, mock payment gateway) and "seckill bench"'s crowd against it
over HTTP. Prints the crowd's progress, the bench report, and exits 1 if an invariant fails.`},
	"events tail": {"[flags]", `Print every reservation event from now on, one JSON object a line (the schema
of docs/EVENTS.md), until interrupted: the order store's outbox and, on the Redis engine,
every live sale's stream. It joins no consumer group: it holds nothing back.`},
	"events replay": {"--sink URL --since T [flags]", `Send the events of a time range to a sink again (consumers dedupe by event id).
The order store's outbox keeps 7 days; on the Redis engine a sale's stream keeps its entries
30 s after every reader has them, so reservation events reach back that far there.`},
	"events dead-letters": {"[flags]", `List the events a sink gave up on after --export-give-up (one JSON object a
line), or with --replay send a sink's dead letters again, oldest first, and mark them
replayed.`},
	"stripe-rehearse": {"[flags]", `Rehearse the Stripe flow on a laptop before going live: a Stripe stand-in in
front of stripe-mock (go install github.com/stripe/stripe-mock@v0.203.0) that keeps the
sessions and refunds stripe-mock forgets, serves each session's payment page (the buyer
clicks "Pay"), and delivers Stripe's signed checkout.session.completed and
checkout.session.expired events to the instance's webhook. Give "seckill serve --gateway
stripe" its address as --stripe-api-url, a test key (sk_test_...) and the same webhook
secret. docs/PAYMENTS.md, "Rehearsal on a laptop", has every command.`},
	"bench-reference": {"[flags]", `The bare net/http handler that "seckill bench --calibrate" measures against,
or with --tell the bare live streams "seckill bench --waiting-room" times its tell against
(internal).`},
}

// secretFlags are flags whose default comes from a secret in the environment: -h says that
// it is set, never its value.
var secretFlags = map[string]bool{
	"auth-secret": true, "admin-token": true, "payment-secret": true,
	"stripe-secret-key": true, "stripe-webhook-secret": true, "export-secret": true, "metrics-token": true,
}

// printUsage prints fs's command, its description and its flags, each written as the README
// writes it: --name (a one-letter flag as -v), its kind of value, its usage and its default.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	h, ok := commandHelp[fs.Name()]
	if !ok {
		h.args = "[flags]"
	}
	fmt.Fprintln(w, strings.TrimSpace(fmt.Sprintf("usage: seckill %s %s", fs.Name(), h.args)))
	for _, para := range strings.Split(h.about, "\n\n") {
		if para != "" {
			fmt.Fprintf(w, "\n%s\n", strings.Join(wrapWords(para, 78), "\n"))
		}
	}
	if !hasFlags(fs) {
		return
	}
	fmt.Fprintf(w, "\nflags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(w, "  %s\n", flagSynopsis(f))
		usage, def := flagUsage(f)
		if def != "" {
			usage += " (default " + def + ")"
		}
		for _, para := range strings.Split(usage, "\n") {
			for _, line := range wrapWords(para, 72) {
				fmt.Fprintf(w, "    \t%s\n", line)
			}
		}
	})
}

// wrapWords breaks s into lines of at most width characters at spaces (a longer word keeps a
// line of its own), so that -h reads on an 80-column terminal.
func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	return append(lines, line)
}

// flagName is how a flag is written: --name, or -v for a one-letter name.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagSynopsis is "--name kind" ("--name" alone for a boolean flag).
func flagSynopsis(f *flag.Flag) string {
	kind, _ := flag.UnquoteUsage(f)
	switch f.Value.(type) {
	case durationValue:
		kind = "duration"
	case intValue:
		kind = "int"
	}
	if kind == "" {
		return flagName(f.Name)
	}
	return flagName(f.Name) + " " + kind
}

// flagUsage is f's usage text and its default as shown (empty when there is none worth
// showing: "", 0, false); a secret default is shown as set, not shown.
func flagUsage(f *flag.Flag) (usage, def string) {
	kind, usage := flag.UnquoteUsage(f)
	switch f.DefValue {
	case "", "0", "false", "0s":
		return usage, ""
	}
	switch {
	case secretFlags[f.Name]:
		return usage, "set from the environment"
	case kind == "string":
		return usage, fmt.Sprintf("%q", f.DefValue)
	}
	return usage, f.DefValue
}

// usageError is a command line that could not be parsed (an unknown flag, a bad value): run
// prints it once and exits 2, as for an unknown command.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// hasFlags reports whether fs defines any flag.
func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}
