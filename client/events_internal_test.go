package client

import (
	"strings"
	"testing"
)

// A stream's lines longer than its read buffer are put together (up to maxEventBytes) and
// longer ones refused; the buffer itself stays small.
func TestSSEReaderLongLines(t *testing.T) {
	pad := strings.Repeat("a", 3*sseBufferBytes)
	long := `{"sale_id":"s1","state":"waiting","position":7,"pad":"` + pad + `"}`
	in := "event: ticket\r\ndata: " + long + "\r\n\r\n: ping\n\nevent: ticket\ndata: {\"state\":\"sold_out\"}\n\n"
	s := newSSEReader(strings.NewReader(in))
	if n := s.r.Size(); n != sseBufferBytes {
		t.Fatalf("read buffer of %d bytes, want %d", n, sseBufferBytes)
	}
	ev, err := s.next()
	if err != nil || ev.Ticket == nil || ev.Ticket.SaleID != "s1" || ev.Ticket.Position != 7 {
		t.Fatalf("the long event: %+v, %v", ev.Ticket, err)
	}
	if ev, err := s.next(); err != nil || ev.Ticket == nil || ev.Ticket.State != "sold_out" {
		t.Fatalf("the event after it: %+v, %v", ev, err)
	}

	tooLong := "event: ticket\ndata: " + strings.Repeat("b", maxEventBytes+1) + "\n\n"
	if ev, err := newSSEReader(strings.NewReader(tooLong)).next(); err == nil || !strings.Contains(err.Error(), "line over") {
		t.Fatalf("a line over %d bytes: %+v, %v; want refused", maxEventBytes, ev, err)
	}
	// Exactly at the bound is still an event's line (its data is then too large to be a
	// ticket's, but it is read).
	atBound := "data: " + strings.Repeat("c", maxEventBytes-len("data: ")) + "\n\n"
	if _, err := newSSEReader(strings.NewReader(atBound)).next(); err != nil {
		t.Fatalf("a line of %d bytes: %v", maxEventBytes, err)
	}
}
