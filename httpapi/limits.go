package httpapi

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
)

// Resource bounds of one instance. What an outsider can make the process hold is bounded by
// these and by the http.Server's timeouts (cmd/seckill): connections (LimitListener), requests
// being handled (inFlight), and live event streams (streamLimiter), each refused with a
// problem+json answer and a Retry-After rather than queued.

const (
	// DefaultMaxInFlight is Config.MaxInFlight's default.
	DefaultMaxInFlight = 1024
	// DefaultMaxStreams is Config.MaxStreams' default.
	DefaultMaxStreams = 1024
	// DefaultMaxStreamsPerUser is Config.MaxStreamsPerUser's default: a few browser tabs.
	DefaultMaxStreamsPerUser = 4

	// requestRetryAfter is the Retry-After of a request refused for load: buys are short, a
	// slot frees soon.
	requestRetryAfter = "1"
	// streamRetryAfter is the Retry-After of a refused event stream: the storefront polls
	// meanwhile, so there is no hurry, and a full instance should not see every refused
	// stream again within a second.
	streamRetryAfter = "5"
	// maxRefusing bounds the connections being refused at once by LimitListener; beyond it a
	// connection is closed without an answer.
	maxRefusing = 64
	// refuseLinger bounds how long a refused connection is kept to deliver its answer.
	refuseLinger = time.Second
)

// refuse writes a problem+json refusal with a Retry-After. It does not go through writeError:
// a refusal for load is expected under load, and logging each one would add to it.
func refuse(w http.ResponseWriter, code seckill.Code, retryAfter, detail string) {
	b := mustJSON(Problem{Type: "about:blank", Title: titleOf(code), Status: statusOf(code), Detail: detail, Code: code})
	h := w.Header()
	h.Set("Retry-After", retryAfter)
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(statusOf(code))
	_, _ = w.Write(b)
}

// inFlight counts the requests being handled; beyond max a request is refused at once with
// 503 unavailable (queueing it would only make every request late).
type inFlight struct {
	max int64 // <= 0: no bound
	n   atomic.Int64
}

// bound wraps h so that it runs only within the bound.
func (f *inFlight) bound(h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	if f.max <= 0 {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		if f.n.Add(1) > f.max {
			f.n.Add(-1)
			refuse(w, seckill.CodeUnavailable, requestRetryAfter, "the server is busy: too many requests in flight")
			return nil
		}
		defer f.n.Add(-1)
		return h(w, r)
	}
}

// boundHandler is bound for a plain http.Handler (static pages, metrics, the catch-all).
func (f *inFlight) boundHandler(h http.Handler) http.Handler {
	if f.max <= 0 {
		return h
	}
	bounded := f.bound(func(w http.ResponseWriter, r *http.Request) error { h.ServeHTTP(w, r); return nil })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = bounded(w, r) })
}

// streamLimiter bounds live event streams: max per instance, of which anonymous streams may
// hold at most maxAnon (so that an anonymous crowd cannot keep signed-in buyers from following
// their reservations), and maxPerUser per signed-in user.
type streamLimiter struct {
	max, maxAnon, maxPerUser int

	mu      sync.Mutex
	total   int
	anon    int
	perUser map[string]int
}

func newStreamLimiter(max, perUser int) *streamLimiter {
	return &streamLimiter{max: max, maxAnon: max - max/4, maxPerUser: perUser, perUser: map[string]int{}}
}

// acquire takes a stream slot for user ("" for an anonymous stream), or answers why not:
// unavailable when the instance is full, rate_limited when the user is.
func (l *streamLimiter) acquire(user string) (release func(), code seckill.Code, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.total >= l.max:
		return nil, seckill.CodeUnavailable, "too many live event streams on this server; poll instead, or retry later"
	case user == "" && l.anon >= l.maxAnon:
		return nil, seckill.CodeUnavailable, "too many anonymous live event streams on this server; poll instead, or retry later"
	case user != "" && l.perUser[user] >= l.maxPerUser:
		return nil, seckill.CodeRateLimited, "at most " + strconv.Itoa(l.maxPerUser) + " live event streams per user"
	}
	l.total++
	if user == "" {
		l.anon++
	} else {
		l.perUser[user]++
	}
	var once sync.Once
	return func() { once.Do(func() { l.release(user) }) }, "", ""
}

func (l *streamLimiter) release(user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if user == "" {
		l.anon--
		return
	}
	if l.perUser[user]--; l.perUser[user] <= 0 {
		delete(l.perUser, user)
	}
}

// LimitListener returns a listener that keeps at most max of its connections open at once, so
// that the process never runs out of file descriptors and /healthz stays reachable. A
// connection beyond the bound is answered 503 problem+json (`unavailable`, Retry-After: 1,
// Connection: close) and closed; at most maxRefusing are being answered at once, and the rest
// are closed at once. max <= 0 returns l unchanged. Close waits for the refusals in progress
// (each is over within refuseLinger).
func LimitListener(l net.Listener, max int) net.Listener {
	if max <= 0 {
		return l
	}
	return &limitListener{Listener: l, max: int64(max)}
}

type limitListener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	refusing atomic.Int64
	wg       sync.WaitGroup
}

// refusal is the whole answer to a connection over the bound.
var refusal = func() []byte {
	body := mustJSON(Problem{Type: "about:blank", Title: titleOf(seckill.CodeUnavailable), Status: http.StatusServiceUnavailable,
		Detail: "the server is busy: too many connections", Code: seckill.CodeUnavailable})
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: " + requestRetryAfter +
		"\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
}()

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refuse(c)
	}
}

// refuse answers c with the 503 and closes it. The request is read (and discarded) for a
// moment after the answer: closing a socket with unread data resets the connection, and the
// client could lose the answer.
func (l *limitListener) refuse(c net.Conn) {
	if l.refusing.Add(1) > maxRefusing {
		l.refusing.Add(-1)
		_ = c.Close()
		return
	}
	l.wg.Go(func() {
		defer l.refusing.Add(-1)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refuseLinger))
		if _, err := c.Write(refusal); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, MaxBody))
	})
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.wg.Wait()
	return err
}

// limitedConn gives its slot back when closed (once: the server may close a connection twice).
type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// limits sets up the in-flight and stream bounds from cfg, with their defaults.
func (s *Server) limits(cfg Config) {
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.MaxStreamsPerUser <= 0 {
		cfg.MaxStreamsPerUser = DefaultMaxStreamsPerUser
	}
	s.inFlight = &inFlight{max: int64(cfg.MaxInFlight)}
	s.streams = newStreamLimiter(cfg.MaxStreams, cfg.MaxStreamsPerUser)
}
