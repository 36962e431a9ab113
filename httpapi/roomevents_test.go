package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/service"
)

// The live ticket stream, GET /api/v1/sales/{id}/waiting-room/events (roomevents.go).

func ticketData(t testing.TB, data string) service.TicketView {
	t.Helper()
	var v service.TicketView
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("ticket event %s: %v", data, err)
	}
	return v
}

// TestRoomEventsFollowTicket: the live ticket's position falls as the room admits, then it
// says admitted with its token; another stream is told sold_out once the last unit is paid.
func TestRoomEventsFollowTicket(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.EventInterval = 5 * time.Millisecond }))
	runAdmitter(t, e)
	start := t0.Add(time.Minute)
	roomSale(t, e, "live", start, map[string]any{"admit_per_second": 1}, map[string]any{"stock": 1})
	users := []string{"l0", "l1", "l2", "l3", "l4"}
	for _, u := range users {
		e.join(t, u, "live")
	}
	e.clock.Set(start)
	e.waitAdmitted(t, "live", 1)
	byIndex := map[int64]string{}
	for _, u := range users {
		byIndex[e.ticket(t, u, "live").Index] = u
	}
	last, first := byIndex[5], byIndex[1]
	s := e.events(t, "live/waiting-room", "", e.user(t, last))
	v := ticketData(t, s.next(t, "ticket", func(string) bool { return true }))
	if v.State != seckill.TicketWaiting || v.Position != 4 || v.Ahead != 3 {
		t.Fatalf("first ticket event: %+v", v)
	}
	for want := int64(3); want >= 1; want-- {
		e.clock.Advance(time.Second)
		v = ticketData(t, s.next(t, "ticket", func(d string) bool { return ticketData(t, d).Position <= want }))
		if v.Position != want || v.Ahead != want-1 || v.State != seckill.TicketWaiting {
			t.Fatalf("position event: %+v, want position %d", v, want)
		}
	}
	e.clock.Advance(time.Second)
	v = ticketData(t, s.next(t, "ticket", func(d string) bool { return ticketData(t, d).State != seckill.TicketWaiting }))
	if v.State != seckill.TicketAdmitted || v.AdmissionToken == "" {
		t.Fatalf("admission event: %+v", v)
	}
	// Sold out: the first admitted buys the only unit and pays; a late joiner's stream says so.
	e.join(t, "late", "live")
	ls := e.events(t, "live/waiting-room", "", e.user(t, "late"))
	if v := ticketData(t, ls.next(t, "ticket", func(string) bool { return true })); v.State != seckill.TicketWaiting {
		t.Fatalf("late joiner: %+v", v)
	}
	res := e.buy(t, first, e.pathAdmitted(t, first, "live"), nil, "")
	wantStatus(t, res, http.StatusCreated)
	var hold seckill.Reservation
	res.decode(t, &hold)
	e.wantResult(t, succeeded(e.pay(t, first, hold.ID).PaymentID, hold), seckill.PaymentApplied)
	v = ticketData(t, ls.next(t, "ticket", func(d string) bool { return ticketData(t, d).State != seckill.TicketWaiting }))
	if v.State != seckill.TicketSoldOut {
		t.Fatalf("after the last unit was paid: %+v", v)
	}
	if rv := e.roomView(t, "live"); rv.Closed == nil || *rv.Closed != seckill.TicketSoldOut || rv.Waiting != 0 {
		t.Fatalf("room after the sell-out: %+v", rv)
	}
}

// TestRoomStreamPlaceAtMostOncePerSecond: a live ticket whose only change is its place is
// written at most about once per second (roomRefreshEvery), however fast the room admits, and
// the place it settles on does arrive. The detector counts the stream's ticket events during
// a burst of moves; the room view shows each move happened (one admission per step, each
// visible to the 5 ms feed), so a stream writing every move would send about one event per
// step, far above the bound.
func TestRoomStreamPlaceAtMostOncePerSecond(t *testing.T) {
	t.Parallel()
	const interval = 5 * time.Millisecond
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.EventInterval = interval }))
	runAdmitter(t, e)
	start := t0.Add(time.Minute)
	roomSale(t, e, "pace", start, map[string]any{"admit_per_second": 1}, nil)
	const crowd, steps = 30, 20
	for i := range crowd {
		e.join(t, fmt.Sprintf("p%02d", i), "pace")
	}
	e.clock.Set(start)
	e.waitAdmitted(t, "pace", 1)
	var last string
	for i := range crowd {
		if u := fmt.Sprintf("p%02d", i); e.ticket(t, u, "pace").Index == crowd {
			last = u
		}
	}
	s := e.events(t, "pace/waiting-room", "", e.user(t, last))
	if v := ticketData(t, s.next(t, "ticket", func(string) bool { return true })); v.Position != crowd-1 {
		t.Fatalf("first ticket event: %+v", v)
	}
	began := time.Now()
	for i := range steps {
		e.clock.Advance(time.Second)
		e.waitAdmitted(t, "pace", int64(2+i))
		time.Sleep(3 * interval) // the feed sees every step's counts
	}
	elapsed := time.Since(began)
	events := 0
	for drained := false; !drained; {
		select {
		case m := <-s.events:
			if m.name == "ticket" {
				events++
			}
		default:
			drained = true
		}
	}
	if bound := int(elapsed/time.Second) + 2; events > bound {
		t.Fatalf("%d ticket events for %d moves in %v: more than one a second (at most %d)", events, steps, elapsed, bound)
	}
	want := int64(crowd - 1 - steps)
	v := ticketData(t, s.next(t, "ticket", func(d string) bool { return ticketData(t, d).Position == want }))
	if v.State != seckill.TicketWaiting || v.Ahead != want-1 {
		t.Fatalf("the settled place: %+v, want position %d", v, want)
	}
}

// countingRooms counts the engine's room calls the live streams make.
type countingRooms struct {
	seckill.WaitingRooms
	tickets, rooms atomic.Int64
}

func (c *countingRooms) Ticket(ctx context.Context, saleID, entrant string) (seckill.Ticket, error) {
	c.tickets.Add(1)
	return c.WaitingRooms.Ticket(ctx, saleID, entrant)
}

func (c *countingRooms) Room(ctx context.Context, saleID string) (seckill.RoomState, error) {
	c.rooms.Add(1)
	return c.WaitingRooms.Room(ctx, saleID)
}

// TestRoomStreamsShareOneRead: many live tickets of one sale cost one read of the room's
// counts per tick on the instance, and no read of their tickets while nobody's turn comes.
// The detector is the call counts; its control is the per-stream reads on connect, which it
// does count (one ticket read per stream).
func TestRoomStreamsShareOneRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	counted := &countingRooms{WaitingRooms: e.engine}
	svc := service.New(service.Config{Inventory: e.engine, Store: e.store, Clock: e.clock, AuthSecret: []byte(authSecret), Rooms: counted})
	const interval = 5 * time.Millisecond
	api := httpapi.New(httpapi.Config{Service: svc, AuthSecret: []byte(authSecret), AdminToken: adminToken, Clock: e.clock,
		EventInterval: interval, MaxStreamsPerUser: 2})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() { _ = api.Close(); srv.Close() })

	start := t0.Add(time.Minute)
	// max_active 1 and the first admitted never buys: nobody else's turn comes.
	roomSale(t, e, "many", start, map[string]any{"admit_per_second": nil, "max_active": 1}, nil)
	const streams = 20
	for i := range streams + 1 {
		e.join(t, fmt.Sprintf("s%02d", i), "many")
	}
	e.clock.Set(start)
	if _, err := e.engine.Admit(context.Background(), e.sale(t, "many").Sale); err != nil {
		t.Fatal(err)
	}
	var open []*sse
	for i := range streams + 1 {
		user := fmt.Sprintf("s%02d", i)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/sales/many/waiting-room/events", nil)
		req.Header.Set("Authorization", e.user(t, user))
		res, err := srv.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		s := readSSE(t, res, cancel)
		s.next(t, "ticket", func(string) bool { return true })
		open = append(open, s)
	}
	connectTickets := counted.tickets.Load()
	if connectTickets != streams+1 {
		t.Fatalf("%d ticket reads on connect, want one per stream (%d)", connectTickets, streams+1)
	}
	// Let the feed tick a while (the test clock stands still; the feed's ticker is real).
	before := counted.rooms.Load()
	began := time.Now()
	for counted.rooms.Load()-before < 40 {
		time.Sleep(interval)
		if time.Since(began) > roomWait {
			t.Fatalf("the room feed read the counts %d times in %v", counted.rooms.Load()-before, roomWait)
		}
	}
	ticks := time.Since(began)/interval + 2
	if got := counted.rooms.Load() - before; got > int64(ticks) {
		t.Fatalf("%d reads of the room's counts in %d ticks with %d streams: more than one per tick", got, ticks, len(open))
	}
	if got := counted.tickets.Load() - connectTickets; got != 0 {
		t.Fatalf("%d ticket reads while nobody's turn came, want 0", got)
	}

	// The sale ends: the room closes, and every waiting stream is told from the counts alone.
	e.clock.Set(start.Add(time.Hour))
	if st, err := e.engine.Admit(context.Background(), e.sale(t, "many").Sale); err != nil || st.Closed != seckill.TicketEnded {
		t.Fatalf("Admit after the end: %+v, %v; want the room closed, ended", st, err)
	}
	told := 0
	for i, s := range open {
		if e.ticket(t, fmt.Sprintf("s%02d", i), "many").State == seckill.TicketAdmitted {
			continue
		}
		v := ticketData(t, s.next(t, "ticket", func(d string) bool { return ticketData(t, d).State != seckill.TicketWaiting }))
		if v.State != seckill.TicketEnded || v.Position != 0 || v.Index != 0 {
			t.Fatalf("stream %d after the close: %+v, want ended with no place", i, v)
		}
		told++
	}
	if told != streams {
		t.Fatalf("%d streams told the close, want %d (all but the admitted one)", told, streams)
	}
	// (e.ticket above reads through the env's own server, which does not count.)
	if got := counted.tickets.Load() - connectTickets; got != 0 {
		t.Fatalf("%d ticket reads by the streams to tell the close, want 0 (the counts tell it)", got)
	}
	// Each of those writes is timed from the close (the admitted stream's is not one).
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := fmt.Sprintf("%s_count %d\n", httpapi.CloseWrittenMetric, streams); !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}
