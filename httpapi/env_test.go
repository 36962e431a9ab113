package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/pipeline"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// t0 is where every test clock starts. It is far from the wall clock on purpose: anything that
// reads real time instead of the injected clock (JWT expiry, webhook staleness, hold expiry)
// shows up as a failure.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	authSecret = "test-auth-secret-0123456789abcdef"
	adminToken = "test-admin-token-0123456789"
	paySecret  = "test-payment-secret-0123456789"
	webhookURL = "/api/v1/payments/webhook"
)

// env is the whole server stack in one process: memory engine and service on one manual
// clock, SQLite in t.TempDir(), the event pipeline, and the HTTP handler served by httptest.
type env struct {
	clock  *seckilltest.ManualClock
	store  *sqlstore.Store
	engine *memory.Engine
	pipe   *pipeline.Pipeline
	svc    *service.Service
	api    *httpapi.Server
	srv    *httptest.Server
	client *http.Client
	gw     *stubGateway
	flaky  *flakyStore // the service's store when withFlakyStore is given

	// engineEvents is what the engine writes to; a forwarder counts each event and passes it
	// on to the pipeline, so drain can tell when every event emitted so far is stored.
	engineEvents chan seckill.Event
	forwarded    atomic.Uint64

	mu      sync.Mutex
	tokens  map[string]string // user → JWT
	tracked map[string]string // reservation id → owner, for snapshots
}

// envConfig adjusts an env before it starts.
type envConfig struct {
	server     func(*httpapi.Config)
	noPayments bool // no gateway at all: pay answers 503
	flaky      bool // the service writes through a flakyStore
}

type envOption func(*envConfig)

func withServer(f func(*httpapi.Config)) envOption { return func(c *envConfig) { c.server = f } }
func withoutPayments() envOption                   { return func(c *envConfig) { c.noPayments = true } }
func withFlakyStore() envOption                    { return func(c *envConfig) { c.flaky = true } }

// newEnv starts a stack; Cleanup stops it in reverse dependency order (HTTP, event channel,
// pipeline drain, store), as cmd/seckill does, so goleak sees no goroutine left behind.
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	ctx := context.Background()
	e := &env{
		clock:        seckilltest.NewManualClock(t0),
		engineEvents: make(chan seckill.Event, 1<<16),
		tokens:       map[string]string{},
		tracked:      map[string]string{},
	}
	var err error
	e.store, err = sqlstore.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	pipeIn := make(chan seckill.Event, 1<<16)
	fwdDone := make(chan struct{})
	go func() { // exits when engineEvents is closed (in Cleanup)
		defer close(fwdDone)
		defer close(pipeIn)
		for ev := range e.engineEvents {
			pipeIn <- ev
			e.forwarded.Add(1)
		}
	}()
	e.engine = memory.New(e.clock, memory.WithEvents(e.engineEvents))
	e.pipe = pipeline.New(e.store, pipeIn, pipeline.Config{FlushEvery: 2 * time.Millisecond})
	pipeDone := make(chan error, 1)
	go func() { pipeDone <- e.pipe.Run(context.Background()) }() // exits when pipeIn is closed

	var payments seckill.Payments
	if !cfg.noPayments {
		e.gw = &stubGateway{intents: map[string]seckill.Reservation{}}
		payments = e.gw
	}
	var store seckill.OrderStore = e.store
	if cfg.flaky {
		e.flaky = &flakyStore{Store: e.store}
		store = e.flaky
	}
	e.svc = service.New(service.Config{
		Inventory: e.engine, Store: store, Payments: payments, Clock: e.clock, AuthSecret: []byte(authSecret),
	})
	sc := httpapi.Config{
		Service: e.svc, AuthSecret: []byte(authSecret), AdminToken: adminToken,
		PaymentSecret: []byte(paySecret), Clock: e.clock,
	}
	if cfg.server != nil {
		cfg.server(&sc)
	}
	e.api = httpapi.New(sc)
	e.srv = httptest.NewServer(e.api.Handler())
	e.client = e.srv.Client()
	t.Cleanup(func() {
		e.api.Close() // ends event streams, which would keep srv.Close waiting
		e.srv.Close()
		close(e.engineEvents) // nothing calls the engine any more
		<-fwdDone
		if err := <-pipeDone; err != nil {
			t.Errorf("pipeline: %v", err)
		}
		if err := e.store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return e
}

// stubGateway is a Payments that answers at once and never calls back: the tests deliver the
// webhooks themselves, signed or not, at the time of their choosing.
type stubGateway struct {
	mu      sync.Mutex
	intents map[string]seckill.Reservation
}

func (g *stubGateway) CreatePaymentFor(_ context.Context, r seckill.Reservation, _ seckill.Sale) (seckill.PaymentIntent, error) {
	id := "pay_" + seckill.NewID()
	g.mu.Lock()
	g.intents[id] = r
	g.mu.Unlock()
	return seckill.PaymentIntent{PaymentID: id, RedirectURL: "https://gateway.example/pay/" + id}, nil
}

// flakyStore is the real store whose RecordPayment fails while failPayments > 0, as a database
// that drops the connection mid-transaction would (the transaction is not committed).
type flakyStore struct {
	*sqlstore.Store
	failPayments atomic.Int32
}

func (s *flakyStore) RecordPayment(ctx context.Context, p seckill.PaymentRecord) (seckill.PaymentResult, error) {
	if s.failPayments.Add(-1) >= 0 {
		return "", errors.New("flaky store: connection reset by peer")
	}
	return s.Store.RecordPayment(ctx, p)
}

// ---- HTTP helpers ----

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// decode decodes the body into v, failing the test if it is not JSON.
func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("response %s: body is not JSON: %v", r, err)
	}
}

// fields decodes the body as a JSON object, to check which fields are present.
func (r response) fields(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.decode(t, &m)
	return m
}

// bodyOf turns a test's body argument into bytes: nil is no body, []byte and string are
// sent as they are, anything else is marshalled.
func bodyOf(body any) io.Reader {
	switch b := body.(type) {
	case nil:
		return nil
	case []byte:
		return bytes.NewReader(b)
	case string:
		return strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			panic(err)
		}
		return bytes.NewReader(j)
	}
}

// do sends one request over the network to the test server. auth is the whole Authorization
// header value ("" for none); headers are extra name, value pairs.
func (e *env) do(t testing.TB, method, path, auth string, body any, headers ...string) response {
	t.Helper()
	r, err := e.tryDo(method, path, auth, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryDo is do for goroutines other than the test's, which must not call t.Fatal.
func (e *env) tryDo(method, path, auth string, body any, headers ...string) (response, error) {
	req, err := http.NewRequest(method, e.srv.URL+path, bodyOf(body))
	if err != nil {
		return response{}, fmt.Errorf("new request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.client.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// serve runs one request through the handler in process, without a socket. It is used for
// bodies larger than the limit: over a socket, the server's early answer races the client's
// still-running upload, and the client may see a reset instead of the 413.
func (e *env) serve(method, path, auth string, body io.Reader, headers ...string) response {
	req := httptest.NewRequest(method, path, body)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	e.api.Handler().ServeHTTP(rec, req)
	return response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// wantStatus fails unless r has the status and a JSON content type.
func wantStatus(t testing.TB, r response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %s", ct, r.Body)
	}
}

// wantProblem fails unless r is an RFC 9457 problem with the status and code of docs/API.md.
func wantProblem(t testing.TB, r response, status int, code seckill.Code) httpapi.Problem {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d (%s); body %s", r.Status, status, code, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json; body %s", ct, r.Body)
	}
	var p httpapi.Problem
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body %s: %v", r.Body, err)
	}
	if p.Code != code || p.Status != status || p.Type != "about:blank" || p.Title == "" {
		t.Fatalf("problem = %+v, want code %q status %d type about:blank and a title", p, code, status)
	}
	return p
}

// ---- identities ----

// user returns an Authorization header for user, with a JWT minted on the test clock.
func (e *env) user(t testing.TB, user string) string {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if tok, ok := e.tokens[user]; ok {
		return "Bearer " + tok
	}
	tok, err := httpapi.MintToken([]byte(authSecret), user, e.clock.Now(), 365*24*time.Hour)
	if err != nil {
		t.Fatalf("mint token: %v", err)
	}
	e.tokens[user] = tok
	return "Bearer " + tok
}

func admin() string { return "Bearer " + adminToken }

// ---- domain helpers ----

// createSale creates a sale through the admin API. The defaults are a small active sale
// (10 units at 10.00, one per user, 60 s holds, one hour long); fields override them and a
// nil value removes a default.
func (e *env) createSale(t testing.TB, id string, fields map[string]any) service.SaleView {
	t.Helper()
	now := e.clock.Now()
	in := map[string]any{
		"id": id, "price_cents": 1000, "stock": 10, "per_user_limit": 1, "hold_seconds": 60,
		"starts_at": now, "ends_at": now.Add(time.Hour),
	}
	for k, v := range fields {
		if v == nil {
			delete(in, k)
		} else {
			in[k] = v
		}
	}
	r := e.do(t, "POST", "/api/v1/sales", admin(), in)
	wantStatus(t, r, http.StatusCreated)
	var v service.SaleView
	r.decode(t, &v)
	return v
}

// sale reads a sale's live view.
func (e *env) sale(t testing.TB, id string) service.SaleView {
	t.Helper()
	r := e.do(t, "GET", "/api/v1/sales/"+id, "", nil)
	wantStatus(t, r, http.StatusOK)
	var v service.SaleView
	r.decode(t, &v)
	return v
}

func (e *env) stock(t testing.TB, id string) seckill.StockState {
	t.Helper()
	return e.sale(t, id).StockState
}

// path asks for user's purchase path of a sale, which must be open.
func (e *env) path(t testing.TB, user, saleID string) string {
	t.Helper()
	r := e.do(t, "GET", "/api/v1/sales/"+saleID+"/path", e.user(t, user), nil)
	wantStatus(t, r, http.StatusOK)
	var p client.PurchasePath
	r.decode(t, &p)
	return p.Path
}

// pathAt fetches a purchase path while the clock reads at, then puts the clock back: the
// token depends only on (sale, user, starts_at), so it can be used before the sale opens or
// after it ends, to reach the buy checks that come after the token.
func (e *env) pathAt(t testing.TB, user, saleID string, at time.Time) string {
	t.Helper()
	back := e.clock.Now()
	e.clock.Set(at)
	defer e.clock.Set(back)
	return e.path(t, user, saleID)
}

// buy POSTs to a purchase path; key is the Idempotency-Key ("" for none).
func (e *env) buy(t testing.TB, user, path string, body any, key string) response {
	t.Helper()
	var h []string
	if key != "" {
		h = []string{"Idempotency-Key", key}
	}
	return e.do(t, "POST", path, e.user(t, user), body, h...)
}

// mustBuy buys one unit and expects the status (201 held or 202 queued).
func (e *env) mustBuy(t testing.TB, user, saleID string, status int) seckill.Reservation {
	t.Helper()
	r := e.buy(t, user, e.path(t, user, saleID), nil, "")
	wantStatus(t, r, status)
	var res seckill.Reservation
	r.decode(t, &res)
	e.track(res.ID, user)
	return res
}

// track adds a reservation to what snapshots compare.
func (e *env) track(rid, user string) {
	e.mu.Lock()
	e.tracked[rid] = user
	e.mu.Unlock()
}

// reservation reads a reservation as its owner.
func (e *env) reservation(t testing.TB, user, rid string) (seckill.Reservation, map[string]any) {
	t.Helper()
	r := e.do(t, "GET", "/api/v1/reservations/"+rid, e.user(t, user), nil)
	wantStatus(t, r, http.StatusOK)
	var res seckill.Reservation
	r.decode(t, &res)
	return res, r.fields(t)
}

// status reads a reservation's status.
func (e *env) status(t testing.TB, user, rid string) seckill.ReservationStatus {
	t.Helper()
	res, _ := e.reservation(t, user, rid)
	return res.Status
}

// pay starts a payment for a held reservation.
func (e *env) pay(t testing.TB, user, rid string) seckill.PaymentIntent {
	t.Helper()
	r := e.do(t, "POST", "/api/v1/reservations/"+rid+"/pay", e.user(t, user), nil)
	wantStatus(t, r, http.StatusOK)
	var in seckill.PaymentIntent
	r.decode(t, &in)
	if in.PaymentID == "" || in.RedirectURL == "" {
		t.Fatalf("payment intent %s lacks payment_id or redirect_url", r.Body)
	}
	return in
}

// webhook delivers a payment event signed now with the payment secret.
func (e *env) webhook(t testing.TB, ev payment.Event) response {
	t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return e.webhookRaw(t, body, payment.Sign([]byte(paySecret), e.clock.Now(), body))
}

func (e *env) webhookRaw(t testing.TB, body []byte, sig string) response {
	t.Helper()
	if sig == "" {
		return e.do(t, "POST", webhookURL, "", body)
	}
	return e.do(t, "POST", webhookURL, "", body, payment.SignatureHeader, sig)
}

// wantResult delivers ev and expects 200 with the given result.
func (e *env) wantResult(t testing.TB, ev payment.Event, want seckill.PaymentResult) {
	t.Helper()
	r := e.webhook(t, ev)
	wantStatus(t, r, http.StatusOK)
	var got struct{ Result seckill.PaymentResult }
	r.decode(t, &got)
	if got.Result != want {
		t.Fatalf("webhook %+v: result %q, want %q", ev, got.Result, want)
	}
}

// succeeded is the webhook event of a succeeded payment of res.
func succeeded(paymentID string, res seckill.Reservation) payment.Event {
	return payment.Event{PaymentID: paymentID, ReservationID: res.ID, AmountCents: res.AmountCents, Status: payment.StatusSucceeded}
}

// orders lists a user's orders.
func (e *env) orders(t testing.TB, user string) []seckill.Order {
	t.Helper()
	r := e.do(t, "GET", "/api/v1/orders", e.user(t, user), nil)
	wantStatus(t, r, http.StatusOK)
	var v struct{ Orders []seckill.Order }
	r.decode(t, &v)
	return v.Orders
}

// drain waits until every event the engine emitted so far is stored. All engine calls happen
// inside requests that have returned, so the events are already in the channel; the check is
// repeated after a pause to cover an event the forwarder had taken but not yet counted.
func (e *env) drain(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	stable := 0
	for stable < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("pipeline did not drain: forwarded %d, applied %d, waiting %d",
				e.forwarded.Load(), e.pipe.Applied(), len(e.engineEvents))
		}
		time.Sleep(10 * time.Millisecond)
		if len(e.engineEvents) == 0 && e.pipe.Backlog() == 0 && e.forwarded.Load() == e.pipe.Applied() {
			stable++
		} else {
			stable = 0
		}
	}
}

// ---- snapshots: "nothing changed" ----

// snapshot is everything a refused request must leave alone: every sale (definition, status
// and stock_state), every known user's /orders and every tracked reservation.
type snapshot struct {
	Sales        []service.SaleView
	Orders       map[string]string
	Reservations map[string]string
}

func (e *env) snapshot(t testing.TB) snapshot {
	t.Helper()
	var s snapshot
	r := e.do(t, "GET", "/api/v1/sales", "", nil)
	wantStatus(t, r, http.StatusOK)
	var list struct{ Sales []service.SaleView }
	r.decode(t, &list)
	// Each sale as read by id: the list is an instance cache whose counts follow the engine a
	// moment later (docs/DECISIONS.md "Lists from an instance cache"), so a snapshot of it taken
	// just after a change could differ from the next one with nothing changed in between.
	for i, v := range list.Sales {
		r := e.do(t, "GET", "/api/v1/sales/"+v.ID, "", nil)
		wantStatus(t, r, http.StatusOK)
		r.decode(t, &list.Sales[i])
		list.Sales[i].ServerTime = time.Time{}
	}
	s.Sales = list.Sales
	e.mu.Lock()
	users := make([]string, 0, len(e.tokens))
	for u := range e.tokens {
		users = append(users, u)
	}
	tracked := make(map[string]string, len(e.tracked))
	for rid, u := range e.tracked {
		tracked[rid] = u
	}
	e.mu.Unlock()
	s.Orders = map[string]string{}
	for _, u := range users {
		r := e.do(t, "GET", "/api/v1/orders", e.user(t, u), nil)
		wantStatus(t, r, http.StatusOK)
		s.Orders[u] = string(r.Body)
	}
	s.Reservations = map[string]string{}
	for rid, u := range tracked {
		r := e.do(t, "GET", "/api/v1/reservations/"+rid, e.user(t, u), nil)
		wantStatus(t, r, http.StatusOK)
		s.Reservations[rid] = string(r.Body)
	}
	return s
}

// unchanged runs fn and fails if it changed any sale, order or tracked reservation.
func (e *env) unchanged(t testing.TB, fn func()) {
	t.Helper()
	before := e.snapshot(t)
	fn()
	after := e.snapshot(t)
	if !reflect.DeepEqual(before.Sales, after.Sales) {
		t.Fatalf("sales changed:\nbefore %+v\nafter  %+v", before.Sales, after.Sales)
	}
	for u, o := range before.Orders {
		if after.Orders[u] != o {
			t.Fatalf("orders of %s changed:\nbefore %s\nafter  %s", u, o, after.Orders[u])
		}
	}
	for rid, b := range before.Reservations {
		if after.Reservations[rid] != b {
			t.Fatalf("reservation %s changed:\nbefore %s\nafter  %s", rid, b, after.Reservations[rid])
		}
	}
}

// refused sends a request that must be refused with status and code and must change nothing.
func (e *env) refused(t testing.TB, status int, code seckill.Code, send func() response) {
	t.Helper()
	e.unchanged(t, func() {
		t.Helper()
		wantProblem(t, send(), status, code)
	})
}

// wantStock fails unless the sale's stock_state is want.
func (e *env) wantStock(t testing.TB, saleID string, want seckill.StockState) {
	t.Helper()
	if got := e.stock(t, saleID); got != want {
		t.Fatalf("stock_state of %s = %+v, want %+v", saleID, got, want)
	}
}
