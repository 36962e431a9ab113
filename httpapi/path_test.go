package httpapi_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
)

// TestPurchasePath covers GET /sales/{id}/path: hidden before the start (425) and after the end
// (410), and while active the user's own absolute buy path, valid until the sale ends.
func TestPurchasePath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := t0.Add(time.Hour)
	sale := e.createSale(t, "s1", map[string]any{"starts_at": start, "ends_at": start.Add(time.Hour)})
	pathOf := func(user string) response {
		return e.do(t, "GET", "/api/v1/sales/s1/path", e.user(t, user), nil)
	}

	e.refused(t, http.StatusTooEarly, seckill.CodeNotStarted, func() response { return pathOf("alice") })
	e.clock.Set(start.Add(-time.Millisecond))
	e.refused(t, http.StatusTooEarly, seckill.CodeNotStarted, func() response { return pathOf("alice") })

	e.clock.Set(start) // starts_at is inclusive
	r := pathOf("alice")
	wantStatus(t, r, http.StatusOK)
	var p client.PurchasePath
	r.decode(t, &p)
	if ok, _ := regexp.MatchString(`^/api/v1/sales/s1/buy/[A-Za-z0-9_-]{43}$`, p.Path); !ok {
		t.Fatalf("path = %q, want /api/v1/sales/s1/buy/<43 base64url characters>", p.Path)
	}
	if !p.ExpiresAt.Equal(sale.EndsAt) {
		t.Fatalf("expires_at = %s, want ends_at %s", p.ExpiresAt, sale.EndsAt)
	}
	if f := r.fields(t); len(f) != 2 || f["path"] == nil || f["expires_at"] == nil {
		t.Fatalf("path answer %s: want exactly path and expires_at", r.Body)
	}
	// The token is stable for a user (any instance, any time) and differs between users.
	e.clock.Advance(30 * time.Minute)
	if again := e.path(t, "alice", "s1"); again != p.Path {
		t.Fatalf("path changed over time: %q then %q", p.Path, again)
	}
	if bob := e.path(t, "bob", "s1"); bob == p.Path {
		t.Fatalf("alice and bob got the same path %q", bob)
	}
	wantStatus(t, e.buy(t, "alice", p.Path, nil, ""), http.StatusCreated)

	e.clock.Set(sale.EndsAt) // ends_at is exclusive
	e.refused(t, http.StatusGone, seckill.CodeEnded, func() response { return pathOf("alice") })
	e.refused(t, http.StatusGone, seckill.CodeEnded, func() response { return pathOf("carol") })

	e.refused(t, http.StatusNotFound, seckill.CodeNotFound, func() response {
		return e.do(t, "GET", "/api/v1/sales/nope/path", e.user(t, "alice"), nil)
	})
}

// TestPurchasePathSoldOut: /path answers 200 for an active sale even when nothing is left
// (docs/API.md); the buy then says sold_out.
func TestPurchasePathSoldOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "empty", map[string]any{"stock": 0})
	e.createSale(t, "one", map[string]any{"stock": 1})
	res := e.mustBuy(t, "alice", "one", http.StatusCreated)
	e.wantResult(t, succeeded(e.pay(t, "alice", res.ID).PaymentID, res), seckill.PaymentApplied)
	for _, id := range []string{"empty", "one"} {
		if st := e.sale(t, id).Status; st != seckill.SaleSoldOut {
			t.Fatalf("sale %s status %q, want sold_out", id, st)
		}
		p := e.path(t, "bob", id)
		e.refused(t, http.StatusConflict, seckill.CodeSoldOut, func() response { return e.buy(t, "bob", p, nil, "") })
	}
}

// TestPurchaseTokenBinding: a token works only for its own user and sale; any other use is 403
// invalid_token, and changes nothing.
func TestPurchaseTokenBinding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", nil)
	e.createSale(t, "s2", nil)
	alice1 := e.path(t, "alice", "s1")
	token := alice1[strings.LastIndexByte(alice1, '/')+1:]
	cases := map[string]struct{ user, path string }{
		"other user":        {"bob", alice1},
		"other sale":        {"alice", "/api/v1/sales/s2/buy/" + token},
		"truncated":         {"alice", alice1[:len(alice1)-1]},
		"altered":           {"alice", alice1[:len(alice1)-1] + string("AB"[min(1, strings.Count(alice1[len(alice1)-1:], "A"))])},
		"padded base64":     {"alice", alice1 + "="},
		"upper case":        {"alice", "/api/v1/sales/s1/buy/" + strings.ToUpper(token)},
		"empty-ish":         {"alice", "/api/v1/sales/s1/buy/x"},
		"other user's path": {"alice", e.path(t, "bob", "s1")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e.refused(t, http.StatusForbidden, seckill.CodeInvalidToken, func() response {
				return e.buy(t, c.user, c.path, map[string]int{"quantity": 1}, "")
			})
		})
	}
	// A token for an unknown sale: the sale check comes first, 404.
	e.refused(t, http.StatusNotFound, seckill.CodeNotFound, func() response {
		return e.buy(t, "alice", "/api/v1/sales/nope/buy/"+token, nil, "")
	})
	// The right user on the right sale still works afterwards.
	wantStatus(t, e.buy(t, "alice", alice1, nil, ""), http.StatusCreated)
}
