package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill/httpapi"
)

// hotView is the answer of GET /api/v1/hot.
type hotView struct {
	Hot       int      `json:"hot"`
	Sales     []string `json:"sales"`
	ColdCache struct {
		Entries int `json:"entries"`
		Max     int `json:"max"`
	} `json:"cold_cache"`
	Cooled uint64 `json:"cooled"`
	Loaded uint64 `json:"loaded"`
}

// TestHotStatus: GET /api/v1/hot is admin only (401 anonymous, 403 for a user); it counts a
// sale on now and not one starting in two days (its 300 s preheat is far off), and the other
// way round two days later (the negative control: the count follows the clock, not the sales
// made); it names at most httpapi.HotListed of them, in the sale list's order, and counts them
// all. Without a cold hook (the memory engine) the cold side is zeros; every answer is what
// the OpenAPI document says.
func TestHotStatus(t *testing.T) {
	e := newEnv(t)
	get := func(auth string) (response, hotView) {
		t.Helper()
		r := e.do(t, "GET", "/api/v1/hot", auth, nil)
		var v hotView
		if r.Status == http.StatusOK {
			r.decode(t, &v)
			checkAgainstDocument(t, e.srv.URL, "hotStatus", "/api/v1/hot")
		}
		return r, v
	}
	if r, _ := get(""); r.Status != http.StatusUnauthorized {
		t.Fatalf("anonymous: %s, want 401", r)
	}
	if r, _ := get(e.user(t, "alice")); r.Status != http.StatusForbidden {
		t.Fatalf("a user: %s, want 403", r)
	}
	if r, v := get(admin()); r.Status != http.StatusOK || v.Hot != 0 || v.Sales == nil || len(v.Sales) != 0 {
		t.Fatalf("no sale yet: %s, want 200 with hot 0 and an empty list", r)
	}

	now := e.clock.Now()
	e.createSale(t, "on-now", nil)
	e.createSale(t, "in-two-days", map[string]any{"starts_at": now.Add(48 * time.Hour), "ends_at": now.Add(49 * time.Hour)})
	r, v := get(admin())
	if r.Status != http.StatusOK || v.Hot != 1 || !slices.Equal(v.Sales, []string{"on-now"}) {
		t.Fatalf("a sale on now and one in two days: %s, want hot 1: [on-now]", r)
	}
	if v.ColdCache.Entries != 0 || v.ColdCache.Max != 0 || v.Cooled != 0 || v.Loaded != 0 {
		t.Fatalf("without a cold hook: %s, want zeros", r)
	}

	// Two days and a minute later the first has left its window (an hour long, 60 s holds,
	// plus a minute) and the second is on.
	e.clock.Advance(48*time.Hour + time.Minute)
	if r, v := get(admin()); v.Hot != 1 || !slices.Equal(v.Sales, []string{"in-two-days"}) {
		t.Fatalf("two days later: %s, want hot 1: [in-two-days]", r)
	}

	// The list is bounded, the count is not: 100 more hot sales, starting after in-two-days.
	e.clock.Advance(time.Second)
	want := []string{"in-two-days"}
	for i := range httpapi.HotListed {
		id := fmt.Sprintf("bulk-%03d", i)
		e.createSale(t, id, nil)
		want = append(want, id)
	}
	r, v = get(admin())
	if v.Hot != httpapi.HotListed+1 || !slices.Equal(v.Sales, want[:httpapi.HotListed]) {
		t.Fatalf("%d hot sales: hot %d, %d listed (first %v, last %v); want hot %d, the first %d in the list's order",
			httpapi.HotListed+1, v.Hot, len(v.Sales), v.Sales[:1], v.Sales[len(v.Sales)-1:], httpapi.HotListed+1, httpapi.HotListed)
	}
}

// TestHotStatusCold: with a cold hook (the Redis engine's, cmd/seckill wires it) the answer
// carries what it reports, field by field.
func TestHotStatusCold(t *testing.T) {
	e := newEnv(t, withServer(func(c *httpapi.Config) {
		c.Cold = func() httpapi.ColdView { return httpapi.ColdView{Entries: 12, Max: 10_000, Cooled: 5, Loaded: 2} }
	}))
	e.createSale(t, "on-now", nil)
	r := e.do(t, "GET", "/api/v1/hot", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	var got map[string]any
	r.decode(t, &got)
	want := map[string]any{"hot": 1.0, "sales": []any{"on-now"}, "cold_cache": map[string]any{"entries": 12.0, "max": 10000.0}, "cooled": 5.0, "loaded": 2.0}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Fatalf("GET /api/v1/hot: %s, want %s", g, w)
	}
	checkAgainstDocument(t, e.srv.URL, "hotStatus", "/api/v1/hot")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkAgainstDocument: the admin's answer to GET target is what the served OpenAPI document
// says of operation op (additionalProperties is false there: a field it does not name fails).
func checkAgainstDocument(t *testing.T, url, op, target string) {
	t.Helper()
	_, raw := fetch(t, url+"/openapi.json", "")
	c, err := newContract(raw)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := fetch(t, url+target, adminToken)
	x := exchange{Op: op, Method: "GET", Target: target, Header: resp.Request.Header,
		Status: resp.StatusCode, RespHeader: resp.Header, RespBody: body}
	if bad := c.check(x); len(bad) > 0 {
		t.Fatalf("GET %s against the document: %v\n%s", target, bad, body)
	}
}
