package memory

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/seckilltest"
)

// TestRoomFull: a room holds at most maxRoomEntrants; a new join beyond is queue_full and
// changes nothing, while those already in still get their ticket.
func TestRoomFull(t *testing.T) {
	old := maxRoomEntrants
	maxRoomEntrants = 3
	t.Cleanup(func() { maxRoomEntrants = old })
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	e := New(seckilltest.NewManualClock(t0))
	stock := 5
	s, err := seckill.NewSale(seckill.SaleInput{ID: "full", PriceCents: new(int64), Stock: &stock,
		StartsAt: &t0, WaitingRoom: &seckill.RoomInput{AdmitPerSecond: 1}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.LoadSale(ctx, s, 0); err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"a", "b", "c", "d"} {
		_, err := e.Join(ctx, s, seckill.EntrantID(s.ID, u), 0)
		if want := i == 3; (seckill.ErrorCode(err) == seckill.CodeQueueFull) != want {
			t.Fatalf("join %d = %v; want queue_full only for the fourth", i+1, err)
		}
	}
	if _, err := e.Join(ctx, s, seckill.EntrantID(s.ID, "a"), 0); err != nil {
		t.Fatalf("joining again once full = %v; want the ticket", err)
	}
	if st, _ := e.Room(ctx, s.ID); st.Entrants != 3 {
		t.Fatalf("room = %+v; want 3 entrants", st)
	}
}
