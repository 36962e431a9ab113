package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/redisinv"
)

// TestBenchSegmentedOnRedisCluster: `seckill bench --segments 4` against three instances on a
// Redis Cluster, as a new user would run it: the sale reads back with its 4 segments on every
// instance, sells exactly its stock (counted in the database, so every segment's events reached
// it), and the bench's verdict is ok: every instance's audit, nothing oversold, and no buyer
// told sold_out while a unit was free or held (loadgen's check during the run).
func TestBenchSegmentedOnRedisCluster(t *testing.T) {
	skipShort(t)
	url := testenv.RedisCluster(t)
	rc, err := redisinv.Dial(t.Context(), url)
	if err != nil {
		t.Fatalf("Dial(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	if !rc.Cluster {
		t.Fatalf("%s is not a Redis Cluster", url)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	sale := "segbench-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { dropSaleKeys(t, rc, sale) }) // the cluster is shared: leave nothing behind
	c := launchCluster(t, 3, rc.Inventory, url, freshMySQL(t))
	var urls []string
	for _, in := range c.insts {
		urls = append(urls, in.url)
	}
	env := map[string]string{"SECKILL_ADMIN_TOKEN": clusterAdmin, "SECKILL_AUTH_SECRET": clusterAuth, "SECKILL_PAYMENT_SECRET": clusterPayment}
	var out bytes.Buffer
	err = bench(context.Background(), []string{"--target", strings.Join(urls, ","), "--sale", sale, "--segments", "4",
		"--units", "300", "--buyers", "600", "--hold", "1s"},
		func(k string) string { return env[k] }, &out, &out)
	if err != nil || !strings.Contains(out.String(), "300 / 300 of 300") || !strings.Contains(out.String(), "invariants  ok") {
		t.Fatalf("bench --segments 4 on a Redis Cluster: %v\n%s", err, out.String())
	}
	for _, in := range c.insts {
		if v, err := c.api(in, "").Sale(context.Background(), sale); err != nil {
			t.Fatalf("GET the sale on %s: %v", in.url, err)
		} else if v.Segments != 4 || v.StockState.Sold != 300 {
			t.Fatalf("the sale on %s: segments %d, sold %d; want 4 segments, 300 sold", in.url, v.Segments, v.StockState.Sold)
		}
	}
	t.Logf("keys of the sale per cluster node: %v\n%s", saleKeysPerNode(t, rc, sale), out.String())
}

// saleKeysPerNode counts the sale's keys (its segments' too) on each node of the cluster.
func saleKeysPerNode(t *testing.T, rc *redisinv.Clients, sale string) []int {
	var counts []int
	for _, node := range rc.Inventory.Nodes() {
		n := 0
		scanSaleKeys(t, node, sale, func(string) { n++ })
		counts = append(counts, n)
	}
	return counts
}

// dropSaleKeys deletes the sale's keys (every segment's) from every node.
func dropSaleKeys(t *testing.T, rc *redisinv.Clients, sale string) {
	rdb := rc.Inventory
	for _, node := range rdb.Nodes() {
		scanSaleKeys(t, node, sale, func(k string) { _ = rdb.Do(context.Background(), rdb.B().Unlink().Key(k).Build()).Error() })
	}
}

// scanSaleKeys calls f with each key of the sale on node: the serve default prefix, every
// segment's hash tag ({sale:X} and {sale:X#i}).
func scanSaleKeys(t *testing.T, node rueidis.Client, sale string, f func(key string)) {
	var cursor uint64
	for {
		e, err := node.Do(context.Background(), node.B().Scan().Cursor(cursor).Match("seckill:{sale:"+sale+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Logf("scan the sale's keys: %v", err)
			return
		}
		for _, k := range e.Elements {
			f(k)
		}
		if cursor = e.Cursor; cursor == 0 {
			return
		}
	}
}
