package redisinv

import (
	"testing"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// TestWaitingRoomsConformance runs the shared rooms suite (rules, the rapid model, the
// concurrency run with CheckRoom) against a standalone Redis and a Redis Cluster, as
// TestInventoryStandalone and TestInventoryCluster run the inventory's.
func TestWaitingRoomsConformance(t *testing.T) {
	run := func(t *testing.T, url string) {
		c := dialT(t, url)
		seckilltest.TestWaitingRooms(t, func(t *testing.T, clock seckill.Clock) seckilltest.RoomEngine {
			return newTestEngine(t, c.Inventory, clock)
		})
	}
	t.Run("standalone", func(t *testing.T) { run(t, testenv.Redis(t)) })
	t.Run("cluster", func(t *testing.T) {
		url := testenv.RedisCluster(t)
		if c := dialT(t, url); !c.Cluster {
			t.Fatalf("%s is not a Redis Cluster", url)
		}
		run(t, url)
	})
}
