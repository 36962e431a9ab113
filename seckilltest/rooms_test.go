package seckilltest

import (
	"context"
	"strings"
	"testing"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/memory"
)

// The negative controls of the rooms suite's detectors: each takes what a correct run
// observes and breaks it the way a faulty engine would; the detector must say so.

func TestCheckAdmissionOrderCatchesAnOrderThatIsNotTheDraw(t *testing.T) {
	seed := []byte("seed")
	pre := []string{seckill.EntrantID("s", "a"), seckill.EntrantID("s", "b"), seckill.EntrantID("s", "c")}
	later := []string{seckill.EntrantID("s", "d")}
	good := append(seckill.DrawOrder(seed, pre), later...)
	if err := CheckAdmissionOrder(seed, pre, later, good); err != nil {
		t.Fatalf("the draw's own order refused: %v", err)
	}
	if err := CheckAdmissionOrder(seed, pre, later, good[:2]); err != nil {
		t.Fatalf("a prefix of the draw refused: %v", err)
	}
	swapped := []string{good[1], good[0], good[2], good[3]}
	if err := CheckAdmissionOrder(seed, pre, later, swapped); err == nil || !strings.Contains(err.Error(), "not the published draw") {
		t.Fatalf("two swapped admissions: %v", err)
	}
	arrival := append(append([]string{}, pre...), later...) // FIFO instead of the draw
	if slicesEqual(arrival, good) {
		t.Fatal("the draw equals arrival order for this seed: choose another, or this control shows nothing")
	}
	if err := CheckAdmissionOrder(seed, pre, later, arrival); err == nil {
		t.Fatal("arrival order passed for the draw")
	}
	if err := CheckAdmissionOrder(seed, pre, later, append(good, good[0])); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("an admission more than the entrants: %v", err)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func TestCheckRoomCatchesFaults(t *testing.T) {
	tk := func(e string, i int64) seckill.Ticket {
		return seckill.Ticket{Entrant: e, State: seckill.TicketAdmitted, Index: i}
	}
	sample := func(admitted, active int64, closedAdmitted int64) RoomSample {
		return RoomSample{State: seckill.RoomState{Admitted: admitted, Active: active}, ClosedAdmitted: closedAdmitted}
	}
	good := RoomObservation{
		Tickets:   []seckill.Ticket{tk("a", 1), tk("b", 2), tk("c", 3), {Entrant: "d", State: seckill.TicketWaiting, Index: 4}},
		Samples:   []RoomSample{sample(2, 2, -1), sample(3, 2, -1), sample(3, 0, 3)},
		MaxActive: 2,
	}
	if err := CheckRoom(good); err != nil {
		t.Fatalf("a correct observation refused: %v", err)
	}
	for name, c := range map[string]struct {
		break_ func(o *RoomObservation)
		want   string
	}{
		"double admission": {func(o *RoomObservation) { o.Tickets[3] = tk("d", 2); o.Samples[1].State.Admitted = 4 }, "both admitted"},
		"counted twice":    {func(o *RoomObservation) { o.Samples[1].State.Admitted = 4 }, "counted 4"},
		"gap":              {func(o *RoomObservation) { o.Tickets[2].Index = 5 }, "no admission at index 3"},
		"max_active":       {func(o *RoomObservation) { o.Samples[0].State.Active = 3 }, "above max_active"},
		"after sold out": {func(o *RoomObservation) {
			o.Tickets[3] = tk("d", 4)
			o.Samples = append(o.Samples, sample(4, 1, 3))
		}, "after the room was seen closed"},
	} {
		t.Run(name, func(t *testing.T) {
			o := good
			o.Tickets = append([]seckill.Ticket{}, good.Tickets...)
			o.Samples = append([]RoomSample{}, good.Samples...)
			c.break_(&o)
			if err := CheckRoom(o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckRoom = %v, want an error about %q", err, c.want)
			}
		})
	}
}

// drawBlind is the memory engine with a fault: it ignores the draw key, so the pre-queue is
// in entrant id order instead of the draw's.
type drawBlind struct{ *memory.Engine }

func (d drawBlind) Join(ctx context.Context, s seckill.Sale, e string, _ uint64) (seckill.Ticket, error) {
	return d.Engine.Join(ctx, s, e, 0)
}

// TestRoomConcurrencyCatchesABrokenDraw runs the concurrency scenario on an engine that
// ignores the draw: it must fail, where the same engine without the fault passes (the memory
// engine's own run of the suite).
func TestRoomConcurrencyCatchesABrokenDraw(t *testing.T) {
	clock := NewManualClock(epoch)
	err := runRoomConcurrency(t, drawBlind{memory.New(clock)}, clock)
	if err == nil || !strings.Contains(err.Error(), "not the published draw") {
		t.Fatalf("runRoomConcurrency on an engine that ignores the draw = %v, want the draw's order refused", err)
	}
}

// tellsAtOnce is the memory engine with a fault: AdmitUntold tells every admission at once
// (what the admitter did before admissions waited for the journal).
type tellsAtOnce struct{ *memory.Engine }

func (e tellsAtOnce) AdmitUntold(ctx context.Context, s seckill.Sale) (seckill.RoomState, seckill.UntoldAdmissions, error) {
	st, err := e.Engine.Admit(ctx, s)
	return st, seckill.UntoldAdmissions{First: st.Admitted + 1}, err
}

// TestRoomTellCatchesAnAdmissionToldAtOnce: the rule "Tell" fails on an engine that tells an
// admission before the journal holds it.
func TestRoomTellCatchesAnAdmissionToldAtOnce(t *testing.T) {
	err := checkRoomTell(t, func(t *testing.T, clock seckill.Clock) RoomEngine { return tellsAtOnce{memory.New(clock)} })
	if err == nil || !strings.Contains(err.Error(), "AdmitUntold answered untold") {
		t.Fatalf("checkRoomTell on an engine that tells at once = %v, want its untold admissions refused", err)
	}
}
