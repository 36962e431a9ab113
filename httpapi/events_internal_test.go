package httpapi

import (
	"github.com/seckill-go/seckill"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlowListenerIsDropped: a listener that does not read is disconnected once its buffer is
// full, the feed never waits for it, and a listener that reads keeps every event.
func TestSlowListenerIsDropped(t *testing.T) {
	var dropped atomic.Int64
	f := newFeeds(nil, time.Hour, func() { dropped.Add(1) }) // the ticker never fires: broadcasts by hand
	defer f.close()
	slow, _ := f.subscribe("s", seckill.SaleView{})
	fast, _ := f.subscribe("s", seckill.SaleView{})
	fd := f.sales["s"]
	got := make(chan int, 100)
	go func() {
		n := 0
		for range fast.events {
			n++
			got <- n
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range listenerBuffer + 5 {
			f.broadcast(fd, []byte{byte(i)})
			// The reader keeps up: wait until it has each event before sending the next.
			if n := <-got; n != i+1 {
				t.Errorf("fast listener got %d events, want %d", n, i+1)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("broadcast blocked on a listener that does not read")
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("the slow listener was not disconnected")
	}
	if len(slow.events) != listenerBuffer || dropped.Load() != 1 {
		t.Fatalf("slow listener: %d buffered, %d dropped; want %d and 1", len(slow.events), dropped.Load(), listenerBuffer)
	}
	f.mu.Lock()
	_, still := fd.listeners[slow]
	_, kept := fd.listeners[fast]
	f.mu.Unlock()
	if still || !kept {
		t.Fatalf("after the drop: slow listening %v, fast listening %v", still, kept)
	}
	f.unsubscribe("s", slow) // the stream's own unsubscribe after a drop is harmless
	f.unsubscribe("s", fast)
	close(fast.events)
	if _, ok := f.sales["s"]; ok {
		t.Fatal("the feed outlived its last listener")
	}
}
