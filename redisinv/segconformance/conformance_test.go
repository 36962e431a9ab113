// Package segconformance runs the shared conformance suite (seckilltest.TestInventory: the
// rules, the rapid model comparison, the concurrency checker) on the Redis engine with every
// sale split into segments (docs/DECISIONS.md "Segmented stock"): sequentially a segmented sale
// must answer exactly as a one-segment sale, and concurrently keep every invariant. It is a
// package of its own so that its runs (a few minutes) have their own test timeout and run
// beside package redisinv's.
package segconformance

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/seckilltest"
)

// segmentCounts are the segment counts the suite runs on (1 is redisinv's TestInventory*).
var segmentCounts = []int{4, 16}

// modelRounds is the rapid rounds (of 50 cases, see TestMain) of the model comparison per
// configuration: the most on 4 segments standalone, where lending, the tail collapse and the
// queue after it all occur within a case's few units; one round each where the segments are
// more (16: most cases collapse at once) or the same scripts are only routed by slot (Cluster).
func modelRounds(cluster bool, n int) int {
	if !cluster && n == 4 {
		return 3
	}
	return 1
}

func conformance(t *testing.T, url string, n int, cluster bool) {
	c, err := redisinv.Dial(t.Context(), url)
	if err != nil {
		t.Fatalf("Dial(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	seckilltest.TestInventory(t, func(t *testing.T, clock seckill.Clock) seckill.Inventory {
		prefix := redistest.KeyPrefix()
		e := redisinv.New(c.Inventory, redisinv.WithTestClock(clock), redisinv.WithPrefix(prefix), redisinv.WithSegments(n))
		t.Cleanup(func() {
			_ = e.Close()
			redistest.DropPrefix(t, c.Inventory, prefix)
		})
		return e
	}, seckilltest.ModelRounds(modelRounds(cluster, n)))
}

// TestInventorySegmentsStandalone runs the suite on segmented sales, standalone Redis.
func TestInventorySegmentsStandalone(t *testing.T) {
	url := testenv.Redis(t)
	for _, n := range segmentCounts {
		t.Run("segments="+strconv.Itoa(n), func(t *testing.T) { conformance(t, url, n, false) })
	}
}

// TestInventorySegmentsCluster runs it on a Redis Cluster, where the segments' hash tags put
// them on different nodes.
func TestInventorySegmentsCluster(t *testing.T) {
	url := testenv.RedisCluster(t)
	c, err := redisinv.Dial(t.Context(), url)
	if err != nil {
		t.Fatalf("Dial(%s): %v", url, err)
	}
	cluster := c.Cluster
	c.Close()
	if !cluster {
		t.Fatalf("%s is not a Redis Cluster", url)
	}
	for _, n := range segmentCounts {
		t.Run("segments="+strconv.Itoa(n), func(t *testing.T) { conformance(t, url, n, true) })
	}
}

// TestMain runs the rapid model comparison with 50 cases per property instead of rapid's 100
// (unless -rapid.checks is given): each case of a 16-segment sale costs several times the round
// trips of a one-segment sale (Sale reads every segment twice, a collapse moves every segment),
// and the package must stay well inside CI's per-package test timeout beside the others.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	if !given {
		_ = flag.Set("rapid.checks", "50")
	}
	os.Exit(m.Run())
}
