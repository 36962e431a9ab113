// Package httpsink delivers events as signed HTTP callbacks: each batch is one POST of
// {"events":[…]} to the shop's endpoint, signed with the Seckill-Signature scheme of incoming
// payment webhooks, so the shop verifies both directions with the same code (docs/EVENTS.md,
// "HTTP callbacks").
//
// A sink makes one delivery attempt per request and reports whether the endpoint confirmed it
// (a 2xx answer). Retries, backoff and dead letters are the exporter's.
package httpsink

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/payment"
)

// Headers of every callback. The names are part of the contract with the shop (docs/EVENTS.md).
const (
	// SignatureHeader carries "t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">", as on incoming
	// payment webhooks (payment.Sign); the shop checks it as payment.Verify does.
	SignatureHeader = payment.SignatureHeader
	// IdempotencyKeyHeader carries IdempotencyKey of the request's events.
	IdempotencyKeyHeader = "Idempotency-Key"
	// UserAgent identifies the sender; the number is the callback format's version.
	UserAgent = "seckill-export/1"
)

// Option defaults and bounds (docs/EVENTS.md).
const (
	DefaultTimeout  = 10 * time.Second
	MinTimeout      = 100 * time.Millisecond
	MaxTimeout      = 2 * time.Minute
	DefaultMaxBatch = 100
	MaxMaxBatch     = 10000
)

// Bounds on what is read of an answer. The sink needs only the status; a little of the body
// makes an error useful to an operator, and a bounded drain lets a small answer's connection
// be reused, while an endpoint that streams without end cannot hold a Publish or fill memory.
const (
	maxErrorSnippet   = 200
	maxDrain          = 64 << 10
	maxResponseHeader = 64 << 10
)

// Body is the JSON object POSTed for each request.
type Body struct {
	Events []events.Event `json:"events"`
}

// Sink posts events to one endpoint. It is safe for concurrent use.
type Sink struct {
	name     string // the URL as given, redacted: what logs and metrics show
	endpoint string // the URL without its query: where requests go
	secret   []byte
	timeout  time.Duration
	maxBatch int
	client   *http.Client
	closed   atomic.Bool
}

// config is a parsed sink URL.
type config struct {
	endpoint  string
	timeout   time.Duration
	maxBatch  int
	secretEnv string // name of an environment variable holding the secret, or ""
}

// Open returns a sink for an http:// or https:// URL (docs/EVENTS.md). The secret that signs
// the callbacks is the one named by the secret_env option if given (an environment variable,
// so that each shop endpoint may have its own), else opts.Secret (SECKILL_EXPORT_SECRET); with
// neither, Open refuses, since an unsigned callback is one the shop cannot trust. A secret is
// never accepted in the URL itself: URLs end up in logs, metrics and process listings.
// Errors wrap events.ErrBadURL.
func Open(raw string, opts events.Options) (events.Sink, error) {
	c, err := parse(raw)
	if err != nil {
		return nil, err
	}
	secret := opts.Secret
	if c.secretEnv != "" {
		v := os.Getenv(c.secretEnv)
		if v == "" {
			// The name is not echoed: a secret pasted in place of its variable's name is a
			// likely slip, and errors reach logs.
			return nil, fmt.Errorf("%w: %s: the environment variable that secret_env names is not set or empty", events.ErrBadURL, events.Redact(raw))
		}
		secret = []byte(v)
		for _, r := range opts.Refused {
			if hmac.Equal(secret, r) {
				return nil, fmt.Errorf("%w: %s: the secret that secret_env names equals another of seckill's secrets (auth, admin, payment, Stripe or metrics); the endpoint would hold it: give it its own",
					events.ErrBadURL, events.Redact(raw))
			}
		}
	}
	if len(secret) == 0 {
		return nil, fmt.Errorf("%w: %s: callbacks must be signed: set SECKILL_EXPORT_SECRET, or name an environment variable holding this endpoint's secret with the secret_env option",
			events.ErrBadURL, events.Redact(raw))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxResponseHeaderBytes = maxResponseHeader
	tr.MaxIdleConnsPerHost = 4
	return &Sink{
		name:     events.Redact(raw),
		endpoint: c.endpoint,
		secret:   bytes.Clone(secret),
		timeout:  c.timeout,
		maxBatch: c.maxBatch,
		client: &http.Client{
			Transport: tr,
			// A redirect is not followed: the shop configured this URL, and a 3xx is not a
			// confirmation that the events are durable. It fails the request, with its status.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// parse checks a sink URL and its options; every error wraps events.ErrBadURL and shows the
// URL redacted.
func parse(raw string) (config, error) {
	raw = strings.TrimSpace(raw)
	bad := func(format string, args ...any) (config, error) {
		return config{}, fmt.Errorf("%w: %s: %s", events.ErrBadURL, events.Redact(raw), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL")
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return bad("scheme %q is not http or https", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return bad("want http[s]://host[:port][/path][?options]")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("port %q is not 1..65535", p)
		}
	}
	if u.User != nil {
		return bad("credentials in the URL are refused (URLs are logged); callbacks are authenticated by their signature")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return bad("a fragment (#…) is not sent to the endpoint; remove it")
	}
	c := config{timeout: DefaultTimeout, maxBatch: DefaultMaxBatch}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("options are not a valid query string")
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return bad("option %q is given %d times", k, len(vs))
		}
		v := vs[0]
		switch k {
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d < MinTimeout || d > MaxTimeout {
				return bad("timeout=%q: want a duration from %s to %s (default %s)", v, MinTimeout, MaxTimeout, DefaultTimeout)
			}
			c.timeout = d
		case "max_batch":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxMaxBatch {
				return bad("max_batch=%q: want an integer from 1 to %d (default %d)", v, MaxMaxBatch, DefaultMaxBatch)
			}
			c.maxBatch = n
		case "secret_env":
			if !envName(v) {
				return bad("secret_env: want the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*)")
			}
			c.secretEnv = v
		case "secret", "key", "token", "password":
			return bad("option %q: a secret never goes in the URL; use secret_env to name an environment variable holding it", k)
		default:
			return bad("unknown option %q (want timeout, max_batch or secret_env)", k)
		}
	}
	e := *u
	e.RawQuery, e.ForceQuery, e.Fragment, e.RawFragment = "", false, "", ""
	if e.Path == "" {
		e.Path = "/"
	}
	c.endpoint = e.String()
	return c, nil
}

func envName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Name is the URL as configured, redacted (events.Redact); it never holds the secret.
func (s *Sink) Name() string { return s.name }

// Publish posts events in requests of at most max_batch events, in order, one after the
// other, and returns nil once every request was answered 2xx. It stops at the first failure:
// later events are not sent before earlier ones are confirmed, so a reservation's events never
// overtake each other. Each request is signed afresh (a retried batch is never stale) and
// bounded by the timeout option and ctx. An empty batch sends nothing.
func (s *Sink) Publish(ctx context.Context, events []events.Event) error {
	if s.closed.Load() {
		return fmt.Errorf("httpsink %s: Publish after Close", s.name)
	}
	for i := 0; i < len(events); i += s.maxBatch {
		if err := s.post(ctx, events[i:min(i+s.maxBatch, len(events))]); err != nil {
			return err
		}
	}
	return nil
}

// StatusError is a callback the endpoint answered with a status other than 2xx.
type StatusError struct {
	Sink       string // Name of the sink
	StatusCode int
	Status     string // e.g. "503 Service Unavailable"
	Snippet    string // the start of the answer's body, at most ~200 bytes, quoted for logs
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("httpsink %s: endpoint answered %s", e.Sink, e.Status)
	if e.StatusCode >= 300 && e.StatusCode < 400 {
		msg += " (redirects are not followed; configure the final URL)"
	}
	if e.Snippet != "" {
		msg += ": " + e.Snippet
	}
	return msg
}

func (s *Sink) post(ctx context.Context, events []events.Event) error {
	body, err := json.Marshal(Body{Events: events})
	if err != nil {
		return fmt.Errorf("httpsink %s: encoding %d events: %w", s.name, len(events), err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("httpsink %s: %w", s.name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(IdempotencyKeyHeader, IdempotencyKey(events))
	req.Header.Set(SignatureHeader, payment.Sign(s.secret, time.Now(), body))
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("httpsink %s: %d events not confirmed: %w", s.name, len(events), cleanErr(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Drain a little so the connection can be reused; a longer answer closes it instead.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		return nil
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorSnippet))
	return &StatusError{Sink: s.name, StatusCode: resp.StatusCode, Status: resp.Status, Snippet: s.snippet(head)}
}

// cleanErr drops the request URL that *url.Error repeats (the sink's name already says it)
// and names a timeout plainly.
func cleanErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no answer in time (timeout option or caller's deadline): %w", err)
	}
	return err
}

// snippet makes the start of an answer fit for a log line: printable, one line, quoted, and
// never holding the secret (an endpoint could echo anything).
func (s *Sink) snippet(b []byte) string {
	b = bytes.ReplaceAll(b, s.secret, []byte("[redacted]"))
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		b = b[n:]
		switch {
		case r == utf8.RuneError && n <= 1:
			sb.WriteRune('?')
		case unicode.IsPrint(r):
			sb.WriteRune(r)
		default:
			sb.WriteRune(' ')
		}
	}
	t := strings.TrimSpace(sb.String())
	if t == "" {
		return ""
	}
	return strconv.Quote(t)
}

// IdempotencyKey is the Idempotency-Key of a request carrying events: the lowercase hex
// SHA-256 of their ids, each followed by a newline. The same events in the same order give
// the same key on every retry, from every instance; any other set gives another, so an
// endpoint may answer a repeated key with its earlier answer without checking the body.
func IdempotencyKey(events []events.Event) string {
	h := sha256.New()
	for _, e := range events {
		io.WriteString(h, e.ID)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Close releases idle connections; Publish must not be called after it.
func (s *Sink) Close() error {
	s.closed.Store(true)
	s.client.CloseIdleConnections()
	return nil
}
