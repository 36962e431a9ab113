package httpsink_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/httpsink"
	"github.com/seckill-go/seckill/events/sinks"
	"github.com/seckill-go/seckill/internal/testkit/toxic"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/seckilltest"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef") // 32 bytes, as SECKILL_PAYMENT_SECRET

// shop is the shop's endpoint: it accepts a callback only if it is a signed POST of
// {"events":[…]} with the documented headers, and records the events it accepted.
type shop struct {
	t      *testing.T
	secret []byte

	mu       sync.Mutex
	events   []events.Event
	requests []captured // every request, accepted or not
	refused  int
}

type captured struct {
	header http.Header
	body   []byte
}

func (s *shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, captured{r.Header.Clone(), body})
	s.mu.Unlock()
	refuse := func(code int, why string) {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		http.Error(w, why, code)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/hooks/seckill" || r.URL.RawQuery != "" {
		s.t.Errorf("callback is %s %s, want POST /hooks/seckill without a query", r.Method, r.URL)
		refuse(http.StatusNotFound, "wrong target")
		return
	}
	if err := payment.Verify(s.secret, r.Header.Get("Seckill-Signature"), body, time.Now()); err != nil {
		refuse(http.StatusUnauthorized, err.Error())
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		s.t.Errorf("Content-Type %q", ct)
	}
	if ua := r.Header.Get("User-Agent"); ua != "seckill-export/1" {
		s.t.Errorf("User-Agent %q", ua)
	}
	var b struct {
		Events []events.Event `json:"events"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil || len(b.Events) == 0 {
		s.t.Errorf("body is not {\"events\":[…]} with events: %v: %.200s", err, body)
		refuse(http.StatusBadRequest, "bad body")
		return
	}
	if got, want := r.Header.Get("Idempotency-Key"), idempotencyKey(b.Events); got != want {
		s.t.Errorf("Idempotency-Key %q, want %q", got, want)
	}
	s.mu.Lock()
	s.events = append(s.events, b.Events...)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// idempotencyKey is the documented key, computed independently of the package.
func idempotencyKey(events []events.Event) string {
	var ids strings.Builder
	for _, e := range events {
		ids.WriteString(e.ID + "\n")
	}
	return fmt.Sprintf("%x", sha256.Sum256([]byte(ids.String())))
}

func (s *shop) received() []events.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]events.Event(nil), s.events...)
}

func newShop(t *testing.T) (*shop, *httptest.Server) {
	sh := &shop{t: t, secret: testSecret}
	srv := httptest.NewServer(sh)
	t.Cleanup(srv.Close)
	return sh, srv
}

func open(t *testing.T, raw string, secret []byte) events.Sink {
	t.Helper()
	s, err := httpsink.Open(raw, events.Options{Secret: secret})
	if err != nil {
		t.Fatalf("Open(%q): %v", raw, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSink runs the conformance suite against a verifying endpoint behind a proxy that the
// outage story cuts; small batches (max_batch=7) make Publish split most batches.
func TestSink(t *testing.T) {
	seckilltest.TestSink(t, seckilltest.SinkHarness{
		Open: func(t *testing.T) seckilltest.SinkUnderTest {
			sh, srv := newShop(t)
			p := toxic.New(t, srv.Listener.Addr().String())
			dest := "http://" + p.Addr + "/hooks/seckill?max_batch=7&timeout=5s"
			return seckilltest.SinkUnderTest{
				Sink:        open(t, dest, testSecret),
				Received:    func(*testing.T) []events.Event { return sh.received() },
				Cut:         p.Outage,
				Destination: dest,
			}
		},
		Reopen: func(t *testing.T, first seckilltest.SinkUnderTest) events.Sink {
			s, err := httpsink.Open(first.Destination, events.Options{Secret: testSecret})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			return s
		},
	})
}

// TestHTTPS: an https:// endpoint gets the same signed callbacks over TLS.
func TestHTTPS(t *testing.T) {
	sh := &shop{t: t, secret: testSecret}
	srv := httptest.NewTLSServer(sh)
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Fatalf("test bug: %s is not https", srv.URL)
	}
	s := open(t, srv.URL+"/hooks/seckill", testSecret)
	httpsink.SetTransport(s, srv.Client().Transport)
	sent := someEvents(5)
	if err := s.Publish(context.Background(), sent); err != nil {
		t.Fatal(err)
	}
	if got := sh.received(); len(got) != len(sent) || got[4].ID != sent[4].ID {
		t.Fatalf("the shop has %d events, want the %d sent", len(got), len(sent))
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.refused != 0 {
		t.Fatalf("the shop refused %d callbacks", sh.refused)
	}
}

// TestServerErrorIsAnError: an endpoint answering 503 (up, but not taking events) fails
// Publish with the status, as the outage story's cut connection does.
func TestServerErrorIsAnError(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusBadRequest, http.StatusFound, http.StatusTooManyRequests} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if code == http.StatusFound {
					http.Redirect(w, r, "/elsewhere", code)
					return
				}
				http.Error(w, "not now", code)
			}))
			t.Cleanup(srv.Close)
			s := open(t, srv.URL+"/hooks", testSecret)
			err := s.Publish(context.Background(), someEvents(3))
			var se *httpsink.StatusError
			if !errors.As(err, &se) || se.StatusCode != code {
				t.Fatalf("Publish: %v, want a StatusError %d", err, code)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(code)) {
				t.Errorf("error %q does not show the status", err)
			}
		})
	}
}

// TestSignature: what the sink sends verifies with the shared secret, and fails with another
// secret, with a changed body and without the header: the endpoint refuses a forged or
// unsigned callback. A sink with the wrong secret gets its callbacks refused.
func TestSignature(t *testing.T) {
	sh, srv := newShop(t)
	s := open(t, srv.URL+"/hooks/seckill", testSecret)
	sent := someEvents(4)
	if err := s.Publish(context.Background(), sent); err != nil {
		t.Fatal(err)
	}
	sh.mu.Lock()
	req := sh.requests[0]
	sh.mu.Unlock()
	sig := req.header.Get("Seckill-Signature")
	if !strings.HasPrefix(sig, "t=") || !strings.Contains(sig, ",v1=") {
		t.Fatalf("Seckill-Signature %q, want t=<unix>,v1=<hex>", sig)
	}
	now := time.Now()
	if err := payment.Verify(testSecret, sig, req.body, now); err != nil {
		t.Fatalf("the callback does not verify with the secret: %v", err)
	}
	other := []byte("another-secret-another-secret-32")
	if payment.Verify(other, sig, req.body, now) == nil {
		t.Fatal("the callback verifies with another secret")
	}
	forged := bytes.Replace(req.body, []byte(`"amount_cents":999`), []byte(`"amount_cents":1`), 1)
	if bytes.Equal(forged, req.body) {
		t.Fatal("test bug: the body was not changed")
	}
	if payment.Verify(testSecret, sig, forged, now) == nil {
		t.Fatal("a changed body verifies")
	}
	if payment.Verify(testSecret, "", req.body, now) == nil {
		t.Fatal("an unsigned callback verifies")
	}
	var body httpsink.Body
	if err := json.Unmarshal(req.body, &body); err != nil || len(body.Events) != len(sent) || body.Events[0].ID != sent[0].ID {
		t.Fatalf("body %s is not {\"events\":[the events]}: %v", req.body, err)
	}

	// A sender with the wrong secret: the endpoint refuses, Publish fails, nothing recorded.
	before := len(sh.received())
	wrong := open(t, srv.URL+"/hooks/seckill", other)
	err := wrong.Publish(context.Background(), someEvents(2))
	var se *httpsink.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Publish with the wrong secret: %v, want 401", err)
	}
	if got := len(sh.received()); got != before {
		t.Fatalf("the endpoint recorded %d events from a forged callback", got-before)
	}
	if strings.Contains(err.Error(), string(other)) || strings.Contains(err.Error(), string(testSecret)) {
		t.Fatalf("the error shows a secret: %v", err)
	}
}

// TestSplitsInOrder: a batch larger than max_batch goes as several requests, in order, each
// with its own key; max_batch=1 sends one event per request.
func TestSplitsInOrder(t *testing.T) {
	sh, srv := newShop(t)
	s := open(t, srv.URL+"/hooks/seckill?max_batch=4", testSecret)
	sent := someEvents(10)
	if err := s.Publish(context.Background(), sent); err != nil {
		t.Fatal(err)
	}
	sh.mu.Lock()
	n := len(sh.requests)
	sh.mu.Unlock()
	if n != 3 {
		t.Fatalf("%d requests for 10 events at max_batch=4, want 3", n)
	}
	got := sh.received()
	if len(got) != len(sent) {
		t.Fatalf("received %d events, want %d", len(got), len(sent))
	}
	for i := range sent {
		if got[i].ID != sent[i].ID {
			t.Fatalf("event %d is %s, want %s", i, got[i].ID, sent[i].ID)
		}
	}
}

// TestStopsAtFirstFailure: when a request fails, later ones are not sent, so a reservation's
// later events never reach the shop before its earlier ones.
func TestStopsAtFirstFailure(t *testing.T) {
	var mu sync.Mutex
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		c := calls
		mu.Unlock()
		if c == 2 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	s := open(t, srv.URL+"/?max_batch=2", testSecret)
	if err := s.Publish(context.Background(), someEvents(8)); err == nil {
		t.Fatal("Publish succeeded although its second request failed")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Fatalf("%d requests, want 2 (none after the failed one)", calls)
	}
}

// TestSlowEndpoint: an endpoint that never answers makes Publish fail by the timeout option,
// or by the caller's context when that ends first.
func TestSlowEndpoint(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	byOption := open(t, srv.URL+"/?timeout=100ms", testSecret)
	if err := returns(t, func() error { return byOption.Publish(context.Background(), someEvents(1)) }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish to a silent endpoint with timeout=100ms: %v, want a deadline error", err)
	}
	byCtx := open(t, srv.URL+"/?timeout=2m", testSecret)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if err := returns(t, func() error { return byCtx.Publish(ctx, someEvents(1)) }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with a cancelled context: %v, want context.Canceled", err)
	}
}

// returns runs f and fails the test if it hangs (a guard, not a timing assertion: the bound
// is far beyond anything the code waits for).
func returns(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Publish hung")
		return nil
	}
}

// TestBoundedRead: an endpoint that answers with a body without end neither holds Publish
// (it reads a bounded prefix, then closes the connection) nor floods the error: a 2xx is a
// success, a 500's error carries the status and at most ~200 bytes of the body.
func TestBoundedRead(t *testing.T) {
	for _, code := range []int{http.StatusOK, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(code)
				chunk := bytes.Repeat([]byte("xxxx\x00\n"), 1000)
				for r.Context().Err() == nil {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}))
			t.Cleanup(srv.Close)
			s := open(t, srv.URL+"/?timeout=2m", testSecret) // beyond the hang guard
			err := returns(t, func() error { return s.Publish(context.Background(), someEvents(1)) })
			if code == http.StatusOK {
				if err != nil {
					t.Fatalf("Publish: %v", err)
				}
				return
			}
			var se *httpsink.StatusError
			if !errors.As(err, &se) || se.StatusCode != code {
				t.Fatalf("Publish: %v, want a StatusError %d", err, code)
			}
			if len(se.Snippet) > 220 || len(err.Error()) > 400 || !strings.Contains(se.Snippet, "xxx") {
				t.Fatalf("the error carries %d bytes of the body (%d in all): %.500s", len(se.Snippet), len(err.Error()), err)
			}
			if strings.ContainsAny(err.Error(), "\x00\n") {
				t.Fatalf("the error holds control characters: %q", err)
			}
		})
	}
}

// TestSecretNeverShown: neither Name nor any error holds the secret, even when the endpoint
// echoes it or the URL tries to carry one.
func TestSecretNeverShown(t *testing.T) {
	secret := "s3cr3tXs3cr3tXs3cr3tXs3cr3tXs3cr" // also a valid variable name, for the slip below
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "your secret is "+secret, http.StatusForbidden)
	}))
	t.Cleanup(echo.Close)
	t.Setenv("HTTPSINK_TEST_SECRET", secret)
	var errs []error
	s := open(t, echo.URL+"/hooks?secret_env=HTTPSINK_TEST_SECRET", nil)
	errs = append(errs, s.Publish(context.Background(), someEvents(1)))
	dead := open(t, "http://127.0.0.1:1/hooks?timeout=1s", []byte(secret))
	errs = append(errs, dead.Publish(context.Background(), someEvents(1)))
	_, err := httpsink.Open("http://shop.example/hooks?secret="+secret, events.Options{Secret: []byte(secret)})
	errs = append(errs, err)
	_, err = httpsink.Open("http://u:"+secret+"@shop.example/hooks", events.Options{Secret: []byte(secret)})
	errs = append(errs, err)
	_, err = httpsink.Open("http://shop.example/hooks?timeout=forever", events.Options{Secret: []byte(secret)})
	errs = append(errs, err)
	// The secret pasted where the name of its variable belongs.
	_, err = httpsink.Open("http://shop.example/hooks?secret_env="+secret, events.Options{Secret: []byte(secret)})
	errs = append(errs, err)
	_, err = httpsink.Open("http://shop.example/hooks?secret_env=-"+secret, events.Options{Secret: []byte(secret)})
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("case %d: the error shows the secret: %v", i, err)
		}
	}
	for _, n := range []string{s.Name(), dead.Name()} {
		if strings.Contains(n, secret) {
			t.Errorf("Name %q shows the secret", n)
		}
	}
}

// TestSecretEnv: secret_env names the variable whose value signs this endpoint's callbacks,
// over the server's secret.
func TestSecretEnv(t *testing.T) {
	sh, srv := newShop(t)
	t.Setenv("HTTPSINK_TEST_SHOP_SECRET", string(testSecret))
	s := open(t, srv.URL+"/hooks/seckill?secret_env=HTTPSINK_TEST_SHOP_SECRET", []byte("the-servers-own-secret-not-the-shops"))
	if err := s.Publish(context.Background(), someEvents(2)); err != nil {
		t.Fatalf("Publish signed with the secret_env secret: %v", err)
	}
	if got := len(sh.received()); got != 2 {
		t.Fatalf("the shop accepted %d events, want 2", got)
	}
}

func TestBadURLs(t *testing.T) {
	t.Setenv("HTTPSINK_TEST_EMPTY", "")
	for _, raw := range []string{
		"",
		"http://",
		"http:///path",
		"http:shop.example",
		"ftp://shop.example/hooks",
		"http://shop.example:0/hooks",
		"http://shop.example:99999/hooks",
		"http://u:p@shop.example/hooks",
		"http://shop.example/hooks#frag",
		"http://shop.example/hooks?timeout=",
		"http://shop.example/hooks?timeout=10",
		"http://shop.example/hooks?timeout=50ms",
		"http://shop.example/hooks?timeout=3m",
		"http://shop.example/hooks?timeout=1s&timeout=2s",
		"http://shop.example/hooks?max_batch=0",
		"http://shop.example/hooks?max_batch=10001",
		"http://shop.example/hooks?max_batch=ten",
		"http://shop.example/hooks?secret=abc",
		"http://shop.example/hooks?token=abc",
		"http://shop.example/hooks?secret_env=1BAD",
		"http://shop.example/hooks?secret_env=HTTPSINK_TEST_UNSET_VARIABLE",
		"http://shop.example/hooks?secret_env=HTTPSINK_TEST_EMPTY",
		"http://shop.example/hooks?retries=3",
		"http://shop.example/hooks?%zz",
	} {
		if _, err := httpsink.Open(raw, events.Options{Secret: testSecret}); !errors.Is(err, events.ErrBadURL) {
			t.Errorf("Open(%q): %v, want ErrBadURL", raw, err)
		}
	}
	for _, raw := range []string{
		"http://shop.example",
		"https://shop.example:8443/hooks/seckill",
		"HTTP://shop.example/hooks?timeout=100ms&max_batch=1",
		"http://[::1]:8080/hooks?timeout=2m&max_batch=10000",
	} {
		s, err := httpsink.Open(raw, events.Options{Secret: testSecret})
		if err != nil {
			t.Errorf("Open(%q): %v", raw, err)
			continue
		}
		_ = s.Close()
	}
	// No secret at all: refused, saying how to give one.
	_, err := httpsink.Open("http://shop.example/hooks", events.Options{})
	if !errors.Is(err, events.ErrBadURL) || !strings.Contains(err.Error(), "SECKILL_EXPORT_SECRET") || !strings.Contains(err.Error(), "secret_env") {
		t.Fatalf("Open without a secret: %v", err)
	}
}

// TestOpenedBySinks: export/sinks opens http and https URLs as this package's sinks, with the
// server's secret, and refuses them without one.
func TestOpenedBySinks(t *testing.T) {
	sh, srv := newShop(t)
	ss, err := sinks.OpenAll(context.Background(), srv.URL+"/hooks/seckill?max_batch=2, https://shop.example/hooks", events.Options{Secret: testSecret})
	if err != nil || len(ss) != 2 {
		t.Fatalf("OpenAll: %d sinks, %v", len(ss), err)
	}
	for _, s := range ss {
		t.Cleanup(func() { _ = s.Close() })
	}
	if err := ss[0].Publish(context.Background(), someEvents(3)); err != nil {
		t.Fatal(err)
	}
	if got := len(sh.received()); got != 3 {
		t.Fatalf("the shop has %d events, want 3", got)
	}
	if _, err := sinks.Open(context.Background(), "https://shop.example/hooks", events.Options{}); !errors.Is(err, events.ErrBadURL) {
		t.Fatalf("sinks.Open without a secret: %v, want ErrBadURL", err)
	}
}

func TestEmptyBatchSendsNothing(t *testing.T) {
	sh, srv := newShop(t)
	s := open(t, srv.URL+"/hooks/seckill", testSecret)
	if err := s.Publish(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.requests) != 0 {
		t.Fatalf("an empty batch sent %d requests", len(sh.requests))
	}
}

func TestPublishAfterClose(t *testing.T) {
	_, srv := newShop(t)
	s := open(t, srv.URL+"/hooks/seckill", testSecret)
	_ = s.Close()
	if err := s.Publish(context.Background(), someEvents(1)); err == nil {
		t.Fatal("Publish after Close succeeded")
	}
}

// FuzzOpen: any URL either opens a sink whose name is the redacted URL, or fails with
// ErrBadURL; it never panics and never shows the secret.
func FuzzOpen(f *testing.F) {
	for _, s := range []string{
		"http://shop.example/hooks", "https://h:1/p?timeout=1s&max_batch=5", "http://h/?secret_env=X",
		"http://h/?timeout=1e9ns", "http://u:p@h/", "http://h/#x", "http://h/?a=1&a=2", "https://[::1]/x?max_batch=+5",
	} {
		f.Add(s)
	}
	secret := "fuzz-secret-fuzz-secret-fuzz-sec"
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := httpsink.Open(raw, events.Options{Secret: []byte(secret)})
		if err != nil {
			if !errors.Is(err, events.ErrBadURL) {
				t.Fatalf("Open(%q): %v, not ErrBadURL", raw, err)
			}
			if !strings.Contains(raw, secret) && strings.Contains(err.Error(), secret) {
				t.Fatalf("the error shows the secret: %v", err)
			}
			return
		}
		defer s.Close()
		if s.Name() != events.Redact(raw) {
			t.Fatalf("Name %q, want %q", s.Name(), events.Redact(raw))
		}
	})
}

func someEvents(n int) []events.Event {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	out := make([]events.Event, n)
	for i := range out {
		out[i] = events.Event{
			ID: fmt.Sprintf("evt-%d", i), Type: events.TypeHeld, SchemaVersion: events.SchemaVersion,
			SaleID: "s", ReservationID: fmt.Sprintf("s-r%d", i), UserID: "u", Quantity: 1, AmountCents: 999,
			Status: "held", At: at.Add(time.Duration(i) * time.Millisecond),
		}
	}
	return out
}
