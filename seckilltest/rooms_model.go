package seckilltest

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"pgregory.net/rapid"
)

// roomModel is the waiting room as plainly as it can be written (docs/MODEL.md "The waiting
// room"): no index, no heap, every answer recomputed from the list of joins. The Model subtest
// of TestWaitingRooms drives it beside an engine and requires the same answers.
type roomModel struct {
	sale     seckill.Sale
	seed     []byte
	joins    []modelJoin // in order of arrival
	admitted []string    // entrant ids in order of admission
	until    map[string]int64
	at       map[string]int64 // admission times
	credit   int64
	last     int64
	closed   string
	closedAt int64 // ms, when closed was set
	saleShut bool  // CloseSale was called
}

type modelJoin struct {
	id     string
	ms     int64
	before bool // joined before the start
}

func (m *roomModel) starts() int64 { return m.sale.StartsAt.UnixMilli() }

// order is the room's order: a draw room's pre-queue by the draw, then everyone else by arrival.
func (m *roomModel) order() []string {
	var pre, rest []string
	for _, j := range m.joins {
		if j.before && m.sale.Room.Order == seckill.RoomDraw {
			pre = append(pre, j.id)
		} else {
			rest = append(rest, j.id)
		}
	}
	return append(seckill.DrawOrder(m.seed, pre), rest...)
}

func (m *roomModel) find(id string) (modelJoin, bool) {
	for _, j := range m.joins {
		if j.id == id {
			return j, true
		}
	}
	return modelJoin{}, false
}

func (m *roomModel) ticket(id string, now int64) (seckill.Ticket, bool) {
	j, ok := m.find(id)
	if !ok {
		return seckill.Ticket{}, false
	}
	arrival := int64(slices.IndexFunc(m.joins, func(x modelJoin) bool { return x.id == id }) + 1)
	t := seckill.Ticket{Entrant: id, Arrival: arrival, JoinedAt: time.UnixMilli(j.ms).UTC(),
		Drawn: j.before && m.sale.Room.Order == seckill.RoomDraw}
	if i := slices.Index(m.admitted, id); i >= 0 {
		t.State, t.Index = seckill.TicketAdmitted, int64(i+1)
		t.AdmittedAt, t.ActiveUntil = time.UnixMilli(m.at[id]).UTC(), time.UnixMilli(m.until[id]).UTC()
		return t, true
	}
	switch {
	case m.closed != "":
		t.State = m.closed
	case now < m.starts():
		t.State = seckill.TicketPreQueue
	default:
		t.State = seckill.TicketWaiting
		t.Index = int64(slices.Index(m.order(), id) + 1)
		t.Ahead = t.Index - 1 - int64(len(m.admitted))
	}
	return t, true
}

func (m *roomModel) active(now int64) int64 {
	var n int64
	for _, u := range m.until {
		if u > now {
			n++
		}
	}
	return n
}

func (m *roomModel) state(now int64) seckill.RoomState {
	st := seckill.RoomState{Entrants: int64(len(m.joins)), Admitted: int64(len(m.admitted)),
		Active: m.active(now), Closed: m.closed}
	if m.sale.Room.Order == seckill.RoomDraw {
		for _, j := range m.joins {
			if j.before {
				st.PreQueue++
			}
		}
	}
	if m.closed == "" {
		st.Waiting = st.Entrants - st.Admitted
	} else {
		st.ClosedAt = time.UnixMilli(m.closedAt).UTC()
	}
	return st
}

// join answers Join: the ticket, or the error code.
func (m *roomModel) join(id string, now int64) (seckill.Ticket, seckill.Code) {
	if t, ok := m.ticket(id, now); ok {
		return t, ""
	}
	switch {
	case m.saleShut || now >= m.sale.EndsAt.UnixMilli():
		return seckill.Ticket{}, seckill.CodeEnded
	case now < m.sale.RoomOpensAt().UnixMilli():
		return seckill.Ticket{}, seckill.CodeNotStarted
	case m.closed != "":
		return seckill.Ticket{Entrant: id, State: m.closed, JoinedAt: time.UnixMilli(now).UTC()}, ""
	}
	m.joins = append(m.joins, modelJoin{id: id, ms: now, before: now < m.starts()})
	t, _ := m.ticket(id, now)
	return t, ""
}

func (m *roomModel) admit(now int64) seckill.RoomState {
	p := m.sale.Room
	if m.closed == "" && now >= m.starts() && (m.saleShut || now >= m.sale.EndsAt.UnixMilli()) {
		m.closed = seckill.TicketEnded // the model sells nothing: a room closes only by the end
		m.closedAt = now
	}
	if m.closed != "" || now < m.starts() {
		return m.state(now)
	}
	n := int64(len(m.joins) - len(m.admitted))
	if p.AdmitPerSecond > 0 {
		burst := int64(p.RoomBurst()) * 1000
		if m.last == 0 {
			m.last, m.credit = m.starts(), burst
		}
		if now > m.last {
			m.credit = min(burst, m.credit+(now-m.last)*int64(p.AdmitPerSecond))
			m.last = now
		}
		n = min(n, m.credit/1000)
	}
	if p.MaxActive > 0 {
		n = min(n, int64(p.MaxActive)-m.active(now))
	}
	order := m.order()
	for range max(n, 0) {
		id := order[len(m.admitted)]
		m.admitted = append(m.admitted, id)
		m.at[id], m.until[id] = now, now+int64(p.TokenSeconds)*1000
		if p.AdmitPerSecond > 0 {
			m.credit -= 1000
		}
	}
	return m.state(now)
}

func (m *roomModel) release(id string, until, now int64) {
	u, ok := m.until[id]
	if !ok || u <= now {
		return
	}
	m.until[id] = max(until, now)
}

// roomMachine drives an engine and a roomModel side by side.
type roomMachine struct {
	t     *rapid.T
	ctx   context.Context
	clock *ManualClock
	eng   RoomEngine
	m     *roomModel
	users []string
}

func testRoomModel(t *testing.T, newEngine NewRoomEngine) {
	checks := 0
	rapid.Check(t, func(rt *rapid.T) {
		checks++
		clock := NewManualClock(epoch)
		eng := newEngine(t, clock)
		order := rapid.SampledFrom([]string{seckill.RoomDraw, seckill.RoomFIFO}).Draw(rt, "order")
		rate := rapid.SampledFrom([]int{0, 1, 7, 20, 100}).Draw(rt, "rate")
		maxActive := rapid.SampledFrom([]int{0, 1, 3}).Draw(rt, "maxActive")
		if rate == 0 && maxActive == 0 {
			maxActive = 2
		}
		in := seckill.SaleInput{ID: "rm" + strconv.Itoa(checks), PriceCents: ptr(int64(price)), Stock: ptr(5),
			StartsAt: ptr(roomStart), EndsAt: ptr(roomStart.Add(10 * time.Minute)),
			WaitingRoom: &seckill.RoomInput{Order: order, OpensSeconds: ptr(60), AdmitPerSecond: rate,
				MaxActive: maxActive, TokenSeconds: ptr(rapid.SampledFrom([]int{10, 30}).Draw(rt, "token"))}}
		sale, err := seckill.NewSale(in, epoch)
		if err != nil {
			rt.Fatal(err)
		}
		if err := eng.LoadSale(context.Background(), sale, 0); err != nil {
			rt.Fatal(err)
		}
		mc := &roomMachine{t: rt, ctx: context.Background(), clock: clock, eng: eng,
			m: &roomModel{sale: sale, seed: seckill.RoomSeed(roomSecret, sale), until: map[string]int64{}, at: map[string]int64{}}}
		for i := range 12 {
			mc.users = append(mc.users, seckill.EntrantID(sale.ID, "u"+strconv.Itoa(i)))
		}
		rt.Repeat(map[string]func(*rapid.T){
			"Join1":    mc.join,
			"Join2":    mc.join,
			"Join3":    mc.join,
			"Admit1":   mc.admit,
			"Admit2":   mc.admit,
			"Release":  mc.release,
			"Advance1": mc.advance,
			"Advance2": mc.advance,
			"Close":    mc.closeSale,
			"":         mc.check,
		})
	})
}

func (mc *roomMachine) now() int64 { return mc.clock.Now().UnixMilli() }

func (mc *roomMachine) join(rt *rapid.T) {
	id := rapid.SampledFrom(mc.users).Draw(rt, "entrant")
	got, err := mc.eng.Join(mc.ctx, mc.m.sale, id, seckill.DrawKey(mc.m.seed, id))
	want, code := mc.m.join(id, mc.now())
	if seckill.ErrorCode(err) != code || (code == "" && got != want) {
		rt.Fatalf("Join(%s) at %s = %+v, %v; the model says %+v, %q", id[:6], mc.clock.Now().Sub(roomStart), got, err, want, code)
	}
}

func (mc *roomMachine) admit(rt *rapid.T) {
	got, err := mc.eng.Admit(mc.ctx, mc.m.sale)
	want := mc.m.admit(mc.now())
	if err != nil || got != want {
		rt.Fatalf("Admit at %s = %+v, %v; the model says %+v", mc.clock.Now().Sub(roomStart), got, err, want)
	}
}

func (mc *roomMachine) release(rt *rapid.T) {
	id := rapid.SampledFrom(mc.users).Draw(rt, "entrant")
	off := rapid.SampledFrom([]time.Duration{-time.Second, 0, 500 * time.Millisecond, 20 * time.Second}).Draw(rt, "until")
	until := mc.clock.Now().Add(off)
	if err := mc.eng.Release(mc.ctx, mc.m.sale.ID, id, until); err != nil {
		rt.Fatalf("Release: %v", err)
	}
	mc.m.release(id, until.UnixMilli(), mc.now())
}

func (mc *roomMachine) advance(rt *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{time.Millisecond, 37 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 999 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second}).Draw(rt, "advance")
	mc.clock.Advance(d)
}

func (mc *roomMachine) closeSale(rt *rapid.T) {
	if rapid.IntRange(0, 9).Draw(rt, "rarely") != 0 {
		return
	}
	if _, _, err := mc.eng.CloseSale(mc.ctx, mc.m.sale.ID); err != nil {
		rt.Fatalf("CloseSale: %v", err)
	}
	mc.m.saleShut = true
}

// check compares every ticket, the counts and the draw's list.
func (mc *roomMachine) check(rt *rapid.T) {
	now := mc.now()
	for _, id := range mc.users {
		got, err := mc.eng.Ticket(mc.ctx, mc.m.sale.ID, id)
		want, ok := mc.m.ticket(id, now)
		if !ok {
			if seckill.ErrorCode(err) != seckill.CodeNotFound {
				rt.Fatalf("Ticket(%s) of an entrant that never joined = %+v, %v; want not_found", id[:6], got, err)
			}
			continue
		}
		if err != nil || got != want {
			rt.Fatalf("Ticket(%s) at %s = %+v, %v; the model says %+v", id[:6], mc.clock.Now().Sub(roomStart), got, err, want)
		}
	}
	got, err := mc.eng.Room(mc.ctx, mc.m.sale.ID)
	if want := mc.m.state(now); err != nil || got != want && !(len(mc.m.joins) == 0 && got == seckill.RoomState{}) {
		rt.Fatalf("Room at %s = %+v, %v; the model says %+v", mc.clock.Now().Sub(roomStart), got, err, want)
	}
	list, err := mc.eng.DrawEntrants(mc.ctx, mc.m.sale.ID, "", seckill.MaxDrawEntrantsPage)
	var want []string
	for _, j := range mc.m.joins {
		if j.before && mc.m.sale.Room.Order == seckill.RoomDraw {
			want = append(want, j.id)
		}
	}
	slices.SortFunc(want, strings.Compare)
	if err != nil || !slices.Equal(list, want) && !(len(list) == 0 && len(want) == 0) {
		rt.Fatalf("DrawEntrants = %v, %v; the model says %v", list, err, want)
	}
}
