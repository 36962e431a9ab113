package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise the module
// version from the build info is shown (versionString).
var version = ""

const usage = `usage: seckill <command> [flags]

commands:
  serve     serve the HTTP API, the storefront and the dashboard (memory engine
            and SQLite by default; --dev for a playground)
  worker    redis engine: store the event streams in the database and sweep,
            without HTTP
  bench     drive running instances with a crowd of buyers, report and check
            the invariants (bench --calibrate: the buy path against a bare
            handler; bench strategies: the ways to take stock, side by side)
  demo      run a complete flash sale in process (a preset of bench) and print
            what happened
  events    the event export: tail the events, replay a time range to a sink,
            list or replay the dead letters
  stripe-rehearse
            play Stripe on a laptop, in front of stripe-mock: the API for
            serve --gateway stripe, the hosted payment page, signed webhooks
  version   print the version: module version, VCS revision and time, local
            changes

Run "seckill <command> -h" (or "seckill help <command>") for its flags.
`

// run is the whole program: it owns signals, so SIGINT/SIGTERM cancel ctx and each command
// shuts down in reverse dependency order. It returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], getenv, stdout, stderr)
	case "worker":
		err = worker(ctx, args[1:], getenv, stderr)
	case "bench":
		err = bench(ctx, args[1:], getenv, stdout, stderr)
	case "bench-reference": // calibrate's bare handler, in a process of its own; not listed
		err = benchReference(ctx, args[1:], stdout, stderr)
	case "demo":
		err = demo(ctx, args[1:], getenv, stdout, stderr)
	case "events":
		err = eventsCommand(ctx, args[1:], getenv, stdout, stderr)
	case "stripe-rehearse":
		err = stripeRehearse(ctx, args[1:], getenv, stdout, stderr)
	case "version":
		err = versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" { // seckill help serve: serve's -h
			return run(ctx, append(slices.Clone(args[1:]), "-h"), getenv, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "seckill: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		if err == errFlagHelp {
			return 0
		}
		fmt.Fprintln(stderr, "seckill:", err)
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	return 0
}

// exitError is a failure whose details have already been printed (e.g. a failed invariant in
// demo); run adds only its one-line summary.
type exitError string

func (e exitError) Error() string { return string(e) }

// versionString is the version line of `seckill version` and of bench reports: the module
// version (or -X main.version), then what the build recorded of its commit: revision, commit
// time, and whether the working tree had local changes. `go build` records them from Git;
// `go run`, `go test` and -buildvcs=false do not, and the line says so.
// versionCmd prints the version. It takes no flags, so that "seckill version -h" prints its
// usage (as every command does) rather than the version.
func versionCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	_, err := fmt.Fprintln(stdout, "seckill", versionString())
	return err
}

func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(version, bi)
}

// formatVersion is versionString for given build info (nil: none available).
func formatVersion(ldflagsVersion string, bi *debug.BuildInfo) string {
	v := ldflagsVersion
	if v == "" && bi != nil {
		v = bi.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	var rev, at, modified string
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if rev == "" {
		v += ", no VCS revision (go run, go test and -buildvcs=false record none; go build does)"
	} else {
		v += ", revision " + rev
		if at != "" {
			v += " of " + at
		}
		if modified == "true" {
			v += ", with local changes"
		}
	}
	if bi != nil && bi.GoVersion != "" {
		v += ", " + bi.GoVersion
	}
	return v
}
