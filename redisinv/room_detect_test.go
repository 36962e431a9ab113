package redisinv

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/seckilltest"
)

// roomDetectorScenario runs one room on Redis with the room scripts rs, sequentially, and returns
// what the rooms suite's detectors (seckilltest.CheckAdmissionOrder, seckilltest.CheckRoom) say
// of it: a draw room of stock 1 and max_active 5, 10 entrants in the pre-queue and 3 after the
// start; two admissions, each batch released after it; the unit paid; an admission that closes
// the room; a restock; and one more admission, which must admit no one.
func roomDetectorScenario(t *testing.T, c *Clients, rs *roomScriptSet) error {
	clock := seckilltest.NewManualClock(t0)
	e := newTestEngine(t, c.Inventory, clock)
	e.roomScripts = rs
	ctx := context.Background()
	s := roomSale("detect", 1, seckill.RoomPolicy{Order: seckill.RoomDraw, OpensSeconds: 300, MaxActive: 5, TokenSeconds: 60})
	if err := e.LoadSale(ctx, s, 0); err != nil {
		t.Fatal(err)
	}
	seed := []byte("detector seed")
	join := func(i int) string {
		id := entrant(i)
		if _, err := e.Join(ctx, s, id, seckill.DrawKey(seed, id)); err != nil {
			t.Fatalf("Join: %v", err)
		}
		return id
	}
	clock.Set(s.RoomOpensAt())
	var pre, later, all []string
	for i := range 10 {
		pre = append(pre, join(i))
		clock.Advance(time.Second)
	}
	if slices.Equal(seckill.DrawOrder(seed, pre)[:10], pre) {
		t.Fatal("the draw equals the arrival order for this seed: the order control would show nothing")
	}
	clock.Set(s.StartsAt)
	for i := 10; i < 13; i++ {
		later = append(later, join(i))
	}
	all = append(slices.Clone(pre), later...)
	var samples []seckill.RoomState
	admit := func() {
		st, err := e.Admit(ctx, s)
		if err != nil {
			t.Fatalf("Admit: %v", err)
		}
		samples = append(samples, st)
	}
	tickets := func() []seckill.Ticket {
		var out []seckill.Ticket
		for _, id := range all {
			tk, err := e.Ticket(ctx, s.ID, id)
			if err != nil {
				t.Fatalf("Ticket: %v", err)
			}
			out = append(out, tk)
		}
		return out
	}
	releaseAll := func() { // every admitted place ends: only max_active's bound is lifted
		for _, tk := range tickets() {
			if tk.State == seckill.TicketAdmitted {
				if err := e.Release(ctx, s.ID, tk.Entrant, time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	admit()
	releaseAll()
	admit()
	releaseAll()
	r := mustBuy(t, e, s.ID, "buyer", 1, "", seckill.StatusHeld)
	mustPay(t, e, r.ID, "pay-1", r.AmountCents, seckill.PaymentApplied)
	clock.Advance(time.Second)
	admit()
	if _, _, err := e.AddStock(ctx, s.ID, 1); err != nil {
		t.Fatal(err)
	}
	admit()

	final := tickets()
	obs := seckilltest.RoomObservation{Tickets: final, MaxActive: 5}
	closedAt := int64(-1)
	for _, st := range samples {
		obs.Samples = append(obs.Samples, seckilltest.RoomSample{State: st, ClosedAdmitted: closedAt})
		if st.Closed != "" && closedAt < 0 {
			closedAt = st.Admitted
		}
	}
	admitted := slices.DeleteFunc(slices.Clone(final), func(tk seckill.Ticket) bool { return tk.State != seckill.TicketAdmitted })
	slices.SortFunc(admitted, func(a, b seckill.Ticket) int { return int(a.Index - b.Index) })
	var order []string
	for _, tk := range admitted {
		order = append(order, tk.Entrant)
	}
	return errors.Join(seckilltest.CheckAdmissionOrder(seed, pre, later, order), seckilltest.CheckRoom(obs))
}

// TestRoomDetectorsCatchBrokenScripts: the rooms suite's detectors pass this engine's room and
// catch it broken on purpose in the three ways issue 30 names: an order that is not the draw
// (the pre-queue scored by arrival), a double admission (the head read, not taken), and an
// admission after sold out (a room that forgets it closed, so a restock reopens it).
func TestRoomDetectorsCatchBrokenScripts(t *testing.T) {
	c := dialT(t, testenv.Redis(t))
	if err := roomDetectorScenario(t, c, nil); err != nil {
		t.Fatalf("the detectors refused the engine's own room: %v", err)
	}
	for _, tc := range []struct {
		name, file string
		fromTo     []string // pairs
	}{
		{"NotTheDraw", "room_join.lua", []string{"drawn, R.pre, score = 1, R.pre + 1, key", "drawn, R.pre = 1, R.pre + 1"}},
		{"DoubleAdmission", "room_admit.lua", []string{"redis.call('ZPOPMIN', KEYS[3], num(n))",
			"redis.call('ZRANGE', KEYS[3], 0, n - 1, 'WITHSCORES')"}},
		// Closing that neither stops the admissions nor forgets the queue.
		{"AdmitAfterSoldOut", "room_admit.lua", []string{"if R.closed ~= 0 or now < S.starts then", "if now < S.starts then",
			"    redis.call('UNLINK', KEYS[3])", "    -- kept"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := newRoomScriptSet(func(name string) string {
				src := scriptSource(name)
				if name == tc.file {
					for i := 0; i < len(tc.fromTo); i += 2 {
						if !strings.Contains(src, tc.fromTo[i]) {
							t.Fatalf("%s no longer contains %q", name, tc.fromTo[i])
						}
						src = strings.Replace(src, tc.fromTo[i], tc.fromTo[i+1], 1)
					}
				}
				return src
			})
			err := roomDetectorScenario(t, c, broken)
			if err == nil {
				t.Fatalf("the detectors found nothing wrong with %s", tc.name)
			}
			t.Logf("caught: %v", err)
		})
	}
}
