package seckill

import (
	"encoding/json"
	"testing"
	"time"
)

// TestRoomOrderEmptyRefused: "order": "" is refused as invalid_argument, as the OpenAPI
// document's enum refuses it; an omitted order is draw; unknown fields are still refused.
func TestRoomOrderEmptyRefused(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	make_ := func(room string) (Sale, error) {
		var in SaleInput
		body := `{"id":"s1","price_cents":100,"stock":5,"starts_at":"2030-01-01T01:00:00Z","waiting_room":` + room + `}`
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			return Sale{}, err
		}
		return NewSale(in, now)
	}
	if _, err := make_(`{"order":"","max_active":5}`); ErrorCode(err) != CodeInvalidArgument {
		t.Fatalf(`order "" = %v, want invalid_argument`, err)
	}
	s, err := make_(`{"max_active":5}`)
	if err != nil || s.Room == nil || s.Room.Order != RoomDraw {
		t.Fatalf("order omitted = %+v, %v; want draw", s.Room, err)
	}
	if s, err := make_(`{"order":"fifo","max_active":5,"opens_seconds":0}`); err != nil || s.Room.Order != RoomFIFO || s.Room.OpensSeconds != 0 {
		t.Fatalf("order fifo = %+v, %v", s.Room, err)
	}
	if _, err := make_(`{"order":"draw","max_active":5,"bogus":1}`); err == nil {
		t.Fatal("an unknown field in waiting_room was accepted")
	}
}
