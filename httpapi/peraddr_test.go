package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/clientaddr"
)

// slowBodyFrom is slowBody with an X-Forwarded-For header ("" for none).
func (e *env) slowBodyFrom(t *testing.T, xff string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := ""
	if xff != "" {
		h = "X-Forwarded-For: " + xff + "\r\n"
	}
	fmt.Fprintf(c, "POST /api/v1/sales HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n%sContent-Length: 100\r\n\r\n{", admin(), h)
	return c
}

// TestInFlightPerAddr: behind a trusted proxy (the test's own 127.0.0.1), a client (its
// X-Forwarded-For hop) with MaxInFlightPerAddr requests in flight is answered 429
// rate_limited, Retry-After: 1, while another client, the proxy itself and
// /readyz are served; once one of its requests ends it is served again. Negative control:
// without trusted proxies the header is not believed, so the two "clients" are one address
// and the second is refused too.
func TestInFlightPerAddr(t *testing.T) {
	trusted, err := clientaddr.ParseTrusted("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, believe := range []bool{true, false} {
		t.Run(fmt.Sprint("trusted=", believe), func(t *testing.T) {
			e := newEnv(t, withServer(func(c *httpapi.Config) {
				c.MaxInFlight, c.MaxInFlightPerAddr = 8, 2
				if believe {
					c.TrustedProxies = trusted
				}
			}))
			e.createSale(t, "s", nil)
			first := e.slowBodyFrom(t, "10.0.0.1")
			e.slowBodyFrom(t, "192.0.2.9, 10.0.0.1") // the left hop is the client's own text
			e.waitInFlight(t, 2)                     // before any look, which would race them for the slots
			wantRefusal(t, e.do(t, "GET", "/api/v1/sales/s", "", nil, "X-Forwarded-For", "10.0.0.1"),
				http.StatusTooManyRequests, seckill.CodeRateLimited, "1")
			other := e.do(t, "GET", "/api/v1/sales/s", "", nil, "X-Forwarded-For", "10.0.0.2")
			if !believe {
				wantRefusal(t, other, http.StatusTooManyRequests, seckill.CodeRateLimited, "1")
				return
			}
			wantStatus(t, other, http.StatusOK)
			wantStatus(t, e.do(t, "GET", "/api/v1/sales/s", "", nil), http.StatusOK) // the proxy's own
			wantStatus(t, e.do(t, "GET", "/readyz", "", nil, "X-Forwarded-For", "10.0.0.1"), http.StatusOK)
			first.Close()
			eventually(t, "the client served again", func() string {
				if r := e.do(t, "GET", "/api/v1/sales/s", "", nil, "X-Forwarded-For", "10.0.0.1"); r.Status != http.StatusOK {
					return r.String()
				}
				return ""
			})
		})
	}
}

// TestReadyzNotCountedInFlight: with every request slot of the instance held by slow bodies,
// /readyz still answers 200 (it reports the dependencies, not the load) while other requests
// are refused 503.
func TestReadyzNotCountedInFlight(t *testing.T) {
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.MaxInFlight, c.MaxInFlightPerAddr = 2, -1 }))
	e.createSale(t, "s", nil)
	e.slowBody(t)
	e.slowBody(t)
	e.waitInFlight(t, 2)
	wantRefusal(t, e.do(t, "GET", "/api/v1/sales/s", "", nil), http.StatusServiceUnavailable, seckill.CodeUnavailable, "1")
	for range 3 {
		wantStatus(t, e.do(t, "GET", "/readyz", "", nil), http.StatusOK)
	}
}

// TestLimitListenerPerAddr: a client address over its connections is closed at once without
// an answer, another address is served; a trusted proxy's connections are not bounded per
// address; closing a connection gives the address its slot back.
func TestLimitListenerPerAddr(t *testing.T) {
	serve := func(t *testing.T, trusted string) string {
		inner, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tr, err := clientaddr.ParseTrusted(trusted)
		if err != nil {
			t.Fatal(err)
		}
		l := httpapi.LimitListenerPerAddr(inner, 100, 2, tr)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(l) }()
		t.Cleanup(func() {
			srv.Close()
			<-done
		})
		return inner.Addr().String()
	}
	dial := func(t *testing.T, addr, from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// get answers whether c is served ("" if closed without an answer).
	get := func(t *testing.T, c net.Conn) string {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return ""
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return ""
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return string(b)
	}
	t.Run("untrusted", func(t *testing.T) {
		addr := serve(t, "")
		a, b := dial(t, addr, "127.0.0.2"), dial(t, addr, "127.0.0.2")
		for _, c := range []net.Conn{a, b} {
			if got := get(t, c); got != "ok" {
				t.Fatalf("within the bound: %q", got)
			}
		}
		if got := get(t, dial(t, addr, "127.0.0.2")); got != "" {
			t.Fatalf("a third connection of one address: %q, want closed", got)
		}
		if got := get(t, dial(t, addr, "127.0.0.3")); got != "ok" {
			t.Fatalf("another address: %q", got)
		}
		a.Close()
		eventually(t, "the address served after one of its connections closed", func() string {
			if got := get(t, dial(t, addr, "127.0.0.2")); got != "ok" {
				return "closed"
			}
			return ""
		})
	})
	t.Run("trusted proxy", func(t *testing.T) {
		addr := serve(t, "127.0.0.2")
		for i := range 4 {
			if got := get(t, dial(t, addr, "127.0.0.2")); got != "ok" {
				t.Fatalf("the proxy's connection %d: %q", i, got)
			}
		}
	})
}
