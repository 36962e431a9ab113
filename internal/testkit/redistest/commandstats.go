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

// CPUSeconds is the server's CPU time so far (INFO cpu: used_cpu_user + used_cpu_sys), every
// client's work included: TestBuyCommands divides its growth by the buyers of a rush.
func CPUSeconds(t testing.TB, rdb rueidis.Client) float64 {
	t.Helper()
	info, err := rdb.Do(context.Background(), rdb.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return total
}
