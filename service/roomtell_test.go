package service

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/sqlstore"
)

// failingJournal is a room journal whose writes fail while down is set (a database that is
// down, or an instance that dies between the admission and the journal).
type failingJournal struct {
	seckill.RoomJournal
	down *atomic.Bool
}

var errJournalDown = errors.New("the journal is down")

func (j failingJournal) AddRoomEntrants(ctx context.Context, es []seckill.RoomEntrant) error {
	if j.down.Load() {
		return errJournalDown
	}
	return j.RoomJournal.AddRoomEntrants(ctx, es)
}

func (j failingJournal) SetRoomAdmitted(ctx context.Context, saleID, inc string, n int64, at time.Time) error {
	if j.down.Load() {
		return errJournalDown
	}
	return j.RoomJournal.SetRoomAdmitted(ctx, saleID, inc, n, at)
}

// tellScenario: a room admits 3 and tells them; then the journal goes down and the admitter
// admits 3 more, which the engine holds untold; the engine loses its state (lose) and the room
// is restored from the journal. No entrant may have been told an admission (a token) that the
// restored room gives again at another index or not at all. With admitAtOnce the second
// admission is the engine's plain Admit, which tells at once (what the admitter did before
// admissions waited for the journal): the scenario must then find a second admission.
func tellScenario(t *testing.T, clock *testClock, svc *Service, down *atomic.Bool, lose func() *Service, admitAtOnce bool) error {
	ctx := context.Background()
	start := createRoomSale(t, svc, clock)
	var users []string
	for i := range 8 {
		clock.Advance(time.Second)
		users = append(users, fmt.Sprint("pre", i))
		if _, err := svc.JoinRoom(ctx, "restart1", users[i], nil); err != nil {
			t.Fatalf("JoinRoom: %v", err)
		}
	}
	if err := svc.FlushRoomJournal(ctx); err != nil {
		t.Fatal(err)
	}
	pass := func(svc *Service) { svc.Admitter(time.Second).(*admitter).pass(ctx) }
	told := map[string]int64{} // user → the index of the admission it was told (given a token)
	var broken error           // the first told admission found lost
	look := func(svc *Service) {
		t.Helper()
		for _, u := range users {
			v, err := roomTicket(svc, u)
			if err != nil {
				t.Fatalf("RoomTicket(%s): %v", u, err)
			}
			i, ok := told[u]
			if ok && (v.State != seckill.TicketAdmitted || v.Index != i) && broken == nil {
				broken = fmt.Errorf("%s was told admission %d; now its ticket is %s at %d: it is admitted a second time", u, i, v.State, v.Index)
			}
			if v.AdmissionToken != "" && !ok {
				told[u] = v.Index
			}
		}
	}
	clock.Set(start)
	pass(svc) // 3 admitted, journaled, told
	look(svc)
	if len(told) != 3 {
		t.Fatalf("told %v after the first pass, want 3", told)
	}
	clock.Advance(11 * time.Second) // their places ended
	down.Store(true)
	if admitAtOnce {
		if _, err := svc.rooms.Admit(ctx, svc.roomDefsSale(t, "restart1")); err != nil {
			t.Fatal(err)
		}
	} else {
		pass(svc) // 3 admitted in the engine; the journal refuses: not told
	}
	look(svc)
	down.Store(false)
	svc = lose()
	look(svc) // the restored room: the 3 told are still admitted at their indexes
	for range 3 {
		clock.Advance(11 * time.Second)
		pass(svc)
		look(svc)
	}
	// Every one of the 8 was told once; a told admission the restore lost shows as an entrant
	// told one index and then waiting (look), or as two entrants at one index.
	if broken != nil {
		return broken
	}
	at := map[int64]string{}
	for _, u := range users {
		v, err := roomTicket(svc, u)
		if err != nil {
			t.Fatal(err)
		}
		if o, dup := at[v.Index]; dup {
			return fmt.Errorf("%s and %s at index %d", o, u, v.Index)
		}
		at[v.Index] = u
	}
	if len(told) != len(users) {
		return fmt.Errorf("told %d of %d entrants", len(told), len(users))
	}
	return nil
}

// roomDefsSale is the sale as the service last read it for its room.
func (s *Service) roomDefsSale(t *testing.T, id string) seckill.Sale {
	t.Helper()
	v, ok := s.roomDefs.Load(id)
	if !ok {
		t.Fatalf("no room definition of %s", id)
	}
	return v.(seckill.Sale)
}

// TestRoomAdmissionToldOnlyOnceJournaledRestart: the memory engine, SQLite, a restart between
// the admission and its journal; the control admits at once and must lose a told admission.
func TestRoomAdmissionToldOnlyOnceJournaledRestart(t *testing.T) {
	for _, atOnce := range []bool{false, true} {
		t.Run(fmt.Sprint("admitAtOnce=", atOnce), func(t *testing.T) {
			clock := &testClock{now: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}
			down := &atomic.Bool{}
			boot, _ := restartRig(t, clock, func(s *sqlstore.Store) seckill.RoomJournal { return failingJournal{s, down} })
			judgeTell(t, atOnce, tellScenario(t, clock, boot(), down, boot, atOnce))
		})
	}
}

// TestRoomAdmissionToldOnlyOnceJournaledFlush: the same on the Redis engine, the loss the
// deletion of the engine's keys (its own prefix) between the admission and its journal.
func TestRoomAdmissionToldOnlyOnceJournaledFlush(t *testing.T) {
	for _, atOnce := range []bool{false, true} {
		t.Run(fmt.Sprint("admitAtOnce=", atOnce), func(t *testing.T) {
			clock := &testClock{now: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}
			down := &atomic.Bool{}
			svc, lose, _ := flushRig(t, clock, func(s *sqlstore.Store) seckill.RoomJournal { return failingJournal{s, down} })
			judgeTell(t, atOnce, tellScenario(t, clock, svc, down, lose, atOnce))
		})
	}
}

// judgeTell requires tellScenario's err to be nil, or, for the control (atOnce), not nil.
func judgeTell(t *testing.T, atOnce bool, err error) {
	t.Helper()
	switch {
	case !atOnce && err != nil:
		t.Fatal(err)
	case atOnce && err == nil:
		t.Fatal("the control (admissions told at once) lost no told admission: the scenario shows nothing")
	case atOnce:
		t.Logf("the control fails as it should: %v", err)
	}
}
