package strategy

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/redisinv"
)

// TestRun is the acceptance: on one racy load, no-lock oversells and every other
// strategy sells exactly the stock, by the buyers' count and by the store's. The load is the
// default one scaled down, with 5 ms of work after the check: the first wave of 32 workers all
// reads the stock of 20 before anyone decrements, so no-lock oversells on every run, even on a
// loaded machine.
func TestRun(t *testing.T) {
	url := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := Config{RedisURL: url, Stock: 20, Buyers: 1000, Workers: 32, Work: 5 * time.Millisecond}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	prefix := "seckill:strategies:test-" + seckill.NewID()[:16] + ":"
	rs, err := run(ctx, cfg, prefix) // Run with a prefix known here
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"no-lock", "setnx", "lock", "lua", "embedded"}
	if len(rs) != len(want) {
		t.Fatalf("got %d results, want %d", len(rs), len(want))
	}
	for i, r := range rs {
		t.Logf("%-8s sold %4d gone %4d  %8.0f ops/s  p99 %v", r.Strategy, r.Sold, r.Gone, r.OpsPerSec, r.P99)
		switch {
		case r.Strategy != want[i]:
			t.Errorf("result %d is %s, want %s", i, r.Strategy, want[i])
		case r.Gone != r.Sold: // DECR keeps even no-lock's counter in step with its sales
			t.Errorf("%s: buyers saw %d sold, the store counts %d", r.Strategy, r.Sold, r.Gone)
		case i == 0 && (r.Sold <= r.Stock || r.Oversold != r.Sold-r.Stock || r.Verdict() != "oversold"):
			t.Errorf("no-lock sold %d of %d (verdict %s): the negative control must oversell", r.Sold, r.Stock, r.Verdict())
		case i > 0 && (!r.Exact || r.Sold != r.Stock || r.Oversold != 0):
			t.Errorf("%s sold %d of %d (verdict %s), want exact", r.Strategy, r.Sold, r.Stock, r.Verdict())
		case r.OpsPerSec <= 0 || r.P99 < 0:
			t.Errorf("%s: ops/s %v, p99 %v", r.Strategy, r.OpsPerSec, r.P99)
		}
	}
	c, err := redisinv.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if keys, err := c.Inventory.Do(ctx, c.Inventory.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice(); err != nil || len(keys) > 0 {
		t.Errorf("keys left behind: %v (%v)", keys, err)
	}
}

// TestSetNXOverlap shows the flaw of the SETNX lock: with a lease shorter than the work, a
// second buyer takes the lock while the first still works, the first one's DEL then frees the
// second one's lock, and the check-then-decrement races as if there were no lock. Each holder
// works 100 ms under a 10 ms lease, so about ten read the stock of 2 before the first DECR;
// the margin is wide so that a loaded machine's stalls cannot hide the overlap.
func TestSetNXOverlap(t *testing.T) {
	url := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := redisinv.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := Config{RedisURL: url, Stock: 2, Buyers: 10, Workers: 10, Work: 100 * time.Millisecond, SetNXLease: 10 * time.Millisecond}
	prefix := "seckill:strategies:test-" + seckill.NewID()[:16] + ":"
	defer func() { _ = deletePrefix(context.WithoutCancel(ctx), c.Inventory, prefix) }()
	st, err := openSetNX(ctx, env{cfg, c, prefix})
	if err != nil {
		t.Fatal(err)
	}
	r, err := measure(ctx, cfg, "setnx", st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sold %d of %d", r.Sold, r.Stock)
	if r.Sold <= r.Stock || r.Gone != r.Sold || r.Verdict() != "oversold" {
		t.Errorf("sold %d of %d, store counts %d (verdict %s): want an oversell", r.Sold, r.Stock, r.Gone, r.Verdict())
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil || c.Stock != DefaultStock || c.Buyers != DefaultBuyers || c.Workers != DefaultWorkers ||
		c.Work != DefaultWork || c.SetNXLease != DefaultSetNXLease || c.RedisURL != DefaultRedisURL {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	if _, err := (Config{Stock: 10, Buyers: 10}).withDefaults(); err == nil {
		t.Error("buyers = stock accepted: no strategy could show it sells out")
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		sold, gone int
		want       string
	}{{10, 10, "exact"}, {12, 12, "oversold"}, {10, 12, "oversold"}, {9, 10, "inconsistent"}, {9, 9, "undersold"}} {
		if got := (Result{Stock: 10, Sold: tc.sold, Gone: tc.gone}).Verdict(); got != tc.want {
			t.Errorf("sold %d gone %d: %s, want %s", tc.sold, tc.gone, got, tc.want)
		}
	}
}

func TestWrite(t *testing.T) {
	rs := []Result{
		{Strategy: "no-lock", Stock: 100, Sold: 130, Gone: 130, Oversold: 30, OpsPerSec: 19756.4, P99: 11687 * time.Microsecond},
		{Strategy: "embedded", Stock: 100, Sold: 100, Gone: 100, OpsPerSec: 884798, P99: 1500 * time.Nanosecond, Exact: true},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"strategy  sold  oversold  ops/s   p99 (µs)  verdict\n" +
		"no-lock   130   30        19756   11687     oversold\n" +
		"embedded  100   0         884798  1         exact\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteMarkdown(&b, rs); err != nil {
		t.Fatal(err)
	}
	want = "| strategy | sold | oversold | ops/s | p99 (µs) | verdict |\n|---|--:|--:|--:|--:|---|\n" +
		"| no-lock | 130 | 30 | 19756 | 11687 | oversold |\n| embedded | 100 | 0 | 884798 | 1 | exact |\n"
	if b.String() != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestP99OfWorkers checks the merged percentile against a known distribution: worker 0 saw 980
// fast takes (10 µs) and worker 1 twenty slow ones (1 ms), so the 990th of the 1 000 samples,
// the 99th percentile, is slow. Counting worker 0's samples twice (its histogram merged into
// itself) makes it 1 960 fast of 1 980 and the percentile fast: this test fails on that.
func TestP99OfWorkers(t *testing.T) {
	fast, slow := hdrhistogram.New(0, maxMicros, 3), hdrhistogram.New(0, maxMicros, 3)
	for range 980 {
		_ = fast.RecordValue(10)
	}
	for range 20 {
		_ = slow.RecordValue(1000)
	}
	if got := p99([]*hdrhistogram.Histogram{fast, slow}); got < 990*time.Microsecond || got > 1010*time.Microsecond {
		t.Fatalf("p99 of 980 × 10 µs and 20 × 1 ms = %v, want 1 ms", got)
	}
	if got := p99([]*hdrhistogram.Histogram{fast}); got > 11*time.Microsecond {
		t.Fatalf("p99 of 980 × 10 µs = %v, want 10 µs", got)
	}
	if fast.TotalCount() != 980 {
		t.Fatalf("p99 changed its input: worker 0 holds %d samples, want 980", fast.TotalCount())
	}
}
