package httpapi

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill/service"
)

// TestSlowListenerIsDropped: a listener that does not read is disconnected once its buffer is
// full, the feed never waits for it, and a listener that reads keeps every event.
func TestSlowListenerIsDropped(t *testing.T) {
	var dropped atomic.Int64
	f := newFeeds(nil, time.Hour, func() { dropped.Add(1) }) // the ticker never fires: broadcasts by hand
	defer f.close()
	slow, _ := f.subscribe("s", service.SaleView{}, nil)
	fast, _ := f.subscribe("s", service.SaleView{}, nil)
	fd := f.feeds["s"]
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
	if _, ok := f.feeds["s"]; ok {
		t.Fatal("the feed outlived its last listener")
	}
}

// TestActivityTable: outcomes decided before the sale is known (onlyKnown) never add a sale;
// the table keeps at most maxActivitySales, forgetting the least recently active; seconds
// older than the window are not reported, and a reused bucket starts from zero.
func TestActivityTable(t *testing.T) {
	a := newActivity()
	t0 := time.Unix(1_900_000_000, 0)
	a.record("ghost", "rate_limited", t0, true)
	if len(a.sales) != 0 {
		t.Fatal("a rate-limited buy of an unknown sale entered the table")
	}
	a.record("s", "held", t0, false)
	a.record("s", "rate_limited", t0, true)
	a.record("s", "bogus", t0, false)
	got := a.snapshot("s", t0)
	if len(got) != 1 || got[0].Outcomes["held"] != 1 || got[0].Outcomes["rate_limited"] != 1 || got[0].Outcomes["other"] != 1 {
		t.Fatalf("snapshot %+v", got)
	}
	// The same ring slot, one window later: the old count is gone.
	later := t0.Add(activityWindow * time.Second)
	a.record("s", "queued", later, false)
	got = a.snapshot("s", later)
	if len(got) != 1 || got[0].Outcomes["held"] != 0 || got[0].Outcomes["queued"] != 1 {
		t.Fatalf("after a window: %+v", got)
	}
	// Filling the table: the sale active longest ago ("s0", at t0) is the one forgotten.
	b := newActivity()
	for i := range maxActivitySales {
		b.record(fmt.Sprintf("s%d", i), "held", t0.Add(time.Duration(i)*time.Second), false)
	}
	b.record("new", "held", t0.Add(time.Hour), false)
	if _, ok := b.sales["s0"]; ok || len(b.sales) != maxActivitySales {
		t.Fatalf("after overflow: %d sales, s0 kept %v", len(b.sales), ok)
	}
	if _, ok := b.sales["s1"]; !ok {
		t.Fatal("a more recent sale was forgotten")
	}
}
