package memory_test

import (
	"testing"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/seckilltest"
)

// TestConformance runs the inventory conformance suite (rules, the rapid model comparison and
// the concurrency checker) against the memory engine.
func TestConformance(t *testing.T) {
	seckilltest.TestInventory(t, func(t *testing.T, c seckill.Clock) seckill.Inventory { return memory.New(c) })
}
