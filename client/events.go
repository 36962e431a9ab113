package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"

	"github.com/seckill-go/seckill"
)

// Event is one event of a sale's live stream (docs/API.md, Live events): the sale as it is
// now (Type "sale": on connect, then whenever its status or stock changes), or one of the
// caller's reservations (Type "reservation": on connect, then whenever it changes).
type Event struct {
	Type        string               // EventSale or EventReservation
	Sale        *Sale                // with EventSale
	Reservation *seckill.Reservation // with EventReservation
	Ticket      *Ticket              // with EventTicket (RoomEvents)
}

// Event types.
const (
	EventSale        = "sale"
	EventReservation = "reservation"
	EventTicket      = "ticket"
)

// maxEventBytes bounds one event's data: a sale or a reservation is well under 1 KiB.
const maxEventBytes = 64 << 10

// sseBufferBytes is a stream's read buffer, which holds any line of a usual event: a longer
// line (up to maxEventBytes) is put together in the reader's own buffer. A buffer of
// maxEventBytes per stream cost a load generator that follows 50 000 streams 3 GiB.
const sseBufferBytes = 4 << 10

// Events is GET /api/v1/sales/{id}/events, the sale's live stream, as a sequence of events.
// reservationIDs (at most 8) add the caller's reservations of this sale to it, and need a
// user's token; others' are silently left out. Events of kinds this client does not know are
// skipped.
//
// The sequence ends when ctx is done (without an error), or after yielding one error: the
// connect's *Error (not_found, rate_limited with RetryAfter: the user's streams are at their
// bound…), a broken connection's, or io.EOF when the server closed the stream (it shuts down,
// or this reader fell 16 events behind). Reconnect to go on, or poll Sale and Reservation. A
// stream lasts: give the client an http.Client without a Timeout (WithHTTPClient).
func (c *Client) Events(ctx context.Context, saleID string, reservationIDs ...string) iter.Seq2[Event, error] {
	path := salePath(saleID) + "/events"
	if len(reservationIDs) > 0 {
		path += "?" + url.Values{"reservation": reservationIDs}.Encode()
	}
	return c.stream(ctx, path)
}

// stream is GET path as a stream of Server-Sent Events: the events of kinds this client knows,
// then one error as Events says (none when ctx is done).
func (c *Client) stream(ctx context.Context, path string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		resp, err := c.send(ctx, func() (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
			if err == nil {
				req.Header.Set("Accept", "text/event-stream")
			}
			return req, err
		})
		if err != nil {
			if ctx.Err() == nil {
				yield(Event{}, err)
			}
			return
		}
		defer resp.Body.Close()
		s := newSSEReader(resp.Body)
		for {
			ev, err := s.next()
			if err != nil {
				if ctx.Err() == nil {
					yield(Event{}, err)
				}
				return
			}
			if ev.Type != "" && !yield(ev, nil) {
				return
			}
		}
	}
}

// sseReader reads Server-Sent Events: "event:" and "data:" lines up to a blank line; comments
// (": ping") and "retry:" are skipped.
type sseReader struct {
	r    *bufio.Reader
	data bytes.Buffer
	long []byte // a line longer than r's buffer, put together
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, sseBufferBytes)}
}

// line reads the next line, with its end, of at most maxEventBytes; it is valid until the
// next call.
func (s *sseReader) line() ([]byte, error) {
	if cap(s.long) > 2*sseBufferBytes {
		s.long = nil // a stream keeps no large buffer for one long line it once read
	}
	line, err := s.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	s.long = append(s.long[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(s.long) > maxEventBytes {
			return nil, fmt.Errorf("seckill: live events: a line over %d bytes", maxEventBytes)
		}
		line, err = s.r.ReadSlice('\n')
		s.long = append(s.long, line...)
	}
	if len(bytes.TrimRight(s.long, "\r\n")) > maxEventBytes { // its end aside
		return nil, fmt.Errorf("seckill: live events: a line over %d bytes", maxEventBytes)
	}
	return s.long, err
}

// next returns the next event; its Type is "" for an event of another kind.
func (s *sseReader) next() (Event, error) {
	var kind string
	s.data.Reset()
	for {
		line, err := s.line()
		if err != nil {
			return Event{}, err // io.EOF: the server closed the stream
		}
		line = bytes.TrimRight(line, "\r\n")
		switch field, value, _ := bytes.Cut(line, []byte(":")); {
		case len(line) == 0:
			if s.data.Len() > 0 || kind != "" {
				return s.decode(kind)
			}
		case len(field) == 0: // a comment
		case string(field) == "event":
			kind = string(bytes.TrimPrefix(value, []byte(" ")))
		case string(field) == "data":
			if s.data.Len() > 0 {
				s.data.WriteByte('\n')
			}
			s.data.Write(bytes.TrimPrefix(value, []byte(" ")))
			if s.data.Len() > maxEventBytes {
				return Event{}, fmt.Errorf("seckill: live events: an event over %d bytes", maxEventBytes)
			}
		}
	}
}

// decode is the event of kind whose data has been read.
func (s *sseReader) decode(kind string) (Event, error) {
	ev := Event{Type: kind}
	var err error
	switch kind {
	case EventSale:
		ev.Sale = new(Sale)
		err = json.Unmarshal(s.data.Bytes(), ev.Sale)
	case EventReservation:
		ev.Reservation = new(seckill.Reservation)
		err = json.Unmarshal(s.data.Bytes(), ev.Reservation)
	case EventTicket:
		ev.Ticket = new(Ticket)
		err = json.Unmarshal(s.data.Bytes(), ev.Ticket)
	default:
		return Event{}, nil
	}
	if err != nil {
		return Event{}, fmt.Errorf("seckill: live events: a %s event: %w", kind, err)
	}
	return ev, nil
}
