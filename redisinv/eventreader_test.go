package redisinv

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill/events"
)

// TestEventReaderSegments: `seckill events replay` and `tail` read a segmented sale's events
// from every segment's stream, merged in the order Redis wrote them. Buyers buy one at a time,
// 2 ms apart (entries of different streams written in the same millisecond have equal ids), the
// clock a millisecond on after each (so that the events' times give the order they were
// written in): first 4 of segment 2, then 1 of segment 0, then the four segments in turn. A
// reader from the start, in pages of 3 entries per stream, returns every hold once and in
// order; a reader from the newest entries ("$") returns only what came after its first read.
// Negative controls: a reader that sees segment 0's stream only (as before segments) misses
// the other segments' holds, and the detector says so; the same streams merged in pages
// without cutting them where the first full page ends put segment 0's first entry before
// segment 2's fourth, and the order check says so.
func TestEventReaderSegments(t *testing.T) {
	for name, url := range segURLs(t) {
		t.Run(name, func(t *testing.T) {
			r := newSegRig(t, url, 4, 80, 1, 0)
			var want, all []string
			buy := func(users []string) {
				for _, u := range users {
					res, err := r.buy(u)
					if err != nil {
						t.Fatal(err)
					}
					want, all = append(want, res.Reservation.ID), append(all, res.Reservation.ID)
					r.clock.Advance(time.Millisecond)
					time.Sleep(2 * time.Millisecond) // stream ids have a millisecond's resolution
				}
			}
			buy(r.usersOf(2, 4, "v")) // a page of 3 of segment 2 ends before segment 0's first entry
			buy(r.usersOf(0, 1, "v"))
			for i := range 6 {
				for seg := range 4 {
					buy(r.usersOf(seg, 6, "u")[i : i+1])
				}
			}
			if p := readerProblems(t, r.e.NewEventReader(r.sale.ID, "0-0", "+"), want); len(p) > 0 {
				t.Fatalf("from the start: %v", p)
			}
			tail := r.e.NewEventReader(r.sale.ID, "$", "+")
			if evs, err := tail.Next(t.Context(), 256, 0); err != nil || len(evs) > 0 {
				t.Fatalf("a tail's first read: %d events (%v), want none", len(evs), err)
			}
			want = want[:0]
			for seg := range 4 {
				buy(r.usersOf(seg, 7, "u")[6:])
			}
			if p := readerProblems(t, tail, want); len(p) > 0 {
				t.Fatalf("the tail: %v", p)
			}

			// Negative control: an instance that takes the sale for one stream.
			one := New(r.e.rdb, WithPrefix(r.e.prefix), WithTestClock(r.clock))
			t.Cleanup(func() { _ = one.Close() })
			one.streamCounts.Store(r.sale.ID, 1)
			p := readerProblems(t, one.NewEventReader(r.sale.ID, "0-0", "+"), all)
			if len(p) == 0 {
				t.Fatal("a reader of segment 0's stream only: the detector found nothing")
			}
			t.Logf("caught: %s", p[0])

			// Negative control of the cut: the same streams merged a page of 3 per stream at
			// a time without it read segment 0's first entry before segment 2's fourth.
			var streams [][]events.Event
			for _, tag := range r.e.segs.tagsOf(r.sale.ID, r.n) {
				entries, err := r.e.rdb.Do(t.Context(), r.e.rdb.B().Xrange().Key(r.e.streamKey(tag)).Start("-").End("+").Build()).AsXRangeSlices()
				if err != nil {
					t.Fatal(err)
				}
				var evs []events.Event
				for _, en := range entries {
					evs = append(evs, r.e.exported(r.sale.ID, en.ID, en.FieldValues)...)
				}
				streams = append(streams, evs)
			}
			var uncut []events.Event
			for k := 0; ; k += 3 {
				var page []events.Event
				for _, evs := range streams {
					page = append(page, evs[min(k, len(evs)):min(k+3, len(evs))]...)
				}
				if len(page) == 0 {
					break
				}
				slices.SortStableFunc(page, func(a, b events.Event) int { return a.At.Compare(b.At) })
				uncut = append(uncut, page...)
			}
			if p := eventProblems(uncut, all); len(p) == 0 {
				t.Fatal("pages merged without the cut: the detector found nothing")
			} else {
				t.Logf("caught without the cut: %s", p[0])
			}
		})
	}
}

// readerProblems reads rd to the end in pages of 3 entries per stream and lists what is wrong:
// a reservation of want whose hold was not read, or read twice, an event of a reservation not
// in want, and an event read before one that happened earlier.
func readerProblems(t *testing.T, rd *EventReader, want []string) []string {
	t.Helper()
	var got []events.Event
	for {
		evs, err := rd.Next(t.Context(), 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		if rd.Done() {
			break
		}
		got = append(got, evs...)
	}
	return eventProblems(got, want)
}

// eventProblems is readerProblems' detector, on the events read in order.
func eventProblems(got []events.Event, want []string) []string {
	var out []string
	seen := map[string]int{}
	for i, ev := range got {
		seen[ev.ReservationID]++
		if i > 0 && ev.At.Before(got[i-1].At) {
			out = append(out, fmt.Sprintf("event %d (%s at %s) read after one at %s", i, ev.ReservationID, ev.At, got[i-1].At))
		}
	}
	for _, id := range want {
		if seen[id] != 1 {
			out = append(out, fmt.Sprintf("reservation %s: its hold read %d times", id, seen[id]))
		}
		delete(seen, id)
	}
	for id := range seen {
		out = append(out, "an event of "+id+", not one of the reservations bought")
	}
	return out
}
