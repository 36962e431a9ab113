package redisinv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// TestHashSlot: hashSlot is Redis Cluster's: CRC16-XMODEM's check value for "123456789" is
// 0x31C3, and on the test Cluster CLUSTER KEYSLOT agrees for segment keys of several sales.
func TestHashSlot(t *testing.T) {
	if got := hashSlot("123456789"); got != 0x31C3 {
		t.Fatalf("hashSlot(123456789) = %#x, want 0x31c3", got)
	}
	c := dialT(t, testenv.RedisCluster(t))
	e := New(c.Inventory)
	t.Cleanup(func() { _ = e.Close() })
	for i := range 20 {
		for _, tag := range e.segs.tagsOf(fmt.Sprintf("sale-%d", i), 6) {
			key := e.keys(tag)[0]
			want, err := c.Inventory.Do(t.Context(), c.Inventory.B().ClusterKeyslot().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if got := hashSlot("sale:" + tag); int64(got) != want {
				t.Fatalf("hashSlot of %s = %d; CLUSTER KEYSLOT %d", key, got, want)
			}
		}
	}
}

// TestSegTagsSpread: each segment's slot is where segTag aims it (within slotRing/(16n) of
// slot0 + i·slotRing/n, checked for 100 sale ids and 2, 3, 4, 6, 16 and 64 segments), and on the test Cluster
// (three masters of equal slot ranges, as .ci/redis-cluster.sh makes it) the segments of 100
// sales spread over the nodes: 3 segments on 3 distinct nodes for at least 90 of the sales,
// 6 segments two per node for at least 90. Negative control: the tags without a salt ("<id>#<i>",
// the first placement) fall short of both, and the detector says so.
func TestSegTagsSpread(t *testing.T) {
	for _, n := range []int{2, 3, 4, 6, 16, maxSegments} {
		for s := range 100 {
			id := fmt.Sprintf("spread-%d", s)
			slot0 := hashSlot("sale:" + id)
			for i, tag := range segTagsFrom(id, n) {
				target := (slot0 + (i+1)*slotRing/n) % slotRing
				if d := ringDistance(hashSlot("sale:"+tag), target); d > max(slotRing/(16*n), 1) {
					t.Fatalf("%d segments, sale %s, segment %d (%s): %d slots from its target", n, id, i+1, tag, d)
				}
			}
		}
	}
	c := dialT(t, testenv.RedisCluster(t))
	shards, err := c.Inventory.Do(t.Context(), c.Inventory.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	type span struct {
		from, to int64
		node     string
	}
	var spans []span
	for _, sh := range shards {
		f, _ := sh.ToArray()
		from, _ := f[0].AsInt64()
		to, _ := f[1].AsInt64()
		m, _ := f[2].ToArray()
		port, _ := m[1].AsInt64()
		spans = append(spans, span{from, to, fmt.Sprint(port)})
	}
	nodeOf := func(tag string) string {
		slot := int64(hashSlot("sale:" + tag))
		for _, s := range spans {
			if s.from <= slot && slot <= s.to {
				return s.node
			}
		}
		t.Fatalf("slot %d of %s is served by no node", slot, tag)
		return ""
	}
	spread := func(tags func(id string, n int) []string) (three, six int) {
		for s := range 100 {
			id := fmt.Sprintf("spread-%d", s)
			count := map[string]int{}
			for _, tag := range tags(id, 3) {
				count[nodeOf(tag)]++
			}
			if len(count) == 3 {
				three++
			}
			count = map[string]int{}
			for _, tag := range tags(id, 6) {
				count[nodeOf(tag)]++
			}
			if len(count) == 3 && count[spans[0].node] == 2 && count[spans[1].node] == 2 {
				six++
			}
		}
		return three, six
	}
	e := New(c.Inventory)
	t.Cleanup(func() { _ = e.Close() })
	salted := func(id string, n int) []string { return e.segs.tagsOf(id, n) }
	unsalted := func(id string, n int) []string {
		out := []string{id}
		for i := 1; i < n; i++ {
			out = append(out, id+"#"+fmt.Sprint(i))
		}
		return out
	}
	if len(spans) != 3 {
		t.Fatalf("the test Cluster has %d slot ranges, want 3 (one per master)", len(spans))
	}
	three, six := spread(salted)
	t.Logf("salted tags: 3 segments on 3 nodes for %d of 100 sales, 6 segments 2 per node for %d", three, six)
	if three < 90 || six < 90 {
		t.Fatalf("salted tags spread 3 segments over 3 nodes for %d of 100 sales and 6 two per node for %d; want 90 or more each", three, six)
	}
	three, six = spread(unsalted)
	t.Logf("negative control, tags without a salt: %d and %d of 100", three, six)
	if three >= 90 && six >= 90 {
		t.Fatal("negative control: the unsalted tags spread as well: the detector cannot fail")
	}
	if !strings.Contains(e.segs.tagsOf("x", 2)[1], "#1.") {
		t.Fatalf("segment 1's tag %q lacks its salt", e.segs.tagsOf("x", 2)[1])
	}
}
