package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
)

// eventually polls f every 20 ms until it returns "" (done) or 10 s pass, then fails with
// f's last word.
func eventually(t *testing.T, what string, f func() string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if last = f(); last == "" {
			return
		}
	}
	t.Fatalf("%s: not within 10 s: %s", what, last)
}

// wantRefusal checks a refusal for load: problem+json with the code and the Retry-After.
func wantRefusal(t *testing.T, r response, status int, code seckill.Code, retryAfter string) {
	t.Helper()
	wantProblem(t, r, status, code)
	if got := r.Header.Get("Retry-After"); got != retryAfter {
		t.Errorf("Retry-After %q, want %q (%s)", got, retryAfter, r)
	}
}

// streamStatus opens an event stream and closes it at once, answering its status, headers and
// (for a refusal) body.
func (e *env) streamStatus(t *testing.T, saleID, query, auth string) response {
	t.Helper()
	s, r := e.tryEvents(t, saleID, query, auth)
	if s != nil {
		s.close()
	}
	return r
}

// slowBody opens a connection that sends the headers of an admin POST /api/v1/sales with a
// body it never sends: its handler waits in the body read, holding its in-flight slot.
func (e *env) slowBody(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /api/v1/sales HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Length: 100\r\n\r\n{", admin())
	return c
}

// waitInFlight waits until the server counts n requests in flight (InFlightNow), with a
// generous deadline: a slow request holds its slot only once the server has taken it (accepted
// its connection, read its headers, run its handler), some time after the test sent it. A test
// that looked by a request of its own before then would race the slow requests for the
// slots: a look in flight when the last slow request arrives has that one refused (at once
// with Connection: close when over the client's bound; over the instance's, its 503 waits for
// the body it never gets), and every later look finds a slot free. That, not a request left
// untaken, was the flake of TestInFlightPerAddr and TestInFlightBound (docs/DECISIONS.md
// "Per-client bounds").
func (e *env) waitInFlight(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); e.api.InFlightNow() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server counts %d requests in flight after a minute; want the %d slow ones", e.api.InFlightNow(), n)
		}
	}
}

// TestInFlightBound: with MaxInFlight requests being handled, the next one is refused at once
// with 503 unavailable and Retry-After: 1, while /healthz and event streams still answer;
// once a request ends, requests are served again.
func TestInFlightBound(t *testing.T) {
	// Every request here comes from one address: its own bound is off (TestInFlightPerAddr).
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.MaxInFlight = 2; c.MaxInFlightPerAddr = -1 }))
	e.createSale(t, "s", nil)
	first := e.slowBody(t)
	e.slowBody(t)
	e.waitInFlight(t, 2)
	wantRefusal(t, e.do(t, "GET", "/api/v1/sales/s", "", nil), http.StatusServiceUnavailable, seckill.CodeUnavailable, "1")
	wantStatus(t, e.do(t, "GET", "/healthz", "", nil), http.StatusOK)
	wantProblem(t, e.do(t, "GET", "/", "", nil), http.StatusServiceUnavailable, seckill.CodeUnavailable) // pages count too
	if r := e.streamStatus(t, "s", "", ""); r.Status != http.StatusOK {
		t.Fatalf("an event stream while requests are at their bound: %s", r)
	}
	first.Close() // its handler's body read fails, and the slot is free
	eventually(t, "requests served again", func() string {
		if r := e.do(t, "GET", "/api/v1/sales/s", "", nil); r.Status != http.StatusOK {
			return r.String()
		}
		return ""
	})
}

// TestStreamBounds: the instance's stream bound (anonymous streams may take three quarters of
// it, the rest is kept for signed-in buyers) answers 503 unavailable, a user's own bound 429
// rate_limited, both with Retry-After: 5 and before the engine is read; a closed stream gives
// its slot back.
func TestStreamBounds(t *testing.T) {
	e := newEnv(t, withServer(func(c *httpapi.Config) {
		fastEvents(c)
		c.MaxStreams, c.MaxStreamsPerUser, c.MaxStreamsPerAddr = 4, 2, -1 // one address: TestStreamsPerAddr
	}))
	e.createSale(t, "s", map[string]any{"stock": 10})
	alice := e.mustBuy(t, "alice", "s", http.StatusCreated)
	bob := e.mustBuy(t, "bob", "s", http.StatusCreated)
	asAlice := func() (string, string) { return "?reservation=" + alice.ID, e.user(t, "alice") }
	asBob := func() (string, string) { return "?reservation=" + bob.ID, e.user(t, "bob") }
	anonymous := func() (string, string) { return "", "" }
	open := func(who func() (string, string)) *sse {
		q, auth := who()
		return e.events(t, "s", q, auth)
	}
	refused := func(saleID string, who func() (string, string), status int, code seckill.Code) {
		t.Helper()
		q, auth := who()
		wantRefusal(t, e.streamStatus(t, saleID, q, auth), status, code, "5")
	}

	anon := []*sse{open(anonymous), open(anonymous), open(anonymous)}
	refused("s", anonymous, http.StatusServiceUnavailable, seckill.CodeUnavailable)
	// Refused before the sale is read: an unknown sale is refused the same way.
	refused("nope", anonymous, http.StatusServiceUnavailable, seckill.CodeUnavailable)
	// The last quarter is for signed-in streams; then the instance is full.
	open(asAlice)
	refused("s", asBob, http.StatusServiceUnavailable, seckill.CodeUnavailable)

	for _, s := range anon {
		s.close()
	}
	var b *sse
	eventually(t, "slots back once the server saw streams closed", func() string {
		q, auth := asBob()
		var r response
		if b, r = e.tryEvents(t, "s", q, auth); b == nil {
			return r.String()
		}
		return ""
	})
	b.next(t, "reservation", func(string) bool { return true })
	open(asAlice).next(t, "reservation", func(string) bool { return true })
	refused("s", asAlice, http.StatusTooManyRequests, seckill.CodeRateLimited) // her third
	open(anonymous)
	refused("s", anonymous, http.StatusServiceUnavailable, seckill.CodeUnavailable)
}

// TestLimitListener: beyond max open connections, a connection is answered 503 problem+json
// (unavailable, Retry-After: 1, Connection: close) and closed; closing a connection gives its
// slot back.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := httpapi.LimitListener(inner, 2)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	addr := inner.Addr().String()
	// get sends one request on c and reads the answer.
	get := func(c net.Conn) (*http.Response, string) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial(), dial()
	for _, c := range []net.Conn{a, b} {
		if res, body := get(c); res.StatusCode != 200 || body != "ok" {
			t.Fatalf("within the bound: %d %q", res.StatusCode, body)
		}
	}
	res, body := get(dial())
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" ||
		res.Header.Get("Content-Type") != "application/problem+json" || !res.Close ||
		!strings.Contains(body, `"code":"unavailable"`) {
		t.Fatalf("over the bound: %d %v %q", res.StatusCode, res.Header, body)
	}
	a.Close()
	eventually(t, "a connection served after one closed", func() string {
		res, body := get(dial())
		if res.StatusCode != 200 {
			return body
		}
		return ""
	})
}
