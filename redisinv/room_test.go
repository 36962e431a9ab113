package redisinv

// Tests of the waiting rooms on Redis (room.go, lua/room_*.lua): a walk through one room's life,
// the policy carried in the sale's definition, the scripts' validation before their first
// write, the room's keys removed with the sale's, and a property test against a plain model.
// The shared rooms suite (seckilltest.TestWaitingRooms) runs in room_conformance_test.go.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/seckilltest"
)

// roomSale is a sale with a room: it starts 10 minutes after t0, preheats 10 minutes before,
// and its room opens 5 minutes before the start.
func roomSale(id string, stock int, p seckill.RoomPolicy) seckill.Sale {
	return seckill.Sale{
		ID: id, Name: "room " + id, PriceCents: 100, Stock: stock, PerUserLimit: 1, HoldSeconds: 60,
		QueueLimit: 10, StartsAt: t0.Add(10 * time.Minute), EndsAt: t0.Add(time.Hour), CreatedAt: t0.Add(-time.Hour),
		PreheatSeconds: 600, Room: &p,
	}
}

func entrant(i int) string { return seckill.EntrantID("room-test", fmt.Sprint("user", i)) }

func mustJoin(t testing.TB, e *Engine, s seckill.Sale, ent string, key uint64) seckill.Ticket {
	t.Helper()
	tk, err := e.Join(context.Background(), s, ent, key)
	if err != nil {
		t.Fatalf("Join(%s): %v", ent[:8], err)
	}
	return tk
}

func mustAdmit(t testing.TB, e *Engine, s seckill.Sale) seckill.RoomState {
	t.Helper()
	st, err := e.Admit(context.Background(), s)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return st
}

func mustTicket(t testing.TB, e *Engine, saleID, ent string) seckill.Ticket {
	t.Helper()
	tk, err := e.Ticket(context.Background(), saleID, ent)
	if err != nil {
		t.Fatalf("Ticket(%s): %v", ent[:8], err)
	}
	return tk
}

func wantRoomCode(t testing.TB, what string, err error, code seckill.Code) {
	t.Helper()
	if got := seckill.ErrorCode(err); got != code {
		t.Fatalf("%s: error %v (code %q), want %q", what, err, got, code)
	}
}

// TestRoomWalk: a draw room from its opening to sold out, step by step, on a standalone Redis,
// on a Cluster (every room script on the sale's node) and through Sentinel with a replica that
// acknowledges every change (WAIT after the room's writes, as after the sale's).
func TestRoomWalk(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { roomWalk(t, testenv.Redis(t)) })
	t.Run("cluster", func(t *testing.T) {
		url := testenv.RedisCluster(t)
		if c := dialT(t, url); !c.Cluster {
			t.Fatalf("%s is not a Redis Cluster", url)
		}
		roomWalk(t, url)
	})
	t.Run("sentinel", func(t *testing.T) {
		master := redistest.StartMaster(t)
		redistest.StartReplica(t, master, "replica1")
		sentinels := redistest.StartSentinels(t, master, 1, 1, redistest.SentinelOptions{})
		url := redistest.SentinelURL(sentinels)
		if c := dialT(t, url); c.MasterSet != redistest.MasterSet {
			t.Fatalf("Dial(%s): master set %q", url, c.MasterSet)
		}
		roomWalk(t, url, WithReplicas(1, time.Second))
	})
}

func roomWalk(t *testing.T, url string, opts ...Option) {
	c := dialT(t, url)
	clock := seckilltest.NewManualClock(t0)
	e := newTestEngine(t, c.Inventory, clock, opts...)
	ctx := context.Background()
	p := seckill.RoomPolicy{Order: seckill.RoomDraw, OpensSeconds: 300, AdmitPerSecond: 10, TokenSeconds: 60}
	s := roomSale("walk", 2, p)
	if err := e.LoadSale(ctx, s, 0); err != nil {
		t.Fatal(err)
	}
	got, _, err := e.Sale(ctx, s.ID)
	if err != nil || got.Room == nil || *got.Room != p {
		t.Fatalf("Sale's room = %+v, %v; want %+v", got.Room, err, p)
	}
	if st, err := e.Room(ctx, s.ID); err != nil || st != (seckill.RoomState{}) {
		t.Fatalf("Room before anyone joined = %+v, %v; want zero", st, err)
	}
	_, err = e.Join(ctx, s, entrant(0), 5)
	wantRoomCode(t, "Join before the room opens", err, seckill.CodeNotStarted)

	// The pre-queue: keys chosen so that the draw's order is 2, 0, 1 (and 3 ties with 0: by id).
	clock.Advance(5 * time.Minute)
	keys := map[int]uint64{0: 20, 1: 30, 2: 10, 3: 20}
	for i := range 4 {
		tk := mustJoin(t, e, s, entrant(i), keys[i])
		if tk.State != seckill.TicketPreQueue || !tk.Drawn || tk.Index != 0 || !tk.JoinedAt.Equal(clock.Now()) {
			t.Fatalf("pre-queue ticket %+v", tk)
		}
	}
	again := mustJoin(t, e, s, entrant(0), 99)
	if again.State != seckill.TicketPreQueue || !again.JoinedAt.Equal(clock.Now()) {
		t.Fatalf("joining again: %+v", again)
	}
	if st := mustAdmit(t, e, s); st.Admitted != 0 || st.Waiting != 4 || st.PreQueue != 4 || st.Entrants != 4 {
		t.Fatalf("Admit before the start: %+v", st)
	}
	ids, err := e.DrawEntrants(ctx, s.ID, "", 1000)
	sorted := []string{entrant(0), entrant(1), entrant(2), entrant(3)}
	slices.Sort(sorted)
	if err != nil || !slices.Equal(ids, sorted) {
		t.Fatalf("DrawEntrants = %v, %v; want %v", ids, err, sorted)
	}
	page, _ := e.DrawEntrants(ctx, s.ID, sorted[1], 1)
	if !slices.Equal(page, sorted[2:3]) {
		t.Fatalf("DrawEntrants after %s limit 1 = %v", sorted[1][:8], page)
	}

	// The start: the draw's order, then arrivals; one admission per 100 ms (burst 1).
	clock.Advance(5 * time.Minute)
	late := mustJoin(t, e, s, entrant(9), 0)
	order := []int{2, 0, 3, 1}
	if entrant(3) < entrant(0) {
		order = []int{2, 3, 0, 1}
	}
	if late.State != seckill.TicketWaiting || late.Index != 5 || late.Ahead != 4 || late.Drawn {
		t.Fatalf("late ticket %+v", late)
	}
	for pos, i := range order {
		tk := mustTicket(t, e, s.ID, entrant(i))
		if tk.State != seckill.TicketWaiting || tk.Index != int64(pos+1) || tk.Ahead != int64(pos) {
			t.Fatalf("ticket of entrant %d at the start: %+v, want index %d", i, tk, pos+1)
		}
	}
	st := mustAdmit(t, e, s)
	if st.Admitted != 1 || st.Waiting != 4 || st.Active != 1 {
		t.Fatalf("first admission: %+v", st)
	}
	if st := mustAdmit(t, e, s); st.Admitted != 1 {
		t.Fatalf("no credit left, yet %+v", st)
	}
	head := mustTicket(t, e, s.ID, entrant(order[0]))
	if head.State != seckill.TicketAdmitted || head.Index != 1 || !head.AdmittedAt.Equal(clock.Now()) ||
		!head.ActiveUntil.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("admitted ticket %+v", head)
	}
	clock.Advance(250 * time.Millisecond) // 2.5 admissions of credit, capped at the burst: 1
	if st := mustAdmit(t, e, s); st.Admitted != 2 {
		t.Fatalf("after 250 ms: %+v", st)
	}
	if tk := mustTicket(t, e, s.ID, entrant(order[2])); tk.Index != 3 || tk.Ahead != 0 {
		t.Fatalf("third ticket after two admissions %+v", tk)
	}
	// Release: ends the place now; never revives it.
	if err := e.Release(ctx, s.ID, entrant(order[0]), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Release(ctx, s.ID, entrant(order[0]), clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := e.Release(ctx, s.ID, entrant(order[3]), clock.Now().Add(time.Hour)); err != nil { // not admitted
		t.Fatal(err)
	}
	if st, _ := e.Room(ctx, s.ID); st.Active != 1 || st.Admitted != 2 {
		t.Fatalf("after release: %+v", st)
	}

	// Sold out: both units paid; the room closes and tells everyone.
	for i, u := range []string{"u1", "u2"} {
		r := mustBuy(t, e, s.ID, u, 1, "", seckill.StatusHeld)
		mustPay(t, e, r.ID, fmt.Sprint("pay", i), r.AmountCents, seckill.PaymentApplied)
	}
	clock.Advance(time.Second)
	if st := mustAdmit(t, e, s); st.Closed != seckill.TicketSoldOut || st.Waiting != 0 || st.Admitted != 2 {
		t.Fatalf("sold out: %+v", st)
	}
	if tk := mustTicket(t, e, s.ID, entrant(order[2])); tk.State != seckill.TicketSoldOut || tk.Ahead != 0 {
		t.Fatalf("a waiting ticket once sold out: %+v", tk)
	}
	if tk := mustJoin(t, e, s, entrant(20), 0); tk.State != seckill.TicketSoldOut {
		t.Fatalf("a join once sold out: %+v", tk)
	}
	if _, err := e.Ticket(ctx, s.ID, entrant(20)); seckill.ErrorCode(err) != seckill.CodeNotFound {
		t.Fatalf("a join once sold out is not kept: %v", err)
	}
	clock.Advance(time.Hour)
	_, err = e.Join(ctx, s, entrant(21), 0)
	wantRoomCode(t, "Join after the end", err, seckill.CodeEnded)
}

// roomFixture is a started draw room in every state a script can meet: an admitted entrant
// whose place counts, entrants waiting, and credit for another admission (so that a script that
// admitted or released before it validated would change the keys visibly).
type roomFixture struct {
	e                 *Engine
	clock             *seckilltest.ManualClock
	sale              seckill.Sale
	keys              []string // the room's six
	all               []string // the sale's seven and the room's five: what a snapshot compares
	admitted, waiting string
}

func newRoomFixture(t *testing.T, c *Clients, id string) *roomFixture {
	t.Helper()
	clock := seckilltest.NewManualClock(t0)
	e := newTestEngine(t, c.Inventory, clock)
	s := roomSale(id, 5, seckill.RoomPolicy{Order: seckill.RoomDraw, OpensSeconds: 300, AdmitPerSecond: 10, MaxActive: 10, TokenSeconds: 60})
	if err := e.LoadSale(context.Background(), s, 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Minute)
	for i := range 5 {
		mustJoin(t, e, s, entrant(i), uint64(i))
	}
	clock.Advance(5 * time.Minute)
	if st := mustAdmit(t, e, s); st.Admitted != 1 || st.Waiting != 4 {
		t.Fatalf("fixture: %+v", st)
	}
	clock.Advance(time.Second)
	f := &roomFixture{e: e, clock: clock, sale: s, keys: e.roomKeys(id), admitted: entrant(0), waiting: entrant(1)}
	f.all = append(e.keys(id), f.keys[1:]...)
	return f
}

func (f *roomFixture) clockMS() string { return i64toa(f.clock.Now().UnixMilli()) }

type roomSpec struct {
	name string
	s    *script
	base func(f *roomFixture) []string
	args []argSpec
}

func roomSpecs() []roomSpec {
	rs := defaultRoomScripts
	clock := argSpec{"clock", badClock}
	ent := argSpec{"entrant", badHex(32)}
	return []roomSpec{
		{"room_join", rs.join, func(f *roomFixture) []string {
			return []string{f.clockMS(), entrant(7), "7", itoa(MaxRoomEntrants)}
		}, []argSpec{clock, ent, {"draw key", bad(append(notDigits, "281474976710656")...)},
			{"most entrants", digits("0", "1000000001")}}},
		{"room_ticket", rs.ticket, func(f *roomFixture) []string { return []string{f.clockMS(), f.waiting} },
			[]argSpec{clock, ent}},
		{"room_admit", rs.admit, func(f *roomFixture) []string { return []string{f.clockMS(), "1000", "0"} },
			[]argSpec{clock, {"most", digits("0", "10001")}, {"tell", digits("2")}}},
		{"room_tell", rs.tell, func(f *roomFixture) []string { return []string{f.clockMS(), "1"} },
			[]argSpec{clock, {"told", digits("1000000001")}}},
		{"room_release", rs.release, func(f *roomFixture) []string { return []string{f.clockMS(), f.admitted, "0"} },
			[]argSpec{clock, ent, {"until", digits()}}},
		{"room_state", rs.state, func(f *roomFixture) []string { return []string{f.clockMS()} }, []argSpec{clock}},
		{"room_draw", rs.draw, func(f *roomFixture) []string { return []string{f.clockMS(), "", "10"} },
			[]argSpec{clock, {"after", badStr(1024, false)}, {"limit", digits("0", "1001")}}},
		{"room_restore", rs.restore, func(f *roomFixture) []string { return []string{f.clockMS(), "begin", ""} },
			[]argSpec{clock, {"step", bad("", "x", "Begin")}, {"token", badTokenSet}}},
	}
}

func roomKeyCases() []keyCase {
	with := func(ks []string, i int, v string) []string { ks = slices.Clone(ks); ks[i] = v; return ks }
	return []keyCase{
		{"0 keys", func(f *fixture) []string { return nil }},
		{"5 keys", func(f *fixture) []string { return f.keys[:5] }},
		{"7 keys", func(f *fixture) []string { return append(slices.Clone(f.keys), f.keys[0]) }},
		{"the sale's seven", func(f *fixture) []string { return f.e.keys(f.def.ID)[:6] }},
		{"KEYS[1] of another sale", func(f *fixture) []string { return with(f.keys, 0, f.e.roomKeys("other")[0]) }},
		{"KEYS[2..6] of another sale", func(f *fixture) []string {
			return append([]string{f.keys[0]}, f.e.roomKeys("other")[1:]...)
		}},
		{"KEYS[6] of another sale", func(f *fixture) []string { return with(f.keys, 5, f.e.roomKeys("other")[5]) }},
		{"KEYS[3] and KEYS[4] swapped", func(f *fixture) []string {
			ks := slices.Clone(f.keys)
			ks[2], ks[3] = ks[3], ks[2]
			return ks
		}},
		{"a segment's tag", func(f *fixture) []string { return f.e.roomKeys(f.def.ID + "#1.2") }},
		{"no {sale:<id>} tag", func(f *fixture) []string {
			return New(f.rdb, WithPrefix(strings.Replace(f.e.prefix, "{", "", -1))).roomKeysUntagged(f.def.ID)
		}},
		{"KEYS[1] an empty name", func(f *fixture) []string { return with(f.keys, 0, "") }},
	}
}

// roomKeysUntagged are the room's keys without the hash tag's braces.
func (e *Engine) roomKeysUntagged(id string) []string {
	ks := e.roomKeys(id)
	for i := range ks {
		ks[i] = strings.NewReplacer("{", "", "}", "").Replace(ks[i])
	}
	return ks
}

// TestRoomScriptsValidateBeforeFirstWrite: every room script refuses wrong keys and each
// argument missing or invalid with a Redis error, and changes none of the sale's and the
// room's twelve keys; its valid call is accepted.
func TestRoomScriptsValidateBeforeFirstWrite(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	rf := newRoomFixture(t, c, "rvalid")
	// keyCases take a *fixture: one whose keys are the room's.
	f := &fixture{e: rf.e, rdb: c.Inventory, def: rf.sale, keys: rf.keys, clock: rf.clock}
	specs := roomSpecs()
	var covered, all []string
	for _, sp := range specs {
		covered = append(covered, sp.s.name)
	}
	v := defaultRoomScripts
	for _, s := range []*script{v.join, v.ticket, v.admit, v.release, v.state, v.draw, v.restore, v.tell} {
		all = append(all, s.name)
	}
	if slices.Sort(covered); !slices.Equal(covered, slices.Sorted(slices.Values(all))) {
		t.Fatalf("covered %v, room scripts %v", covered, all)
	}
	refuse := func(t *testing.T, s *script, keys, argv []string) {
		t.Helper()
		before := takeSnapshot(t, c.Inventory, rf.all)
		got, err := execScript(c.Inventory, s, keys, argv)
		if !isValidationError(err) {
			t.Errorf("%s.lua KEYS=%q ARGV=%q: want \"ERR seckill: ...\", got %q, %v", s.name, shortKeys(f, keys), argv, got, err)
		}
		if d := before.diff(t, takeSnapshot(t, c.Inventory, rf.all)); d != "" {
			t.Errorf("%s.lua KEYS=%q ARGV=%q wrote before it refused:\n%s", s.name, shortKeys(f, keys), argv, d)
			before.restore(t)
		}
	}
	for _, sp := range specs {
		t.Run(sp.name, func(t *testing.T) {
			if n := len(sp.base(rf)); n != len(sp.args) {
				t.Fatalf("spec has %d positions, base %d", len(sp.args), n)
			}
			for _, kc := range roomKeyCases() {
				t.Run("keys/"+kc.name, func(t *testing.T) { refuse(t, sp.s, kc.keys(f), sp.base(rf)) })
			}
			for i, a := range sp.args {
				pos := fmt.Sprintf("ARGV[%d] %s", i+1, a.name)
				t.Run(pos+"/missing", func(t *testing.T) { refuse(t, sp.s, rf.keys, sp.base(rf)[:i]) })
				for _, b := range a.bad {
					t.Run(pos+"/"+b.label, func(t *testing.T) {
						argv := sp.base(rf)
						argv[i] = b.v
						refuse(t, sp.s, rf.keys, argv)
					})
				}
			}
			t.Run("valid call is accepted", func(t *testing.T) {
				before := takeSnapshot(t, c.Inventory, rf.all)
				defer before.restore(t)
				got, err := execScript(c.Inventory, sp.s, rf.keys, sp.base(rf))
				if err != nil || len(got) == 0 || got[0] != "ok" {
					t.Fatalf("%s.lua with its valid ARGV: %q, %v", sp.name, got, err)
				}
			})
		})
	}
}

// TestRoomScriptsCatchAWriteBeforeValidation is the negative control: a room_admit.lua broken to
// admit before it validates its last argument is caught by the snapshot.
func TestRoomScriptsCatchAWriteBeforeValidation(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	rf := newRoomFixture(t, c, "rcontrol")
	const from = "  local most = int_arg(ARGV[2], 'most admissions', 1, 10000)\n"
	broken := newRoomScriptSet(func(name string) string {
		src := scriptSource(name)
		if name == "room_admit.lua" {
			if !strings.Contains(src, from) {
				t.Fatalf("room_admit.lua no longer contains %q", from)
			}
			src = strings.Replace(src, from, "  redis.call('ZPOPMIN', KEYS[3])\n"+from, 1)
		}
		return src
	})
	before := takeSnapshot(t, c.Inventory, rf.all)
	if _, err := execScript(c.Inventory, broken.admit, rf.keys, []string{rf.clockMS(), "abc", "1"}); !isValidationError(err) {
		t.Fatalf("broken room_admit.lua: %v, want its validation error", err)
	}
	if before.diff(t, takeSnapshot(t, c.Inventory, rf.all)) == "" {
		t.Fatal("the snapshot did not see a write before validation")
	}
}

// TestRoomScriptsWrongTypeKeyWritesNothing corrupts each room key in turn: a script that fails
// on it must not have written anything first.
func TestRoomScriptsWrongTypeKeyWritesNothing(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	rf := newRoomFixture(t, c, "rwrongtype")
	clean := takeSnapshot(t, c.Inventory, rf.all)
	ctx := context.Background()
	for i := 1; i < len(rf.keys); i++ {
		for _, sp := range roomSpecs() {
			t.Run(roomParts[i-1]+"/"+sp.name, func(t *testing.T) {
				defer clean.restore(t)
				if err := c.Inventory.Do(ctx, c.Inventory.B().Set().Key(rf.keys[i]).Value("corrupt").Build()).Error(); err != nil {
					t.Fatal(err)
				}
				before := takeSnapshot(t, c.Inventory, rf.all)
				got, err := execScript(c.Inventory, sp.s, rf.keys, sp.base(rf))
				if err == nil {
					return
				}
				if d := before.diff(t, takeSnapshot(t, c.Inventory, rf.all)); d != "" {
					t.Errorf("%s.lua failed with %q (reply %q) after writing:\n%s", sp.name, err, got, d)
				}
			})
		}
	}
}

// TestRoomKeysOfCoolAndDrop: cool.lua and sale_admin.lua take the room's five keys after the
// sale's seven and refuse any others.
func TestRoomKeysOfCoolAndDrop(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	rf := newRoomFixture(t, c, "rkeys")
	for _, s := range []*script{defaultScripts.cool, defaultScripts.saleAdmin} {
		argv := []string{rf.clockMS(), "60000"}
		if s == defaultScripts.saleAdmin {
			argv = []string{rf.clockMS(), "drop"}
		}
		other := rf.e.roomKeys("other")
		for name, keys := range map[string][]string{
			"room keys of another sale": append(rf.e.keys(rf.sale.ID), other[1:]...),
			"room keys swapped":         append(rf.e.keys(rf.sale.ID), rf.keys[2], rf.keys[1], rf.keys[3], rf.keys[4], rf.keys[5]),
			"4 room keys":               append(rf.e.keys(rf.sale.ID), rf.keys[1:5]...),
		} {
			before := takeSnapshot(t, c.Inventory, rf.all)
			if _, err := execScript(c.Inventory, s, keys, argv); !isValidationError(err) {
				t.Errorf("%s.lua with %s: %v, want a validation error", s.name, name, err)
			}
			if d := before.diff(t, takeSnapshot(t, c.Inventory, rf.all)); d != "" {
				t.Errorf("%s.lua with %s wrote:\n%s", s.name, name, d)
			}
		}
	}
}

// TestRoomGoesWithItsSale: dropping a sale (DropSale) and cooling it (cool) remove its room's
// keys with its own; cooling waits for the sale's hot window to end like the sale's keys.
func TestRoomGoesWithItsSale(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	ctx := context.Background()
	t.Run("cool", func(t *testing.T) {
		rf := newRoomFixture(t, c, "rcool")
		if out, _, err := rf.e.cool(ctx, rf.sale.ID); err != nil || out != coolWait {
			t.Fatalf("cool during the sale: %v, %v; want wait", out, err)
		}
		if n := keysExisting(t, c.Inventory, rf.keys[1:]); n != 5 {
			t.Fatalf("%d room keys before cooling, want 5", n)
		}
		rf.clock.Set(rf.sale.EndsAt.Add(time.Duration(rf.sale.HoldSeconds)*time.Second + seckill.CoolMargin))
		if out, _, err := rf.e.cool(ctx, rf.sale.ID); err != nil || out != coolDone {
			t.Fatalf("cool after the window: %v, %v; want done", out, err)
		}
		if n := keysExisting(t, c.Inventory, rf.all); n != 0 {
			t.Fatalf("%d keys left after cooling", n)
		}
		if st, err := rf.e.Room(ctx, rf.sale.ID); seckill.ErrorCode(err) != seckill.CodeNotFound {
			t.Fatalf("Room of a cooled sale without a rebuilder: %+v, %v; want not_found", st, err)
		}
	})
	t.Run("drop", func(t *testing.T) {
		clock := seckilltest.NewManualClock(t0)
		e := newTestEngine(t, c.Inventory, clock)
		s := roomSale("rdrop", 1, seckill.RoomPolicy{Order: seckill.RoomFIFO, OpensSeconds: 300, MaxActive: 1, TokenSeconds: 60})
		if err := e.LoadSale(ctx, s, 0); err != nil {
			t.Fatal(err)
		}
		clock.Advance(6 * time.Minute)
		mustJoin(t, e, s, entrant(1), 0)
		if _, err := e.CloseUnreserved(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.DropSale(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if n := keysExisting(t, c.Inventory, append(e.keys(s.ID), e.roomKeys(s.ID)[1:]...)); n != 0 {
			t.Fatalf("%d keys left after DropSale", n)
		}
	})
}

// TestRoomPolicyCarried: the sale's room policy comes back from Sale and SaleWindow, from the
// local answers' copies, from a segmented load's segment 0, and from a rebuild; a sale without a
// room stores none. A room whose sale's keys vanished survives the sale's rebuild, which a join
// waits for (a buyer's call, as a buy).
func TestRoomPolicyCarried(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	ctx := context.Background()
	p := seckill.RoomPolicy{Order: seckill.RoomFIFO, OpensSeconds: 120, AdmitPerSecond: 7, MaxActive: 9, TokenSeconds: 45, PowBits: 12}
	check := func(t *testing.T, e *Engine, id string, want *seckill.RoomPolicy) {
		t.Helper()
		s, _, err := e.Sale(ctx, id)
		if err != nil || !equalRoom(s.Room, want) {
			t.Fatalf("Sale(%s).Room = %+v, %v; want %+v", id, s.Room, err, want)
		}
		for range 2 { // the second from the local copy, when the engine keeps one
			w, err := e.SaleWindow(ctx, id)
			if err != nil || !equalRoom(w.Room, want) {
				t.Fatalf("SaleWindow(%s).Room = %+v, %v; want %+v", id, w.Room, err, want)
			}
			if w.Room != nil {
				w.Room.MaxActive = -1 // a caller's change reaches no other caller
			}
		}
	}
	t.Run("plain and local answers", func(t *testing.T) {
		clock := seckilltest.NewManualClock(t0)
		e := newTestEngine(t, c.Inventory, clock)
		local := New(c.Inventory, WithTestClock(clock), WithPrefix(e.prefix), WithLocalAnswers(watcherT(t, c)))
		t.Cleanup(func() { _ = local.Close() })
		with, without := roomSale("carried", 3, p), roomSale("bare", 3, p)
		without.Room = nil
		for _, s := range []seckill.Sale{with, without} {
			if err := e.LoadSale(ctx, s, 0); err != nil {
				t.Fatal(err)
			}
		}
		for _, eng := range []*Engine{e, local} {
			check(t, eng, with.ID, &p)
			check(t, eng, without.ID, nil)
		}
		if hexists(t, c.Inventory, e.keys(without.ID)[0], "room") {
			t.Fatal("a sale without a room has a room field")
		}
	})
	t.Run("segments", func(t *testing.T) {
		e := newTestEngine(t, c.Inventory, seckilltest.NewManualClock(t0))
		s := roomSale("segs", 30, p)
		if err := e.LoadSaleSegments(ctx, s, 0, 3); err != nil {
			t.Fatal(err)
		}
		check(t, e, s.ID, &p)
		_, err := e.Join(ctx, s, entrant(1), 0)
		wantRoomCode(t, "Join a segmented sale", err, seckill.CodeInvalidArgument)
	})
	t.Run("rebuild", func(t *testing.T) {
		clock := seckilltest.NewManualClock(t0.Add(9 * time.Minute))
		s := roomSale("rebuilt", 3, p)
		locks := lock.New(c.Locks, &lock.Options{Lease: time.Second})
		t.Cleanup(func() { _ = locks.Close() })
		e := newTestEngine(t, c.Inventory, clock, WithRebuild(&fakeSource{sale: s}, locks))
		if err := e.LoadSale(ctx, s, 0); err != nil {
			t.Fatal(err)
		}
		mustJoin(t, e, s, entrant(1), 0)
		if err := c.Inventory.Do(ctx, c.Inventory.B().Del().Key(e.keys(s.ID)...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		tk := mustJoin(t, e, s, entrant(2), 0) // waits for the rebuild
		if tk.State != seckill.TicketPreQueue {
			t.Fatalf("a join after the rebuild: %+v", tk)
		}
		check(t, e, s.ID, &p)
		if st, err := e.Room(ctx, s.ID); err != nil || st.Entrants != 2 {
			t.Fatalf("the room after its sale's rebuild: %+v, %v; want its 2 entrants", st, err)
		}
	})
}

func equalRoom(a, b *seckill.RoomPolicy) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// TestRoomRestoreStepsGateTheRoom: from room_restore.lua's 'begin' to its 'end' the room
// answers unavailable to every call (nobody joins or is admitted in a half-made room), an 'add'
// or 'end' without the mark of its restore is refused, and a restore with a rebuild token is
// fenced unless the sale is being rebuilt under it.
func TestRoomRestoreStepsGateTheRoom(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	f := newRoomFixture(t, c, "rgate")
	ctx := context.Background()
	step := func(args ...string) string {
		t.Helper()
		msgs, err := f.e.run(ctx, f.e.rooms().restore, f.keys, append([]string{f.clockMS()}, args...))
		if err != nil {
			t.Fatalf("room_restore %v: %v", args, err)
		}
		r, _, err := splitVersion(msgs)
		if err != nil {
			t.Fatal(err)
		}
		return r.code()
	}
	if got := step("begin", "7-abcdef"); got != "fenced" {
		t.Fatalf("begin with a rebuild token on a sale not being rebuilt = %s, want fenced", got)
	}
	if got := step("end", "", "0", "0", "0", "0"); got != "not_begun" {
		t.Fatalf("end without begin = %s, want not_begun", got)
	}
	if got := step("begin", ""); got != "ok" {
		t.Fatalf("begin = %s", got)
	}
	_, err := f.e.Join(ctx, f.sale, entrant(9), 9)
	if seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("Join while the room is restored = %v, want unavailable", err)
	}
	if _, err := f.e.Admit(ctx, f.sale); seckill.ErrorCode(err) != seckill.CodeUnavailable {
		t.Fatalf("Admit while the room is restored = %v, want unavailable", err)
	}
	if got := step("end", "", "0", "0", "0", "0"); got != "ok" {
		t.Fatalf("end = %s", got)
	}
	tk, err := f.e.Join(ctx, f.sale, entrant(9), 9)
	if err != nil || tk.Arrival != 1 || tk.State != seckill.TicketWaiting {
		t.Fatalf("Join after the restore (of an empty room) = %+v, %v; want the first arrival, waiting", tk, err)
	}
}
