package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// TestExportRushBenchmark measures the event export during a rush (docs/BENCHMARKS.md, "Event
// export"); it runs only with SECKILL_BENCH_EXPORT=1 and asserts nothing: it prints figures.
// Each round runs the same `seckill bench` rush twice against three fresh `serve --engine
// redis` instances (private Redis, fresh MariaDB database): without --export, then exporting
// to RabbitMQ and a signed-callback endpoint in this process. Every buyer gets a hold (units =
// buyers) and 512 buyers are in flight (most of them holding, paying or waiting for their hold
// to expire), so buys arrive as fast as the instances take them: the engine's full buy rate
// on this machine, not a rate the crowd's own pauses set. While it runs, every instance's
// /metrics is read every 100 ms (seckill_export_lag_seconds and _lag_events); the shop side
// stamps each event's arrival, so the lag is also measured as arrival − the event's `at`.
//
//	SECKILL_BENCH_EXPORT=1 go test -count=1 -v -run TestExportRushBenchmark -timeout 30m ./cmd/seckill/
//
// SECKILL_BENCH_EXPORT_BUYERS (default 10000) and SECKILL_BENCH_EXPORT_ROUNDS (default 1)
// size it.
func TestExportRushBenchmark(t *testing.T) {
	if os.Getenv("SECKILL_BENCH_EXPORT") == "" {
		t.Skip("a benchmark: set SECKILL_BENCH_EXPORT=1")
	}
	amqpBase := testenv.AMQP(t)
	buyers := envInt(t, "SECKILL_BENCH_EXPORT_BUYERS", 10000)
	rounds := envInt(t, "SECKILL_BENCH_EXPORT_ROUNDS", 1)
	var lines []string
	for round := 1; round <= rounds; round++ {
		for _, export := range []bool{false, true} {
			name := fmt.Sprintf("round%d/no-export", round)
			if export {
				name = fmt.Sprintf("round%d/export", round)
			}
			t.Run(name, func(t *testing.T) {
				lines = append(lines, name+": "+exportRush(t, amqpBase, buyers, export))
			})
		}
	}
	summary := "event export benchmark (" + strconv.Itoa(buyers) + " buyers, 3 instances):\n  " + strings.Join(lines, "\n  ")
	t.Log(summary)
	fmt.Println(summary)
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// lagReading is one reading of one instance's /metrics: per sink, its
// seckill_export_lag_seconds and seckill_export_lag_events.
type lagReading struct {
	at      time.Time
	seconds map[string]float64
	events  map[string]float64
}

// exportRush runs one rush and returns its figures as one line.
func exportRush(t *testing.T, amqpBase string, buyers int, withExport bool) string {
	var shops []*shopSink
	var extra []string
	if withExport {
		queue, amqpURL := shopQueue(t, amqpBase)
		hooks, hookURL := shopEndpoint(t, clusterExport)
		shops = []*shopSink{queue, hooks}
		extra = []string{"--export", amqpURL + "," + hookURL}
	}
	c := startCluster(t, 3, extra...)
	var urls []string
	for _, in := range c.insts {
		urls = append(urls, in.url)
	}

	// Read every instance's /metrics every 100 ms until the rush and its drain are over.
	var readings [][]lagReading
	stopSampling := func() {}
	if withExport {
		readings, stopSampling = sampleExportLag(c)
	}

	var b [4]byte
	_, _ = crand.Read(b[:])
	sale := "exbench-" + hex.EncodeToString(b[:])
	env := map[string]string{"SECKILL_ADMIN_TOKEN": clusterAdmin, "SECKILL_AUTH_SECRET": clusterAuth, "SECKILL_PAYMENT_SECRET": clusterPayment}
	var out, errOut bytes.Buffer
	start := time.Now()
	err := bench(context.Background(), []string{"--target", strings.Join(urls, ","), "--sale", sale,
		"--units", strconv.Itoa(buyers), "--buyers", strconv.Itoa(buyers), "--concurrency", "512", "--deadline", "10m", "--json"},
		func(k string) string { return env[k] }, &out, &errOut)
	if err != nil {
		t.Errorf("bench: %v\n%s\n%s", err, errOut.String(), tail(out.String(), 40))
	}
	var rep struct {
		ElapsedMS int64            `json:"elapsed_ms"`
		Counts    map[string]int64 `json:"counts"`
		Latency   map[string]map[string]int64
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.ElapsedMS == 0 {
		t.Fatalf("bench report: %v\n%s", err, tail(out.String(), 20))
	}
	elapsed := time.Duration(rep.ElapsedMS) * time.Millisecond
	rushEnd := start.Add(elapsed + 100*time.Millisecond) // the sale's creation and the crowd
	secs := elapsed.Seconds()
	line := fmt.Sprintf("crowd %.1f s, %.0f buys/s (%d holds, %.0f holds/s), %.0f requests/s, buy p99 %.1f ms",
		secs, float64(rep.Latency["buy"]["count"])/secs, rep.Counts["held"], float64(rep.Counts["held"])/secs,
		float64(rep.Counts["requests"])/secs, float64(rep.Latency["buy"]["p99_us"])/1000)
	if !withExport {
		return line
	}

	db, err := sql.Open("mysql", mysqlConfig(t, c.db).FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	facts := waitForExport(t, c, db, sale, shops, 5*time.Minute)
	stopSampling()

	for _, s := range shops {
		got := s.arrivals()
		firstAt := map[string]time.Time{}
		var lags, rushLags []time.Duration
		inRush, dups := 0, 0
		var first, last time.Time
		perSecond := map[int64]int{}
		for _, a := range got {
			if _, seen := firstAt[a.ev.ID]; seen {
				dups++
				continue
			}
			firstAt[a.ev.ID] = a.at
			d := a.at.Sub(a.ev.At)
			lags = append(lags, d)
			if !a.at.After(rushEnd) {
				inRush++
				rushLags = append(rushLags, d)
			}
			if first.IsZero() {
				first = a.at
			}
			last = a.at
			perSecond[a.at.Unix()]++
		}
		peak := 0
		for _, n := range perSecond {
			peak = max(peak, n)
		}
		metricSecs, metricEvents, n := metricLag(readings, s.name, start, rushEnd)
		problems := checkExport(facts, got)
		line += fmt.Sprintf("\n    %s sink: %d events (%d redelivered); %d (%.0f/s) arrived during the crowd, peak %d in one second, "+
			"the last %.1f s after it (%.0f/s from first to last); arrival − at: p50 %s p99 %s max %s (crowd: p99 %s); "+
			"lag_seconds in /metrics (%d readings in the crowd, %d points): p50 %.2f s p99 %.2f s max %.2f s, lag_events p99 %.0f max %.0f; detector: %d problems",
			s.name, len(firstAt), dups, inRush, float64(inRush)/secs, peak, last.Sub(rushEnd).Seconds(),
			float64(len(firstAt))/last.Sub(first).Seconds(),
			pct(lags, 50), pct(lags, 99), pct(lags, 100), pct(rushLags, 99),
			n, len(metricSecs), pctF(metricSecs, 50), pctF(metricSecs, 99), pctF(metricSecs, 100), pctF(metricEvents, 99), pctF(metricEvents, 100), len(problems))
		for i, p := range problems {
			if i == 10 {
				break
			}
			t.Logf("%s sink: %s", s.name, p)
		}
	}
	return line
}

// sampleExportLag reads every instance's /metrics every 100 ms, each instance on its own (so a
// slow answer from one delays no other), until stop is called; readings[i] is instance i's.
func sampleExportLag(c *cluster) (readings [][]lagReading, stop func()) {
	readings = make([][]lagReading, len(c.insts))
	done := make(chan struct{})
	var sampling sync.WaitGroup
	for i, in := range c.insts {
		sampling.Go(func() {
			client := &http.Client{Timeout: 2 * time.Second}
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				m := exportMetricsAll(context.Background(), client, in.url)
				readings[i] = append(readings[i], lagReading{at: time.Now(),
					seconds: m["seckill_export_lag_seconds"], events: m["seckill_export_lag_events"]})
				select {
				case <-done:
					return
				case <-tick.C:
				}
			}
		})
	}
	return readings, func() {
		close(done)
		sampling.Wait()
	}
}

// metricLag is the metric's lag of one sink every 100 ms of the crowd: the largest over the
// instances of each one's latest reading (each leads some of the logs) in seconds, the sum in
// events, and n, how many readings were taken during the crowd.
func metricLag(readings [][]lagReading, sink string, start, rushEnd time.Time) (metricSecs, metricEvents []float64, n int) {
	for at := start; at.Before(rushEnd); at = at.Add(100 * time.Millisecond) {
		secs, evs, any := 0.0, 0.0, false
		for _, rs := range readings {
			var latest *lagReading
			for i := range rs {
				if rs[i].at.After(at) {
					break
				}
				latest = &rs[i]
			}
			if latest == nil {
				continue
			}
			for k, v := range latest.seconds {
				if strings.HasPrefix(k, sink) {
					secs, any = max(secs, v), true
				}
			}
			for k, v := range latest.events {
				if strings.HasPrefix(k, sink) {
					evs += v
				}
			}
		}
		if any {
			metricSecs = append(metricSecs, secs)
			metricEvents = append(metricEvents, evs)
		}
	}
	for _, rs := range readings {
		for _, r := range rs {
			if !r.at.After(rushEnd) {
				n++
			}
		}
	}
	return metricSecs, metricEvents, n
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, int(float64(len(s))*p/100))
	return s[i].Round(time.Millisecond)
}

func pctF(d []float64, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}
