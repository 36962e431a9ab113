package natssink

import (
	"testing"

	"github.com/seckill-go/seckill/events"
)

// TestWave: a wave is the longest run of consecutive events of distinct reservations, at most
// maxWave, so that no reservation ever has two events in flight.
func TestWave(t *testing.T) {
	ev := func(rs ...string) []events.Event {
		out := make([]events.Event, len(rs))
		for i, r := range rs {
			out[i] = events.Event{ReservationID: r}
		}
		return out
	}
	for _, c := range []struct {
		rs   []string
		want int
	}{
		{[]string{"a"}, 1},
		{[]string{"a", "b", "c"}, 3},
		{[]string{"a", "b", "a", "c"}, 2},
		{[]string{"a", "a"}, 1},
	} {
		if got := wave(ev(c.rs...)); got != c.want {
			t.Errorf("wave(%v) = %d, want %d", c.rs, got, c.want)
		}
	}
	many := make([]string, maxWave+10)
	for i := range many {
		many[i] = string(rune(0x4e00 + i))
	}
	if got := wave(ev(many...)); got != maxWave {
		t.Errorf("wave of %d distinct reservations = %d, want %d", len(many), got, maxWave)
	}
}
