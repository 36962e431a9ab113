package memory_test

import (
	"testing"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/seckilltest"
)

func TestWaitingRooms(t *testing.T) {
	seckilltest.TestWaitingRooms(t, func(t *testing.T, c seckill.Clock) seckilltest.RoomEngine { return memory.New(c) })
}
