package httpapi_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

// listPage is one answer of GET /api/v1/sales.
type listPage struct {
	Sales      []service.SaleView `json:"sales"`
	NextCursor string             `json:"next_cursor"`
	ServerTime time.Time          `json:"server_time"`
}

// walkList reads every page of the list at query (limit, status, all) and answers the ids in
// the order given, failing on a page larger than limit or an error.
func (e *env) walkList(t *testing.T, query url.Values, auth string, limit int) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("walk of %v: more than 100 pages", query)
		}
		r := e.do(t, "GET", "/api/v1/sales?"+query.Encode(), auth, nil)
		wantStatus(t, r, http.StatusOK)
		var p listPage
		r.decode(t, &p)
		if len(p.Sales) > limit {
			t.Fatalf("page of %d sales at limit %d", len(p.Sales), limit)
		}
		for _, v := range p.Sales {
			ids = append(ids, v.ID)
		}
		if p.NextCursor == "" {
			return ids
		}
		query.Set("cursor", p.NextCursor)
	}
}

// TestListPagesByStartAndFilters: the list pages in (starts_at, id) order, every filter and
// all=true walk to exactly the sales they name, and the last page has no next_cursor.
func TestListPagesByStartAndFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.clock.Now()
	// Created out of order, two with the same start (the id breaks the tie), one unlisted.
	at := func(d time.Duration) time.Time { return now.Add(d) }
	e.createSale(t, "up-b", map[string]any{"starts_at": at(2 * time.Hour), "ends_at": at(3 * time.Hour)})
	e.createSale(t, "old", map[string]any{"starts_at": now, "ends_at": at(time.Minute)})
	e.createSale(t, "up-a", map[string]any{"starts_at": at(2 * time.Hour), "ends_at": at(3 * time.Hour)})
	e.createSale(t, "sell-1", map[string]any{"starts_at": now, "ends_at": at(time.Hour)})
	e.createSale(t, "hidden", map[string]any{"starts_at": at(time.Second), "ends_at": at(time.Hour), "listed": false})
	e.createSale(t, "sell-2", map[string]any{"starts_at": at(30 * time.Second), "ends_at": at(time.Hour)})
	e.createSale(t, "up-c", map[string]any{"starts_at": at(90 * time.Minute), "ends_at": at(3 * time.Hour)})
	e.clock.Advance(2 * time.Minute) // "old" has ended; "sell-*" and "hidden" sell

	for _, c := range []struct {
		status string
		all    bool
		want   []string
	}{
		{"", false, []string{"old", "sell-1", "sell-2", "up-c", "up-a", "up-b"}},
		{"", true, []string{"old", "sell-1", "hidden", "sell-2", "up-c", "up-a", "up-b"}},
		{"upcoming", false, []string{"up-c", "up-a", "up-b"}},
		{"selling", false, []string{"sell-1", "sell-2"}},
		{"selling", true, []string{"sell-1", "hidden", "sell-2"}},
		{"ended", false, []string{"old"}},
	} {
		for _, limit := range []int{1, 2, 3, 100} {
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			auth := ""
			if c.status != "" {
				q.Set("status", c.status)
			}
			if c.all {
				q.Set("all", "true")
				auth = admin()
			}
			if got := e.walkList(t, q, auth, limit); !slices.Equal(got, c.want) {
				t.Errorf("walk status=%q all=%v limit=%d: %v, want %v", c.status, c.all, limit, got, c.want)
			}
		}
	}
	// Without a limit, a page holds up to DefaultListLimit.
	var p listPage
	e.do(t, "GET", "/api/v1/sales", "", nil).decode(t, &p)
	if len(p.Sales) != 6 || p.NextCursor != "" || !p.ServerTime.Equal(e.clock.Now()) {
		t.Fatalf("default page: %d sales, next %q, server_time %v", len(p.Sales), p.NextCursor, p.ServerTime)
	}
}

// TestListRefusesWhatIsNotOurs: a limit out of 1..100, an unknown status and every cursor the
// list did not answer for this query are 400 invalid_argument, and change nothing.
func TestListRefusesWhatIsNotOurs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, id := range []string{"a", "b", "c"} {
		e.createSale(t, id, nil)
	}
	var first listPage
	e.do(t, "GET", "/api/v1/sales?limit=1", "", nil).decode(t, &first)
	var firstAll listPage
	e.do(t, "GET", "/api/v1/sales?limit=1&all=true", admin(), nil).decode(t, &firstAll)
	if first.NextCursor == "" || firstAll.NextCursor == "" {
		t.Fatal("no next_cursor on a first page of 3 sales at limit 1")
	}
	// The negative control: the cursor as answered opens the next page.
	var second listPage
	e.do(t, "GET", "/api/v1/sales?limit=1&cursor="+first.NextCursor, "", nil).decode(t, &second)
	if len(second.Sales) != 1 || second.Sales[0].ID != "b" {
		t.Fatalf("second page: %+v", second.Sales)
	}
	tampered := []byte(first.NextCursor)
	tampered[len(tampered)/2] ^= 1
	for _, q := range []string{
		"limit=0", "limit=101", "limit=-1", "limit=", "limit=abc", "limit=1e2", "limit=+5", "limit=99999999999999999999",
		"status=active", "status=sold_out", "status=Selling",
		"cursor=garbage", "cursor=" + string(tampered), "cursor=" + first.NextCursor + "A",
		"cursor=" + strings.Repeat("A", seckill.MaxListCursor+1),
		"cursor=" + first.NextCursor + "&status=upcoming", // answered for another filter
		"cursor=" + firstAll.NextCursor,                   // answered for all=true
		"cursor=" + url.QueryEscape(first.NextCursor+"="),
	} {
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "GET", "/api/v1/sales?"+q, "", nil)
		})
	}
	// A cursor answered for all=true is refused on the storefront's list, and the reverse.
	wantProblem(t, e.do(t, "GET", "/api/v1/sales?all=true&cursor="+first.NextCursor, admin(), nil), http.StatusBadRequest, seckill.CodeInvalidArgument)
}

// TestListETagAndCaching: an unchanged page answers 304 without a body to its ETag, also a
// second later (the clocks are not part of it); a change answers 200 with another ETag.
// Anonymous pages are public for a second; an admin's are not to be kept.
func TestListETagAndCaching(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "a", nil)
	e.createSale(t, "b", nil)
	r := e.do(t, "GET", "/api/v1/sales", "", nil)
	wantStatus(t, r, http.StatusOK)
	etag := r.Header.Get("ETag")
	if !strings.HasPrefix(etag, `W/"`) {
		t.Fatalf("ETag %q", etag)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "public, max-age=1, s-maxage=1, stale-while-revalidate=5" {
		t.Fatalf("Cache-Control %q", cc)
	}
	e.clock.Advance(time.Second)
	r = e.do(t, "GET", "/api/v1/sales", "", nil, "If-None-Match", etag)
	if r.Status != http.StatusNotModified || len(r.Body) != 0 || r.Header.Get("ETag") != etag {
		t.Fatalf("If-None-Match of the page: %d %q, ETag %q", r.Status, r.Body, r.Header.Get("ETag"))
	}
	// Another tag, or one of several: as RFC 9110 compares them.
	if r := e.do(t, "GET", "/api/v1/sales", "", nil, "If-None-Match", `W/"nope"`); r.Status != http.StatusOK {
		t.Fatalf("another tag: %d", r.Status)
	}
	if r := e.do(t, "GET", "/api/v1/sales", "", nil, "If-None-Match", `"x", `+strings.TrimPrefix(etag, "W/")); r.Status != http.StatusNotModified {
		t.Fatalf("a list of tags holding it: %d", r.Status)
	}
	// A change made here shows on the next page at once (the cache is emptied).
	wantStatus(t, e.do(t, "PATCH", "/api/v1/sales/b", admin(), map[string]any{"listed": false}), http.StatusOK)
	r = e.do(t, "GET", "/api/v1/sales", "", nil, "If-None-Match", etag)
	wantStatus(t, r, http.StatusOK)
	if r.Header.Get("ETag") == etag || strings.Contains(string(r.Body), `"id":"b"`) {
		t.Fatalf("after unlisting b: ETag %q (was %q), body %s", r.Header.Get("ETag"), etag, r.Body)
	}
	r = e.do(t, "GET", "/api/v1/sales?all=true", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	if cc := r.Header.Get("Cache-Control"); cc != "private, no-store" {
		t.Fatalf("admin's Cache-Control %q", cc)
	}
	// A page's ETag differs from another filter's page of other sales.
	r2 := e.do(t, "GET", "/api/v1/sales?status=upcoming", "", nil)
	wantStatus(t, r2, http.StatusOK)
	if r2.Header.Get("ETag") == r.Header.Get("ETag") {
		t.Fatal("an empty page and a full one share an ETag")
	}
	// An error is kept by no cache.
	r = e.do(t, "GET", "/api/v1/sales?limit=0", "", nil)
	wantProblem(t, r, http.StatusBadRequest, seckill.CodeInvalidArgument)
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("a refused page's Cache-Control %q", cc)
	}
}

// TestSaleETagAndCaching: a sale's answer is public for a second with an ETag of the sale and
// its stock, not of server_time: 304 to it a second later, 200 with another ETag once the
// stock changes. An admin gets the same answer (nothing in it is the caller's); an unknown
// sale's 404 is kept by no cache.
func TestSaleETagAndCaching(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "a", nil)
	r := e.do(t, "GET", "/api/v1/sales/a", "", nil)
	wantStatus(t, r, http.StatusOK)
	etag := r.Header.Get("ETag")
	if !strings.HasPrefix(etag, `W/"`) {
		t.Fatalf("ETag %q", etag)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "public, max-age=1, s-maxage=1, stale-while-revalidate=5" {
		t.Fatalf("Cache-Control %q", cc)
	}
	var first service.SaleView
	r.decode(t, &first)
	e.clock.Advance(time.Second)
	r = e.do(t, "GET", "/api/v1/sales/a", "", nil)
	wantStatus(t, r, http.StatusOK)
	var later service.SaleView
	r.decode(t, &later)
	if !later.ServerTime.After(first.ServerTime) || r.Header.Get("ETag") != etag {
		t.Fatalf("a second later: server_time %v (was %v), ETag %q (was %q)", later.ServerTime, first.ServerTime, r.Header.Get("ETag"), etag)
	}
	r = e.do(t, "GET", "/api/v1/sales/a", "", nil, "If-None-Match", etag)
	if r.Status != http.StatusNotModified || len(r.Body) != 0 || r.Header.Get("ETag") != etag || r.Header.Get("Cache-Control") == "" {
		t.Fatalf("If-None-Match of the sale: %d %q, ETag %q, Cache-Control %q", r.Status, r.Body, r.Header.Get("ETag"), r.Header.Get("Cache-Control"))
	}
	if r := e.do(t, "GET", "/api/v1/sales/a", "", nil, "If-None-Match", `W/"nope"`); r.Status != http.StatusOK {
		t.Fatalf("another tag: %d", r.Status)
	}
	// The admin's answer is the shopper's, byte for byte but the clock.
	r = e.do(t, "GET", "/api/v1/sales/a", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	if r.Header.Get("ETag") != etag || r.Header.Get("Vary") != "" {
		t.Fatalf("admin's answer: ETag %q (shopper's %q), Vary %q", r.Header.Get("ETag"), etag, r.Header.Get("Vary"))
	}
	// The stock changes: another ETag, and the old one answers 200.
	wantStatus(t, e.do(t, "POST", "/api/v1/sales/a/stock", admin(), map[string]any{"add": 1}), http.StatusOK)
	r = e.do(t, "GET", "/api/v1/sales/a", "", nil, "If-None-Match", etag)
	wantStatus(t, r, http.StatusOK)
	if r.Header.Get("ETag") == etag {
		t.Fatal("restocked sale kept its ETag")
	}
	r = e.do(t, "GET", "/api/v1/sales/nope", "", nil)
	wantProblem(t, r, http.StatusNotFound, seckill.CodeNotFound)
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" || r.Header.Get("ETag") != "" {
		t.Fatalf("404: Cache-Control %q, ETag %q", cc, r.Header.Get("ETag"))
	}
}
