package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// CommandStats is the server's INFO commandstats as calls per command (lower case, subcommands
// as "config|resetstat"), the commands that scripts ran included. The tests that count what a
// path costs in commands or script calls read it before and after (redisinv's TestBuyCommands,
// TestBuyRoundTripsWithLimits and scriptCalls, cmd/seckill's TestLocalAnswersBenchmark); it
// counts every client of the server, so they run on a private one.
func CommandStats(t testing.TB, rdb rueidis.Client) map[string]int64 {
	t.Helper()
	info, err := rdb.Do(context.Background(), rdb.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// Info is one section of the server's INFO as field -> value (the "# Section" header and
// blank lines left out): the one reader of INFO fields for the tests and their helpers below.
func Info(t testing.TB, rdb rueidis.Client, section string) map[string]string {
	t.Helper()
	info, err := rdb.Do(context.Background(), rdb.B().Info().Section(section).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}

// InfoInt is an integer field of INFO section (total_commands_processed of "stats", say); a
// missing or malformed one fails the test.
func InfoInt(t testing.TB, rdb rueidis.Client, section, field string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(Info(t, rdb, section)[field], 10, 64)
	if err != nil {
		t.Fatalf("INFO %s %s: %v", section, field, err)
	}
	return n
}

// CPUSeconds is the server's CPU time so far (INFO cpu: used_cpu_user + used_cpu_sys), every
// client's work included: TestBuyCommands divides its growth by the buyers of a rush.
func CPUSeconds(t testing.TB, rdb rueidis.Client) float64 {
	t.Helper()
	info := Info(t, rdb, "cpu")
	var total float64
	for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
		f, err := strconv.ParseFloat(info[k], 64)
		if err != nil {
			t.Fatalf("INFO cpu %s: %v", k, err)
		}
		total += f
	}
	return total
}
