package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/purchasetoken"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/loadgen"
)

// TestLocalAnswersBenchmark measures the Redis engine's local answers (docs/BENCHMARKS.md,
// "Answers that never reach Redis"); it runs only with SECKILL_BENCH_LOCAL=1 and asserts
// nothing but that each run completed: it prints figures. For each setting of
// --redis-local-answers (false, then true), on three fresh `serve --engine redis` instances
// (a private Redis, a fresh MariaDB database):
//
//  1. a `seckill bench` rush: SECKILL_BENCH_LOCAL_UNITS units (100) for SECKILL_BENCH_LOCAL_BUYERS
//     buyers (100 000), with the Redis commands it cost (INFO commandstats, before and after);
//
//  2. after the sell-out, a flood of buys of the sold-out sale through the three instances
//     (new users, 64 connections each, 5 s), and the Redis commands it cost per request;
//
//  3. `seckill bench --calibrate` against the first instance (3 rounds of 5 s): the sold-out
//     path (409) against a bare net/http handler.
//
//     SECKILL_BENCH_LOCAL=1 go test -count=1 -v -run TestLocalAnswersBenchmark -timeout 30m ./cmd/seckill/
func TestLocalAnswersBenchmark(t *testing.T) {
	if os.Getenv("SECKILL_BENCH_LOCAL") == "" {
		t.Skip("a benchmark: set SECKILL_BENCH_LOCAL=1")
	}
	buyers := envInt(t, "SECKILL_BENCH_LOCAL_BUYERS", 100000)
	units := envInt(t, "SECKILL_BENCH_LOCAL_UNITS", 100)
	var lines []string
	for _, local := range []bool{false, true} {
		name := fmt.Sprintf("local-answers=%v", local)
		t.Run(name, func(t *testing.T) {
			lines = append(lines, localAnswersRun(t, local, units, buyers)...)
		})
	}
	summary := fmt.Sprintf("local answers benchmark (%d units, %d buyers, 3 instances):\n  %s", units, buyers, strings.Join(lines, "\n  "))
	t.Log(summary)
	fmt.Println(summary)
}

// commandDelta is after − before, without the measurement's own INFO calls; and its total.
func commandDelta(before, after map[string]int64) (map[string]int64, int64) {
	d := map[string]int64{}
	var total int64
	for k, v := range after {
		if k == "info" {
			continue
		}
		if n := v - before[k]; n > 0 {
			d[k] = n
			total += n
		}
	}
	return d, total
}

// scriptCalls counts the script calls in d: the round trips of the scripts (each runs the
// commands inside it, which commandstats counts too).
func scriptCalls(d map[string]int64) int64 {
	return d["evalsha"] + d["evalsha_ro"] + d["eval"] + d["eval_ro"]
}

// topCommands formats the largest entries of d.
func topCommands(d map[string]int64) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(d[b] - d[a]) })
	var parts []string
	for _, k := range keys[:min(len(keys), 6)] {
		parts = append(parts, fmt.Sprintf("%s %d", k, d[k]))
	}
	return strings.Join(parts, ", ")
}

func localAnswersRun(t *testing.T, local bool, units, buyers int) []string {
	c := startCluster(t, 3, "--redis-local-answers="+strconv.FormatBool(local))
	var urls []string
	for _, in := range c.insts {
		urls = append(urls, in.url)
	}
	var b [4]byte
	_, _ = crand.Read(b[:])
	sale := "labench-" + hex.EncodeToString(b[:])
	env := map[string]string{"SECKILL_ADMIN_TOKEN": clusterAdmin, "SECKILL_AUTH_SECRET": clusterAuth, "SECKILL_PAYMENT_SECRET": clusterPayment}
	getenv := func(k string) string { return env[k] }
	tag := fmt.Sprintf("local=%v", local)

	// 1. The rush.
	before := redistest.CommandStats(t, c.rdb)
	var out, errOut bytes.Buffer
	err := bench(context.Background(), []string{"--target", strings.Join(urls, ","), "--sale", sale,
		"--units", strconv.Itoa(units), "--buyers", strconv.Itoa(buyers), "--deadline", "10m", "--json"},
		getenv, &out, &errOut)
	if err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, errOut.String(), tail(out.String(), 40))
	}
	rushDelta, rushTotal := commandDelta(before, redistest.CommandStats(t, c.rdb))
	var rep struct {
		ElapsedMS int64            `json:"elapsed_ms"`
		Counts    map[string]int64 `json:"counts"`
		Latency   map[string]map[string]int64
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.ElapsedMS == 0 {
		t.Fatalf("bench report: %v\n%s", err, tail(out.String(), 20))
	}
	buys := rep.Latency["buy"]["count"]
	reqs := max(rep.Counts["requests"], 1)
	lines := []string{fmt.Sprintf("%s rush: %.1f s, %d requests (%d buys), %d held, invariants checked by bench; Redis commands (with those inside scripts) %d = %.3f per buyer, %.3f per request; script calls %d = %.3f per buyer, %.3f per request [%s]",
		tag, float64(rep.ElapsedMS)/1000, rep.Counts["requests"], buys, rep.Counts["held"], rushTotal,
		float64(rushTotal)/float64(buyers), float64(rushTotal)/float64(reqs), scriptCalls(rushDelta),
		float64(scriptCalls(rushDelta))/float64(buyers), float64(scriptCalls(rushDelta))/float64(reqs), topCommands(rushDelta))}
	t.Log(lines[0])

	// 2. After the sell-out: new buyers flood the sold-out sale through every instance.
	sv, err := c.api(c.insts[0], "").Sale(context.Background(), sale)
	if err != nil {
		t.Fatalf("read the sale: %v", err)
	}
	key := purchasetoken.Key([]byte(clusterAuth))
	before = redistest.CommandStats(t, c.rdb)
	results := make([]loadgen.FloodResult, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			r, err := loadgen.Flood(context.Background(), loadgen.FloodConfig{Target: u, SaleID: sale, Clients: 64, Duration: 5 * time.Second, Want: 409,
				Buyer: func(j int) (string, string) {
					user := fmt.Sprintf("after-%d-%d", i, j)
					tok, _ := httpapi.MintToken([]byte(clusterAuth), user, time.Now(), time.Hour)
					return client.BuyPath(sale, purchasetoken.New(key, sale, user, sv.StartsAt)), tok
				}})
			if err != nil {
				t.Errorf("flood %s: %v", u, err)
			}
			results[i] = r
		})
	}
	wg.Wait()
	floodDelta, floodTotal := commandDelta(before, redistest.CommandStats(t, c.rdb))
	var sent int64
	var rate float64
	for _, r := range results {
		sent += r.Sent
		rate += r.Rate
	}
	lines = append(lines, fmt.Sprintf("%s after the sell-out: %d sold-out buys in 5 s (%.0f/s over 3 instances), Redis commands (with those inside scripts) %d = %.4f per request; script calls %d = %.4f per request [%s]",
		tag, sent, rate, floodTotal, float64(floodTotal)/float64(max(sent, 1)), scriptCalls(floodDelta),
		float64(scriptCalls(floodDelta))/float64(max(sent, 1)), topCommands(floodDelta)))
	t.Log(lines[len(lines)-1])

	// 3. The sold-out path against a bare handler, on the first instance.
	// Through the binary: calibrate starts its reference handler by running its own executable,
	// which here would be this test binary.
	cal := exec.Command(c.bin, "bench", "--calibrate", "--target", urls[0], "--sale", sale+"-cal", "--rounds", "3", "--duration", "5s")
	cal.Env = c.env
	calOut, err := cal.CombinedOutput()
	if err != nil {
		t.Fatalf("calibrate: %v\n%s", err, calOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(calOut)), "\n") {
		lines = append(lines, tag+" calibrate: "+l)
	}
	return lines
}
