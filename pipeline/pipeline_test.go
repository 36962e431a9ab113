package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
)

type fakeStore struct {
	mu      sync.Mutex
	batches [][]seckill.Event
	fail    int // fail this many calls first
}

func (f *fakeStore) ApplyEvents(_ context.Context, evs []seckill.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return errors.New("database down")
	}
	f.batches = append(f.batches, append([]seckill.Event(nil), evs...))
	return nil
}

func (f *fakeStore) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, b := range f.batches {
		for _, e := range b {
			out = append(out, e.Reservation.ID)
		}
	}
	return out
}

func TestDrainKeepsOrderAndRetries(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := &fakeStore{fail: 2}
	ch := make(chan seckill.Event, 1000)
	p := New(store, ch, Config{BatchSize: 7, FlushEvery: time.Millisecond, RetryDelay: time.Millisecond})
	done := make(chan error)
	go func() { done <- p.Run(context.Background()) }()
	want := make([]string, 0, 100)
	for i := range 100 {
		id := string(rune('a'+i%26)) + string(rune('0'+i/26))
		want = append(want, id)
		ch <- seckill.Event{Reservation: seckill.Reservation{ID: id}}
	}
	close(ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := store.ids()
	if len(got) != len(want) {
		t.Fatalf("stored %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: got %s want %s (order lost)", i, got[i], want[i])
		}
	}
	if p.Applied() != 100 || p.Failures() != 2 {
		t.Fatalf("applied %d failures %d, want 100 and 2", p.Applied(), p.Failures())
	}
	for _, b := range store.batches {
		if len(b) > 7 {
			t.Fatalf("batch of %d exceeds BatchSize 7", len(b))
		}
	}
}

// TestStopWithStoreDownGivesUp: stopped while the store is down, the pipeline retries its
// batch until DrainTimeout and then returns an error counting the events it could not store.
func TestStopWithStoreDownGivesUp(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := &fakeStore{fail: 1 << 30}
	ch := make(chan seckill.Event, 3)
	ch <- seckill.Event{}
	ctx, cancel := context.WithCancel(context.Background())
	p := New(store, ch, Config{FlushEvery: time.Millisecond, RetryDelay: time.Millisecond, DrainTimeout: 20 * time.Millisecond})
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	for p.Failures() == 0 {
		time.Sleep(time.Millisecond)
	}
	ch <- seckill.Event{}
	cancel()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "2 events not stored") {
		t.Fatalf("Run returned %v, want an error counting 2 events not stored", err)
	}
	if len(store.ids()) != 0 {
		t.Fatal("a failing store must not record events")
	}
}

// TestStopDrainsTheChannel: a pipeline stopped by its runner stores every event already in its
// channel, in order, before Stop returns; the channel is never closed.
func TestStopDrainsTheChannel(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := &fakeStore{}
	ch := make(chan seckill.Event, 1000)
	p := New(store, ch, Config{BatchSize: 16, FlushEvery: time.Hour, RetryDelay: time.Millisecond})
	r := background.NewRunner(nil)
	r.Start(p)
	var want []string
	for i := range 500 {
		id := fmt.Sprint("r", i)
		want = append(want, id)
		ch <- seckill.Event{Reservation: seckill.Reservation{ID: id}}
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := store.ids(); !slices.Equal(got, want) {
		t.Fatalf("stored %d events (first %v); want all 500 in order", len(got), got[:min(len(got), 5)])
	}
	if p.Backlog() != 0 {
		t.Fatalf("%d events left in the channel", p.Backlog())
	}
}

// TestDrainDetectorSeesLostEvents is the negative control: events sent after the pipeline
// stopped are not stored, and the check above would see it.
func TestDrainDetectorSeesLostEvents(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := &fakeStore{}
	ch := make(chan seckill.Event, 10)
	p := New(store, ch, Config{FlushEvery: time.Hour, RetryDelay: time.Millisecond})
	r := background.NewRunner(nil)
	r.Start(p)
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	ch <- seckill.Event{Reservation: seckill.Reservation{ID: "late"}}
	if got := store.ids(); len(got) != 0 || p.Backlog() != 1 {
		t.Fatalf("stored %v, backlog %d; want nothing stored and the event left in the channel", got, p.Backlog())
	}
}

// poisonStore refuses any batch containing the reservation "bad" as invalid.
type poisonStore struct{ fakeStore }

func (p *poisonStore) ApplyEvents(ctx context.Context, evs []seckill.Event) error {
	for _, e := range evs {
		if e.Reservation.ID == "bad" {
			return seckill.Errorf(seckill.CodeInvalidArgument, "bad event")
		}
	}
	return p.fakeStore.ApplyEvents(ctx, evs)
}

func TestPoisonEventIsDroppedNotBlocking(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := &poisonStore{}
	ch := make(chan seckill.Event, 10)
	for _, id := range []string{"a", "bad", "b", "c"} {
		ch <- seckill.Event{Reservation: seckill.Reservation{ID: id}}
	}
	close(ch)
	p := New(store, ch, Config{BatchSize: 10, FlushEvery: time.Millisecond, RetryDelay: time.Millisecond})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := store.ids(); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("stored %v, want [a b c]", got)
	}
	if p.Dropped() != 1 || p.Applied() != 3 {
		t.Fatalf("dropped %d applied %d, want 1 and 3", p.Dropped(), p.Applied())
	}
}

// TestBatchesFromAFullChannel: events already waiting in the channel (a backlog, taken without
// waiting on the timer) are stored in batches of BatchSize, in order, the last one when the
// channel is closed.
func TestBatchesFromAFullChannel(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := &fakeStore{}
	ch := make(chan seckill.Event, 10)
	var want []string
	for i := range 10 {
		id := fmt.Sprint("r", i)
		want = append(want, id)
		ch <- seckill.Event{Reservation: seckill.Reservation{ID: id}}
	}
	close(ch)
	p := New(store, ch, Config{BatchSize: 4, FlushEvery: time.Hour, RetryDelay: time.Millisecond})
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range store.batches {
		sizes = append(sizes, len(b))
	}
	if got := store.ids(); !slices.Equal(sizes, []int{4, 4, 2}) || !slices.Equal(got, want) {
		t.Fatalf("batches of %v, stored %v; want batches of [4 4 2] storing %v", sizes, got, want)
	}
}
