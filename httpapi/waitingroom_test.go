package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/admission"
	"github.com/seckill-go/seckill/pow"
	"github.com/seckill-go/seckill/service"
)

// The waiting room from the outside (docs/API.md "The waiting room"): the memory engine, the
// service's admitter running on the test clock, and only HTTP calls.

// roomWait bounds how long a test waits for the admitter (a real ticker over the manual
// clock) to act on a clock step: a bound against a hang, never a timing assertion.
const roomWait = 20 * time.Second

// runAdmitter runs the service's admitter every few milliseconds until the test ends.
func runAdmitter(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.svc.Admitter(2 * time.Millisecond).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// roomSale creates a sale starting at start with a waiting room (room's fields over defaults:
// draw order, opening with the preheat, 600 s before the start).
func roomSale(t *testing.T, e *env, id string, start time.Time, room map[string]any, fields map[string]any) service.SaleView {
	t.Helper()
	r := map[string]any{"order": "draw", "admit_per_second": 1000}
	for k, v := range room {
		if v == nil {
			delete(r, k)
		} else {
			r[k] = v
		}
	}
	f := map[string]any{"starts_at": start, "ends_at": start.Add(time.Hour), "preheat_seconds": 600, "waiting_room": r}
	for k, v := range fields {
		f[k] = v
	}
	return e.createSale(t, id, f)
}

func (e *env) roomView(t testing.TB, saleID string) service.RoomView {
	t.Helper()
	r := e.do(t, "GET", "/api/v1/sales/"+saleID+"/waiting-room", "", nil)
	wantStatus(t, r, http.StatusOK)
	var v service.RoomView
	r.decode(t, &v)
	return v
}

func (e *env) join(t testing.TB, user, saleID string) service.TicketView {
	t.Helper()
	r := e.do(t, "POST", "/api/v1/sales/"+saleID+"/waiting-room/join", e.user(t, user), nil)
	wantStatus(t, r, http.StatusOK)
	var v service.TicketView
	r.decode(t, &v)
	return v
}

func (e *env) ticket(t testing.TB, user, saleID string) service.TicketView {
	t.Helper()
	r := e.do(t, "GET", "/api/v1/sales/"+saleID+"/waiting-room/ticket", e.user(t, user), nil)
	wantStatus(t, r, http.StatusOK)
	var v service.TicketView
	r.decode(t, &v)
	return v
}

// waitTicket polls the user's ticket until ok holds (bounded by roomWait).
func (e *env) waitTicket(t testing.TB, user, saleID string, ok func(service.TicketView) bool) service.TicketView {
	t.Helper()
	deadline := time.Now().Add(roomWait)
	for {
		v := e.ticket(t, user, saleID)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticket of %s in %s never reached the state wanted; last %+v", user, saleID, v)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitAdmitted polls the room until its serving counter reaches n.
func (e *env) waitAdmitted(t testing.TB, saleID string, n int64) service.RoomView {
	t.Helper()
	deadline := time.Now().Add(roomWait)
	for {
		v := e.roomView(t, saleID)
		if v.Admitted >= n {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("room of %s: admitted %d, never %d", saleID, v.Admitted, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func isAdmitted(v service.TicketView) bool { return v.State == seckill.TicketAdmitted }

// TestRoomJoinIdempotent: joining answers one ticket however often; the room shows its policy,
// its commitment (and no seed) before the start; a sale without a room has none.
func TestRoomJoinIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := t0.Add(5 * time.Minute)
	roomSale(t, e, "r1", start, map[string]any{"max_active": 3, "token_seconds": 60}, nil)
	e.createSale(t, "plain", nil)

	first := e.join(t, "alice", "r1")
	if first.State != seckill.TicketPreQueue || !first.Drawn || first.Entrant != seckill.EntrantID("r1", "alice") {
		t.Fatalf("first join: %+v", first)
	}
	e.clock.Advance(time.Second)
	for range 3 {
		again := e.join(t, "alice", "r1")
		if again.Entrant != first.Entrant || !again.JoinedAt.Equal(first.JoinedAt) || again.State != first.State {
			t.Fatalf("join again: %+v, first %+v", again, first)
		}
	}
	v := e.roomView(t, "r1")
	if v.Entrants != 1 || v.PreQueue != 1 || v.Seed != nil || len(v.Commitment) != 64 || v.Order != seckill.RoomDraw ||
		v.MaxActive != 3 || v.TokenSeconds != 60 || !v.OpensAt.Equal(start.Add(-600*time.Second)) || v.Closed != nil {
		t.Fatalf("room before the start: %+v", v)
	}
	// Cacheable like the sale: a weak ETag and a 304.
	r := e.do(t, "GET", "/api/v1/sales/r1/waiting-room", "", nil)
	if cc := r.Header.Get("Cache-Control"); !strings.Contains(cc, "s-maxage=1") {
		t.Fatalf("Cache-Control %q", cc)
	}
	if r2 := e.do(t, "GET", "/api/v1/sales/r1/waiting-room", "", nil, "If-None-Match", r.Header.Get("ETag")); r2.Status != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", r2.Status)
	}
	wantProblem(t, e.do(t, "POST", "/api/v1/sales/plain/waiting-room/join", e.user(t, "alice"), nil), http.StatusNotFound, seckill.CodeNotFound)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/r1/waiting-room/ticket", e.user(t, "bob"), nil), http.StatusNotFound, seckill.CodeNotFound)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/r1/waiting-room/entrants", "", nil), http.StatusTooEarly, seckill.CodeNotStarted)
	wantProblem(t, e.do(t, "POST", "/api/v1/sales/r1/waiting-room/join", "", nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
}

// TestRoomAdmissionGuardsPath: /path of a room sale needs the admission token of this user
// and sale that has not expired; the buy then needs nothing more.
func TestRoomAdmissionGuardsPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runAdmitter(t, e)
	start := t0.Add(time.Minute)
	roomSale(t, e, "ra", start, map[string]any{"token_seconds": 30}, nil)
	roomSale(t, e, "rb", start, nil, nil)
	e.join(t, "alice", "ra")
	e.join(t, "alice", "rb")
	e.join(t, "bob", "ra")
	e.clock.Set(start)
	alice := e.waitTicket(t, "alice", "ra", isAdmitted)
	if alice.AdmissionToken == "" || alice.AdmissionExpiresAt == nil || !alice.AdmissionExpiresAt.Equal(alice.Admitted.Add(30*time.Second)) {
		t.Fatalf("admitted ticket: %+v", alice)
	}
	aliceB := e.waitTicket(t, "alice", "rb", isAdmitted)
	bob := e.waitTicket(t, "bob", "ra", isAdmitted)
	pathWith := func(user, sale, token string) response {
		var h []string
		if token != "" {
			h = []string{"Seckill-Admission", token}
		}
		return e.do(t, "GET", "/api/v1/sales/"+sale+"/path", e.user(t, user), nil, h...)
	}
	forged := admission.New(admission.Key([]byte("another-secret-0123456789abcdef")), "ra", "alice", *alice.AdmissionExpiresAt)
	for name, r := range map[string]func() response{
		"none":          func() response { return pathWith("alice", "ra", "") },
		"garbage":       func() response { return pathWith("alice", "ra", "not-a-token") },
		"forged":        func() response { return pathWith("alice", "ra", forged) },
		"another user":  func() response { return pathWith("alice", "ra", bob.AdmissionToken) },
		"another sale":  func() response { return pathWith("alice", "ra", aliceB.AdmissionToken) },
		"huge":          func() response { return pathWith("alice", "ra", strings.Repeat("1", 4000)) },
		"stranger, own": func() response { return pathWith("carol", "ra", alice.AdmissionToken) },
	} {
		t.Run(name, func(t *testing.T) { e.refused(t, http.StatusForbidden, seckill.CodeAdmissionRequired, r) })
	}
	r := pathWith("alice", "ra", alice.AdmissionToken)
	wantStatus(t, r, http.StatusOK)
	var p struct{ Path string }
	r.decode(t, &p)
	wantStatus(t, e.buy(t, "alice", p.Path, nil, ""), http.StatusCreated)

	// Expired: at admitted_at + token_seconds the token no longer opens the path (the path
	// handed out before stays valid: it is the purchase token's, until the sale ends).
	e.clock.Set(*bob.AdmissionExpiresAt)
	e.refused(t, http.StatusForbidden, seckill.CodeAdmissionRequired, func() response { return pathWith("bob", "ra", bob.AdmissionToken) })
	if v := e.ticket(t, "bob", "ra"); v.AdmissionToken != "" || v.State != seckill.TicketAdmitted {
		t.Fatalf("lapsed admission still hands out a token: %+v", v)
	}
	// A sale without a room ignores the header.
	e.createSale(t, "plain", nil)
	wantStatus(t, pathWith("alice", "plain", "whatever"), http.StatusOK)
}

// drawRecipe is the buyer's verification of docs/API.md "Verifying the draw", from the public
// endpoints only: the seed against the commitment, the entrant list, the order. It returns
// the draw's order, or an error naming the step that failed.
func drawRecipe(e *env, t testing.TB, saleID string) ([]string, error) {
	v := e.roomView(t, saleID)
	if v.Seed == nil {
		return nil, fmt.Errorf("no seed published")
	}
	seed, err := hex.DecodeString(*v.Seed)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	if seckill.RoomCommitment(seed) != v.Commitment {
		return nil, fmt.Errorf("the seed does not match the commitment")
	}
	var all []string
	after := ""
	for {
		q := "/api/v1/sales/" + saleID + "/waiting-room/entrants?limit=7"
		if after != "" {
			q += "&after=" + after
		}
		r := e.do(t, "GET", q, "", nil)
		if r.Status != http.StatusOK {
			return nil, fmt.Errorf("entrants: %s", r)
		}
		var page struct {
			Entrants []string
			Next     string
		}
		r.decode(t, &page)
		all = append(all, page.Entrants...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if int64(len(all)) != v.PreQueue {
		return nil, fmt.Errorf("entrant list has %d, the room says %d", len(all), v.PreQueue)
	}
	return seckill.DrawOrder(seed, all), nil
}

// TestRoomDrawVerifiable: the recipe a buyer runs — the revealed seed matches the commitment
// published before the start, and DrawOrder(seed, entrants) is the order in which the room
// admitted the pre-queue, one at a time. Later arrivals come after, in arrival order. The
// negative controls: a seed that is not the committed one fails the check, and the order
// another seed gives is not the admission order (so the comparison can fail).
func TestRoomDrawVerifiable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runAdmitter(t, e)
	start := t0.Add(time.Minute)
	roomSale(t, e, "fair", start, map[string]any{"admit_per_second": 1}, map[string]any{"stock": 100, "per_user_limit": 1})
	const n = 12
	users := make([]string, n)
	byEntrant := map[string]string{}
	for i := range users {
		users[i] = fmt.Sprintf("buyer%02d", i)
		e.join(t, users[i], "fair")
		byEntrant[seckill.EntrantID("fair", users[i])] = users[i]
	}
	commitment := e.roomView(t, "fair").Commitment
	if _, err := drawRecipe(e, t, "fair"); err == nil {
		t.Fatal("the recipe ran before the start")
	}
	e.clock.Set(start)
	late := []string{"late1", "late2"}
	for _, u := range late {
		if v := e.join(t, u, "fair"); v.Drawn || v.State != seckill.TicketWaiting {
			t.Fatalf("a join after the start: %+v", v)
		}
	}
	// One admission per second of the test clock: the admission order, as it happens.
	var admitted []string
	for i := range n + len(late) {
		if i > 0 {
			e.clock.Advance(time.Second)
		}
		e.waitAdmitted(t, "fair", int64(i+1))
		for _, u := range append(slices.Clone(users), late...) {
			if slices.Contains(admitted, u) {
				continue
			}
			if v := e.ticket(t, u, "fair"); v.State == seckill.TicketAdmitted {
				admitted = append(admitted, u)
			}
		}
		if len(admitted) != i+1 {
			t.Fatalf("after %d admissions %d tickets are admitted: %v", i+1, len(admitted), admitted)
		}
	}
	v := e.roomView(t, "fair")
	if v.Commitment != commitment {
		t.Fatalf("the commitment changed at the start: %s then %s", commitment, v.Commitment)
	}
	order, err := drawRecipe(e, t, "fair")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, 0, n+len(late))
	for _, id := range order {
		want = append(want, byEntrant[id])
	}
	want = append(want, late...)
	if !slices.Equal(admitted, want) {
		t.Fatalf("admission order %v\nthe draw's          %v", admitted, want)
	}
	// Each buyer's own check: their ticket's index is their place in the recomputed order.
	for i, u := range want {
		if tk := e.ticket(t, u, "fair"); tk.Index != int64(i+1) {
			t.Fatalf("%s: index %d, place in the draw %d", u, tk.Index, i+1)
		}
	}
	// Negative controls.
	other := make([]byte, 32)
	if seckill.RoomCommitment(other) == v.Commitment {
		t.Fatal("a zero seed matches the commitment")
	}
	ids := slices.Collect(func(yield func(string) bool) {
		for id := range byEntrant {
			if !yield(id) {
				return
			}
		}
	})
	wrong := seckill.DrawOrder(other, ids)
	wrongUsers := make([]string, 0, n)
	for _, id := range wrong {
		wrongUsers = append(wrongUsers, byEntrant[id])
	}
	if slices.Equal(wrongUsers, admitted[:n]) {
		t.Fatal("another seed's order equals the admission order: the comparison could not fail")
	}
}

// TestRoomReleaseFreesPlaces: with max_active 1 the next entrant is admitted only once the
// admitted one has an outcome: a refused buy frees the place at once, a hold keeps it until it
// ends (here: cancelled), a payment frees it.
func TestRoomReleaseFreesPlaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runAdmitter(t, e)
	start := t0.Add(time.Minute)
	roomSale(t, e, "one", start, map[string]any{"admit_per_second": nil, "max_active": 1, "token_seconds": 600},
		map[string]any{"stock": 5, "per_user_limit": 1})
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		e.join(t, u, "one")
	}
	e.clock.Set(start)
	e.waitAdmitted(t, "one", 1)
	first := admittedUser(t, e, "one", []string{"u1", "u2", "u3", "u4"})
	buyAdmitted := func(u string, status int) seckill.Reservation {
		tk := e.waitTicket(t, u, "one", isAdmitted)
		r := e.do(t, "GET", "/api/v1/sales/one/path", e.user(t, u), nil, "Seckill-Admission", tk.AdmissionToken)
		wantStatus(t, r, http.StatusOK)
		var p struct{ Path string }
		r.decode(t, &p)
		b := e.buy(t, u, p.Path, nil, "")
		wantStatus(t, b, status)
		var res seckill.Reservation
		b.decode(t, &res)
		return res
	}
	hold := buyAdmitted(first, http.StatusCreated)
	if v := e.roomView(t, "one"); v.Admitted != 1 || v.Active != 1 {
		t.Fatalf("a hold keeps the place: %+v", v)
	}
	// Cancelled: the place is free, the next is admitted.
	wantStatus(t, e.do(t, "DELETE", "/api/v1/reservations/"+hold.ID, e.user(t, first), nil), http.StatusOK)
	e.waitAdmitted(t, "one", 2)
	// The first buys again (a hold), and pays: that frees nothing more (its place ended), but
	// the second's payment frees the second's place.
	rest := slices.DeleteFunc([]string{"u1", "u2", "u3", "u4"}, func(u string) bool { return u == first })
	second := admittedUser(t, e, "one", rest)
	h2 := buyAdmitted(second, http.StatusCreated)
	e.wantResult(t, succeeded(e.pay(t, second, h2.ID).PaymentID, h2), seckill.PaymentApplied)
	e.waitAdmitted(t, "one", 3)
	// A refusal frees the place at once: the third buys twice, the second buy is refused
	// (limit_exceeded), which releases its place... after the hold it took first is paid.
	third := admittedUser(t, e, "one", slices.DeleteFunc(slices.Clone(rest), func(u string) bool { return u == second }))
	wantProblem(t, e.buy(t, second, e.pathAdmitted(t, second, "one"), nil, ""), http.StatusConflict, seckill.CodeLimitExceeded)
	if v := e.roomView(t, "one"); v.Active != 1 {
		t.Fatalf("the second's refusal (its place had ended) changed the third's: %+v", v)
	}
	h3 := buyAdmitted(third, http.StatusCreated)
	wantStatus(t, e.do(t, "DELETE", "/api/v1/reservations/"+h3.ID, e.user(t, third), nil), http.StatusOK)
	e.waitAdmitted(t, "one", 4)
}

// pathAdmitted is the user's purchase path of a room sale, with the admission of their ticket.
func (e *env) pathAdmitted(t testing.TB, user, saleID string) string {
	t.Helper()
	tk := e.ticket(t, user, saleID)
	r := e.do(t, "GET", "/api/v1/sales/"+saleID+"/path", e.user(t, user), nil, "Seckill-Admission", tk.AdmissionToken)
	wantStatus(t, r, http.StatusOK)
	var p struct{ Path string }
	r.decode(t, &p)
	return p.Path
}

// admittedUser is the one user of users whose ticket is admitted and has not bought yet.
func admittedUser(t *testing.T, e *env, saleID string, users []string) string {
	t.Helper()
	var found []string
	for _, u := range users {
		if e.ticket(t, u, saleID).State == seckill.TicketAdmitted {
			found = append(found, u)
		}
	}
	if len(found) != 1 {
		t.Fatalf("admitted among %v: %v, want exactly one", users, found)
	}
	return found[0]
}

// TestRoomConcurrentJoins: many buyers join at once, each several times (under -race): every
// one has one ticket, the room counts each once, and the pre-queue's indexes at the start are
// 1..n, each once.
func TestRoomConcurrentJoins(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := t0.Add(time.Minute)
	roomSale(t, e, "crowd", start, nil, nil)
	const users, joins = 40, 3
	auth := make([]string, users)
	for u := range users {
		auth[u] = e.user(t, fmt.Sprintf("c%02d", u)) // tokens minted before the goroutines
	}
	var wg sync.WaitGroup
	type joined struct {
		user int
		v    service.TicketView
		err  error
	}
	out := make(chan joined, users*joins)
	for u := range users {
		for range joins {
			wg.Go(func() {
				r, err := e.tryDo("POST", "/api/v1/sales/crowd/waiting-room/join", auth[u], nil)
				if err == nil && r.Status != http.StatusOK {
					err = fmt.Errorf("join: %s", r)
				}
				var v service.TicketView
				if err == nil {
					r.decode(t, &v)
				}
				out <- joined{u, v, err}
			})
		}
	}
	wg.Wait()
	close(out)
	first := map[int]service.TicketView{}
	for j := range out {
		if j.err != nil {
			t.Fatal(j.err)
		}
		if f, ok := first[j.user]; ok && (f.Entrant != j.v.Entrant || !f.JoinedAt.Equal(j.v.JoinedAt)) {
			t.Fatalf("user %d got two tickets: %+v and %+v", j.user, f, j.v)
		}
		first[j.user] = j.v
	}
	if v := e.roomView(t, "crowd"); v.Entrants != users || v.PreQueue != users {
		t.Fatalf("room after %d×%d joins: %+v", users, joins, v)
	}
	e.clock.Set(start)
	seen := map[int64]bool{}
	for u := range users {
		tk := e.ticket(t, fmt.Sprintf("c%02d", u), "crowd")
		if tk.Index < 1 || tk.Index > users || seen[tk.Index] {
			t.Fatalf("ticket %+v: index out of 1..%d or taken twice", tk, users)
		}
		seen[tk.Index] = true
	}
}

// TestRoomBadInput: ids, limits, cursors, proofs and bodies out of bounds are problem+json
// and change nothing.
func TestRoomBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := t0.Add(time.Minute)
	roomSale(t, e, "rb", start, nil, nil)
	e.join(t, "alice", "rb")
	before := e.roomView(t, "rb")
	alice := e.user(t, "alice")
	cases := []struct {
		name   string
		status int
		code   seckill.Code
		send   func() response
	}{
		{"bad id view", 404, seckill.CodeNotFound, func() response { return e.do(t, "GET", "/api/v1/sales/a%20b/waiting-room", "", nil) }},
		{"long id join", 404, seckill.CodeNotFound, func() response {
			return e.do(t, "POST", "/api/v1/sales/"+strings.Repeat("x", 65)+"/waiting-room/join", e.user(t, "bob"), nil)
		}},
		{"unknown sale", 404, seckill.CodeNotFound, func() response { return e.do(t, "GET", "/api/v1/sales/nope/waiting-room", "", nil) }},
		{"limit 0", 400, seckill.CodeInvalidArgument, func() response { return e.do(t, "GET", "/api/v1/sales/rb/waiting-room/entrants?limit=0", "", nil) }},
		{"limit 1001", 400, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "GET", "/api/v1/sales/rb/waiting-room/entrants?limit=1001", "", nil)
		}},
		{"limit x", 400, seckill.CodeInvalidArgument, func() response { return e.do(t, "GET", "/api/v1/sales/rb/waiting-room/entrants?limit=x", "", nil) }},
		{"bad cursor", 400, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "GET", "/api/v1/sales/rb/waiting-room/entrants?after=ZZ", "", nil)
		}},
		{"body not JSON", 400, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "POST", "/api/v1/sales/rb/waiting-room/join", e.user(t, "bob"), "{")
		}},
		{"unknown field", 400, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "POST", "/api/v1/sales/rb/waiting-room/join", e.user(t, "bob"), map[string]any{"seat": 1})
		}},
		{"long proof", 400, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "POST", "/api/v1/sales/rb/waiting-room/join", e.user(t, "bob"),
				map[string]any{"pow": map[string]string{"challenge": strings.Repeat("c", 300), "solution": "1"}})
		}},
		{"huge body", 413, seckill.CodeTooLarge, func() response {
			return e.serve("POST", "/api/v1/sales/rb/waiting-room/join", e.user(t, "bob"),
				strings.NewReader(`{"pow":{"challenge":"`+strings.Repeat("c", httpapi.MaxBody)+`","solution":"1"}}`))
		}},
		{"no auth ticket", 401, seckill.CodeUnauthorized, func() response { return e.do(t, "GET", "/api/v1/sales/rb/waiting-room/ticket", "", nil) }},
		{"no auth stream", 401, seckill.CodeUnauthorized, func() response { return e.do(t, "GET", "/api/v1/sales/rb/waiting-room/events", "", nil) }},
		{"challenge without pow", 400, seckill.CodeInvalidArgument, func() response {
			return e.do(t, "GET", "/api/v1/sales/rb/waiting-room/challenge", alice, nil)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { e.refused(t, c.status, c.code, c.send) })
	}
	after := e.roomView(t, "rb")
	after.ServerTime, before.ServerTime = time.Time{}, time.Time{}
	if after != before {
		t.Fatalf("the room changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestRoomProofOfWork: a room with pow_bits needs a solved challenge of this user and sale on
// the first join (pow_required without, invalid_pow for another's or an unsolved one); a
// user who joined joins again without one.
func TestRoomProofOfWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := t0.Add(time.Minute)
	roomSale(t, e, "pw", start, map[string]any{"pow_bits": 8}, nil)
	roomSale(t, e, "pw2", start, map[string]any{"pow_bits": 8}, nil)
	challenge := func(user, sale string) service.RoomChallenge {
		r := e.do(t, "GET", "/api/v1/sales/"+sale+"/waiting-room/challenge", e.user(t, user), nil)
		wantStatus(t, r, http.StatusOK)
		var c service.RoomChallenge
		r.decode(t, &c)
		if c.Bits != 8 || c.Challenge == "" {
			t.Fatalf("challenge %+v", c)
		}
		return c
	}
	solve := func(c service.RoomChallenge) string {
		s, err := pow.Solve(context.Background(), c.Challenge, c.Bits)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	joinWith := func(user, sale string, body any) response {
		return e.do(t, "POST", "/api/v1/sales/"+sale+"/waiting-room/join", e.user(t, user), body)
	}
	proof := func(c service.RoomChallenge, sol string) map[string]any {
		return map[string]any{"pow": map[string]string{"challenge": c.Challenge, "solution": sol}}
	}
	e.refused(t, http.StatusForbidden, seckill.CodePowRequired, func() response { return joinWith("alice", "pw", nil) })
	bobs := challenge("bob", "pw")
	other := challenge("alice", "pw2")
	mine := challenge("alice", "pw")
	e.refused(t, http.StatusBadRequest, seckill.CodeInvalidPow, func() response { return joinWith("alice", "pw", proof(bobs, solve(bobs))) })
	e.refused(t, http.StatusBadRequest, seckill.CodeInvalidPow, func() response { return joinWith("alice", "pw", proof(other, solve(other))) })
	// An unsolved one: the first counter whose hash lacks the work.
	unsolved := ""
	for n := 1; unsolved == ""; n++ {
		sum := sha256.Sum256([]byte(mine.Challenge + ":" + fmt.Sprint(n)))
		if pow.LeadingZeroBits(sum[:]) < mine.Bits {
			unsolved = fmt.Sprint(n)
		}
	}
	e.refused(t, http.StatusBadRequest, seckill.CodeInvalidPow, func() response { return joinWith("alice", "pw", proof(mine, unsolved)) })
	// Expired: older than its window.
	e.clock.Advance(3 * time.Minute)
	e.refused(t, http.StatusBadRequest, seckill.CodeInvalidPow, func() response { return joinWith("alice", "pw", proof(mine, solve(mine))) })
	fresh := challenge("alice", "pw")
	r := joinWith("alice", "pw", proof(fresh, solve(fresh)))
	wantStatus(t, r, http.StatusOK)
	wantStatus(t, joinWith("alice", "pw", nil), http.StatusOK) // joined: no new proof
	if v := e.roomView(t, "pw"); v.Entrants != 1 || v.PowBits != 8 {
		t.Fatalf("room %+v", v)
	}
}
