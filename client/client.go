// Package client is the Go client of seckill's HTTP API (/api/v1, docs/API.md): one typed
// method per operation of the served OpenAPI document (GET /openapi.json), the problem
// documents as *Error values whose Code is one of the root package's seckill.Code constants,
// the live event stream as an iterator, and the built-in scheme's signed payment webhooks.
//
// A shop's Go services, seckill's load generator, `seckill bench`, the demo and the engine
// benchmark all speak the API through it, so that the wire format is written down once on the
// client's side. It adds no work of its own on a request's way: it encodes small bodies by
// hand, reads answers into pooled buffers, and leaves retrying off unless asked (WithRetries).
//
// Every method takes a context; a Client is safe for concurrent use and cheap to copy with
// another bearer token (WithToken), one per buyer.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/payment"
)

// Client calls one seckill instance (or a load balancer in front of several).
type Client struct {
	base    string // scheme://host[:port], no trailing slash
	hc      *http.Client
	auth    string // the Authorization header's value, "" for none
	ua      string
	retries int           // retries of a 503 or 429 answer; 0: none
	maxWait time.Duration // the longest wait before one retry
}

// Option sets up a Client (New).
type Option func(*Client)

// WithToken sends token as the bearer token of every request: a user's JWT or the admin
// token. A client without one calls the endpoints anyone may call.
func WithToken(token string) Option { return func(c *Client) { c.setToken(token) } }

// WithHTTPClient sends the requests through hc instead of http.DefaultClient: for its
// timeout, its connection pool or a transport of the caller's.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// WithRetries retries a request answered 503 unavailable or 429 rate_limited up to n times,
// each after the answer's Retry-After (DefaultRetryWait when it names none) with some jitter,
// never waiting more than maxWait (DefaultMaxRetryWait if 0) at once: the server asks for these
// retries (docs/API.md, Errors). Off by default, so that a caller with a retry policy of its own
// (a load generator counting every answer) sees each one. A buy retried this way carries an
// Idempotency-Key, so that a retry never buys twice (Buy). Transport errors are not retried:
// whether the request was handled is unknown.
func WithRetries(n int, maxWait time.Duration) Option {
	return func(c *Client) {
		c.retries = max(0, n)
		c.maxWait = maxWait
		if c.maxWait <= 0 {
			c.maxWait = DefaultMaxRetryWait
		}
	}
}

// Retry waits (WithRetries).
const (
	DefaultRetryWait    = time.Second
	DefaultMaxRetryWait = 30 * time.Second
)

// MaxAnswerBytes bounds how much of an answer the client reads: every answer of the API is far
// smaller (the longest, a list of 1 000 refunds, is under 1 MiB).
const MaxAnswerBytes = 8 << 20

// New returns a client of the instance at baseURL ("http://127.0.0.1:8080"; a trailing slash
// is dropped).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithToken returns a copy of c that sends token as its bearer token ("" for none): one client
// per user, sharing c's connections.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.setToken(token)
	return &cp
}

func (c *Client) setToken(token string) {
	c.auth = ""
	if token != "" {
		c.auth = "Bearer " + token
	}
}

// BaseURL is the instance's URL, as given to New.
func (c *Client) BaseURL() string { return c.base }

// call is one operation: its method and path, its JSON body (nil: none), its headers beyond
// the client's, and what a 2xx answer is decoded into (nil: nothing).
type call struct {
	method, path string
	body         []byte
	idemKey      string
	header       []string // name, value pairs
	out          any
}

// do sends cl, retrying as WithRetries says, decodes a 2xx answer into cl.out and returns its
// status; any other answer is an *Error.
func (c *Client) do(ctx context.Context, cl call) (int, error) {
	build := func() (*http.Request, error) {
		var body io.Reader
		if cl.body != nil {
			body = bytes.NewReader(cl.body)
		}
		req, err := http.NewRequestWithContext(ctx, cl.method, c.base+cl.path, body)
		if err != nil {
			return nil, err
		}
		if cl.body != nil {
			req.Header["Content-Type"] = jsonType
		}
		if cl.idemKey != "" {
			req.Header["Idempotency-Key"] = []string{cl.idemKey}
		}
		for i := 0; i+1 < len(cl.header); i += 2 {
			req.Header.Set(cl.header[i], cl.header[i+1])
		}
		return req, nil
	}
	resp, err := c.send(ctx, build)
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, decode(resp, cl.out)
}

// decode reads a 2xx answer into out (nil: the answer is drained) and closes it.
func decode(resp *http.Response, out any) error {
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAnswerBytes))
		return nil
	}
	buf := getBuffer()
	defer putBuffer(buf)
	what := resp.Request.Method + " " + resp.Request.URL.Path
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, MaxAnswerBytes)); err != nil {
		return fmt.Errorf("seckill: %s: reading the answer: %w", what, err)
	}
	if err := json.Unmarshal(buf.Bytes(), out); err != nil {
		return fmt.Errorf("seckill: %s: decoding the answer: %w", what, err)
	}
	return nil
}

var jsonType = []string{"application/json"}

// send makes the request build returns (anew for each attempt) and returns a 2xx answer, its
// body unread; any other answer is read, closed and returned as an *Error, after the retries
// WithRetries allows.
func (c *Client) send(ctx context.Context, build func() (*http.Request, error)) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := build()
		if err != nil {
			return nil, err
		}
		if c.auth != "" {
			req.Header["Authorization"] = []string{c.auth}
		}
		if c.ua != "" {
			req.Header["User-Agent"] = []string{c.ua}
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 300 {
			return resp, nil
		}
		e := readError(req, resp)
		if attempt >= c.retries || (e.Status != http.StatusServiceUnavailable && e.Status != http.StatusTooManyRequests) {
			return nil, e
		}
		if !wait.Sleep(ctx, c.retryWait(e.RetryAfter)) {
			return nil, errors.Join(e, ctx.Err())
		}
	}
}

// retryWait is the wait before retrying an answer that asked for after: between half and all
// of it (jitter, so that the clients refused together do not all come back together), at most
// maxWait.
func (c *Client) retryWait(after time.Duration) time.Duration {
	if after <= 0 {
		after = DefaultRetryWait
	}
	after = min(after, c.maxWait)
	return after/2 + rand.N(after/2+1)
}

// readError reads a non-2xx answer into an *Error and closes it.
func readError(req *http.Request, resp *http.Response) *Error {
	defer resp.Body.Close()
	buf := getBuffer()
	defer putBuffer(buf)
	_, _ = buf.ReadFrom(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Method: req.Method, Path: req.URL.Path, Status: resp.StatusCode,
		RetryAfter: payment.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var p problem
	if json.Unmarshal(buf.Bytes(), &p) == nil {
		e.Code, e.Title, e.Detail = p.Code, p.Title, p.Detail
	} else {
		e.Detail = excerpt(buf.Bytes())
	}
	return e
}

// excerpt is the start of an answer that is not a problem document (a proxy's error page).
func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b[:min(len(b), 200)]))
	if len(b) > 200 {
		s += "…"
	}
	return s
}

// buffers are the answers' read buffers, reused: a load generator reads hundreds of thousands.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer { b := buffers.Get().(*bytes.Buffer); b.Reset(); return b }

func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 { // a rare large answer is not kept
		buffers.Put(b)
	}
}
