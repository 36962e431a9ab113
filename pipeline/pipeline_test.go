package pipeline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"go.uber.org/goleak"
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

func TestCancelStopsRetrying(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := &fakeStore{fail: 1 << 30}
	ch := make(chan seckill.Event, 1)
	ch <- seckill.Event{}
	ctx, cancel := context.WithCancel(context.Background())
	p := New(store, ch, Config{FlushEvery: time.Millisecond, RetryDelay: time.Millisecond})
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if len(store.ids()) != 0 {
		t.Fatal("a failing store must not record events")
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
