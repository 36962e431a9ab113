package redisinv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// roomCrowdViolations runs a crowd against one room through three engines (instances) sharing
// its keys: 48 goroutines join 240 entrants (each entrant twice, from two instances), 4 admit
// in a loop and 4 release the admitted, while the clock moves. It returns what broke the room's
// invariants: an entrant admitted twice or indices that are not 1..admitted, a count that
// disagrees with the tickets, more active places than max_active seen by an admission.
func roomCrowdViolations(t *testing.T, rs *roomScriptSet) []string {
	c := dialT(t, testenv.Redis(t))
	clock := seckilltest.NewManualClock(t0)
	a := newTestEngine(t, c.Inventory, clock)
	engines := []*Engine{a}
	for range 2 {
		e := New(c.Inventory, WithTestClock(clock), WithPrefix(a.prefix))
		t.Cleanup(func() { _ = e.Close() })
		engines = append(engines, e)
	}
	for _, e := range engines {
		e.roomScripts = rs
	}
	p := seckill.RoomPolicy{Order: seckill.RoomFIFO, OpensSeconds: 0, AdmitPerSecond: 50, MaxActive: 8, TokenSeconds: 10}
	s := roomSale("crowd", 100, p)
	ctx := context.Background()
	if err := a.LoadSale(ctx, s, 0); err != nil {
		t.Fatal(err)
	}
	clock.Set(s.StartsAt)
	const entrants, joiners = 240, 48
	var (
		mu         sync.Mutex
		violations []string
		joined     atomic.Int64
		wg         sync.WaitGroup
		stop       = make(chan struct{})
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(violations) < 20 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}
	for g := range joiners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 2*entrants; i += joiners {
				if _, err := engines[i%3].Join(ctx, s, entrant(i%entrants), 0); err != nil {
					report("Join: %v", err)
				}
				joined.Add(1)
			}
		}()
	}
	var bg sync.WaitGroup
	for g := range 4 {
		bg.Add(2)
		go func() { // admitting
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st, err := engines[g%3].Admit(ctx, s)
				if err != nil {
					report("Admit: %v", err)
					return
				}
				if st.Active > int64(p.MaxActive) {
					report("an admission left %d places active, max_active %d", st.Active, p.MaxActive)
				}
			}
		}()
		go func() { // releasing the admitted, and moving the clock
			defer bg.Done()
			for i := g; ; i = (i + 7) % entrants {
				select {
				case <-stop:
					return
				default:
				}
				if g == 0 {
					clock.Advance(20 * time.Millisecond)
				}
				if err := engines[(g+1)%3].Release(ctx, s.ID, entrant(i), time.Time{}); err != nil {
					report("Release: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Let the room drain: every entrant admitted (the releases free the places).
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := a.Room(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiting == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	bg.Wait()
	st, err := a.Room(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	var admitted int64
	for i := range entrants {
		tk, err := a.Ticket(ctx, s.ID, entrant(i))
		if err != nil {
			report("Ticket(%d): %v", i, err)
			continue
		}
		if tk.State != seckill.TicketAdmitted {
			continue
		}
		admitted++
		if other, dup := seen[tk.Index]; dup {
			report("index %d given to %s and %s", tk.Index, other[:8], tk.Entrant[:8])
		}
		seen[tk.Index] = tk.Entrant
	}
	if st.Entrants != entrants {
		report("%d entrants counted, %d joined", st.Entrants, entrants)
	}
	if st.Admitted != admitted || int64(len(seen)) != admitted {
		report("%d admitted counted, %d tickets admitted (%d distinct indices)", st.Admitted, admitted, len(seen))
	}
	for i := int64(1); i <= admitted; i++ {
		if _, ok := seen[i]; !ok {
			report("no admitted ticket has index %d of 1..%d", i, admitted)
			break
		}
	}
	t.Logf("%d joins, room %+v", joined.Load(), st)
	return violations
}

// TestRoomConcurrency: the crowd breaks none of the room's invariants.
func TestRoomConcurrency(t *testing.T) {
	if v := roomCrowdViolations(t, nil); len(v) > 0 {
		t.Fatalf("violations:\n%s", strings.Join(v, "\n"))
	}
}

// TestRoomConcurrencyCatchesABrokenScript is its negative control: a room_admit.lua that
// ignores max_active is caught.
func TestRoomConcurrencyCatchesABrokenScript(t *testing.T) {
	const from = "n = math.min(n, math.max(0, maxact - redis.call('ZCARD', KEYS[6])))"
	broken := newRoomScriptSet(func(name string) string {
		src := scriptSource(name)
		if name == "room_admit.lua" {
			if !strings.Contains(src, from) {
				t.Fatalf("room_admit.lua no longer contains %q", from)
			}
			src = strings.Replace(src, from, "n = n", 1)
		}
		return src
	})
	v := roomCrowdViolations(t, broken)
	if len(v) == 0 {
		t.Fatal("the crowd found nothing wrong with a room that ignores max_active")
	}
	t.Logf("caught:\n%s", strings.Join(v, "\n"))
}
