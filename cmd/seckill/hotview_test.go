package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/redisinv"
)

// TestHotViewRedis: with the Redis engine the app wires the engine's cold side into GET
// /api/v1/hot: a new instance's cache is empty, with its bound; once a sale created two days
// ahead (cold: in the database only) has been read, the cache holds it, and it is not among the
// hot sales, where the sale on now is.
func TestHotViewRedis(t *testing.T) {
	url := testenv.Redis(t)
	cfg := config{Addr: "127.0.0.1:0", Engine: "redis", RedisURL: url, DB: "sqlite://" + filepath.Join(t.TempDir(), "h.db"), Dev: true}
	if _, err := cfg.secrets(); err != nil {
		t.Fatal(err)
	}
	a, err := startApp(context.Background(), cfg, appOptions{buyRate: -1}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.close(context.Background()) })
	ctx := context.Background()
	admin := client.New(a.url, client.WithToken(cfg.AdminToken))
	empty, err := admin.Hot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Hot != 0 || empty.ColdCache != (client.ColdCache{Entries: 0, Max: redisinv.ColdCacheMax}) {
		t.Fatalf("GET /api/v1/hot of a new instance: %+v, want nothing hot, an empty cold cache of bound %d", empty, redisinv.ColdCacheMax)
	}
	run := fmt.Sprintf("hot-%d", time.Now().UnixNano()) // the Redis is shared: ids of this run only
	now, later := run+"-now", run+"-later"
	createSale(t, a, cfg, client.NewSale{ID: now, PriceCents: 100, Stock: 1})
	createSale(t, a, cfg, client.NewSale{ID: later, PriceCents: 100, Stock: 1, StartsAt: time.Now().Add(48 * time.Hour)})
	if _, err := client.New(a.url).Sale(ctx, later); err != nil {
		t.Fatal(err)
	}
	got, err := admin.Hot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hot != 1 || !slices.Equal(got.Sales, []string{now}) || got.ColdCache != (client.ColdCache{Entries: 1, Max: redisinv.ColdCacheMax}) {
		t.Fatalf("GET /api/v1/hot: %+v, want hot 1 [%s] and the cold sale in the cache (1 of %d)", got, now, redisinv.ColdCacheMax)
	}
}
