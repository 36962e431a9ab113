package client

import (
	"io"
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
	// Around the buffer and the bound, with either line end: a line of up to maxEventBytes
	// (its end aside) is read whole, a longer one refused, and EOF inside a long line is EOF.
	for _, end := range []string{"\n", "\r\n"} {
		for _, n := range []int{sseBufferBytes - 1, sseBufferBytes, sseBufferBytes + 1, 2 * sseBufferBytes, maxEventBytes, maxEventBytes + 1} {
			line := "data: " + strings.Repeat("c", n-len("data: "))
			s := newSSEReader(strings.NewReader(line + end + end + "event: ticket" + end + "data: {}" + end + end))
			_, err := s.next()
			switch {
			case n <= maxEventBytes && err != nil:
				t.Fatalf("a line of %d bytes ending %q: %v", n, end, err)
			case n > maxEventBytes && (err == nil || !strings.Contains(err.Error(), "line over")):
				t.Fatalf("a line of %d bytes ending %q: %v, want refused", n, end, err)
			case n > maxEventBytes:
				continue
			}
			if got := s.data.Len(); got != n-len("data: ") {
				t.Fatalf("a line of %d bytes ending %q: %d bytes of data", n, end, got)
			}
			if ev, err := s.next(); err != nil || ev.Ticket == nil || s.data.String() != "{}" {
				t.Fatalf("after a line of %d bytes ending %q: %+v, %v, data %q", n, end, ev, err, s.data.Bytes())
			}
			if cap(s.long) > 2*sseBufferBytes {
				t.Fatalf("after a line of %d bytes the reader keeps %d bytes for long lines", n, cap(s.long))
			}
		}
	}
	if _, err := newSSEReader(strings.NewReader("data: " + strings.Repeat("d", 3*sseBufferBytes))).next(); err != io.EOF {
		t.Fatalf("EOF inside a long line: %v, want io.EOF", err)
	}
}
