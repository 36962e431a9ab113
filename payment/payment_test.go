package payment

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
)

var (
	testSecret = []byte("whsec_test_secret")
	testNow    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	testBody   = []byte(`{"payment_id":"pay_1","reservation_id":"r_1","amount_cents":1999,"status":"succeeded"}`)
)

// wantCode fails the test unless err is a *seckill.Error with the given code and its message
// contains every fragment.
func wantCode(t *testing.T, err error, code seckill.Code, fragments ...string) {
	t.Helper()
	var e *seckill.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *seckill.Error with code %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("code = %s (%q), want %s", e.Code, e.Message, code)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Message, f) {
			t.Errorf("message %q does not contain %q", e.Message, f)
		}
	}
}

func sigOf(h string) string {
	_, v, _ := strings.Cut(h, "v1=")
	return v
}

func TestSignFormat(t *testing.T) {
	h := Sign(testSecret, testNow, testBody)
	ts := strconv.FormatInt(testNow.Unix(), 10)
	if !strings.HasPrefix(h, "t="+ts+",v1=") {
		t.Fatalf("header %q does not start with t=%s,v1=", h, ts)
	}
	sig := sigOf(h)
	if len(sig) != 64 || strings.ToLower(sig) != sig {
		t.Fatalf("v1 %q is not 64 lowercase hex digits", sig)
	}
	// Known answer, computed independently with
	// printf '1700000000.{}' | openssl dgst -sha256 -hmac secret
	// so that another implementation (a real gateway, a shell script) can be checked against it.
	got := Sign([]byte("secret"), time.Unix(1700000000, 0), []byte("{}"))
	if want := "t=1700000000,v1=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163"; got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

func TestVerifyRoundTrip(t *testing.T) {
	h := Sign(testSecret, testNow, testBody)
	if err := Verify(testSecret, h, testBody, testNow); err != nil {
		t.Fatalf("Verify(Sign(...)) = %v", err)
	}
	ev, err := VerifyEvent(testSecret, h, testBody, testNow)
	if err != nil {
		t.Fatalf("VerifyEvent = %v", err)
	}
	if want := (Event{"pay_1", "r_1", 1999, StatusSucceeded}); ev != want {
		t.Fatalf("VerifyEvent = %+v, want %+v", ev, want)
	}
	// Exactly at the edge of the window, both ways, still verifies.
	for _, skew := range []time.Duration{Tolerance, -Tolerance, time.Minute, -time.Minute} {
		if err := Verify(testSecret, Sign(testSecret, testNow.Add(skew), testBody), testBody, testNow); err != nil {
			t.Errorf("skew %s: %v", skew, err)
		}
	}
}

func TestVerifyRejects(t *testing.T) {
	good := Sign(testSecret, testNow, testBody)
	sig := sigOf(good)
	ts := strconv.FormatInt(testNow.Unix(), 10)
	tests := []struct {
		name   string
		secret []byte
		header string
		body   []byte
		want   string // fragment of the message
	}{
		{"tampered body", testSecret, good, bytes.Replace(testBody, []byte("1999"), []byte("1"), 1), "no v1 signature matches"},
		{"body with trailing newline", testSecret, good, append(append([]byte{}, testBody...), '\n'), "no v1 signature matches"},
		{"wrong secret", []byte("another secret"), good, testBody, "no v1 signature matches"},
		{"empty secret", nil, good, testBody, "secret is not configured"},
		{"stale by 6 minutes", testSecret, Sign(testSecret, testNow.Add(-6*time.Minute), testBody), testBody, "6m0s old"},
		{"future by 6 minutes", testSecret, Sign(testSecret, testNow.Add(6*time.Minute), testBody), testBody, "6m0s in the future"},
		{"stale by a second past tolerance", testSecret, Sign(testSecret, testNow.Add(-Tolerance-time.Second), testBody), testBody, "old"},
		{"timestamp changed (replay with fresh t)", testSecret, "t=" + strconv.FormatInt(testNow.Unix()+1, 10) + ",v1=" + sig, testBody, "no v1 signature matches"},
		{"missing header", testSecret, "", testBody, "missing Seckill-Signature header"},
		{"blank header", testSecret, "  \t ", testBody, "missing Seckill-Signature header"},
		{"garbage", testSecret, "garbage", testBody, "malformed"},
		{"no timestamp", testSecret, "v1=" + sig, testBody, "no timestamp"},
		{"empty timestamp", testSecret, "t=,v1=" + sig, testBody, "no timestamp"},
		{"no v1", testSecret, "t=" + ts, testBody, "no v1 signature"},
		{"only unknown scheme", testSecret, "t=" + ts + ",v0=" + sig, testBody, "no v1 signature"},
		{"non-numeric timestamp", testSecret, "t=abc,v1=" + sig, testBody, "not an integer"},
		{"fractional timestamp", testSecret, "t=" + ts + ".5,v1=" + sig, testBody, "not an integer"},
		{"negative timestamp", testSecret, "t=-1,v1=" + sig, testBody, "out of range"},
		{"huge timestamp", testSecret, "t=9223372036854775807,v1=" + sig, testBody, "out of range"},
		{"overflowing timestamp", testSecret, "t=99999999999999999999,v1=" + sig, testBody, "not an integer"},
		{"two timestamps", testSecret, "t=" + ts + ",t=" + ts + ",v1=" + sig, testBody, "more than one timestamp"},
		{"field without =", testSecret, "t=" + ts + ",v1=" + sig + ",junk", testBody, "field 3 is not key=value"},
		{"uppercase hex", testSecret, "t=" + ts + ",v1=" + strings.ToUpper(sig), testBody, "no v1 signature matches"},
		{"truncated v1", testSecret, "t=" + ts + ",v1=" + sig[:63], testBody, "no v1 signature matches"},
		{"empty v1", testSecret, "t=" + ts + ",v1=", testBody, "no v1 signature matches"},
		{"header too long", testSecret, good + strings.Repeat(",x=y", 3000), testBody, "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, Verify(tt.secret, tt.header, tt.body, testNow), seckill.CodeInvalidSignature, tt.want)
			_, err := VerifyEvent(tt.secret, tt.header, tt.body, testNow)
			wantCode(t, err, seckill.CodeInvalidSignature)
		})
	}
}

func TestVerifyTolerantParsing(t *testing.T) {
	sig := sigOf(Sign(testSecret, testNow, testBody))
	other := sigOf(Sign([]byte("old secret"), testNow, testBody))
	ts := strconv.FormatInt(testNow.Unix(), 10)
	for _, h := range []string{
		"v1=" + sig + ",t=" + ts,                             // order of fields
		"t=" + ts + ",v1=" + other + ",v1=" + sig,            // several v1: a later one matches
		"t=" + ts + ",v1=" + sig + ",v1=" + other,            // several v1: the first matches
		"t=" + ts + ",v1=deadbeef,v1=" + sig,                 // a junk v1 does not spoil a good one
		"t=" + ts + ",v0=" + other + ",v1=" + sig + ",v2=zz", // unknown schemes ignored
		"  t = " + ts + " ,\tv1 = " + sig + "  ",             // whitespace
		"t=" + ts + ",,v1=" + sig + ",",                      // empty fields
		"t=0" + ts[0:] + ",v1=" + sigOf(Sign(testSecret, testNow, testBody)),
	} {
		err := Verify(testSecret, h, testBody, testNow)
		if strings.HasPrefix(h, "t=0") {
			// Leading zero: t is authenticated exactly as written, and the sender signed it
			// without the zero, so this must not verify.
			wantCode(t, err, seckill.CodeInvalidSignature, "no v1 signature matches")
			continue
		}
		if err != nil {
			t.Errorf("Verify(%q) = %v", h, err)
		}
	}
}

func TestParseEvent(t *testing.T) {
	long := strings.Repeat("a", MaxIDBytes)
	ok := []struct {
		name string
		body string
		want Event
	}{
		{"succeeded", `{"payment_id":"p","reservation_id":"r","amount_cents":1999,"status":"succeeded"}`, Event{"p", "r", 1999, StatusSucceeded}},
		{"failed", `{"payment_id":"p","reservation_id":"r","amount_cents":0,"status":"failed"}`, Event{"p", "r", 0, StatusFailed}},
		{"unknown fields kept out", `{"payment_id":"p","reservation_id":"r","amount_cents":5,"status":"succeeded","currency":"eur","meta":{"a":[1,2]}}`, Event{"p", "r", 5, StatusSucceeded}},
		{"field order and whitespace", " \n{ \"status\" : \"failed\" , \"amount_cents\" : 7 ,\"reservation_id\":\"r\",\"payment_id\":\"p\" }\n\t", Event{"p", "r", 7, StatusFailed}},
		{"escapes", `{"payment_id":"p\u00e9","reservation_id":"r\/1","amount_cents":1,"status":"succ\u0065eded"}`, Event{"pé", "r/1", 1, StatusSucceeded}},
		{"ids of max length", `{"payment_id":"` + long + `","reservation_id":"` + long + `","amount_cents":1,"status":"failed"}`, Event{long, long, 1, StatusFailed}},
		{"max amount", `{"payment_id":"p","reservation_id":"r","amount_cents":9223372036854775807,"status":"failed"}`, Event{"p", "r", 1<<63 - 1, StatusFailed}},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEvent([]byte(tt.body))
			if err != nil {
				t.Fatalf("ParseEvent = %v", err)
			}
			if got != tt.want {
				t.Fatalf("ParseEvent = %+v, want %+v", got, tt.want)
			}
		})
	}

	bad := []struct {
		name, body, want string
	}{
		{"empty", ``, "empty body"},
		{"whitespace only", " \n", "empty body"},
		{"not JSON", `payment`, "not valid JSON"},
		{"array", `[]`, "must be a JSON object"},
		{"string", `"x"`, "must be a JSON object"},
		{"null", `null`, "must be a JSON object"},
		{"truncated", `{"payment_id":"p"`, "not valid JSON"},
		{"trailing object", `{"payment_id":"p","reservation_id":"r","amount_cents":1,"status":"failed"}{}`, "trailing data"},
		{"trailing garbage", `{"payment_id":"p","reservation_id":"r","amount_cents":1,"status":"failed"} x`, "trailing data"},
		{"trailing comma", `{"payment_id":"p","reservation_id":"r","amount_cents":1,"status":"failed",}`, "not valid JSON"},
		{"missing payment_id", `{"reservation_id":"r","amount_cents":1,"status":"failed"}`, "payment_id is required"},
		{"null payment_id", `{"payment_id":null,"reservation_id":"r","amount_cents":1,"status":"failed"}`, "payment_id is required"},
		{"empty payment_id", `{"payment_id":"","reservation_id":"r","amount_cents":1,"status":"failed"}`, "payment_id must not be empty"},
		{"case-variant key does not count", `{"Payment_ID":"p","reservation_id":"r","amount_cents":1,"status":"failed"}`, "payment_id is required"},
		{"missing reservation_id", `{"payment_id":"p","amount_cents":1,"status":"failed"}`, "reservation_id is required"},
		{"missing amount", `{"payment_id":"p","reservation_id":"r","status":"failed"}`, "amount_cents is required"},
		{"null with whitespace", `{"payment_id" :  null , "reservation_id":"r","amount_cents":1,"status":"failed"}`, "payment_id is required"},
		{"null amount", `{"payment_id":"p","reservation_id":"r","amount_cents":null,"status":"failed"}`, "amount_cents is required"},
		{"missing status", `{"payment_id":"p","reservation_id":"r","amount_cents":1}`, "status is required"},
		{"numeric payment_id", `{"payment_id":1,"reservation_id":"r","amount_cents":1,"status":"failed"}`, "payment_id must be a string"},
		{"object reservation_id", `{"payment_id":"p","reservation_id":{},"amount_cents":1,"status":"failed"}`, "reservation_id must be a string"},
		{"string amount", `{"payment_id":"p","reservation_id":"r","amount_cents":"1","status":"failed"}`, "must be an integer"},
		{"fractional amount", `{"payment_id":"p","reservation_id":"r","amount_cents":1.5,"status":"failed"}`, "must be an integer"},
		{"exponent amount", `{"payment_id":"p","reservation_id":"r","amount_cents":1e2,"status":"failed"}`, "must be an integer"},
		{"overflowing amount", `{"payment_id":"p","reservation_id":"r","amount_cents":9223372036854775808,"status":"failed"}`, "must be an integer"},
		{"boolean status", `{"payment_id":"p","reservation_id":"r","amount_cents":1,"status":true}`, "status must be a string"},
		{"negative amount", `{"payment_id":"p","reservation_id":"r","amount_cents":-1,"status":"failed"}`, "must not be negative"},
		{"unknown status", `{"payment_id":"p","reservation_id":"r","amount_cents":1,"status":"pending"}`, "status must be"},
		{"uppercase status", `{"payment_id":"p","reservation_id":"r","amount_cents":1,"status":"SUCCEEDED"}`, "status must be"},
		{"empty status", `{"payment_id":"p","reservation_id":"r","amount_cents":1,"status":""}`, "status must be"},
		{"payment_id too long", `{"payment_id":"` + long + `x","reservation_id":"r","amount_cents":1,"status":"failed"}`, "longer than 128 bytes"},
		{"reservation_id too long", `{"payment_id":"p","reservation_id":"` + long + `x","amount_cents":1,"status":"failed"}`, "longer than 128 bytes"},
		{"control character in id", `{"payment_id":"p\n","reservation_id":"r","amount_cents":1,"status":"failed"}`, "control character"},
		{"duplicate field", `{"payment_id":"p","payment_id":"q","reservation_id":"r","amount_cents":1,"status":"failed"}`, `"payment_id" appears more than once`},
		{"duplicate via escape", `{"amount_cents":1,"amount\u005fcents":100000,"payment_id":"p","reservation_id":"r","status":"failed"}`, "appears more than once"},
		{"duplicate unknown field", `{"x":1,"x":2,"payment_id":"p","reservation_id":"r","amount_cents":1,"status":"failed"}`, "appears more than once"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseEvent([]byte(tt.body))
			wantCode(t, err, seckill.CodeInvalidArgument, tt.want)
		})
	}
}

func TestEventConfirmation(t *testing.T) {
	e := Event{"p", "r", 10, StatusSucceeded}
	if !e.Succeeded() || (Event{Status: StatusFailed}).Succeeded() {
		t.Fatal("Succeeded is wrong")
	}
	if got := e.Confirmation(); got != (seckill.PaymentConfirmation{PaymentID: "p", ReservationID: "r", AmountCents: 10}) {
		t.Fatalf("Confirmation = %+v", got)
	}
}

// --- mock gateway ---

// recorder is an in-process webhook receiver: it verifies every delivery and keeps the events.
type recorder struct {
	t      *testing.T
	clock  seckill.Clock
	mu     sync.Mutex
	events []Event
	// answer returns the status for the n-th (1-based) delivery, which carries ev.
	answer func(n int, ev Event) int
	calls  atomic.Int64
}

func (rc *recorder) receive(body []byte, header string) int {
	n := int(rc.calls.Add(1))
	ev, err := VerifyEvent(testSecret, header, body, rc.clock.Now())
	if err != nil {
		rc.t.Errorf("delivery %d: %v", n, err)
		return http.StatusUnauthorized
	}
	status := http.StatusOK
	if rc.answer != nil {
		status = rc.answer(n, ev)
	}
	if status == http.StatusOK {
		rc.mu.Lock()
		rc.events = append(rc.events, ev)
		rc.mu.Unlock()
	}
	return status
}

func (rc *recorder) deliver(_ context.Context, body []byte, header string) (int, error) {
	return rc.receive(body, header), nil
}

func (rc *recorder) got() []Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Event(nil), rc.events...)
}

func testReservation() seckill.Reservation {
	return seckill.Reservation{ID: seckill.NewID(), SaleID: "s1", UserID: "alice", Quantity: 1, Status: seckill.StatusHeld, AmountCents: 1999}
}

// fastConfig keeps delays and backoff tiny so that tests run in milliseconds.
func fastConfig() MockConfig {
	return MockConfig{
		Secret:       testSecret,
		Delay:        func(seckill.Reservation) time.Duration { return time.Millisecond },
		Backoff:      time.Millisecond,
		MaxBackoff:   4 * time.Millisecond,
		RedirectBase: "http://localhost:8080/pay/",
		Rand:         rand.New(rand.NewPCG(1, 2)),
	}
}

func waitIdle(t *testing.T, g *MockGateway) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.WaitIdle(ctx); err != nil {
		t.Fatalf("WaitIdle: %v (pending %d)", err, g.Pending())
	}
}

// noGatewayGoroutines fails if a delivery goroutine is still alive shortly after shutdown.
func noGatewayGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "payment.(*MockGateway)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway goroutines leaked:\n%s", stacks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMockGatewayRetriesOverHTTP(t *testing.T) {
	rc := &recorder{t: t, clock: seckill.SystemClock{}, answer: func(n int, _ Event) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}}
	var contentType atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			t.Errorf("method %s", req.Method)
		}
		contentType.Store(req.Header.Get("Content-Type"))
		body, _ := io.ReadAll(req.Body)
		status := rc.receive(body, req.Header.Get(SignatureHeader))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"result":"applied"}`)
	}))
	defer srv.Close()

	cfg := fastConfig()
	cfg.WebhookURL = srv.URL + "/api/v1/payments/webhook"
	g := NewMockGateway(cfg)
	r := testReservation()
	intent, err := g.CreatePayment(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(intent.PaymentID, "pay_") || len(intent.PaymentID) != 36 {
		t.Errorf("payment id %q", intent.PaymentID)
	}
	if want := "http://localhost:8080/pay/" + intent.PaymentID; intent.RedirectURL != want {
		t.Errorf("redirect %q, want %q", intent.RedirectURL, want)
	}
	waitIdle(t, g)
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := rc.calls.Load(); n != 3 {
		t.Fatalf("receiver saw %d attempts, want 3", n)
	}
	if ct := contentType.Load(); ct != "application/json" {
		t.Errorf("Content-Type %v", ct)
	}
	want := []Event{{intent.PaymentID, r.ID, r.AmountCents, StatusSucceeded}}
	if got := rc.got(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	st := g.Stats()
	if st != (MockStats{Created: 1, PaymentsSucceeded: 1, Delivered: 1, Retries: 2}) {
		t.Fatalf("stats %+v", st)
	}
	noGatewayGoroutines(t)
}

func TestMockGatewayGivesUp(t *testing.T) {
	rc := &recorder{t: t, clock: seckill.SystemClock{}, answer: func(int, Event) int { return http.StatusServiceUnavailable }}
	cfg := fastConfig()
	cfg.Deliver = rc.deliver
	cfg.MaxAttempts = 3
	g := NewMockGateway(cfg)
	defer g.Close()
	if _, err := g.CreatePayment(context.Background(), testReservation()); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, g)
	if n := rc.calls.Load(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	if st := g.Stats(); st.DeliveryFailures != 1 || st.Retries != 2 || st.Delivered != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMockGatewayTransportErrorRetried(t *testing.T) {
	var calls atomic.Int64
	cfg := fastConfig()
	cfg.Deliver = func(ctx context.Context, body []byte, header string) (int, error) {
		if calls.Add(1) == 1 {
			return 0, errors.New("connection refused")
		}
		return http.StatusNoContent, nil // any 2xx acknowledges
	}
	g := NewMockGateway(cfg)
	defer g.Close()
	if _, err := g.CreatePayment(context.Background(), testReservation()); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, g)
	if st := g.Stats(); st.Delivered != 1 || st.Retries != 1 || calls.Load() != 2 {
		t.Fatalf("stats %+v, calls %d", st, calls.Load())
	}
}

func TestMockGatewayDuplicate(t *testing.T) {
	rc := &recorder{t: t, clock: seckill.SystemClock{}}
	cfg := fastConfig()
	cfg.Deliver = rc.deliver
	cfg.DuplicateRate = 1
	g := NewMockGateway(cfg)
	defer g.Close()
	intent, err := g.CreatePayment(context.Background(), testReservation())
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, g)
	got := rc.got()
	if len(got) != 2 || got[0] != got[1] || got[0].PaymentID != intent.PaymentID {
		t.Fatalf("events %+v, want the same event twice", got)
	}
	if st := g.Stats(); st.Delivered != 2 || st.Duplicates != 1 || st.Retries != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMockGatewayFailureRate(t *testing.T) {
	for _, tt := range []struct {
		rate float64
		want string
	}{{1, StatusFailed}, {0, StatusSucceeded}} {
		rc := &recorder{t: t, clock: seckill.SystemClock{}}
		cfg := fastConfig()
		cfg.Deliver = rc.deliver
		cfg.FailureRate = tt.rate
		g := NewMockGateway(cfg)
		for range 20 {
			if _, err := g.CreatePayment(context.Background(), testReservation()); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := rc.got()
		if len(got) != 20 {
			t.Fatalf("rate %v: %d events", tt.rate, len(got))
		}
		for _, e := range got {
			if e.Status != tt.want {
				t.Fatalf("rate %v: status %q, want %q", tt.rate, e.Status, tt.want)
			}
		}
		st := g.Stats()
		if tt.rate == 1 && st.PaymentsFailed != 20 || tt.rate == 0 && st.PaymentsSucceeded != 20 {
			t.Fatalf("rate %v: stats %+v", tt.rate, st)
		}
	}
}

func TestMockGatewaySeedIsReproducible(t *testing.T) {
	outcomes := func() []string {
		rc := &recorder{t: t, clock: seckill.SystemClock{}}
		cfg := fastConfig()
		cfg.Deliver = rc.deliver
		cfg.Delay = func(seckill.Reservation) time.Duration { return 0 }
		cfg.FailureRate = 0.5
		cfg.DuplicateRate = 0.3
		cfg.Rand = rand.New(rand.NewPCG(42, 7))
		g := NewMockGateway(cfg)
		var out []string
		for range 40 {
			intent, err := g.CreatePayment(context.Background(), testReservation())
			if err != nil {
				t.Fatal(err)
			}
			waitIdle(t, g)
			n := 0
			status := ""
			for _, e := range rc.got() {
				if e.PaymentID == intent.PaymentID {
					n++
					status = e.Status
				}
			}
			out = append(out, status+"x"+strconv.Itoa(n))
		}
		_ = g.Close()
		return out
	}
	a, b := outcomes(), outcomes()
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("same seed, different outcomes:\n%v\n%v", a, b)
	}
	joined := strings.Join(a, ",")
	for _, want := range []string{"failedx", "succeededx", "x2", "x1"} {
		if !strings.Contains(joined, want) {
			t.Errorf("40 payments at rates 0.5/0.3 never gave %q: %v", want, a)
		}
	}
}

func TestMockGatewayShutdownWaits(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	var delivered atomic.Bool
	cfg := fastConfig()
	cfg.Deliver = func(ctx context.Context, body []byte, header string) (int, error) {
		close(entered)
		<-release
		delivered.Store(true)
		return http.StatusOK, nil
	}
	g := NewMockGateway(cfg)
	if _, err := g.CreatePayment(context.Background(), testReservation()); err != nil {
		t.Fatal(err)
	}
	<-entered
	done := make(chan error, 1)
	go func() { done <- g.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v while a delivery was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	// Shutting down: new payments are refused.
	_, err := g.CreatePayment(context.Background(), testReservation())
	wantCode(t, err, seckill.CodeUnavailable)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if !delivered.Load() {
		t.Fatal("Shutdown returned before the in-flight delivery finished")
	}
	if st := g.Stats(); st.Delivered != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	noGatewayGoroutines(t)
}

func TestMockGatewayShutdownDeadlineCancels(t *testing.T) {
	sawCancel := make(chan struct{})
	entered := make(chan struct{})
	cfg := fastConfig()
	cfg.Deliver = func(ctx context.Context, body []byte, header string) (int, error) {
		close(entered)
		<-ctx.Done() // a receiver that hangs until the gateway gives up
		close(sawCancel)
		return 0, ctx.Err()
	}
	g := NewMockGateway(cfg)
	if _, err := g.CreatePayment(context.Background(), testReservation()); err != nil {
		t.Fatal(err)
	}
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := g.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded", err)
	}
	select {
	case <-sawCancel:
	default:
		t.Fatal("the in-flight delivery was not cancelled")
	}
	if st := g.Stats(); st.DeliveryFailures != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	noGatewayGoroutines(t)
}

func TestMockGatewayStopAbandonsWaiting(t *testing.T) {
	cfg := fastConfig()
	cfg.Deliver = func(context.Context, []byte, string) (int, error) { return http.StatusOK, nil }
	cfg.Delay = func(seckill.Reservation) time.Duration { return time.Hour }
	g := NewMockGateway(cfg)
	for range 5 {
		if _, err := g.CreatePayment(context.Background(), testReservation()); err != nil {
			t.Fatal(err)
		}
	}
	if g.Pending() != 5 {
		t.Fatalf("pending %d", g.Pending())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := g.WaitIdle(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitIdle with work pending = %v", err)
	}
	start := time.Now()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > time.Minute { // the delay is an hour: a minute tells them apart on any machine
		t.Fatal("Close waited for the delay")
	}
	if st := g.Stats(); st.DeliveryFailures != 5 || st.Delivered != 0 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := g.Shutdown(context.Background()); err != nil { // again: harmless
		t.Fatal(err)
	}
	noGatewayGoroutines(t)
}

func TestMockGatewayConcurrent(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	// The first attempt for every payment fails, so every payment is retried exactly once
	// (its duplicate, if any, is acknowledged at once).
	rc := &recorder{t: t, clock: seckill.SystemClock{}, answer: func(_ int, ev Event) int {
		mu.Lock()
		defer mu.Unlock()
		seen[ev.PaymentID]++
		if seen[ev.PaymentID] == 1 {
			return http.StatusBadGateway
		}
		return http.StatusOK
	}}
	cfg := fastConfig()
	cfg.Deliver = rc.deliver
	cfg.DuplicateRate = 0.2
	cfg.FailureRate = 0.2
	g := NewMockGateway(cfg)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if _, err := g.CreatePayment(context.Background(), testReservation()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := g.Stats()
	if st.Created != 200 || st.PaymentsSucceeded+st.PaymentsFailed != 200 || st.DeliveryFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
	if st.Delivered != 200+st.Duplicates || int64(len(rc.got())) != st.Delivered {
		t.Fatalf("stats %+v, receiver kept %d", st, len(rc.got()))
	}
	if st.Retries != 200 || rc.calls.Load() != st.Delivered+st.Retries {
		t.Fatalf("calls %d, stats %+v", rc.calls.Load(), st)
	}
	noGatewayGoroutines(t)
}

func TestMockGatewayUsesClockForSignature(t *testing.T) {
	fake := seckill.ClockFunc(func() time.Time { return testNow })
	rc := &recorder{t: t, clock: fake}
	cfg := fastConfig()
	cfg.Deliver = rc.deliver
	cfg.Clock = fake
	g := NewMockGateway(cfg)
	defer g.Close()
	if _, err := g.CreatePayment(context.Background(), testReservation()); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, g) // the recorder verifies at testNow: it fails the test if t came from the wall clock
	if len(rc.got()) != 1 {
		t.Fatal("no delivery")
	}
}

func TestMockGatewayRejectsBadInput(t *testing.T) {
	g := NewMockGateway(MockConfig{Secret: testSecret}) // no WebhookURL, no Deliver
	_, err := g.CreatePayment(context.Background(), testReservation())
	wantCode(t, err, seckill.CodeInternal, "neither WebhookURL nor Deliver")
	_ = g.Close()

	g = NewMockGateway(MockConfig{Deliver: (&recorder{t: t}).deliver})
	_, err = g.CreatePayment(context.Background(), testReservation())
	wantCode(t, err, seckill.CodeInternal, "no webhook secret")
	_ = g.Close()

	cfg := fastConfig()
	cfg.Deliver = func(context.Context, []byte, string) (int, error) { return http.StatusOK, nil }
	g = NewMockGateway(cfg)
	defer g.Close()
	_, err = g.CreatePayment(context.Background(), seckill.Reservation{})
	wantCode(t, err, seckill.CodeInvalidArgument, "no id")
	_, err = g.CreatePayment(context.Background(), seckill.Reservation{ID: "r", AmountCents: -1})
	wantCode(t, err, seckill.CodeInvalidArgument, "negative")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.CreatePayment(ctx, testReservation()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	if g.Stats().Created != 0 {
		t.Fatal("a refused payment was counted")
	}
}

func TestDeliverToHandler(t *testing.T) {
	rc := &recorder{t: t, clock: seckill.SystemClock{}, answer: func(n int, _ Event) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}}
	var panicked atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/payments/webhook", func(w http.ResponseWriter, req *http.Request) {
		if !panicked.Swap(true) {
			panic("boom") // the first call: recovered, reported as an error, retried
		}
		body, _ := io.ReadAll(req.Body)
		w.WriteHeader(rc.receive(body, req.Header.Get(SignatureHeader)))
		_, _ = io.WriteString(w, `{"result":"applied"}`)
	})
	cfg := fastConfig()
	cfg.Deliver = DeliverToHandler(mux, "/api/v1/payments/webhook")
	g := NewMockGateway(cfg)
	intent, err := g.CreatePayment(context.Background(), testReservation())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rc.got(); len(got) != 1 || got[0].PaymentID != intent.PaymentID {
		t.Fatalf("events %+v", got)
	}
	// panic, 503, 200
	if st := g.Stats(); st.Delivered != 1 || st.Retries != 2 {
		t.Fatalf("stats %+v", st)
	}
	// A handler that writes nothing answers 200, as over a real connection.
	status, err := DeliverToHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), "/x")(context.Background(), nil, "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("empty handler: %d, %v", status, err)
	}
}

func TestBackoff(t *testing.T) {
	g := NewMockGateway(MockConfig{Secret: testSecret, Deliver: (&recorder{t: t}).deliver})
	defer g.Close()
	for attempt, nominal := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		6: 3200 * time.Millisecond, 7: 5 * time.Second, 30: 5 * time.Second, 1000: 5 * time.Second,
	} {
		for range 50 {
			d := g.backoff(attempt)
			if d < nominal/2 || d > nominal {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", attempt, d, nominal/2, nominal)
			}
		}
	}
}

// --- fuzzing ---

// fuzzTime maps any int64 onto a valid signing time, so that the round-trip property is checked
// over the whole range Verify accepts.
func fuzzTime(ts int64) time.Time {
	span := int64(maxUnix - minUnix + 1)
	return time.Unix(minUnix+((ts%span)+span)%span, 0)
}

func FuzzVerify(f *testing.F) {
	good := Sign(testSecret, testNow, testBody)
	f.Add(testSecret, testBody, testNow.Unix(), good, 0, byte('0'))
	f.Add([]byte("k"), []byte(""), int64(0), "", 63, byte(' '))
	f.Add([]byte("k"), []byte("{}"), int64(-1), "t=1,v1=00", 5, byte(','))
	f.Add([]byte{0}, []byte("\x00\xff"), int64(maxUnix), "v1=x,t=9", 70, byte('='))
	f.Add(testSecret, testBody, int64(1<<62), " t = 1 , v1 = "+sigOf(good)+" , v0=a", 1, byte('A'))
	f.Add(testSecret, testBody, testNow.Unix(), good+",v1="+sigOf(good), 200, byte('\t'))
	f.Fuzz(func(t *testing.T, secret, body []byte, ts int64, header string, pos int, b byte) {
		now := fuzzTime(ts)
		// 1. Arbitrary headers never panic, and every failure is a coded invalid_signature.
		if err := Verify(secret, header, body, now); err != nil {
			wantCode(t, err, seckill.CodeInvalidSignature)
		}
		if len(secret) == 0 {
			if err := Verify(secret, Sign(secret, now, body), body, now); err == nil {
				t.Fatal("an empty secret verified")
			}
			return
		}
		// 2. A signature made for this body verifies, at the signing time and at the edges.
		h := Sign(secret, now, body)
		for _, at := range []time.Time{now, now.Add(Tolerance), now.Add(-Tolerance)} {
			if err := Verify(secret, h, body, at); err != nil {
				t.Fatalf("valid signature rejected at %v: %v\nheader %q", at.Sub(now), err, h)
			}
		}
		// 3. Any change to the v1 value never verifies: replace one byte, truncate, or extend.
		prefix, sig, _ := strings.Cut(h, "v1=")
		prefix += "v1="
		i := pos % len(sig)
		if i < 0 {
			i = -i
		}
		mutants := []string{sig[:i], sig + hex.EncodeToString([]byte{b})}
		// Appending a separator (whitespace, a comma) changes the header's syntax, not the v1
		// value, which ends where the field ends: those are not mutations of v1.
		if tail := string(rune(b)); strings.TrimSpace(tail) != "" && tail != "," {
			mutants = append(mutants, sig+tail)
		}
		if c := sig[i]; c != b {
			mutants = append(mutants, sig[:i]+string([]byte{b})+sig[i+1:])
		}
		if x := sig[i] ^ (b | 1); x != sig[i] { // always differs: b|1 is never 0
			mutants = append(mutants, sig[:i]+string([]byte{x})+sig[i+1:])
		}
		for _, m := range mutants {
			if err := Verify(secret, prefix+m, body, now); err == nil {
				t.Fatalf("mutated v1 %q (from %q) verified", m, sig)
			} else {
				wantCode(t, err, seckill.CodeInvalidSignature)
			}
		}
		// 4. The right signature for another body does not verify this one.
		other := append([]byte{b}, body...)
		if err := Verify(secret, Sign(secret, now, other), body, now); err == nil {
			t.Fatal("signature of a different body verified")
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add(testBody)
	f.Add([]byte(`{"payment_id":"p","reservation_id":"r","amount_cents":0,"status":"failed","extra":[{"x":null}]}`))
	f.Add([]byte(`{"payment_id":"p\u00e9\ud800","reservation_id":"r\/","amount_cents":9223372036854775807,"status":"succeeded"}`))
	f.Add([]byte(`{"payment_id":"p","payment_id":"q","reservation_id":"r","amount_cents":1,"status":"failed"}`))
	f.Add([]byte(`{"payment_id":"p","reservation_id":"r","amount_cents":1e2,"status":"failed"} {}`))
	f.Add([]byte(`{"payment_id":"\u2028","reservation_id":"<&>","amount_cents":-0,"status":"failed"}`))
	f.Add([]byte("{\"payment_id\":\"\xff\xfe\",\"reservation_id\":\"r\",\"amount_cents\":1,\"status\":\"failed\"}"))
	f.Add([]byte(`[`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := ParseEvent(body)
		if err != nil {
			wantCode(t, err, seckill.CodeInvalidArgument)
			return
		}
		// A parsed event satisfies every documented rule...
		if e.PaymentID == "" || e.ReservationID == "" || len(e.PaymentID) > MaxIDBytes ||
			len(e.ReservationID) > MaxIDBytes || e.AmountCents < 0 ||
			(e.Status != StatusSucceeded && e.Status != StatusFailed) {
			t.Fatalf("ParseEvent(%q) accepted an invalid event %+v", body, e)
		}
		// ...and survives a round trip unchanged.
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := ParseEvent(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v (original %q)", b, err, body)
		}
		if e2 != e {
			t.Fatalf("round trip changed the event: %+v → %s → %+v", e, b, e2)
		}
	})
}
