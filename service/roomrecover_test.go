package service

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/sqlstore"

	_ "modernc.org/sqlite"
)

// TestRoomSurvivesRestart: a waiting room of the memory engine, journaled in SQLite by the
// service (joins, the admitter's count), comes back after a restart (a new engine, a new
// service, Recover) with the same tickets and counts, and goes on admitting from where it
// was, no one twice. Without the journal's rows (the control) the same restart loses the room.
func TestRoomSurvivesRestart(t *testing.T) {
	clock := &testClock{now: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}
	boot, dsn := restartRig(t, clock, nil)
	roomLossScenario(t, clock, boot(), boot, func() { forgetEntrants(t, dsn) })
}

// restartRig makes services on the memory engine over one SQLite file: each boot closes the
// last store, opens it again and builds a new engine and service (a restart), Recover done.
// journal, if set, wraps the store as the service's room journal.
func restartRig(t *testing.T, clock *testClock, journal func(*sqlstore.Store) seckill.RoomJournal) (boot func() *Service, dsn string) {
	ctx := context.Background()
	dsn = "sqlite://" + t.TempDir() + "/seckill.db"
	var store *sqlstore.Store
	t.Cleanup(func() {
		if store != nil {
			_ = store.Close()
		}
	})
	return func() *Service {
		t.Helper()
		if store != nil {
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if store, err = sqlstore.Open(ctx, dsn); err != nil {
			t.Fatalf("open store: %v", err)
		}
		cfg := Config{Inventory: memory.New(clock), Store: store, Clock: clock, AuthSecret: []byte("restart-secret")}
		if journal != nil {
			cfg.RoomJournal = journal(store)
		}
		svc := New(cfg)
		if err := svc.Recover(ctx); err != nil {
			t.Fatalf("Recover: %v", err)
		}
		return svc
	}, dsn
}

// forgetEntrants deletes the journal's entrants from the SQLite file of dsn.
func forgetEntrants(t *testing.T, dsn string) {
	t.Helper()
	raw, err := sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite://"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(context.Background(), `DELETE FROM room_entrants`); err != nil {
		t.Fatalf("delete the journal: %v", err)
	}
}

// roomLossScenario runs a draw room through its pre-queue, the draw, later arrivals and two
// admissions on svc, then lose (which returns the service after the loss: a restart, or the
// same one after a FLUSHALL), and requires the same tickets and counts after, and admission
// going on in the room's order, no one twice. Then, as a control, forget (which removes the
// journal's entrants) and lose again: the room must come back empty (its tickets not found),
// showing that the tickets came from the journal.
func roomLossScenario(t *testing.T, clock *testClock, svc *Service, lose func() *Service, forget func()) {
	ctx := context.Background()
	start := createRoomSale(t, svc, clock)
	var users []string
	join := func(svc *Service, u string) TicketView {
		t.Helper()
		v, err := svc.JoinRoom(ctx, "restart1", u, nil)
		if err != nil {
			t.Fatalf("JoinRoom(%s): %v", u, err)
		}
		return v
	}
	for i := range 10 {
		clock.Advance(time.Second)
		users = append(users, fmt.Sprint("pre", i))
		join(svc, users[i])
	}
	pass := func(svc *Service) { svc.Admitter(time.Second).(*admitter).pass(ctx) }
	clock.Set(start)
	pass(svc) // 3 admitted: max_active
	for i := range 5 {
		clock.Advance(time.Millisecond)
		users = append(users, fmt.Sprint("late", i))
		join(svc, users[len(users)-1])
	}
	clock.Advance(11 * time.Second) // their tokens ended
	pass(svc)                       // 3 more
	if err := svc.FlushRoomJournal(ctx); err != nil {
		t.Fatalf("FlushRoomJournal: %v", err)
	}
	tickets := func(svc *Service) map[string]TicketView {
		t.Helper()
		m := map[string]TicketView{}
		for _, u := range users {
			v, err := roomTicket(svc, u)
			if err != nil {
				t.Fatalf("RoomTicket(%s): %v", u, err)
			}
			v.ServerTime, v.AdmissionToken, v.AdmissionExpiresAt, v.Admitted, v.WaitP50, v.WaitP90 = time.Time{}, "", nil, nil, nil, nil
			m[u] = v
		}
		return m
	}
	before := tickets(svc)
	viewBefore, err := svc.RoomView(ctx, "restart1")
	if err != nil || viewBefore.Admitted != 6 {
		t.Fatalf("RoomView before the restart = %+v, %v; want 6 admitted", viewBefore, err)
	}
	svc = lose()
	after := tickets(svc)
	for _, u := range users {
		if after[u] != before[u] {
			t.Fatalf("ticket of %s after the restart = %+v, want %+v", u, after[u], before[u])
		}
	}
	view, err := svc.RoomView(ctx, "restart1")
	if err != nil {
		t.Fatal(err)
	}
	if view.Entrants != viewBefore.Entrants || view.PreQueue != viewBefore.PreQueue || view.Admitted != 6 || view.Waiting != viewBefore.Waiting {
		t.Fatalf("room after the restart = %+v, want the counts of %+v", view, viewBefore)
	}
	// It goes on: the next three of the order, then the rest, each once.
	for range 5 {
		clock.Advance(11 * time.Second)
		pass(svc)
	}
	seen := map[int64]string{}
	for _, u := range users {
		v, err := roomTicket(svc, u)
		if err != nil || v.State != seckill.TicketAdmitted {
			t.Fatalf("ticket of %s at the end = %+v, %v; want admitted", u, v, err)
		}
		if o, dup := seen[v.Index]; dup {
			t.Fatalf("%s and %s admitted at the same index %d", o, u, v.Index)
		}
		seen[v.Index] = u
		if b := before[u]; b.Index != v.Index {
			t.Fatalf("%s admitted at index %d, its place was %d", u, v.Index, b.Index)
		}
	}

	// The control: the same loss with the journal's entrants gone loses the room.
	forget()
	svc = lose()
	if _, err := roomTicket(svc, users[0]); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("ticket after a loss without the journal = %v, want not_found (the control)", err)
	}
}

// createRoomSale makes the sale "restart1": 100 units, a draw room opening now, starting in a
// minute, max_active 3, token_seconds 10. It returns the start.
func createRoomSale(t *testing.T, svc *Service, clock *testClock) time.Time {
	t.Helper()
	start := clock.Now().Add(time.Minute)
	stock, limit, hold, token, opens, preheat := 100, 1, 10, 10, 60, 60
	in := seckill.SaleInput{ID: "restart1", PriceCents: ptrTo(int64(500)), Stock: &stock, PerUserLimit: &limit,
		HoldSeconds: &hold, StartsAt: &start, PreheatSeconds: &preheat,
		WaitingRoom: &seckill.RoomInput{Order: seckill.RoomDraw, MaxActive: 3, TokenSeconds: &token, OpensSeconds: &opens}}
	if _, err := svc.CreateSale(context.Background(), in); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	return start
}

// roomTicket reads u's ticket, waiting out a room being restored (unavailable: a rebuild
// runs after a FLUSHALL) for up to a minute.
func roomTicket(svc *Service, u string) (TicketView, error) {
	for i := 0; ; i++ {
		v, err := svc.RoomTicket(context.Background(), "restart1", u)
		if seckill.ErrorCode(err) != seckill.CodeUnavailable || i == 1200 {
			return v, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ptrTo[T any](v T) *T { return &v }

// testClock is a settable clock (seckilltest's imports this package).
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRoomSurvivesFlush: the same scenario on the Redis engine, the loss a FLUSHALL of the
// engine's keys (its own prefix on the shared Redis: only its keys are deleted). The rebuild
// of the sale restores the room from the journal (redisinv SetRoomSource) before the sale
// answers again.
func TestRoomSurvivesFlush(t *testing.T) {
	clock := &testClock{now: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}
	svc, lose, dsn := flushRig(t, clock, nil)
	roomLossScenario(t, clock, svc, lose, func() { forgetEntrants(t, dsn) })
}

// flushRig makes a service on the Redis engine (a key prefix of its own on the shared Redis)
// over SQLite, rebuilding lost sales and their rooms from the store; lose deletes the engine's
// keys (the FLUSHALL, of this test's keys only) and returns the same service. journal, if set,
// wraps the store as the service's room journal.
func flushRig(t *testing.T, clock *testClock, journal func(*sqlstore.Store) seckill.RoomJournal) (svc *Service, lose func() *Service, dsn string) {
	ctx := context.Background()
	c, err := redisinv.Dial(ctx, testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	prefix := redistest.KeyPrefix()
	t.Cleanup(func() { redistest.DropPrefix(t, c.Inventory, prefix) })
	dsn = "sqlite://" + t.TempDir() + "/seckill.db"
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	locks := lock.New(c.Locks, &lock.Options{Lease: 5 * time.Second})
	t.Cleanup(func() { _ = locks.Close() })
	eng := redisinv.New(c.Inventory, redisinv.WithPrefix(prefix), redisinv.WithTestClock(clock), redisinv.WithRebuild(store, locks))
	t.Cleanup(func() { _ = eng.Close() })
	cfg := Config{Inventory: eng, Windows: eng, Store: store, Clock: clock, LoadOnDemand: true, AuthSecret: []byte("flush-secret")}
	if journal != nil {
		cfg.RoomJournal = journal(store)
	}
	svc = New(cfg)
	eng.SetRoomSource(svc.RoomJournal)
	return svc, func() *Service {
		redistest.DropPrefix(t, c.Inventory, prefix)
		return svc
	}, dsn
}
