package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

// TestWaitingRoomCreate: POST /api/v1/sales with a waiting_room creates the sale with it, and
// the create's answer and a read show it with the defaults filled; a sale without one shows
// none. Every bound of the room, just inside, is accepted by the server and by the OpenAPI
// document; just outside, it is 400 invalid_argument, changes nothing, and the document
// refuses it too (except opens_seconds past preheat_seconds, a rule across fields the document
// cannot state): so the document's bounds are the constants of room.go and bounds.go. The
// negative control of this detector is the inside half: the same checks pass there.
func TestWaitingRoomCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := newContract(raw)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body map[string]any) exchange {
		return exchange{Method: "POST", Target: "/api/v1/sales", HasBody: true, Body: mustMarshal(body),
			Header: http.Header{"Authorization": {admin()}, "Content-Type": {"application/json"}}}
	}
	docAccepts := func(body map[string]any) bool {
		ok, _ := doc.v.ValidateHttpRequest(post(body).request())
		return ok
	}
	// answerOnDocument fails unless x, answered r, is within the document (the answer's
	// waiting_room against the Sale schema's bounds).
	answerOnDocument := func(x exchange, r response) {
		t.Helper()
		x.Status, x.RespHeader, x.RespBody = r.Status, r.Header, r.Body
		if x.Header == nil {
			x.Header = http.Header{}
		}
		if bad := doc.check(x); len(bad) > 0 {
			t.Fatalf("%s %s: off the document: %v", x.Method, x.Target, bad)
		}
	}
	now := e.clock.Now()
	sale := func(id string, fields map[string]any) map[string]any {
		in := map[string]any{"id": id, "price_cents": 100, "stock": 5, "starts_at": now.Add(time.Hour), "ends_at": now.Add(2 * time.Hour)}
		maps.Copy(in, fields)
		return in
	}
	room := func(fields map[string]any) map[string]any {
		r := map[string]any{"admit_per_second": 5}
		for k, v := range fields {
			if v == nil {
				delete(r, k)
			} else {
				r[k] = v
			}
		}
		return r
	}
	def := func(p seckill.RoomPolicy) seckill.RoomPolicy { // the defaults of a room with admit_per_second 5
		if p.Order == "" {
			p.Order = seckill.RoomDraw
		}
		if p.TokenSeconds == 0 {
			p.TokenSeconds = seckill.DefaultTokenSeconds
		}
		return p
	}

	// Without a room: none in the answer or a read.
	r := e.do(t, "POST", "/api/v1/sales", admin(), sale("plain", nil))
	wantStatus(t, r, http.StatusCreated)
	if _, ok := r.fields(t)["waiting_room"]; ok {
		t.Fatalf("a sale created without a waiting room answers one: %s", r.Body)
	}
	if v := e.sale(t, "plain"); v.Room != nil {
		t.Fatalf("a sale created without a waiting room reads %+v", v.Room)
	}

	maxPre := map[string]any{"preheat_seconds": seckill.MaxPreheatSeconds}
	inside := []struct {
		sale, room map[string]any
		want       seckill.RoomPolicy
	}{
		{nil, nil, def(seckill.RoomPolicy{OpensSeconds: seckill.DefaultPreheatSeconds, AdmitPerSecond: 5})},
		{nil, map[string]any{"order": "fifo"}, def(seckill.RoomPolicy{Order: seckill.RoomFIFO, OpensSeconds: 300, AdmitPerSecond: 5})},
		{nil, map[string]any{"order": "draw"}, def(seckill.RoomPolicy{OpensSeconds: 300, AdmitPerSecond: 5})},
		{nil, map[string]any{"opens_seconds": 0}, def(seckill.RoomPolicy{AdmitPerSecond: 5})},
		{nil, map[string]any{"opens_seconds": 300}, def(seckill.RoomPolicy{OpensSeconds: 300, AdmitPerSecond: 5})},
		{maxPre, map[string]any{"opens_seconds": seckill.MaxPreheatSeconds},
			def(seckill.RoomPolicy{OpensSeconds: seckill.MaxPreheatSeconds, AdmitPerSecond: 5})},
		{map[string]any{"preheat_seconds": 0}, nil, def(seckill.RoomPolicy{AdmitPerSecond: 5})},
		{nil, map[string]any{"admit_per_second": 1}, def(seckill.RoomPolicy{OpensSeconds: 300, AdmitPerSecond: 1})},
		{nil, map[string]any{"admit_per_second": seckill.MaxAdmitPerSecond},
			def(seckill.RoomPolicy{OpensSeconds: 300, AdmitPerSecond: seckill.MaxAdmitPerSecond})},
		{nil, map[string]any{"admit_per_second": nil, "max_active": 1}, def(seckill.RoomPolicy{OpensSeconds: 300, MaxActive: 1})},
		{nil, map[string]any{"admit_per_second": 0, "max_active": seckill.MaxQuantity},
			def(seckill.RoomPolicy{OpensSeconds: 300, MaxActive: seckill.MaxQuantity})},
		{nil, map[string]any{"token_seconds": seckill.MinTokenSeconds},
			def(seckill.RoomPolicy{OpensSeconds: 300, AdmitPerSecond: 5, TokenSeconds: seckill.MinTokenSeconds})},
		{nil, map[string]any{"token_seconds": seckill.MaxTokenSeconds},
			def(seckill.RoomPolicy{OpensSeconds: 300, AdmitPerSecond: 5, TokenSeconds: seckill.MaxTokenSeconds})},
		{nil, map[string]any{"pow_bits": 0}, def(seckill.RoomPolicy{OpensSeconds: 300, AdmitPerSecond: 5})},
		{nil, map[string]any{"pow_bits": seckill.MaxPowBits}, def(seckill.RoomPolicy{OpensSeconds: 300, AdmitPerSecond: 5, PowBits: seckill.MaxPowBits})},
		{map[string]any{"segments": 1}, nil, def(seckill.RoomPolicy{OpensSeconds: 300, AdmitPerSecond: 5})},
	}
	for i, c := range inside {
		id := fmt.Sprintf("room%d", i)
		body := sale(id, c.sale)
		body["waiting_room"] = room(c.room)
		if !docAccepts(body) {
			t.Fatalf("the document refuses %s", mustMarshal(body))
		}
		r := e.do(t, "POST", "/api/v1/sales", admin(), body)
		wantStatus(t, r, http.StatusCreated)
		answerOnDocument(post(body), r)
		answerOnDocument(exchange{Method: "GET", Target: "/api/v1/sales/" + id}, e.do(t, "GET", "/api/v1/sales/"+id, "", nil))
		var created struct {
			Room *seckill.RoomPolicy `json:"waiting_room"`
		}
		r.decode(t, &created)
		if created.Room == nil || *created.Room != c.want {
			t.Fatalf("created with %s: answered %+v, want %+v", mustMarshal(body), created.Room, c.want)
		}
		if v := e.sale(t, id); v.Room == nil || *v.Room != c.want {
			t.Fatalf("created with %s: read %+v, want %+v", mustMarshal(body), v.Room, c.want)
		}
	}

	// The list shows each room as created (its definitions come from the database).
	r = e.do(t, "GET", "/api/v1/sales?all=true&limit=100", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	var list struct {
		Sales []struct {
			ID   string              `json:"id"`
			Room *seckill.RoomPolicy `json:"waiting_room"`
		} `json:"sales"`
	}
	r.decode(t, &list)
	listed := map[string]*seckill.RoomPolicy{}
	for _, v := range list.Sales {
		listed[v.ID] = v.Room
	}
	if got, ok := listed["plain"]; !ok || got != nil {
		t.Fatalf("the list shows the sale without a room with %+v (listed: %t)", got, ok)
	}
	for i, c := range inside {
		if got := listed[fmt.Sprintf("room%d", i)]; got == nil || *got != c.want {
			t.Fatalf("the list shows room%d with %+v, want %+v", i, got, c.want)
		}
	}

	outside := []struct {
		sale, room map[string]any
		docRefuses bool
	}{
		{nil, map[string]any{"order": "random"}, true},
		{nil, map[string]any{"order": ""}, true}, // the document's enum refuses it; so does the edge
		{nil, map[string]any{"order": "FIFO"}, true},
		{nil, map[string]any{"order": 1}, true},
		{nil, map[string]any{"opens_seconds": -1}, true},
		{nil, map[string]any{"opens_seconds": seckill.DefaultPreheatSeconds + 1}, false}, // past preheat_seconds
		{map[string]any{"preheat_seconds": 0}, map[string]any{"opens_seconds": 1}, false},
		{maxPre, map[string]any{"opens_seconds": seckill.MaxPreheatSeconds + 1}, true},
		{nil, map[string]any{"opens_seconds": 1.5}, true},
		{nil, map[string]any{"admit_per_second": -1}, true},
		{nil, map[string]any{"admit_per_second": seckill.MaxAdmitPerSecond + 1}, true},
		{nil, map[string]any{"admit_per_second": 0}, true}, // neither bound above 0
		{nil, map[string]any{"admit_per_second": nil}, true},
		{nil, map[string]any{"admit_per_second": 0, "max_active": 0}, true},
		{nil, map[string]any{"max_active": -1}, true},
		{nil, map[string]any{"max_active": seckill.MaxQuantity + 1}, true},
		{nil, map[string]any{"token_seconds": seckill.MinTokenSeconds - 1}, true},
		{nil, map[string]any{"token_seconds": 0}, true},
		{nil, map[string]any{"token_seconds": seckill.MaxTokenSeconds + 1}, true},
		{nil, map[string]any{"pow_bits": -1}, true},
		{nil, map[string]any{"pow_bits": seckill.MaxPowBits + 1}, true},
		{nil, map[string]any{"surprise": 1}, true},
		{map[string]any{"segments": 2}, nil, true}, // a sale with a waiting room has one segment
	}
	for _, c := range outside {
		body := sale("room-bad", c.sale)
		body["waiting_room"] = room(c.room)
		if docRefuses := !docAccepts(body); docRefuses != c.docRefuses {
			t.Fatalf("the document refuses %s: %t, want %t", mustMarshal(body), docRefuses, c.docRefuses)
		}
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "POST", "/api/v1/sales", admin(), body)
		})
		e.refused(t, http.StatusNotFound, seckill.CodeNotFound, func() response { return e.do(t, "GET", "/api/v1/sales/room-bad", "", nil) })
	}
	for _, bad := range []string{`"yes"`, `[]`, `5`, `{"admit_per_second":5,"order":"draw"`} {
		body := bytes.Replace(mustMarshal(sale("room-bad", nil)), []byte(`"id":`), []byte(`"waiting_room":`+bad+`,"id":`), 1)
		if json.Valid(body) && docAccepts(mustUnmarshal(t, body)) {
			t.Fatalf("the document accepts %s", body)
		}
		e.refused(t, http.StatusBadRequest, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "POST", "/api/v1/sales", admin(), body)
		})
	}
}

func mustUnmarshal(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
