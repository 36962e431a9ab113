package redisinv

// The property test of the rooms on Redis: random sequences of joins, admissions, releases,
// sales and clock steps against roomModel, a plain Go statement of the semantics (room.go,
// docs/DECISIONS.md "Waiting rooms on Redis"); after every step every ticket, the counts and
// the draw's list must be the model's.

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

const two48 = 1 << 48

type modelTicket struct {
	joined, admitted, active int64
	drawn                    bool
	index                    int64
	score                    int64
	arrival                  int64
}

// roomModel is the room's semantics in plain Go, all times in ms.
type roomModel struct {
	p                        seckill.RoomPolicy
	starts, ends             int64
	sellable, sold           int
	tickets                  map[string]*modelTicket
	waiting                  []string // in order: by score, then id
	pre                      []string // the draw's pre-queue
	entrants, npre, admitted int64
	seq                      int64
	closed                   string
	closedAt                 int64 // ms, when closed was set
	credit, refill           int64 // credit -1: never admitted
}

func (m *roomModel) sortWaiting() {
	sort.Slice(m.waiting, func(i, j int) bool {
		a, b := m.tickets[m.waiting[i]], m.tickets[m.waiting[j]]
		if a.score != b.score {
			return a.score < b.score
		}
		return m.waiting[i] < m.waiting[j]
	})
}

func (m *roomModel) join(now int64, e string, key uint64) (seckill.Ticket, seckill.Code) {
	if _, ok := m.tickets[e]; ok {
		return m.ticket(now, e), ""
	}
	switch {
	case now >= m.ends:
		return seckill.Ticket{}, seckill.CodeEnded
	case now < m.starts-int64(m.p.OpensSeconds)*1000:
		return seckill.Ticket{}, seckill.CodeNotStarted
	case m.closed != "":
		return seckill.Ticket{Entrant: e, State: m.closed, JoinedAt: fromMillis(now)}, ""
	}
	m.seq++
	m.entrants++
	t := &modelTicket{joined: now, score: two48 + m.seq, arrival: m.seq}
	if now < m.starts && m.p.Order == seckill.RoomDraw {
		t.drawn = true
		m.npre++
		t.score = int64(key)
		m.pre = append(m.pre, e)
		slices.Sort(m.pre)
	}
	m.tickets[e] = t
	m.waiting = append(m.waiting, e)
	m.sortWaiting()
	return m.ticket(now, e), ""
}

func (m *roomModel) ticket(now int64, e string) seckill.Ticket {
	t := m.tickets[e]
	out := seckill.Ticket{Entrant: e, Drawn: t.drawn, Arrival: t.arrival, JoinedAt: fromMillis(t.joined)}
	switch {
	case t.index > 0:
		out.State, out.Index = seckill.TicketAdmitted, t.index
		out.AdmittedAt, out.ActiveUntil = fromMillis(t.admitted), fromMillis(t.active)
	case m.closed != "":
		out.State = m.closed
	case now < m.starts:
		out.State = seckill.TicketPreQueue
	default:
		rank := int64(slices.Index(m.waiting, e))
		out.State, out.Index, out.Ahead = seckill.TicketWaiting, rank+m.admitted+1, rank
	}
	return out
}

func (m *roomModel) active(now int64) int64 {
	var n int64
	for _, t := range m.tickets {
		if t.index > 0 && t.active > now {
			n++
		}
	}
	return n
}

func (m *roomModel) counts(now int64) seckill.RoomState {
	st := seckill.RoomState{Entrants: m.entrants, PreQueue: m.npre, Admitted: m.admitted, Active: m.active(now), Closed: m.closed}
	if m.closed == "" {
		st.Waiting = int64(len(m.waiting))
	} else {
		st.ClosedAt = fromMillis(m.closedAt)
	}
	return st
}

func (m *roomModel) admit(now int64) seckill.RoomState {
	if m.closed != "" || now < m.starts {
		return m.counts(now)
	}
	if m.sold >= m.sellable || now >= m.ends {
		m.closed, m.closedAt = seckill.TicketEnded, now
		if m.sold >= m.sellable {
			m.closed = seckill.TicketSoldOut
		}
		return m.counts(now)
	}
	n := min(int64(seckill.RoomAdmitBatch), int64(len(m.waiting)))
	if r := int64(m.p.AdmitPerSecond); r > 0 {
		capacity := int64(m.p.RoomBurst()) * 1000
		if m.credit < 0 {
			m.credit, m.refill = capacity, m.starts
		}
		if now > m.refill {
			m.credit = min(capacity, m.credit+(now-m.refill)*r)
			m.refill = now
		}
		n = min(n, m.credit/1000)
	}
	if m.p.MaxActive > 0 {
		n = min(n, max(0, int64(m.p.MaxActive)-m.active(now)))
	}
	for _, e := range m.waiting[:n] {
		t := m.tickets[e]
		m.admitted++
		t.admitted, t.index, t.active = now, m.admitted, now+int64(m.p.TokenSeconds)*1000
	}
	m.waiting = m.waiting[n:]
	if m.p.AdmitPerSecond > 0 {
		m.credit -= n * 1000
	}
	return m.counts(now)
}

func (m *roomModel) release(now int64, e string, until int64) {
	t := m.tickets[e]
	if t == nil || t.index == 0 || t.active <= now {
		return
	}
	t.active = max(until, now)
}

var roomModelSales atomic.Int64

// TestRoomModel runs random room histories on a standalone Redis against roomModel.
func TestRoomModel(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	rapid.Check(t, roomProperty(c, prefix, nil))
}

// roomProperty is one random history on an engine under prefix with the room scripts rs (nil:
// the engine's own).
func roomProperty(c *Clients, prefix string, rs *roomScriptSet) func(*rapid.T) {
	ctx := context.Background()
	return func(rt *rapid.T) {
		clock := seckilltest.NewManualClock(t0)
		e := New(c.Inventory, WithTestClock(clock), WithPrefix(prefix))
		e.roomScripts = rs
		defer e.Close()
		p := seckill.RoomPolicy{
			Order:          rapid.SampledFrom([]string{seckill.RoomDraw, seckill.RoomFIFO}).Draw(rt, "order"),
			OpensSeconds:   rapid.IntRange(0, 600).Draw(rt, "opens"),
			AdmitPerSecond: rapid.SampledFrom([]int{0, 1, 3, 10, 25}).Draw(rt, "rate"),
			MaxActive:      rapid.IntRange(0, 3).Draw(rt, "max_active"),
			TokenSeconds:   rapid.IntRange(10, 30).Draw(rt, "token"),
		}
		if p.AdmitPerSecond == 0 && p.MaxActive == 0 {
			p.MaxActive = 1
		}
		s := roomSale(fmt.Sprint("model", roomModelSales.Add(1)), rapid.IntRange(0, 3).Draw(rt, "stock"), p)
		s.EndsAt = s.StartsAt.Add(2 * time.Minute)
		if err := e.LoadSale(ctx, s, 0); err != nil {
			rt.Fatal(err)
		}
		m := &roomModel{p: p, starts: s.StartsAt.UnixMilli(), ends: s.EndsAt.UnixMilli(), sellable: s.Sellable(),
			tickets: map[string]*modelTicket{}, credit: -1}
		const crowd = 12
		now := func() int64 { return clock.Now().UnixMilli() }
		buyers := 0
		check := func(rt *rapid.T) {
			for i := range crowd {
				ent := entrant(i)
				got, err := e.Ticket(ctx, s.ID, ent)
				if _, ok := m.tickets[ent]; !ok {
					if seckill.ErrorCode(err) != seckill.CodeNotFound {
						rt.Fatalf("Ticket of %d who never joined: %+v, %v", i, got, err)
					}
					continue
				}
				if want := m.ticket(now(), ent); err != nil || got != want {
					rt.Fatalf("Ticket of %d = %+v, %v\nwant %+v", i, got, err, want)
				}
			}
			if st, err := e.Room(ctx, s.ID); err != nil || st != m.counts(now()) {
				rt.Fatalf("Room = %+v, %v; want %+v", st, err, m.counts(now()))
			}
			ids, err := e.DrawEntrants(ctx, s.ID, "", 1000)
			if err != nil || !slices.Equal(ids, m.pre) && len(ids)+len(m.pre) > 0 {
				rt.Fatalf("DrawEntrants = %v, %v; want %v", ids, err, m.pre)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"": check,
			"join": func(rt *rapid.T) {
				i := rapid.IntRange(0, crowd-1).Draw(rt, "entrant")
				key := uint64(rapid.IntRange(0, 4).Draw(rt, "key")) // small keys: ties, broken by id
				got, err := e.Join(ctx, s, entrant(i), key)
				want, code := m.join(now(), entrant(i), key)
				if seckill.ErrorCode(err) != code || code == "" && got != want {
					rt.Fatalf("Join(%d) = %+v, %v\nwant %+v, %q", i, got, err, want, code)
				}
			},
			"admit": func(rt *rapid.T) {
				got, err := e.Admit(ctx, s)
				if want := m.admit(now()); err != nil || got != want {
					rt.Fatalf("Admit = %+v, %v; want %+v", got, err, want)
				}
			},
			"release": func(rt *rapid.T) {
				i := rapid.IntRange(0, crowd-1).Draw(rt, "entrant")
				d := rapid.SampledFrom([]time.Duration{-time.Second, 0, 5 * time.Second, time.Minute}).Draw(rt, "until")
				until := clock.Now().Add(d)
				if err := e.Release(ctx, s.ID, entrant(i), until); err != nil {
					rt.Fatal(err)
				}
				m.release(now(), entrant(i), until.UnixMilli())
			},
			"sell": func(rt *rapid.T) {
				buyers++
				r, err := e.Buy(ctx, seckill.BuyRequest{SaleID: s.ID, UserID: fmt.Sprint("buyer", buyers), Quantity: 1})
				if err != nil || r.Reservation.Status != seckill.StatusHeld {
					return // outside the window, or nothing left
				}
				res, _, err := e.ConfirmPayment(ctx, seckill.PaymentConfirmation{PaymentID: fmt.Sprint("pay", buyers),
					ReservationID: r.Reservation.ID, AmountCents: r.Reservation.AmountCents})
				if err != nil || res != seckill.PaymentApplied {
					rt.Fatalf("pay: %v, %v", res, err)
				}
				m.sold++
			},
			"tick": func(rt *rapid.T) {
				clock.Advance(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "ms")) * time.Millisecond)
			},
			"jump": func(rt *rapid.T) {
				to := rapid.SampledFrom([]time.Time{s.RoomOpensAt(), s.StartsAt, s.EndsAt}).Draw(rt, "to")
				if to.After(clock.Now()) {
					clock.Set(to)
				}
			},
		})
	}
}

// TestRoomModelCatchesABrokenScript is its negative control: with room_admit.lua broken to
// admit from the tail of the room instead of its head, the same property fails.
func TestRoomModelCatchesABrokenScript(t *testing.T) {
	const from, to = "redis.call('ZPOPMIN', KEYS[3], num(n))", "redis.call('ZPOPMAX', KEYS[3], num(n))"
	broken := newRoomScriptSet(func(name string) string {
		src := scriptSource(name)
		if name == "room_admit.lua" {
			if !strings.Contains(src, from) {
				t.Fatalf("room_admit.lua no longer contains %q", from)
			}
			src = strings.Replace(src, from, to, 1)
		}
		return src
	})
	c := dialT(t, testenv.Redis(t))
	prefix := testPrefix()
	t.Cleanup(func() { dropPrefix(t, c.Inventory, prefix) })
	// A failure found is the expected outcome: no fail file, and little time shrinking it.
	for name, v := range map[string]string{"rapid.nofailfile": "true", "rapid.shrinktime": "2s"} {
		f := flag.Lookup(name)
		old := f.Value.String()
		if err := f.Value.Set(v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Value.Set(old) })
	}
	var rec failRecorder
	rapid.Check(&rec, roomProperty(c, prefix, broken))
	if !rec.failed {
		t.Fatal("the model comparison found nothing wrong with a room that admits from its tail")
	}
	t.Logf("caught: %s", rec.first)
}

// failRecorder is a rapid.TB that records a failure instead of failing the test.
type failRecorder struct {
	failed bool
	first  string
}

func (r *failRecorder) Helper()                   {}
func (r *failRecorder) Name() string              { return "negative-control" }
func (r *failRecorder) Logf(string, ...any)       {}
func (r *failRecorder) Log(...any)                {}
func (r *failRecorder) Skipf(string, ...any)      {}
func (r *failRecorder) Skip(...any)               {}
func (r *failRecorder) SkipNow()                  {}
func (r *failRecorder) Errorf(f string, a ...any) { r.fail(fmt.Sprintf(f, a...)) }
func (r *failRecorder) Error(a ...any)            { r.fail(fmt.Sprint(a...)) }
func (r *failRecorder) Fatalf(f string, a ...any) { r.fail(fmt.Sprintf(f, a...)) }
func (r *failRecorder) Fatal(a ...any)            { r.fail(fmt.Sprint(a...)) }
func (r *failRecorder) FailNow()                  { r.fail("FailNow") }
func (r *failRecorder) Fail()                     { r.fail("Fail") }
func (r *failRecorder) Failed() bool              { return r.failed }

func (r *failRecorder) fail(msg string) {
	if !r.failed {
		r.failed, r.first = true, msg
	}
}
