package httpapi

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/clientaddr"
)

// Resource bounds of one instance. What an outsider can make the process hold is bounded by
// these and by the http.Server's timeouts (cmd/seckill): connections (LimitListener), requests
// being handled (inFlight), and live event streams (streamLimiter), each refused with a
// problem+json answer and a Retry-After rather than queued. Each also has a bound per client
// (internal/clientaddr: one address, or one IPv6 /64), a share of the instance's, so that one
// client cannot take all of it: connections over it are closed at once, requests and streams
// over it are answered 429 rate_limited.

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
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(statusOf(code))
	_, _ = w.Write(b)
}

// TrustedProxies are the proxies whose X-Forwarded-For is believed (Config.TrustedProxies);
// the zero value trusts none.
type TrustedProxies = clientaddr.Trusted

// ParseTrustedProxies parses a comma-separated list of CIDRs and addresses ("" for none).
func ParseTrustedProxies(s string) (TrustedProxies, error) { return clientaddr.ParseTrusted(s) }

// perAddr counts what each client holds (connections, requests, streams), at most max each
// (<= 0: no bound). An entry lives only while its count is above zero, so the table holds at
// most as many entries as the instance-wide bound it shares.
type perAddr struct {
	max int
	mu  sync.Mutex
	n   map[netip.Prefix]int
}

func newPerAddr(max int) *perAddr { return &perAddr{max: max, n: map[netip.Prefix]int{}} }

// acquire counts one more for k, unless k holds max already.
func (p *perAddr) acquire(k netip.Prefix) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.max > 0 && p.n[k] >= p.max {
		return false
	}
	p.n[k]++
	return true
}

func (p *perAddr) release(k netip.Prefix) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[k]--; p.n[k] <= 0 {
		delete(p.n, k)
	}
}

// len is the number of clients holding something (tests: the table is bounded).
func (p *perAddr) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.n)
}

// clientKey is the key of r's client for the per-client bounds (internal/clientaddr); ok is
// false when the connection has no IP address (no per-client bound applies).
func clientKey(trusted clientaddr.Trusted, r *http.Request) (netip.Prefix, bool) {
	var xff []string
	if !trusted.None() {
		xff = r.Header.Values("X-Forwarded-For")
	}
	a, ok := trusted.Client(r.RemoteAddr, xff)
	if !ok {
		return netip.Prefix{}, false
	}
	return clientaddr.Key(a), true
}

// inFlight counts the requests being handled; beyond max a request is refused at once with
// 503 unavailable (queueing it would only make every request late), and beyond perAddr.max
// of one client with 429 rate_limited, before the instance-wide bound is counted.
type inFlight struct {
	max     int64 // <= 0: no bound
	n       atomic.Int64
	perAddr *perAddr // max <= 0: no bound
	trusted clientaddr.Trusted
}

// bound wraps h so that it runs only within the bounds.
func (f *inFlight) bound(h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	if f.max <= 0 && f.perAddr.max <= 0 {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		if f.perAddr.max > 0 {
			if k, ok := clientKey(f.trusted, r); ok {
				if !f.perAddr.acquire(k) {
					// The connection is closed after the answer: its body (maybe trickling in) is
					// not waited for, and its slot among the client's connections is given back.
					w.Header().Set("Connection", "close")
					refuse(w, seckill.CodeRateLimited, requestRetryAfter, "too many requests in flight from this address")
					return nil
				}
				defer f.perAddr.release(k)
			}
		}
		if f.max > 0 {
			if f.n.Add(1) > f.max {
				f.n.Add(-1)
				refuse(w, seckill.CodeUnavailable, requestRetryAfter, "the server is busy: too many requests in flight")
				return nil
			}
			defer f.n.Add(-1)
		}
		return h(w, r)
	}
}

// boundHandler is bound for a plain http.Handler (static pages, metrics, the catch-all).
func (f *inFlight) boundHandler(h http.Handler) http.Handler {
	if f.max <= 0 && f.perAddr.max <= 0 {
		return h
	}
	bounded := f.bound(func(w http.ResponseWriter, r *http.Request) error { h.ServeHTTP(w, r); return nil })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = bounded(w, r) })
}

// streamLimiter bounds live event streams: max per instance, of which anonymous streams may
// hold at most maxAnon (so that an anonymous crowd cannot keep signed-in buyers from following
// their reservations), maxPerUser per signed-in user, and perAddr.max per client address,
// signed in or not (so that one address cannot take the anonymous share).
type streamLimiter struct {
	max, maxAnon, maxPerUser int
	perAddr                  *perAddr // its own lock is taken under mu

	mu      sync.Mutex
	total   int
	anon    int
	perUser map[string]int
}

func newStreamLimiter(max, perUser, perAddress int) *streamLimiter {
	return &streamLimiter{max: max, maxAnon: max - max/4, maxPerUser: perUser, perUser: map[string]int{}, perAddr: newPerAddr(perAddress)}
}

// acquire takes a stream slot for user ("" for an anonymous stream) from the client addr
// (hasAddr false: no address, no per-address bound), or answers why not: rate_limited when
// the address or the user is at its bound, unavailable when the instance is full.
func (l *streamLimiter) acquire(user string, addr netip.Prefix, hasAddr bool) (release func(), code seckill.Code, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	hasAddr = hasAddr && l.perAddr.max > 0
	switch {
	case hasAddr && l.perAddr.n[addr] >= l.perAddr.max:
		return nil, seckill.CodeRateLimited, "at most " + strconv.Itoa(l.perAddr.max) + " live event streams per address"
	case user != "" && l.perUser[user] >= l.maxPerUser:
		return nil, seckill.CodeRateLimited, "at most " + strconv.Itoa(l.maxPerUser) + " live event streams per user"
	case l.total >= l.max:
		return nil, seckill.CodeUnavailable, "too many live event streams on this server; poll instead, or retry later"
	case user == "" && l.anon >= l.maxAnon:
		return nil, seckill.CodeUnavailable, "too many anonymous live event streams on this server; poll instead, or retry later"
	}
	l.total++
	if user == "" {
		l.anon++
	} else {
		l.perUser[user]++
	}
	if hasAddr {
		l.perAddr.acquire(addr)
	}
	var once sync.Once
	return func() { once.Do(func() { l.release(user, addr, hasAddr) }) }, "", ""
}

func (l *streamLimiter) release(user string, addr netip.Prefix, hasAddr bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if hasAddr {
		l.perAddr.release(addr)
	}
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
	return LimitListenerPerAddr(l, max, 0, clientaddr.Trusted{})
}

// LimitListenerPerAddr is LimitListener that also keeps at most perAddr connections of one
// client address (clientaddr.Key: an IPv4 address, an IPv6 /64) open at once; one more is
// closed at once, unanswered, before it counts against max: a client over its share gets
// nothing, and costs a file descriptor for a moment only. Connections from trusted proxies
// carry many clients: they are not bounded per address. perAddr <= 0: no per-address bound.
func LimitListenerPerAddr(l net.Listener, max, perAddr int, trusted clientaddr.Trusted) net.Listener {
	if max <= 0 && perAddr <= 0 {
		return l
	}
	return &limitListener{Listener: l, max: int64(max), perAddr: newPerAddr(perAddr), trusted: trusted}
}

type limitListener struct {
	net.Listener
	max      int64 // <= 0: no bound
	perAddr  *perAddr
	trusted  clientaddr.Trusted
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
		var key netip.Prefix
		keyed := false
		if l.perAddr.max > 0 {
			if a, ok := clientaddr.Peer(c.RemoteAddr().String()); ok && !l.trusted.Contains(a) {
				key, keyed = clientaddr.Key(a), true
				if !l.perAddr.acquire(key) {
					_ = c.Close()
					continue
				}
			}
		}
		if l.max <= 0 || l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, l: l, key: key, keyed: keyed}, nil
		}
		l.open.Add(-1)
		if keyed {
			l.perAddr.release(key)
		}
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

// limitedConn gives its slots back when closed (once: the server may close a connection twice).
type limitedConn struct {
	net.Conn
	l     *limitListener
	key   netip.Prefix
	keyed bool
	once  sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		if c.l.max > 0 {
			c.l.open.Add(-1)
		}
		if c.keyed {
			c.l.perAddr.release(c.key)
		}
	})
	return c.Conn.Close()
}

// limits sets up the in-flight and stream bounds from cfg, with their defaults: a client's
// share of each is a quarter of the instance's.
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
	if cfg.MaxInFlightPerAddr == 0 && cfg.MaxInFlight > 0 {
		cfg.MaxInFlightPerAddr = PerAddrShare(cfg.MaxInFlight)
	}
	if cfg.MaxStreamsPerAddr == 0 {
		cfg.MaxStreamsPerAddr = PerAddrShare(cfg.MaxStreams)
	}
	s.inFlight = &inFlight{max: int64(cfg.MaxInFlight), perAddr: newPerAddr(cfg.MaxInFlightPerAddr), trusted: cfg.TrustedProxies}
	s.streams = newStreamLimiter(cfg.MaxStreams, cfg.MaxStreamsPerUser, cfg.MaxStreamsPerAddr)
}

// PerAddrShare is the default bound of one client address for an instance-wide bound n: a
// quarter of it (at least 1), so that it takes four clients at their bound to fill the
// instance, and a crowd behind one NAT address still gets a good part of it.
func PerAddrShare(n int) int { return max(n/4, 1) }

// unbounded says which routes the in-flight bounds do not count: live event streams (bounds
// of their own), /healthz, and /readyz, which reports the dependencies, never the load: an
// instance at its bound (or a client at its own) is not unready, and a load balancer that
// saw 503s under a flood would pull every instance at once. /readyz is kept cheap instead
// (readyFlight: concurrent probes share one run of the checks).
func unbounded(pattern string) bool {
	return pattern == "/api/v1/sales/{id}/events" || pattern == "/api/v1/sales/{id}/waiting-room/events" || pattern == "/healthz" || pattern == "/readyz"
}
