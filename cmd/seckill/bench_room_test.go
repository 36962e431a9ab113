package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
)

// TestBenchWaitingRoom: `seckill bench --waiting-room` against a --dev server (memory engine):
// a pre-queue and later arrivals, a proof of work per join, every check ok, and the run without
// a room side by side. --told-within and --hold are generous: the test checks the detectors
// run and hold, not this machine's speed.
func TestBenchWaitingRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a flash sale with a waiting room over HTTP")
	}
	a, cfg := startDevApp(t, nil)
	out, err := benchAgainst(t, a, cfg, "--waiting-room", "--buyers", "300", "--prequeue", "120", "--arrival", "1s",
		"--lead", "2s", "--admit-rate", "100", "--pow-bits", "4", "--streams", "100", "--told-within", "30s", "--hold", "30s", "--json")
	if err != nil {
		t.Fatalf("bench --waiting-room: %v\n%s", err, out)
	}
	var rp roomReportJSON
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &rp); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, out)
	}
	if rp.WithRoom.Paid != 20 || rp.WithoutRm == nil || rp.WithoutRm.Paid != 20 || rp.PreQueue < 1 || rp.PreQueue > 120 || len(rp.Checks) < 6 {
		t.Fatalf("report %+v: want 20 units paid on each side, a pre-queue (at most the 120 sent before the start: a slow join lands after it), every check\n%s", rp, out)
	}
	for _, c := range rp.Checks {
		if !c.OK {
			t.Errorf("check %s failed: %v", c.Name, c.Violations)
		}
	}
	if rp.Streamed+rp.Polled+rp.AtJoin != 300-int(rp.Admitted) || rp.SolveP50Ms <= 0 || rp.VerifyUs <= 0 {
		t.Errorf("told %d+%d of %d not admitted, solve %v ms, verify %v µs: want everyone told, the proof's costs",
			rp.Streamed, rp.Polled, 300-rp.Admitted, rp.SolveP50Ms, rp.VerifyUs)
	}
	// The server's own timing of the tell: the streams open at the close are among those the
	// bench saw told by stream (the others were told at connect).
	if w := rp.CloseWritten; w == nil || w.Streams > uint64(rp.Streamed) ||
		(w.Streams > 0 && (w.P50Ms <= 0 || (w.MaxMs != -1 && w.MaxMs < w.P50Ms))) {
		t.Errorf("close_written %+v with %d told by stream: want the servers' histogram read, no more writes than streams told", w, rp.Streamed)
	}
	// The streams' closing events carry their arrival at the buyers' sockets (rxstamp): never
	// after this process read them.
	if runtime.GOOS == "linux" && rp.Arrived != rp.Streamed {
		t.Errorf("arrival known for %d of the %d told by stream: want every one (SO_TIMESTAMPNS)", rp.Arrived, rp.Streamed)
	}
	if rp.Streamed > 0 && (rp.ToldClosedMaxMs > rp.ReadClosedMaxMs || rp.ToldClosedP50Ms > rp.ReadClosedP50Ms) {
		t.Errorf("told after closed_at p50 %v max %v ms, read p50 %v max %v ms: an arrival after its read",
			rp.ToldClosedP50Ms, rp.ToldClosedMaxMs, rp.ReadClosedP50Ms, rp.ReadClosedMaxMs)
	}
	// The bare reference's tell (bench-reference --tell, this test binary: TestMain), read by
	// as many streams as the servers told at the close (at most the buyers told by stream).
	if tr := rp.TellReference; rp.Streamed > 0 && (tr == nil || tr.Streams == 0 || tr.Streams > rp.Streamed || tr.Told != tr.Streams || tr.Open != tr.Streams) {
		t.Errorf("tell_reference %+v with %d told by stream: want every one of the room's stream-told buyers' count told by the reference", tr, rp.Streamed)
	}
}

// goodRoom is a fabricated observation every check accepts: four drawn entrants admitted in
// the draw's order, two later arrivals (one admitted), one buyer told sold out in time.
func goodRoom(t *testing.T) roomObservation {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i)
	}
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	var drawn []string
	for i := range 4 {
		drawn = append(drawn, seckill.EntrantID("s", fmt.Sprint("u", i)))
	}
	o := roomObservation{rate: 2, burst: 1, order: seckill.RoomDraw, commitmentBefore: seckill.RoomCommitment(seed),
		commitment: seckill.RoomCommitment(seed), seed: hex.EncodeToString(seed), entrants: drawn, preQueue: 4,
		soldOut: true, lastPaid: t0.Add(10 * time.Second), closedAt: t0.Add(10*time.Second + 50*time.Millisecond), toldWithin: time.Second}
	for i, e := range seckill.DrawOrder(seed, drawn) {
		o.buyers = append(o.buyers, &roomBuyer{user: "d" + e[:4], entrant: e, joined: true, drawn: true, index: int64(i + 1),
			admittedAt: t0.Add(time.Duration(i) * 600 * time.Millisecond), admissions: 1})
	}
	o.buyers = append(o.buyers,
		&roomBuyer{user: "late1", entrant: seckill.EntrantID("s", "late1"), joined: true, index: 5, joinedAt: t0.Add(time.Second),
			admittedAt: t0.Add(3 * time.Second), admissions: 1},
		&roomBuyer{user: "late2", entrant: seckill.EntrantID("s", "late2"), joined: true, index: 6, joinedAt: t0.Add(2 * time.Second),
			state: seckill.TicketSoldOut, told: t0.Add(10*time.Second + 300*time.Millisecond), by: "stream"})
	o.admitted = 5
	return o
}

func failedChecks(o roomObservation) map[string][]string {
	out := map[string][]string{}
	for _, c := range checkRoom(o) {
		if len(c.bad) > 0 {
			out[c.name] = c.bad
		}
	}
	return out
}

// TestRoomChecksCatch: the checks accept a good observation, and each catches its violation
// (the negative controls): an admission out of the draw's order, a double admission, a second
// over the rate, a seed that is not the committed one, an arrival out of order, a buyer told
// late and one never told.
func TestRoomChecksCatch(t *testing.T) {
	if bad := failedChecks(goodRoom(t)); len(bad) > 0 {
		t.Fatalf("a good observation fails %v", bad)
	}
	// A buyer whose stream's close arrived in time is told in time, however late this process
	// read it (short of CPU): the arrival is what a buyer on a machine of its own sees.
	late := goodRoom(t)
	late.buyers[5].arrived, late.buyers[5].told = late.closedAt.Add(400*time.Millisecond), late.closedAt.Add(3*time.Second)
	if bad := failedChecks(late); len(bad) > 0 {
		t.Fatalf("a close that arrived in time and was read late fails %v", bad)
	}
	for _, tc := range []struct {
		name, check string
		spoil       func(o *roomObservation)
	}{
		{"out of draw order", "draw", func(o *roomObservation) { o.buyers[0].index, o.buyers[1].index = o.buyers[1].index, o.buyers[0].index }},
		{"admitted twice", "admitted_once", func(o *roomObservation) { o.buyers[2].admissions = 2 }},
		{"an index twice", "admitted_once", func(o *roomObservation) { o.buyers[5].index = 5 }},
		{"counter disagrees", "admitted_once", func(o *roomObservation) { o.admitted = 6 }},
		{"over the rate", "admission_rate", func(o *roomObservation) {
			for _, b := range o.buyers[:4] {
				b.admittedAt = o.buyers[0].admittedAt.Add(time.Duration(b.index) * time.Millisecond)
			}
		}},
		{"seed not committed", "draw", func(o *roomObservation) { o.commitmentBefore = strings.Repeat("0", 64) }},
		{"entrant list short", "draw", func(o *roomObservation) { o.entrants = o.entrants[1:] }},
		{"admitted past a waiting one", "admission_order", func(o *roomObservation) {
			o.buyers[3].admittedAt, o.buyers[3].admissions, o.admitted = time.Time{}, 0, 4
		}},
		{"admitted earlier than the one ahead", "admission_order", func(o *roomObservation) {
			o.buyers[2].admittedAt = o.buyers[0].admittedAt.Add(-time.Second)
		}},
		{"arrival out of order", "admission_order", func(o *roomObservation) { o.buyers[5].joinedAt = o.buyers[4].joinedAt.Add(-time.Millisecond) }},
		{"told late", "told_sold_out", func(o *roomObservation) { o.buyers[5].told = o.closedAt.Add(1001 * time.Millisecond) }},
		{"arrived late", "told_sold_out", func(o *roomObservation) { o.buyers[5].arrived = o.closedAt.Add(1001 * time.Millisecond) }},
		{"no closed_at", "told_sold_out", func(o *roomObservation) { o.closedAt = time.Time{} }},
		{"path without admission", "no_bypass", func(o *roomObservation) { o.bypass = []string{"GET /path answered 200"} }},
		{"bought unadmitted", "no_bypass", func(o *roomObservation) { o.buyers[5].bought = true }},
		{"counter above the failed", "admitted_once", func(o *roomObservation) {
			o.buyers[5].failure, o.admitted = "ticket: timeout", 7
		}},
		{"never told", "told_sold_out", func(o *roomObservation) { o.buyers[5].told = time.Time{} }},
	} {
		o := goodRoom(t)
		tc.spoil(&o)
		if bad := failedChecks(o); len(bad[tc.check]) == 0 {
			t.Errorf("%s: check %s did not fail (failed: %v)", tc.name, tc.check, bad)
		}
	}
}

// TestBenchWaitingRoomFailsOnViolation: a failed check fails the run's report (which
// runRoomBench turns into a non-zero exit).
func TestBenchWaitingRoomFailsOnViolation(t *testing.T) {
	o := goodRoom(t)
	o.buyers[2].admissions = 2
	rr := &roomRun{saleID: "s", room: true, buyers: o.buyers}
	rp := roomReport(rr, nil, o, checkRoom(o), 0)
	if f := rp.failed(); len(f) != 1 || f[0] != "admitted_once" {
		t.Fatalf("failed = %v, want [admitted_once]", f)
	}
}

func TestSpearman(t *testing.T) {
	if r := spearman([]float64{1, 2, 3, 4}, []float64{1, 1, 0, 0}); !(r < -0.85) {
		t.Errorf("first come first served: ρ = %v, want about −0.89", r)
	}
	if r := spearman([]float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}); r != 1 {
		t.Errorf("same order: ρ = %v, want 1", r)
	}
	if r := spearman(nil, nil); r != 0 {
		t.Errorf("nothing to correlate: ρ = %v, want 0 (JSON has no NaN)", r)
	}
}

// The servers' histogram: a difference of two readings, its buckets' bounds as quantiles, and
// no difference between readings that cannot be the same servers'.
func TestCloseWrittenBuckets(t *testing.T) {
	bounds := []float64{.1, .5, 1}
	before := closeWritten{bounds: bounds, counts: []uint64{1, 2, 2}, total: 3}
	after := closeWritten{bounds: bounds, counts: []uint64{5, 11, 12}, total: 14} // 4 ≤ 100 ms, 5 ≤ 500 ms, 1 ≤ 1 s, 1 over
	d, ok := after.since(before)
	if !ok || d.total != 11 {
		t.Fatalf("since = %+v, %v", d, ok)
	}
	if got := d.report(); got.Streams != 11 || got.P50Ms != 500 || got.P99Ms != -1 || got.MaxMs != -1 {
		t.Fatalf("report = %+v, want 11 writes, p50 ≤ 500 ms, p99 and max past the last bucket", got)
	}
	if got := (closeWritten{bounds: bounds, counts: []uint64{3, 3, 3}, total: 3}).report(); got.P50Ms != 100 || got.MaxMs != 100 {
		t.Fatalf("all in the first bucket: %+v", got)
	}
	if _, ok := before.since(after); ok {
		t.Fatal("a reading with fewer counts than the one before (a restarted server) was subtracted")
	}
	if got := (closeWritten{bounds: bounds, counts: make([]uint64, 3)}).report(); got.Streams != 0 || got.P50Ms != 0 {
		t.Fatalf("no writes: %+v", got)
	}
}

// readCloseWritten reads the histogram as a server serves it, +Inf bucket included: a write
// past the last bound is "past the last bucket" (-1), which the JSON report can carry.
func TestReadCloseWritten(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: httpapi.CloseWrittenMetric, Help: "x", Buckets: []float64{.1, 1}})
	reg.MustRegister(h)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	targets := []string{srv.URL, srv.URL} // two targets: summed
	before, ok := readCloseWritten(t.Context(), srv.Client(), targets)
	if !ok || len(before) != 2 || before[0].total != 0 || len(before[0].bounds) != 2 {
		t.Fatalf("empty histogram read as %+v, %v", before, ok)
	}
	for _, s := range []float64{.05, .05, .5, 7} {
		h.Observe(s)
	}
	after, ok := readCloseWritten(t.Context(), srv.Client(), targets)
	d, ok2 := closeWrittenSince(before, after)
	if !ok || !ok2 {
		t.Fatal("not read")
	}
	// One target restarted (fewer counts) while the other grew: not hidden by the sum.
	if _, ok := closeWrittenSince(after, []closeWritten{before[0], after[1]}); ok {
		t.Fatal("a restarted target's reading was subtracted")
	}
	rp := d.report()
	if rp.Streams != 8 || rp.P50Ms != 100 || rp.MaxMs != -1 {
		t.Fatalf("report %+v, want 8 writes, p50 ≤ 100 ms, the last past the last bucket", rp)
	}
	if _, err := json.Marshal(rp); err != nil {
		t.Fatalf("the report does not encode: %v", err)
	}
}
