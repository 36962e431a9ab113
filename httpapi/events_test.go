package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/service"
)

// sse is one open event stream, read by a goroutine of its own into events.
type sse struct {
	events chan sseMsg
	cancel context.CancelFunc
	done   chan struct{}
	header http.Header
}

type sseMsg struct {
	name string
	data string
}

// events opens GET /api/v1/sales/{id}/events with the query and auth, and fails unless it
// answers 200 text/event-stream.
func (e *env) events(t testing.TB, saleID, query, auth string) *sse {
	t.Helper()
	s, r := e.tryEvents(t, saleID, query, auth)
	if s == nil {
		t.Fatalf("events: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	return s
}

// tryEvents opens the stream like events; a stream that is refused (or not an event stream)
// is answered as a response instead, its body read.
func (e *env) tryEvents(t testing.TB, saleID, query, auth string) (*sse, response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/sales/"+saleID+"/events"+query, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := e.client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := response{Status: res.StatusCode, Header: res.Header}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		r.Body, _ = io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		return nil, r
	}
	return readSSE(t, res, cancel), r
}

// readSSE reads the stream res in a goroutine into an sse's events (cancel ends it), closed at
// the test's end.
func readSSE(t testing.TB, res *http.Response, cancel context.CancelFunc) *sse {
	s := &sse{events: make(chan sseMsg, 1024), cancel: cancel, done: make(chan struct{}), header: res.Header}
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.name != "" {
					s.events <- m
				}
				m = sseMsg{}
			case strings.HasPrefix(line, "event: "):
				m.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				m.data = line[len("data: "):]
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *sse) close() {
	s.cancel()
	<-s.done
}

// next waits for the next event named name (skipping others) whose data satisfies ok.
func (s *sse) next(t testing.TB, name string, ok func(data string) bool) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, open := <-s.events:
			if !open {
				t.Fatalf("stream ended while waiting for a %s event", name)
			}
			if m.name == name && ok(m.data) {
				return m.data
			}
		case <-deadline:
			t.Fatalf("no matching %s event within 10 s", name)
		}
	}
}

func saleData(t testing.TB, data string) service.SaleView {
	t.Helper()
	var v service.SaleView
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("sale event %s: %v", data, err)
	}
	return v
}

func resData(t testing.TB, data string) seckill.Reservation {
	t.Helper()
	var r seckill.Reservation
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		t.Fatalf("reservation event %s: %v", data, err)
	}
	return r
}

func fastEvents(c *httpapi.Config) { c.EventInterval = 10 * time.Millisecond }

// TestSaleEvents: the stream starts with the sale and follows its stock and status; a signed-in
// buyer's own reservations are followed through hold, grant, payment and expiry; another
// user's reservation is never reported.
func TestSaleEvents(t *testing.T) {
	e := newEnv(t, withServer(fastEvents))
	e.createSale(t, "ev", map[string]any{"stock": 1, "hold_seconds": 30, "queue_limit": 5})

	anon := e.events(t, "ev", "", "")
	if cc := anon.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	first := saleData(t, anon.next(t, "sale", func(string) bool { return true }))
	if first.ID != "ev" || first.StockState.Available != 1 || first.Status != seckill.SaleActive {
		t.Fatalf("first sale event %+v", first)
	}

	alice := e.mustBuy(t, "alice", "ev", http.StatusCreated)
	anon.next(t, "sale", func(d string) bool { return saleData(t, d).StockState.Held == 1 })
	bob := e.mustBuy(t, "bob", "ev", http.StatusAccepted)
	anon.next(t, "sale", func(d string) bool { return saleData(t, d).StockState.Queued == 1 })

	// Bob follows his queued reservation and, unknowingly, alice's: hers is not reported.
	bs := e.events(t, "ev", "?reservation="+bob.ID+"&reservation="+alice.ID, e.user(t, "bob"))
	got := resData(t, bs.next(t, "reservation", func(string) bool { return true }))
	if got.ID != bob.ID || got.Status != seckill.StatusQueued || got.Position != 1 {
		t.Fatalf("bob's first reservation event %+v", got)
	}
	// Alice's hold expires: bob is granted the unit.
	e.clock.Advance(31 * time.Second)
	got = resData(t, bs.next(t, "reservation", func(d string) bool { return resData(t, d).Status == seckill.StatusHeld }))
	if got.ID != bob.ID || got.ExpiresAt == nil || got.Position != 0 {
		t.Fatalf("bob's grant event %+v", got)
	}
	// Bob pays: his reservation and the sale say so.
	e.pay(t, "bob", bob.ID)
	e.wantResult(t, succeeded("pay-bob", got), seckill.PaymentApplied)
	resData(t, bs.next(t, "reservation", func(d string) bool { return resData(t, d).Status == seckill.StatusPaid }))
	v := saleData(t, anon.next(t, "sale", func(d string) bool { return saleData(t, d).StockState.Sold == 1 }))
	if v.Status != seckill.SaleSoldOut {
		t.Errorf("sale after the last unit was paid: %s, want sold_out", v.Status)
	}
	bs.close()
	for m := range bs.events {
		if m.name == "reservation" && resData(t, m.data).ID == alice.ID {
			t.Fatalf("bob's stream reported alice's reservation: %s", m.data)
		}
	}
}

// TestSaleEventsStatusChange: a sale that starts later is announced active by the stream at
// its start, without any stock change.
func TestSaleEventsStatusChange(t *testing.T) {
	e := newEnv(t, withServer(fastEvents))
	start := e.clock.Now().Add(time.Minute)
	e.createSale(t, "later", map[string]any{"starts_at": start, "ends_at": start.Add(time.Hour)})
	s := e.events(t, "later", "", "")
	if v := saleData(t, s.next(t, "sale", func(string) bool { return true })); v.Status != seckill.SaleUpcoming {
		t.Fatalf("first event: %s, want upcoming", v.Status)
	}
	// Nothing changes for a few ticks: nothing is sent (not even the first state again).
	select {
	case m := <-s.events:
		t.Fatalf("an event without a change: %s %s", m.name, m.data)
	case <-time.After(200 * time.Millisecond):
	}
	e.clock.Set(start)
	s.next(t, "sale", func(d string) bool { return saleData(t, d).Status == seckill.SaleActive })
}

// TestSaleEventsRefusals: unknown sale 404, reservation parameters need a valid user JWT, at
// most 8 of them, each a valid id; nothing is streamed for a refusal.
func TestSaleEventsRefusals(t *testing.T) {
	e := newEnv(t)
	e.createSale(t, "s", nil)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/nope/events", "", nil), http.StatusNotFound, seckill.CodeNotFound)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/s/events?reservation=r1", "", nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/s/events?reservation=r1", "Bearer nope", nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
	many := strings.Repeat("&reservation=r", 9)[1:]
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/s/events?"+many, e.user(t, "alice"), nil), http.StatusBadRequest, seckill.CodeInvalidArgument)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/s/events?reservation=a%20b", e.user(t, "alice"), nil), http.StatusBadRequest, seckill.CodeInvalidArgument)
}

// TestSaleEventsManyListeners: 200 streams on one sale while 100 buyers buy concurrently;
// every stream sees the final state, and one feed serves them all.
func TestSaleEventsManyListeners(t *testing.T) {
	e := newEnv(t, withServer(func(c *httpapi.Config) { fastEvents(c); c.BuyRate = -1 }))
	e.createSale(t, "crowd", map[string]any{"stock": 50, "queue_limit": 100})
	streams := make([]*sse, 200)
	for i := range streams {
		streams[i] = e.events(t, "crowd", "", "")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		user := fmt.Sprintf("u%d", i)
		path := e.path(t, user, "crowd")
		auth := e.user(t, user)
		wg.Go(func() {
			r, err := e.tryDo("POST", path, auth, nil)
			if err == nil && r.Status != http.StatusCreated && r.Status != http.StatusAccepted {
				err = fmt.Errorf("buy: %s", r)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range streams {
		s.next(t, "sale", func(d string) bool {
			st := saleData(t, d).StockState
			return st.Held == 50 && st.Queued == 50
		})
	}
}

// TestSaleEventsEndOnClose: Close ends every stream, so that a server can shut down.
func TestSaleEventsEndOnClose(t *testing.T) {
	e := newEnv(t, withServer(fastEvents))
	e.createSale(t, "c", nil)
	s := e.events(t, "c", "", "")
	s.next(t, "sale", func(string) bool { return true })
	e.api.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open 5 s after Close")
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/c/events", "", nil), http.StatusServiceUnavailable, seckill.CodeUnavailable)
}

// TestActivity: the dashboard's endpoint counts this instance's buy outcomes per second and
// lists the holds about to expire, soonest first; admin only.
func TestActivity(t *testing.T) {
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.BuyBurst = 2; c.BuyRate = 0.001 }))
	e.createSale(t, "a", map[string]any{"stock": 2, "queue_limit": 1, "hold_seconds": 60})
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/a/activity", "", nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/a/activity", e.user(t, "alice"), nil), http.StatusForbidden, seckill.CodeForbidden)
	wantProblem(t, e.do(t, "GET", "/api/v1/sales/nope/activity", admin(), nil), http.StatusNotFound, seckill.CodeNotFound)

	first := e.mustBuy(t, "u1", "a", http.StatusCreated)
	e.clock.Advance(time.Second)
	second := e.mustBuy(t, "u2", "a", http.StatusCreated)
	e.mustBuy(t, "u3", "a", http.StatusAccepted)
	wantProblem(t, e.buy(t, "u4", e.path(t, "u4", "a"), nil, ""), http.StatusConflict, seckill.CodeQueueFull)
	u1path := e.path(t, "u1", "a") // once: GET /path spends the same budget (burst 2), in a bucket of its own
	wantProblem(t, e.buy(t, "u1", u1path, nil, ""), http.StatusConflict, seckill.CodeLimitExceeded)
	wantProblem(t, e.buy(t, "u1", u1path, nil, ""), http.StatusTooManyRequests, seckill.CodeRateLimited)
	wantProblem(t, e.buy(t, "u5", "/api/v1/sales/a/buy/forged", nil, ""), http.StatusForbidden, seckill.CodeInvalidToken)
	e.drain(t) // the holds are in the database

	var a httpapi.Activity
	r := e.do(t, "GET", "/api/v1/sales/a/activity", admin(), nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &a)
	if a.SaleID != "a" || a.IntervalSeconds != 1 || len(a.Buckets) != 2 {
		t.Fatalf("activity %+v: want 2 buckets", a)
	}
	if a.Buckets[0].Outcomes["held"] != 1 || !a.Buckets[0].At.Before(a.Buckets[1].At) {
		t.Errorf("first second %+v", a.Buckets[0])
	}
	want := map[string]uint32{"held": 1, "queued": 1, "queue_full": 1, "limit_exceeded": 1, "rate_limited": 1, "invalid_token": 1}
	for k, v := range a.Buckets[1].Outcomes {
		if v != want[k] {
			t.Errorf("second bucket: %s = %d, want %d", k, v, want[k])
		}
	}
	if len(a.Expiring) != 2 || a.Expiring[0].ID != first.ID || a.Expiring[1].ID != second.ID {
		t.Fatalf("expiring = %+v, want %s then %s", a.Expiring, first.ID, second.ID)
	}
	// A hold that ended is no longer listed, even before the database hears of it.
	e.do(t, "DELETE", "/api/v1/reservations/"+first.ID, e.user(t, "u1"), nil)
	r = e.do(t, "GET", "/api/v1/sales/a/activity", admin(), nil)
	r.decode(t, &a)
	for _, h := range a.Expiring {
		if h.ID == first.ID {
			t.Fatalf("a cancelled hold is listed as expiring: %+v", a.Expiring)
		}
	}
}
