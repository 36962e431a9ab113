package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

var cursorFilters = []service.SaleFilter{service.FilterAny, service.FilterUpcoming, service.FilterSelling, service.FilterEnded}

// TestCursorRoundTripAndRefusals: a sealed cursor opens to its position for its own query
// only, and not under another key (another deployment's secret); every edit of it is refused.
func TestCursorRoundTripAndRefusals(t *testing.T) {
	c, other := newCursors([]byte("secret")), newCursors([]byte("another"))
	p := service.SalePosition{StartsAt: time.Date(2030, 1, 2, 3, 4, 5, 6_000_000, time.UTC), ID: strings.Repeat("x", seckill.MaxIDBytes)}
	for _, all := range []bool{false, true} {
		for _, f := range cursorFilters {
			s := c.seal(p, all, f)
			if len(s) > seckill.MaxListCursor {
				t.Fatalf("cursor of %d bytes, more than MaxListCursor", len(s))
			}
			got, err := c.open(s, all, f)
			if err != nil || !got.StartsAt.Equal(p.StartsAt) || got.ID != p.ID {
				t.Fatalf("open(seal(%v)) = %v, %v", p, got, err)
			}
			if _, err := other.open(s, all, f); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
				t.Fatalf("a cursor of another key: %v", err)
			}
			for _, all2 := range []bool{false, true} {
				for _, f2 := range cursorFilters {
					if all2 == all && f2 == f {
						continue
					}
					if _, err := c.open(s, all2, f2); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
						t.Fatalf("a cursor of all=%v status=%q opened for all=%v status=%q: %v", all, f, all2, f2, err)
					}
				}
			}
			// Every one-character edit is refused (the MAC covers every byte).
			for i := range len(s) {
				for _, ch := range []byte{'A', '_', '-', '0'} {
					if s[i] == ch {
						continue
					}
					edited := s[:i] + string(ch) + s[i+1:]
					if _, err := c.open(edited, all, f); seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
						t.Fatalf("edited cursor %q opened: %v", edited, err)
					}
				}
			}
		}
	}
}

// FuzzListCursor: open never panics, refuses with invalid_argument only, and what it opens is
// exactly a cursor it sealed (sealing it again gives the same string).
func FuzzListCursor(f *testing.F) {
	c := newCursors([]byte("secret"))
	f.Add(c.seal(service.SalePosition{StartsAt: time.Unix(1_900_000_000, 0), ID: "a"}, false, service.FilterAny), false, 0)
	f.Add(c.seal(service.SalePosition{StartsAt: seckill.MaxTime, ID: "sale-1"}, true, service.FilterEnded), true, 3)
	f.Add("", false, 0)
	f.Add("AQ", false, 1)
	f.Fuzz(func(t *testing.T, s string, all bool, filter int) {
		fl := cursorFilters[(filter%4+4)%4]
		p, err := c.open(s, all, fl)
		if err != nil {
			if seckill.ErrorCode(err) != seckill.CodeInvalidArgument {
				t.Fatalf("open(%q): %v, want invalid_argument", s, err)
			}
			return
		}
		if again := c.seal(p, all, fl); again != s {
			t.Fatalf("open(%q) = %v, sealed again %q", s, p, again)
		}
	})
}
