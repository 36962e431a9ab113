package redisinv

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/sqlstore"
)

// dialT connects to the Redis that url names, for the test's lifetime.
func dialT(t testing.TB, url string) *Clients {
	t.Helper()
	c, err := Dial(t.Context(), url)
	if err != nil {
		t.Fatalf("Dial(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sqliteStoreT opens an order store in a SQLite file of the test's own, closed at cleanup.
func sqliteStoreT(t *testing.T) *sqlstore.Store {
	t.Helper()
	store, err := sqlstore.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// testPrefix is a key prefix no other test uses, so tests share one Redis.
func testPrefix() string { return redistest.KeyPrefix() }

// dropPrefix deletes every key under prefix on every node.
func dropPrefix(t testing.TB, rdb rueidis.Client, prefix string) {
	redistest.DropPrefix(t, rdb, prefix)
}

// newTestEngine builds an engine on its own prefix with the suite's clock, removed at cleanup.
func newTestEngine(t *testing.T, rdb rueidis.Client, clock seckill.Clock, opts ...Option) *Engine {
	prefix := testPrefix()
	e := New(rdb, append([]Option{WithTestClock(clock), WithPrefix(prefix)}, opts...)...)
	t.Cleanup(func() {
		_ = e.Close()
		dropPrefix(t, rdb, prefix)
	})
	return e
}

func conformance(t *testing.T, url string, opts ...seckilltest.SuiteOption) {
	c := dialT(t, url)
	seckilltest.TestInventory(t, func(t *testing.T, clock seckill.Clock) seckill.Inventory {
		return newTestEngine(t, c.Inventory, clock)
	}, opts...)
}

// TestInventoryStandalone runs the shared conformance suite (rules, the rapid model, the
// concurrency checker) against a standalone Redis.
func TestInventoryStandalone(t *testing.T) { conformance(t, testenv.Redis(t)) }

// TestInventoryCluster runs it against a Redis Cluster: every script touches one hash slot.
// The same scripts as standalone, routed by slot: one round of the model comparison.
func TestInventoryCluster(t *testing.T) {
	url := testenv.RedisCluster(t)
	if c := dialT(t, url); !c.Cluster {
		t.Fatalf("%s is not a Redis Cluster", url)
	}
	conformance(t, url, seckilltest.ModelRounds(1))
}

// TestConcurrencyCatchesBrokenScripts is the negative control on this engine: the concurrency
// checker that passes above must report violations when a script is broken on purpose, in
// the ways public flash-sale projects broke theirs. It runs on one-segment sales and on sales
// split into 4 segments (docs/DECISIONS.md "Segmented stock"), where the checker must catch
// them just as well.
func TestConcurrencyCatchesBrokenScripts(t *testing.T) {
	for _, segs := range []int{1, 4} {
		t.Run("segments="+itoa(segs), func(t *testing.T) { concurrencyCatchesBrokenScripts(t, segs) })
	}
}

func concurrencyCatchesBrokenScripts(t *testing.T, segs int) {
	c := dialT(t, testenv.Redis(t))
	for _, tc := range []struct {
		name, file, from, to string
	}{
		// `if total >= sold then sell`: one unit too many.
		{"OffByOne", "buy.lua", "if S.qlen == 0 and S.avail >= q then", "if S.qlen == 0 and S.avail + 1 >= q then"},
		// An expired hold whose units never come back to available.
		{"ExpiryKeepsUnits", "common.lua", "S.held, S.avail = S.held - r.q, S.avail + r.q\n  user_add(r.user, -r.q)",
			"S.held = S.held - r.q\n  user_add(r.user, -r.q)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := newScriptSet(func(name string) string {
				src := scriptSource(name)
				if name == tc.file || tc.file == "common.lua" {
					if !strings.Contains(src, tc.from) {
						t.Fatalf("%s no longer contains the text the mutation replaces: %q", name, tc.from)
					}
					src = strings.Replace(src, tc.from, tc.to, 1)
				}
				return src
			})
			got := seckilltest.ConcurrencyViolations(t, func(t *testing.T, clock seckill.Clock) seckill.Inventory {
				e := newTestEngine(t, c.Inventory, clock, WithSegments(segs))
				e.scripts = broken
				return e
			})
			if len(got) == 0 {
				t.Fatalf("the concurrency checker found nothing wrong with a broken %s", tc.file)
			}
			t.Logf("caught:\n%s", strings.Join(got, "\n"))
		})
	}
}
