package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seckill-go/seckill"
)

// FuzzAppendReservation: whatever appendReservation writes is byte for byte what json.Marshal
// writes for the same reservation; what it leaves to json.Marshal is a value with a string to
// escape or a time out of RFC 3339's range.
func FuzzAppendReservation(f *testing.F) {
	f.Add("s1-0000000000000001a1b2c3d4e5f60718", "s1", "alice", 1, "held", int64(1796300000123), int64(1796300060123), true, 0, int64(100), 0)
	f.Add("s1-x", "s1", "bob", 2, "queued", int64(0), int64(0), false, 3, int64(0), 3600)
	f.Add("<&>", "s\"1", "é", -1, "paid\n", int64(-62167219200001), int64(253402300800000), true, -1, int64(-5), -3600*25)
	f.Fuzz(func(t *testing.T, id, sale, user string, q int, status string, created, expires int64, held bool, pos int, amount int64, zone int) {
		loc := time.FixedZone("z", zone)
		r := seckill.Reservation{ID: id, SaleID: sale, UserID: user, Quantity: q, Status: seckill.ReservationStatus(status),
			Position: pos, AmountCents: amount, CreatedAt: time.UnixMilli(created).In(loc)}
		if held {
			e := time.UnixMilli(expires).UTC()
			r.ExpiresAt = &e
		}
		got, ok := appendReservation(nil, &r)
		want, err := json.Marshal(r)
		if !ok {
			// Leaving it to json.Marshal was needed: Marshal escapes a string, refuses a
			// time, writes a non-ASCII string (the fast path takes ASCII only), or drops the
			// seconds of a zone offset (which the fast path does not copy).
			_, off := r.CreatedAt.Zone()
			if err == nil && !bytes.ContainsRune(want, '\\') && utf8.RuneCount(want) == len(want) && off%60 == 0 {
				t.Fatalf("left to json.Marshal, which writes it plainly: %s", want)
			}
			return
		}
		if err != nil {
			t.Fatalf("appendReservation wrote %s; json.Marshal refuses: %v", got, err)
		}
		if string(got) != string(want) {
			t.Fatalf("appendReservation %s\njson.Marshal       %s", got, want)
		}
	})
}

// TestAppendReservationFallsBack: the values appendReservation must not write itself.
func TestAppendReservationFallsBack(t *testing.T) {
	base := seckill.Reservation{ID: "s-1", SaleID: "s", UserID: "u", Quantity: 1, Status: seckill.StatusHeld,
		CreatedAt: time.UnixMilli(1796300000123).UTC()}
	for name, r := range map[string]seckill.Reservation{
		"quote": func() seckill.Reservation { r := base; r.UserID = `u"`; return r }(),
		"html":  func() seckill.Reservation { r := base; r.SaleID = "a<b"; return r }(),
		"utf8":  func() seckill.Reservation { r := base; r.ID = "é"; return r }(),
		"year": func() seckill.Reservation {
			r := base
			r.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			return r
		}(),
		"seconds": func() seckill.Reservation {
			r := base
			r.CreatedAt = base.CreatedAt.In(time.FixedZone("x", 30))
			return r
		}(),
	} {
		if b, ok := appendReservation(nil, &r); ok {
			t.Errorf("%s: wrote %s itself", name, b)
		}
	}
	if _, ok := appendReservation(nil, &base); !ok {
		t.Fatal("refused a plain reservation")
	}
}

// FuzzAppendProblem: whatever appendProblem writes is byte for byte what json.Marshal writes
// for the same problem; what it leaves to json.Marshal has a string to escape (or non-ASCII).
func FuzzAppendProblem(f *testing.F) {
	f.Add("about:blank", "Conflict", 409, "sale s1 is sold out", "sold_out")
	f.Add("about:blank", "Too Many Requests", 429, "", "rate_limited")
	f.Add("x", "<&>", -1, "a \"quoted\"\n détail", "é")
	f.Fuzz(func(t *testing.T, typ, title string, status int, detail, code string) {
		p := Problem{Type: typ, Title: title, Status: status, Detail: detail, Code: seckill.Code(code)}
		got, ok := appendProblem(nil, &p)
		want := mustJSON(p)
		if !ok {
			if !bytes.ContainsRune(want, '\\') && utf8.RuneCount(want) == len(want) {
				t.Fatalf("left to json.Marshal, which writes it plainly: %s", want)
			}
			return
		}
		if string(got) != string(want) {
			t.Fatalf("appendProblem %s\njson.Marshal  %s", got, want)
		}
	})
}
