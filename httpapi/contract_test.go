package httpapi_test

// Contract fuzzing: every operation of the served /openapi.json is driven with generated valid
// and invalid inputs and credentials, and every exchange is judged against the document by
// libopenapi-validator (contract.check). The test fails on a 5xx other than 503 with
// Retry-After, on an answer the document does not allow for that operation (status, content
// type, body schema, required headers), on a request the generator and the document disagree
// about (the document lacks a bound, or the generator is wrong), on a request the document
// refuses that the server accepted, and if the audit of a sale the run touched is not ok.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"pgregory.net/rapid"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/pipeline"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/seckilltest"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// ---- the checker ----

// contract is the OpenAPI document a server serves, ready to judge exchanges.
type contract struct {
	v   validator.Validator
	ops []string // every operationId of the document
}

// exchange is one recorded request and its answer.
type exchange struct {
	Op      string // the operationId the generator meant to call (for coverage and messages)
	Method  string
	Target  string // path and query
	Header  http.Header
	Body    []byte
	HasBody bool
	// Valid is the generator's verdict on the request (nil: no verdict). The document must
	// agree with it, so that every documented bound is in the schema.
	Valid *bool

	Status     int
	RespHeader http.Header
	RespBody   []byte
}

func (x exchange) String() string {
	clip := func(b []byte) string {
		if len(b) > 400 {
			return fmt.Sprintf("%q… (%d bytes)", b[:400], len(b))
		}
		return fmt.Sprintf("%q", b)
	}
	auth := x.Header.Get("Authorization")
	if len(auth) > 24 {
		auth = auth[:24] + "…"
	}
	return fmt.Sprintf("%s %s %s (auth %q, idem %q, sig %q) body %s → %d %s %s", x.Op, x.Method, x.Target, auth,
		x.Header.Get("Idempotency-Key"), x.Header.Get(payment.SignatureHeader), clip(x.Body), x.Status,
		x.RespHeader.Get("Content-Type"), clip(x.RespBody))
}

// newContract parses an OpenAPI document and builds its validator. Formats (date-time) are
// asserted, so times are checked too.
func newContract(raw []byte) (*contract, error) {
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("the document is not valid OpenAPI: %s", describe(verrs))
	}
	var ids struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, err
	}
	c := &contract{v: v}
	for _, item := range ids.Paths {
		for _, op := range item {
			if op.OperationID != "" {
				c.ops = append(c.ops, op.OperationID)
			}
		}
	}
	sort.Strings(c.ops)
	return c, nil
}

// request rebuilds the exchange's request (each validation reads the body).
func (x exchange) request() *http.Request {
	var body io.Reader
	if x.HasBody {
		body = bytes.NewReader(x.Body)
	}
	r := httptest.NewRequest(x.Method, x.Target, body)
	for k, vs := range x.Header {
		r.Header[k] = append([]string(nil), vs...)
	}
	return r
}

// check judges one exchange and returns what is wrong with it (nothing: it is within the
// contract). It is the single judge of the contract test and of its negative control.
func (c *contract) check(x exchange) []string {
	var bad []string
	if x.Status >= 500 && (x.Status != http.StatusServiceUnavailable || x.RespHeader.Get("Retry-After") == "") {
		bad = append(bad, fmt.Sprintf("answer %d: a 5xx other than 503 with Retry-After", x.Status))
	}
	resp := &http.Response{
		StatusCode: x.Status, Header: x.RespHeader, Body: io.NopCloser(bytes.NewReader(x.RespBody)),
		ContentLength: int64(len(x.RespBody)),
	}
	if ok, errs := c.v.ValidateHttpResponse(x.request(), resp); !ok {
		bad = append(bad, "answer off the document: "+describe(errs))
	}
	reqOK, reqErrs := c.v.ValidateHttpRequest(x.request())
	if x.Valid != nil && *x.Valid != reqOK {
		if *x.Valid {
			bad = append(bad, "a request the generator built valid is refused by the document: "+describe(reqErrs))
		} else {
			bad = append(bad, "a request the generator built invalid passes the document (a bound is missing from the schema)")
		}
	}
	if !reqOK && x.Status >= 200 && x.Status < 300 {
		bad = append(bad, fmt.Sprintf("answer %d to a request the document refuses (%s)", x.Status, describe(reqErrs)))
	}
	if x.Valid != nil && !*x.Valid && x.Status < 400 {
		bad = append(bad, fmt.Sprintf("answer %d to an invalid request", x.Status))
	}
	return bad
}

// describe renders validation errors on one line.
func describe(errs []*verrors.ValidationError) string {
	var parts []string
	for _, e := range errs {
		s := e.Message
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		for _, f := range e.SchemaValidationErrors {
			s += " [" + f.Error() + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// ---- the stacks under test ----

// contractStack is one server over one engine, on a manual clock.
type contractStack struct {
	name    string
	clock   *seckilltest.ManualClock
	handler http.Handler
	url     string
	client  *http.Client
}

// newContractStack starts the whole server over the named engine ("memory" or "redis"),
// with --dev (so /dev/token answers) and a stub payment gateway; Cleanup stops it.
func newContractStack(t *testing.T, engine string) *contractStack {
	t.Helper()
	ctx := context.Background()
	st := &contractStack{name: engine, clock: seckilltest.NewManualClock(t0)}
	store, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	var inv seckill.Inventory
	var windows seckill.SaleWindows  // the Redis engine's, as cmd/seckill wires it
	var stop []func()                // in order, after HTTP is closed
	var cold func() httpapi.ColdView // the Redis engine's cold side, as cmd/seckill wires it
	switch engine {
	case "memory":
		events := make(chan seckill.Event, 1<<16)
		inv = memory.New(st.clock, memory.WithEvents(events))
		pipe := pipeline.New(store, events, pipeline.Config{FlushEvery: 2 * time.Millisecond})
		done := make(chan error, 1)
		go func() { done <- pipe.Run(context.Background()) }()
		stop = append(stop, func() {
			close(events)
			if err := <-done; err != nil {
				t.Errorf("pipeline: %v", err)
			}
		})
	case "redis":
		clients, err := redisinv.Dial(ctx, testenv.Redis(t))
		if err != nil {
			t.Fatalf("redis: %v", err)
		}
		prefix := fmt.Sprintf("seckill-contract-%d-%d:", os.Getpid(), time.Now().UnixNano())
		eng := redisinv.New(clients.Inventory, redisinv.WithTestClock(st.clock), redisinv.WithPrefix(prefix))
		inv, windows = eng, eng
		cold = func() httpapi.ColdView {
			st := eng.ColdStats()
			return httpapi.ColdView{Entries: st.Entries, Max: redisinv.ColdCacheMax, Cooled: st.Cooled, Loaded: st.Loaded}
		}
		// Every sale is consumed until the end, however far the test clock has moved past it,
		// so that the audits compare a fully stored database.
		all := func(ctx context.Context) ([]string, error) {
			sales, _, err := store.Sales(ctx)
			ids := make([]string, 0, len(sales))
			for _, s := range sales {
				ids = append(ids, s.ID)
			}
			return ids, err
		}
		cctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		consumer := eng.NewConsumer(store, redisinv.ConsumerConfig{Linger: -1, List: all})
		wg.Go(func() { _ = consumer.Run(cctx) })
		stop = append(stop, func() {
			cancel()
			wg.Wait()
			_ = eng.Close()
			dropRedisPrefix(t, clients, prefix)
			clients.Close()
		})
	default:
		t.Fatalf("unknown engine %q", engine)
	}
	svc := service.New(service.Config{
		Inventory: inv, Windows: windows, Store: store, Payments: &stubGateway{intents: map[string]seckill.Reservation{}},
		Clock: st.clock, AuthSecret: []byte(authSecret),
	})
	api := httpapi.New(httpapi.Config{
		Service: svc, AuthSecret: []byte(authSecret), AdminToken: adminToken, PaymentSecret: []byte(paySecret),
		Clock: st.clock, Dev: true, Cold: cold,
	})
	st.handler = api.Handler()
	srv := httptest.NewServer(st.handler)
	st.url, st.client = srv.URL, srv.Client()
	t.Cleanup(func() {
		api.Close()
		srv.Close()
		for _, f := range stop {
			f()
		}
		if err := store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// dropRedisPrefix deletes the keys the test wrote.
func dropRedisPrefix(t *testing.T, c *redisinv.Clients, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cursor uint64
	for {
		rdb := c.Inventory
		e, err := rdb.Do(ctx, rdb.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Errorf("scan %s: %v", prefix, err)
			return
		}
		if len(e.Elements) > 0 {
			if err := rdb.Do(ctx, rdb.B().Del().Key(e.Elements...).Build()).Error(); err != nil {
				t.Errorf("del: %v", err)
				return
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			return
		}
	}
}

// ---- the test ----

// contractChecks is the number of rapid runs per engine unless -rapid.checks or RAPID_CHECKS
// says otherwise: about 20–40 s per engine with -race on a busy 2-core machine.
const contractChecks = 80

// TestContractMemory and TestContractRedis drive every operation of the served document.
// Raise the effort with -rapid.checks=N (or RAPID_CHECKS=N) and -rapid.steps.
func TestContractMemory(t *testing.T) { runContract(t, "memory") }

func TestContractRedis(t *testing.T) {
	testenv.Redis(t) // skips without SECKILL_TEST_REDIS, fails under CI=true
	runContract(t, "redis")
}

func runContract(t *testing.T, engine string) {
	st := newContractStack(t, engine)
	res, err := st.client.Get(st.url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %v", res.StatusCode, err)
	}
	c, err := newContract(raw)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{st: st, c: c, seen: map[string]map[int]int{}, saleHasRoom: bytes.Contains(raw, []byte(`"waiting_room"`))}
	defer withDefaultChecks(contractChecks)()
	start := time.Now()
	rapid.Check(t, h.run)
	t.Logf("%s engine: %d runs, %d exchanges in %v", engine, h.runs.Load(), h.exchanges.Load(), time.Since(start).Round(time.Millisecond))

	// Every operation of the document was driven, and the answers seen are logged.
	var missing []string
	for _, op := range c.ops {
		if len(h.seen[op]) == 0 {
			missing = append(missing, op)
		}
		codes := make([]int, 0, len(h.seen[op]))
		for code := range h.seen[op] {
			codes = append(codes, code)
		}
		sort.Ints(codes)
		var b strings.Builder
		for _, code := range codes {
			fmt.Fprintf(&b, " %d×%d", code, h.seen[op][code])
		}
		t.Logf("%-18s%s", op, b.String())
	}
	if len(missing) > 0 && !t.Failed() {
		t.Errorf("operations of the document never driven: %v", missing)
	}
}

// withDefaultChecks sets rapid's number of checks to n unless -rapid.checks or RAPID_CHECKS was
// given, and returns the function that puts it back.
func withDefaultChecks(n int) func() {
	f := flag.Lookup("rapid.checks")
	if f == nil || os.Getenv("RAPID_CHECKS") != "" {
		return func() {}
	}
	set := false
	flag.Visit(func(g *flag.Flag) { set = set || g.Name == "rapid.checks" })
	if set {
		return func() {}
	}
	old := f.Value.String()
	_ = f.Value.Set(strconv.Itoa(n))
	return func() { _ = f.Value.Set(old) }
}

// harness drives one stack; its state spans rapid runs, each run's names are its own.
type harness struct {
	st *contractStack
	c  *contract

	runs, exchanges atomic.Int64
	mu              sync.Mutex
	seen            map[string]map[int]int // operationId → status → count
	// saleHasRoom: the document's Sale has waiting_room, so a run may make a sale with a room
	// (whose reads, in the list too, must then match the document).
	saleHasRoom bool
}

// model is what one run knows: its sales, paths, reservations and payments.
type model struct {
	rt      *rapid.T
	h       *harness
	prefix  string // of every sale id and user id of this run
	sales   []string
	created map[string]bool
	paths   map[string]string // user + " " + sale → purchase path
	res     []reservationRef
	payIDs  []string
	users   []string
	rooms   []string // sales with a waiting room (driven by the room operations only)
}

type reservationRef struct {
	id, user string
	amount   int64
}

func (h *harness) run(rt *rapid.T) {
	n := h.runs.Add(1)
	m := &model{rt: rt, h: h, prefix: fmt.Sprintf("r%d", n), created: map[string]bool{}, paths: map[string]string{}}
	for i := range 3 {
		m.users = append(m.users, fmt.Sprintf("%s-u%d", m.prefix, i))
	}
	// Every run starts with one open sale, so that buying has something to act on.
	m.createSale(true)
	if h.saleHasRoom {
		m.createRoomSale()
	}
	actions := map[string]func(){
		"createSale": func() { m.createSale(false) }, "listSales": m.listSales, "getSale": m.getSale,
		"purchasePath": m.purchasePath, "buy": m.buy, "getReservation": m.getReservation,
		"cancelReservation": m.cancelReservation, "pay": m.pay, "paymentWebhook": m.webhook,
		"gatewayPaymentWebhook": m.gatewayWebhook, "listOrders": m.orders, "listRefunds": m.refunds, "exportStatus": m.exportStatus, "hotStatus": m.hotStatus, "audit": m.audit, "addStock": m.addStock, "closeSale": m.closeSale,
		"updateSale": m.updateSale, "deleteSale": m.deleteSale,
		"devToken": m.devToken, "signIn": m.simple("signIn", "/api/v1/signin"), "healthz": m.simple("healthz", "/healthz"), "readyz": m.simple("readyz", "/readyz"),
		"openapi": m.simple("openapi", "/openapi.json"), "saleEvents": m.events, "saleActivity": m.activity,
		"advanceClock": m.advance, "waitingRoom": m.room,
		"rush": func() { // a burst of buys: sell-outs, queues, per-user limits and the rate limit
			for range 6 {
				m.buy()
			}
		},
	}
	names := make([]string, 0, len(actions))
	for k := range actions {
		names = append(names, k)
	}
	sort.Strings(names)
	steps := rapid.IntRange(20, 60).Draw(rt, "steps")
	for range steps {
		actions[rapid.SampledFrom(names).Draw(rt, "action")]()
	}
	m.auditAll()
}

// ---- sending ----

type call struct {
	op, method, target, auth string
	header                   []string // name, value pairs
	body                     []byte
	hasBody                  bool
	valid                    *bool
	inProcess                bool // served without a socket (bodies over the limit)
}

func verdict(v bool) *bool { return &v }

// send performs a call, judges the exchange and fails the run on anything wrong.
func (m *model) send(c call) exchange {
	m.rt.Helper()
	x := exchange{Op: c.op, Method: c.method, Target: c.target, Header: http.Header{}, Body: c.body, HasBody: c.hasBody, Valid: c.valid}
	if c.auth != "" {
		x.Header.Set("Authorization", c.auth)
	}
	if c.hasBody {
		x.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(c.header); i += 2 {
		x.Header.Set(c.header[i], c.header[i+1])
	}
	if c.inProcess {
		rec := httptest.NewRecorder()
		m.h.st.handler.ServeHTTP(rec, x.request())
		x.Status, x.RespHeader, x.RespBody = rec.Code, rec.Result().Header, rec.Body.Bytes()
	} else {
		var body io.Reader
		if c.hasBody {
			body = bytes.NewReader(c.body)
		}
		req, err := http.NewRequest(c.method, m.h.st.url+c.target, body)
		if err != nil {
			m.rt.Fatalf("%s: %v", c.op, err)
		}
		req.Header = x.Header.Clone()
		res, err := m.h.st.client.Do(req)
		if err != nil {
			m.rt.Fatalf("%s %s: %v", c.method, c.target, err)
		}
		x.RespBody, err = io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			m.rt.Fatalf("%s %s: read: %v", c.method, c.target, err)
		}
		x.Status, x.RespHeader = res.StatusCode, res.Header
	}
	m.judge(x)
	return x
}

// judge counts the exchange and fails the run if the checker finds anything.
func (m *model) judge(x exchange) {
	m.rt.Helper()
	m.h.exchanges.Add(1)
	m.h.mu.Lock()
	if m.h.seen[x.Op] == nil {
		m.h.seen[x.Op] = map[int]int{}
	}
	m.h.seen[x.Op][x.Status]++
	m.h.mu.Unlock()
	if bad := m.h.c.check(x); len(bad) > 0 {
		m.rt.Fatalf("[%s engine] %s\n  %s", m.h.st.name, x, strings.Join(bad, "\n  "))
	}
}

// ---- credentials ----

func (m *model) user() string { return rapid.SampledFrom(m.users).Draw(m.rt, "user") }

func (m *model) jwt(user string, now time.Time, ttl time.Duration, secret string) string {
	tok, err := httpapi.MintToken([]byte(secret), user, now, ttl)
	if err != nil {
		m.rt.Fatalf("mint: %v", err)
	}
	return "Bearer " + tok
}

// userAuth draws the credentials of a user call: mostly the user's valid JWT, sometimes none
// (refused by the document) or a bearer token the server must refuse.
func (m *model) userAuth(user string) (auth string, present bool) {
	auth, present, _ = m.userAuthOK(user)
	return auth, present
}

// userAuthOK is userAuth that also tells whether the credentials are the user's valid JWT.
func (m *model) userAuthOK(user string) (auth string, present, good bool) {
	now := m.h.st.clock.Now()
	if rapid.IntRange(0, 9).Draw(m.rt, "userAuthBad") < 8 {
		return m.jwt(user, now, time.Hour, authSecret), true, true
	}
	switch rapid.IntRange(0, 4).Draw(m.rt, "userAuth") {
	case 0:
		return "", false, false
	case 1:
		return "Bearer not-a-jwt", true, false
	case 2:
		return m.jwt(user, now.Add(-48*time.Hour), time.Hour, authSecret), true, false // expired
	case 3:
		return m.jwt(user, now, time.Hour, "another-secret-0123456789abcdef"), true, false
	default:
		return "Bearer " + adminToken, true, false
	}
}

// adminAuth draws the credentials of an admin call.
func (m *model) adminAuth() (auth string, present bool) {
	if rapid.IntRange(0, 9).Draw(m.rt, "adminAuthBad") < 8 {
		return "Bearer " + adminToken, true
	}
	switch rapid.IntRange(0, 2).Draw(m.rt, "adminAuth") {
	case 0:
		return "", false
	case 1:
		return "Bearer wrong-admin-token", true
	default:
		return m.jwt(m.users[0], m.h.st.clock.Now(), time.Hour, authSecret), true
	}
}

// ---- ids ----

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

// saleRef draws a sale id for a path: one of the run's sales, an unknown valid id, or an id the
// document refuses (escaped into the path). "." and ".." are not drawn here: a router cleans
// them out of a path before any handler sees it.
func (m *model) saleRef() (id string, valid bool) {
	switch k := rapid.IntRange(0, 9).Draw(m.rt, "saleRef"); {
	case k < 7 && len(m.sales) > 0:
		return rapid.SampledFrom(m.sales).Draw(m.rt, "sale"), true
	case k < 8:
		return m.prefix + "-unknown", true
	case k < 9:
		return strings.Repeat("x", 65), false
	default:
		return rapid.SampledFrom([]string{"a b", "é", "a~b", "a!", "a%b", "a:b", "a@b"}).Draw(m.rt, "badID"), false
	}
}

// ---- operations ----

func (m *model) simple(op, path string) func() {
	return func() { m.send(call{op: op, method: "GET", target: path, valid: verdict(true)}) }
}

func (m *model) listSales() {
	if rapid.Bool().Draw(m.rt, "listAll") { // every sale, for admins
		// The document cannot make security depend on a parameter: without a token the
		// request is valid to it, and the answer is its documented 401.
		auth, _ := m.adminAuth()
		x := m.send(call{op: "listSales", method: "GET", target: "/api/v1/sales?all=true", auth: auth, valid: verdict(true)})
		if auth == "" && x.Status != http.StatusUnauthorized {
			m.rt.Fatalf("[%s engine] the list of every sale without a token was answered %d, want 401: %s", m.h.st.name, x.Status, x)
		}
		return
	}
	m.send(call{op: "listSales", method: "GET", target: "/api/v1/sales", valid: verdict(true)})
}

func (m *model) updateSale() {
	rt := m.rt
	id, ok := m.saleRef()
	auth, present := m.adminAuth()
	body, valid := fmt.Appendf(nil, `{"listed":%t}`, rapid.Bool().Draw(rt, "listed")), true
	if rapid.IntRange(0, 4).Draw(rt, "badUpdate") == 0 {
		body, valid = []byte(rapid.SampledFrom([]string{`{}`, `{"listed":"no"}`, `{"listed":1}`, `null`,
			`{"listed":true,"currency":"eur"}`, `{"listed":null}`}).Draw(rt, "badUpdateBody")), false
	}
	x := m.send(call{op: "updateSale", method: "PATCH", target: "/api/v1/sales/" + url.PathEscape(id), auth: auth,
		body: body, hasBody: true, valid: verdict(ok && present && valid)})
	if !valid && auth == "Bearer "+adminToken && x.Status != http.StatusBadRequest {
		m.rt.Fatalf("[%s engine] an invalid sale update was answered %d, want 400: %s", m.h.st.name, x.Status, x)
	}
}

// deleteSale deletes rarely (a deleted sale is gone for the rest of the run); a sale someone
// reserved in must be refused, and one that is deleted leaves the run's list of sales.
func (m *model) deleteSale() {
	if rapid.IntRange(0, 2).Draw(m.rt, "reallyDelete") > 0 {
		return
	}
	id, ok := m.saleRef()
	auth, present := m.adminAuth()
	x := m.send(call{op: "deleteSale", method: "DELETE", target: "/api/v1/sales/" + url.PathEscape(id), auth: auth, valid: verdict(ok && present)})
	if x.Status == http.StatusNoContent {
		m.sales = slices.DeleteFunc(m.sales, func(s string) bool { return s == id })
		delete(m.created, id)
	}
}

func (m *model) getSale() {
	id, ok := m.saleRef()
	m.send(call{op: "getSale", method: "GET", target: "/api/v1/sales/" + url.PathEscape(id), valid: verdict(ok)})
}

// saleBody is a generated sale input and whether the server must create it.
type saleBody struct {
	fields map[string]any
	raw    []byte // used instead of fields when set
	valid  bool   // valid per the document
	create bool   // valid and consistent: 201 (or 409 for a taken id)
	id     string
}

func (m *model) createSale(open bool) {
	var b saleBody
	if open {
		now := m.h.st.clock.Now()
		b = saleBody{fields: map[string]any{"id": m.prefix + "-open", "price_cents": 1000, "stock": 3,
			"per_user_limit": 2, "hold_seconds": 30, "queue_limit": 5,
			"starts_at": now.Format(time.RFC3339Nano), "ends_at": now.Add(time.Hour).Format(time.RFC3339Nano)},
			valid: true, create: true, id: m.prefix + "-open"}
	} else {
		b = m.drawSale()
	}
	body := b.raw
	if body == nil {
		body = mustMarshal(b.fields)
	}
	auth, present := "Bearer "+adminToken, true
	if !open {
		auth, present = m.adminAuth()
	}
	large := !open && rapid.IntRange(0, 19).Draw(m.rt, "large") == 0
	if large { // over 64 KiB: the name alone breaks a bound, and the answer must be 4xx
		b.fields = map[string]any{"price_cents": 1, "stock": 1, "name": strings.Repeat("n", httpapi.MaxBody)}
		body, b.valid, b.create = mustMarshal(b.fields), false, false
	}
	x := m.send(call{op: "createSale", method: "POST", target: "/api/v1/sales", auth: auth, body: body, hasBody: true,
		valid: verdict(b.valid && present), inProcess: large})
	adminOK := auth == "Bearer "+adminToken
	switch {
	case b.create && adminOK:
		taken := b.id != "" && m.created[b.id]
		want := http.StatusCreated
		if taken {
			want = http.StatusConflict
		}
		if x.Status != want {
			m.rt.Fatalf("[%s engine] a valid sale was answered %d, want %d: %s", m.h.st.name, x.Status, want, x)
		}
	case !b.valid && adminOK && !large && x.Status != http.StatusBadRequest:
		m.rt.Fatalf("[%s engine] an invalid sale was answered %d, want 400: %s", m.h.st.name, x.Status, x)
	case b.valid && !b.create && adminOK && !large && x.Status != http.StatusBadRequest:
		m.rt.Fatalf("[%s engine] a sale within the document but breaking a rule across fields was answered %d, want 400: %s", m.h.st.name, x.Status, x)
	}
	if x.Status == http.StatusCreated {
		var v struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(x.RespBody, &v)
		m.created[v.ID] = true
		m.sales = append(m.sales, v.ID)
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// drawSale draws a sale input: valid (and then consistent or not), or broken in one way.
func (m *model) drawSale() saleBody {
	rt := m.rt
	now := m.h.st.clock.Now()
	f := map[string]any{}
	b := saleBody{valid: true, create: true}
	if rapid.IntRange(0, 4).Draw(rt, "hasID") > 0 {
		suffix := rapid.StringOfN(rapid.SampledFrom([]rune(idAlphabet)), 1, 60-len(m.prefix), -1).Draw(rt, "idSuffix")
		b.id = m.prefix + "-" + suffix
		f["id"] = b.id
	}
	if rapid.Bool().Draw(rt, "hasName") {
		// Printable text, multi-byte runes included: the bound is 200 bytes.
		f["name"] = rapid.StringOfN(rapid.RuneFrom(nil, unicode.L, unicode.N, unicode.P, unicode.Zs), 0, 60, 200).Draw(rt, "name")
	}
	price := rapid.OneOf(rapid.Int64Range(0, 5000), rapid.Int64Range(0, 1_000_000_000_000)).Draw(rt, "price")
	f["price_cents"] = price
	stock := rapid.OneOf(rapid.IntRange(0, 6), rapid.IntRange(0, 1_000_000_000)).Draw(rt, "stock")
	f["stock"] = stock
	if rapid.Bool().Draw(rt, "hasHoldback") {
		f["holdback"] = rapid.IntRange(0, min(stock, 3)).Draw(rt, "holdback")
	}
	start := now
	if rapid.Bool().Draw(rt, "hasStart") {
		start = now.Add(time.Duration(rapid.IntRange(-7200, 7200).Draw(rt, "startOffset")) * time.Second)
		if rapid.IntRange(0, 9).Draw(rt, "farStart") == 0 {
			start = time.Date(8999, 6, 1, 0, 0, 0, 0, time.UTC)
		}
		f["starts_at"] = start.UTC().Format(time.RFC3339Nano)
	}
	if rapid.Bool().Draw(rt, "hasEnd") {
		end := start.Add(time.Duration(rapid.IntRange(1, 3*3600).Draw(rt, "length")) * time.Second)
		f["ends_at"] = end.UTC().Format(time.RFC3339Nano)
	}
	if rapid.Bool().Draw(rt, "hasLimit") {
		limit := rapid.IntRange(1, 3).Draw(rt, "limit")
		if price <= 9007 && rapid.IntRange(0, 9).Draw(rt, "bigLimit") == 0 {
			limit = 1_000_000_000 // per_user_limit × price_cents ≤ 2^53 − 1 still
		}
		f["per_user_limit"] = limit
	}
	if rapid.Bool().Draw(rt, "hasHold") {
		f["hold_seconds"] = rapid.OneOf(rapid.IntRange(1, 120), rapid.IntRange(1, 604800)).Draw(rt, "hold")
	}
	if rapid.Bool().Draw(rt, "hasQueue") {
		f["queue_limit"] = rapid.IntRange(0, 8).Draw(rt, "queue")
	}
	if rapid.Bool().Draw(rt, "hasCurrency") {
		f["currency"] = rapid.SampledFrom([]string{"usd", "eur", "jpy", "xts"}).Draw(rt, "currency")
	}
	if rapid.Bool().Draw(rt, "hasListed") {
		f["listed"] = rapid.Bool().Draw(rt, "listed")
	}
	if rapid.IntRange(0, 3).Draw(rt, "hasSegments") == 0 {
		f["segments"] = 1 // more is the Redis engine's (the memory engine refuses it: TestSegmentsOnMemoryEngine)
	}
	if rapid.Bool().Draw(rt, "hasPreheat") {
		f["preheat_seconds"] = rapid.OneOf(rapid.SampledFrom([]int{0, seckill.MaxPreheatSeconds}), rapid.IntRange(0, seckill.MaxPreheatSeconds)).Draw(rt, "preheat")
	}
	if rapid.IntRange(0, 3).Draw(rt, "hasRoom") == 0 {
		preheat := seckill.DefaultPreheatSeconds
		if p, ok := f["preheat_seconds"].(int); ok {
			preheat = p
		}
		room, consistent := m.drawRoom(preheat)
		f["waiting_room"] = room
		b.create = consistent // opens_seconds past preheat_seconds: within the document, refused by the server
	}
	if rapid.IntRange(0, 2).Draw(rt, "breakIt") > 0 {
		return b.withFields(f)
	}
	// Break it: each way is refused by the document and must be 400 from the server.
	b.valid, b.create = false, false
	breaks := []func(){
		func() {
			f["id"] = rapid.SampledFrom([]string{".", "..", strings.Repeat("i", 65), "a/b", "a b", "é"}).Draw(rt, "badID")
		},
		func() {
			f["name"] = "bad" + rapid.SampledFrom([]string{"\x00", "\n", "\x1f", "\x7f", "\u0085"}).Draw(rt, "ctl") + "name"
		},
		func() { f["name"] = strings.Repeat("n", 201) },
		func() { f["price_cents"] = rapid.SampledFrom([]int64{-1, 1_000_000_000_001}).Draw(rt, "badPrice") },
		func() { f["stock"] = rapid.SampledFrom([]int64{-1, 1_000_000_001}).Draw(rt, "badStock") },
		func() { f["holdback"] = -1 },
		func() { f["per_user_limit"] = rapid.SampledFrom([]int64{0, -1, 1_000_000_001}).Draw(rt, "badLimit") },
		func() { f["hold_seconds"] = rapid.SampledFrom([]int64{0, -5, 604801}).Draw(rt, "badHold") },
		func() { f["queue_limit"] = rapid.SampledFrom([]int64{-1, 10_000_000_001}).Draw(rt, "badQueue") },
		func() { f["surprise"] = 1 },
		func() {
			f["currency"] = rapid.SampledFrom([]any{"USD", "eu", "euro", "", "u$d", 840}).Draw(rt, "badCurrency")
		},
		func() { f["listed"] = rapid.SampledFrom([]any{"true", 1, "no"}).Draw(rt, "badListed") },
		func() { f["segments"] = rapid.SampledFrom([]any{0, -1, 65, "2", 1.5}).Draw(rt, "badSegments") },
		func() {
			f["preheat_seconds"] = rapid.SampledFrom([]any{-1, seckill.MaxPreheatSeconds + 1, "abc", 1.5}).Draw(rt, "badPreheat")
		},
		func() {
			room, _ := m.drawRoom(0)
			room["opens_seconds"] = 0
			breakRoom := []func(){
				func() { room["order"] = rapid.SampledFrom([]any{"random", "FIFO", 1}).Draw(rt, "badOrder") },
				func() {
					room["opens_seconds"] = rapid.SampledFrom([]any{-1, seckill.MaxPreheatSeconds + 1, "0", 0.5}).Draw(rt, "badOpens")
				},
				func() {
					room["admit_per_second"] = rapid.SampledFrom([]any{-1, seckill.MaxAdmitPerSecond + 1, 1.5}).Draw(rt, "badAdmit")
				},
				func() {
					room["max_active"] = rapid.SampledFrom([]any{-1, seckill.MaxQuantity + 1, "1"}).Draw(rt, "badActive")
				},
				func() {
					room["token_seconds"] = rapid.SampledFrom([]any{0, seckill.MinTokenSeconds - 1, seckill.MaxTokenSeconds + 1}).Draw(rt, "badToken")
				},
				func() { room["pow_bits"] = rapid.SampledFrom([]any{-1, seckill.MaxPowBits + 1}).Draw(rt, "badPow") },
				func() { // neither bound above 0
					delete(room, "admit_per_second")
					room["max_active"] = 0
				},
				func() { room["surprise"] = 1 },
				func() { f["segments"] = 2 }, // a sale with a waiting room has one segment
			}
			breakRoom[rapid.IntRange(0, len(breakRoom)-1).Draw(rt, "breakRoom")]()
			f["waiting_room"] = room
		},
		func() { f["waiting_room"] = rapid.SampledFrom([]any{"yes", true, []any{}, 5}).Draw(rt, "badRoomType") },
		func() { f["stock"] = "10" },
		func() { delete(f, "price_cents") },
		func() {
			f["starts_at"] = rapid.SampledFrom([]string{"9999-12-31T23:30:00Z", "9000-01-01T00:00:01Z",
				"1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "yesterday", "2030-01-02 03:04:05"}).Draw(rt, "badTime")
		},
		func() { f["ends_at"] = "9999-12-31T23:59:59.999Z" },
		func() {
			b.raw = []byte(rapid.SampledFrom([]string{"null", "[]", `"sale"`, "", "{"}).Draw(rt, "badJSON"))
		},
	}
	breaks[rapid.IntRange(0, len(breaks)-1).Draw(rt, "break")]()
	b.id = ""
	return b.withFields(f)
}

// drawRoom draws a waiting_room object within the document, for a sale whose preheat_seconds
// is preheat: consistent unless opens_seconds is past preheat (which the document cannot say).
// admit_per_second is always sent (above 0 or not), so that a break can take it away.
func (m *model) drawRoom(preheat int) (room map[string]any, consistent bool) {
	rt := m.rt
	room = map[string]any{}
	if rapid.Bool().Draw(rt, "hasOrder") {
		room["order"] = rapid.SampledFrom([]string{seckill.RoomDraw, seckill.RoomFIFO}).Draw(rt, "order")
	}
	consistent = true
	if rapid.Bool().Draw(rt, "hasOpens") {
		opens := rapid.OneOf(rapid.SampledFrom([]int{0, preheat}), rapid.IntRange(0, preheat)).Draw(rt, "opens")
		if preheat < seckill.MaxPreheatSeconds && rapid.IntRange(0, 4).Draw(rt, "opensPastPreheat") == 0 {
			opens, consistent = preheat+1, false
		}
		room["opens_seconds"] = opens
	}
	admit := rapid.OneOf(rapid.SampledFrom([]int{0, 1, seckill.MaxAdmitPerSecond}), rapid.IntRange(0, 1000)).Draw(rt, "admit")
	room["admit_per_second"] = admit
	if admit == 0 || rapid.Bool().Draw(rt, "hasActive") {
		room["max_active"] = rapid.OneOf(rapid.SampledFrom([]int{1, seckill.MaxQuantity}), rapid.IntRange(1, 100)).Draw(rt, "active")
	}
	if rapid.Bool().Draw(rt, "hasToken") {
		room["token_seconds"] = rapid.OneOf(rapid.SampledFrom([]int{seckill.MinTokenSeconds, seckill.MaxTokenSeconds}),
			rapid.IntRange(seckill.MinTokenSeconds, seckill.MaxTokenSeconds)).Draw(rt, "token")
	}
	if rapid.Bool().Draw(rt, "hasPow") {
		room["pow_bits"] = rapid.IntRange(0, seckill.MaxPowBits).Draw(rt, "pow")
	}
	return room, consistent
}

func (b saleBody) withFields(f map[string]any) saleBody {
	b.fields = f
	return b
}

func (m *model) purchasePath() {
	user := m.user()
	auth, present, good := m.userAuthOK(user)
	id, ok := m.saleRef()
	x := m.send(call{op: "purchasePath", method: "GET", target: "/api/v1/sales/" + url.PathEscape(id) + "/path",
		auth: auth, valid: verdict(ok && present)})
	if x.Status == http.StatusOK && good {
		var p struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(x.RespBody, &p)
		m.paths[user+" "+id] = p.Path
	}
}

// buy buys with a path fetched before (or a made-up one), a drawn body and key.
func (m *model) buy() {
	rt := m.rt
	user := m.user()
	var target string
	pathOK := true
	keys := make([]string, 0, len(m.paths))
	for k := range m.paths {
		if strings.HasPrefix(k, user+" ") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) == 0 && len(m.sales) > 0 && rapid.IntRange(0, 3).Draw(rt, "fetchPath") > 0 {
		// Most buys go through a purchase path fetched for the purpose, as a client's would.
		id := rapid.SampledFrom(m.sales).Draw(rt, "pathSale")
		x := m.send(call{op: "purchasePath", method: "GET", target: "/api/v1/sales/" + url.PathEscape(id) + "/path",
			auth: m.jwt(user, m.h.st.clock.Now(), time.Hour, authSecret), valid: verdict(true)})
		if x.Status == http.StatusOK {
			var p client.PurchasePath
			_ = json.Unmarshal(x.RespBody, &p)
			m.paths[user+" "+id] = p.Path
			keys = append(keys, user+" "+id)
		}
	}
	switch {
	case len(keys) > 0 && rapid.IntRange(0, 4).Draw(rt, "realPath") > 0:
		target = m.paths[rapid.SampledFrom(keys).Draw(rt, "path")]
	default:
		id, ok := m.saleRef()
		pathOK = ok
		target = "/api/v1/sales/" + url.PathEscape(id) + "/buy/" + rapid.SampledFrom([]string{"AAAA", "x", "TrkTasxfJ-d6ZZyCcKmDiIT5Ob64ZJqhAHOc6VuA7ms"}).Draw(rt, "token")
	}
	auth, present := m.userAuth(user)
	valid := pathOK && present
	var body []byte
	hasBody := true
	large := false
	switch rapid.IntRange(0, 12).Draw(rt, "buyBody") {
	case 0:
		hasBody = false
	case 1:
		body = []byte(`{"quantity":null}`)
	case 2:
		body = []byte(`{}`)
	case 3:
		body = fmt.Appendf(nil, `{"quantity":%d}`, rapid.IntRange(2, 5).Draw(rt, "q"))
	case 4:
		body, valid = []byte(rapid.SampledFrom([]string{`{"quantity":0}`, `{"quantity":-1}`, `{"quantity":"1"}`,
			`{"quantity":1,"extra":true}`, `null`, `[]`, `1`, `{"quantity":1.5}`}).Draw(rt, "badBuy")), false
	case 5:
		large = true // valid JSON over the limit: 413
		body = append(append([]byte(`{"quantity":1`), bytes.Repeat([]byte(" "), httpapi.MaxBody)...), '}')
	default:
		body = []byte(`{"quantity":1}`)
	}
	var header []string
	switch rapid.IntRange(0, 5).Draw(rt, "idem") {
	case 0:
		header = []string{"Idempotency-Key", strings.Repeat("k", 129)}
		valid = false
	case 1, 2:
		header = []string{"Idempotency-Key", m.prefix + "-key-" + strconv.Itoa(rapid.IntRange(0, 3).Draw(rt, "key"))}
	}
	x := m.send(call{op: "buy", method: "POST", target: target, auth: auth, header: header, body: body, hasBody: hasBody,
		valid: verdict(valid), inProcess: large})
	if large && x.Status == http.StatusCreated {
		m.rt.Fatalf("[%s engine] a body over the limit was accepted: %s", m.h.st.name, x)
	}
	if x.Status == http.StatusOK || x.Status == http.StatusCreated || x.Status == http.StatusAccepted {
		var r seckill.Reservation
		_ = json.Unmarshal(x.RespBody, &r)
		m.res = append(m.res, reservationRef{id: r.ID, user: r.UserID, amount: r.AmountCents})
	}
}

// resRef draws a reservation id and the user to act as: mostly its owner.
func (m *model) resRef() (rid, user string) {
	if len(m.res) == 0 || rapid.IntRange(0, 5).Draw(m.rt, "knownRes") == 0 {
		return m.prefix + "-nobody-" + strings.Repeat("0", 32), m.user()
	}
	r := rapid.SampledFrom(m.res).Draw(m.rt, "res")
	if rapid.IntRange(0, 5).Draw(m.rt, "otherUser") == 0 {
		return r.id, m.user()
	}
	return r.id, r.user
}

func (m *model) getReservation() {
	rid, user := m.resRef()
	auth, present := m.userAuth(user)
	m.send(call{op: "getReservation", method: "GET", target: "/api/v1/reservations/" + url.PathEscape(rid), auth: auth, valid: verdict(present)})
}

func (m *model) cancelReservation() {
	rid, user := m.resRef()
	auth, present := m.userAuth(user)
	m.send(call{op: "cancelReservation", method: "DELETE", target: "/api/v1/reservations/" + url.PathEscape(rid), auth: auth, valid: verdict(present)})
}

func (m *model) pay() {
	rid, user := m.resRef()
	auth, present := m.userAuth(user)
	x := m.send(call{op: "pay", method: "POST", target: "/api/v1/reservations/" + url.PathEscape(rid) + "/pay", auth: auth, valid: verdict(present)})
	if x.Status == http.StatusOK {
		var in seckill.PaymentIntent
		_ = json.Unmarshal(x.RespBody, &in)
		m.payIDs = append(m.payIDs, in.PaymentID)
	}
}

// webhook delivers a payment event at the built-in scheme's original route.
func (m *model) webhook() { m.webhookTo("paymentWebhook", "/api/v1/payments/webhook") }

// gatewayWebhook delivers one at the per-gateway route: mostly to the built-in "webhook"
// gateway, sometimes to a name that is not configured (404).
func (m *model) gatewayWebhook() {
	name := rapid.SampledFrom([]string{"webhook", "webhook", "webhook", "alipay"}).Draw(m.rt, "gateway")
	m.webhookTo("gatewayPaymentWebhook", "/api/v1/payments/webhook/"+name)
}

// webhookTo delivers a payment event: mostly signed and well formed (for a reservation of the
// run, with the right or a wrong amount), sometimes broken or unsigned.
func (m *model) webhookTo(op, target string) {
	rt := m.rt
	ev := map[string]any{"payment_id": m.prefix + "-pay-" + strconv.Itoa(rapid.IntRange(0, 5).Draw(rt, "payN")),
		"reservation_id": m.prefix + "-nobody", "amount_cents": 100, "status": "succeeded"}
	if len(m.payIDs) > 0 && rapid.Bool().Draw(rt, "intentID") {
		ev["payment_id"] = rapid.SampledFrom(m.payIDs).Draw(rt, "payID")
	}
	if len(m.res) > 0 && rapid.IntRange(0, 4).Draw(rt, "knownRes") > 0 {
		r := rapid.SampledFrom(m.res).Draw(rt, "res")
		ev["reservation_id"], ev["amount_cents"] = r.id, r.amount
		if rapid.IntRange(0, 4).Draw(rt, "wrongAmount") == 0 {
			ev["amount_cents"] = r.amount + 1
		}
	}
	if rapid.IntRange(0, 4).Draw(rt, "failed") == 0 {
		ev["status"] = "failed"
	}
	if rapid.IntRange(0, 4).Draw(rt, "extraField") == 0 {
		ev["gateway_note"] = "unknown fields are allowed here"
	}
	valid := true
	var body []byte
	switch rapid.IntRange(0, 9).Draw(rt, "webhookBreak") {
	case 0:
		valid = false
		switch rapid.IntRange(0, 6).Draw(rt, "how") {
		case 0:
			delete(ev, "amount_cents")
		case 1:
			ev["payment_id"] = ""
		case 2:
			ev["amount_cents"] = -1
		case 3:
			ev["status"] = "maybe"
		case 4:
			ev["reservation_id"] = "r\x00id"
		case 5:
			ev["payment_id"] = strings.Repeat("p", 129)
		case 6:
			body = []byte("null")
		}
	}
	if body == nil {
		body = mustMarshal(ev)
	}
	large := false
	if rapid.IntRange(0, 19).Draw(rt, "largeWebhook") == 0 {
		large, valid = true, false
		ev["payment_id"] = strings.Repeat("p", httpapi.MaxBody)
		body = mustMarshal(ev)
	}
	var header []string
	switch rapid.IntRange(0, 7).Draw(rt, "sig") {
	case 0: // no signature: the document requires one
		valid = false
	case 1:
		header = []string{payment.SignatureHeader, "t=1,v1=00"}
	case 2: // signed with a stale time
		header = []string{payment.SignatureHeader, payment.Sign([]byte(paySecret), m.h.st.clock.Now().Add(-time.Hour), body)}
	default:
		header = []string{payment.SignatureHeader, payment.Sign([]byte(paySecret), m.h.st.clock.Now(), body)}
	}
	v := verdict(valid)
	if op == "gatewayPaymentWebhook" {
		// The per-gateway route documents no signature header and any JSON object (each
		// provider has its own): the answer is judged, the generator's verdict is not.
		v = nil
	}
	m.send(call{op: op, method: "POST", target: target, header: header, body: body,
		hasBody: true, valid: v, inProcess: large})
}

func (m *model) orders() {
	auth, present := m.userAuth(m.user())
	m.send(call{op: "listOrders", method: "GET", target: "/api/v1/orders", auth: auth, valid: verdict(present)})
}

// refunds lists refunds by a status and a limit, each valid or not.
func (m *model) refunds() {
	auth, present := m.adminAuth()
	status := rapid.SampledFrom([]string{"", "refund_required", "refund_pending", "refunded", "refund_failed", "paid"}).Draw(m.rt, "refundStatus")
	limit := rapid.SampledFrom([]string{"", "1", "100", "1000", "0", "1001", "x"}).Draw(m.rt, "refundLimit")
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if limit != "" {
		q.Set("limit", limit)
	}
	ok := status != "paid" && (limit == "" || limit == "1" || limit == "100" || limit == "1000")
	m.send(call{op: "listRefunds", method: "GET", target: "/api/v1/refunds?" + q.Encode(), auth: auth, valid: verdict(ok && present)})
}

// exportStatus reads the export's sinks (none are configured here: the list is empty).
func (m *model) exportStatus() {
	auth, present := m.adminAuth()
	m.send(call{op: "exportStatus", method: "GET", target: "/api/v1/export", auth: auth, valid: verdict(present)})
}

// hotStatus reads this instance's hot sales and cold cache.
func (m *model) hotStatus() {
	auth, present := m.adminAuth()
	m.send(call{op: "hotStatus", method: "GET", target: "/api/v1/hot", auth: auth, valid: verdict(present)})
}

func (m *model) audit() {
	id, ok := m.saleRef()
	auth, present := m.adminAuth()
	m.send(call{op: "audit", method: "GET", target: "/api/v1/sales/" + url.PathEscape(id) + "/audit", auth: auth, valid: verdict(ok && present)})
}

func (m *model) activity() {
	id, ok := m.saleRef()
	auth, present := m.adminAuth()
	m.send(call{op: "saleActivity", method: "GET", target: "/api/v1/sales/" + url.PathEscape(id) + "/activity", auth: auth, valid: verdict(ok && present)})
}

func (m *model) addStock() {
	rt := m.rt
	id, ok := m.saleRef()
	auth, present := m.adminAuth()
	valid := ok && present
	body := fmt.Appendf(nil, `{"add":%d}`, rapid.IntRange(1, 3).Draw(rt, "add"))
	large := false
	switch rapid.IntRange(0, 9).Draw(rt, "stockBody") {
	case 0:
		body, valid = []byte(rapid.SampledFrom([]string{`{"add":0}`, `{"add":-2}`, `{}`, `{"add":1,"more":1}`,
			`{"add":1000000001}`, `null`, `{"add":"1"}`}).Draw(rt, "badStock")), false
	case 1:
		large = true
		body = append(append([]byte(`{"add":1`), bytes.Repeat([]byte(" "), httpapi.MaxBody)...), '}')
	}
	x := m.send(call{op: "addStock", method: "POST", target: "/api/v1/sales/" + url.PathEscape(id) + "/stock", auth: auth,
		body: body, hasBody: true, valid: verdict(valid), inProcess: large})
	if large && auth == "Bearer "+adminToken && x.Status != http.StatusRequestEntityTooLarge {
		m.rt.Fatalf("[%s engine] a restock body over the limit was answered %d, want 413: %s", m.h.st.name, x.Status, x)
	}
}

func (m *model) closeSale() {
	if rapid.IntRange(0, 2).Draw(m.rt, "reallyClose") > 0 {
		return // closing is final for a sale: do it rarely
	}
	id, ok := m.saleRef()
	auth, present := m.adminAuth()
	x := m.send(call{op: "closeSale", method: "POST", target: "/api/v1/sales/" + url.PathEscape(id) + "/close", auth: auth, valid: verdict(ok && present)})
	if x.Status == http.StatusOK {
		var v service.SaleView
		_ = json.Unmarshal(x.RespBody, &v)
		if v.Status != seckill.SaleEnded {
			m.rt.Fatalf("[%s engine] a closed sale is %q, want ended: %s", m.h.st.name, v.Status, x)
		}
	}
}

func (m *model) devToken() {
	rt := m.rt
	body, valid := mustMarshal(map[string]string{"user": m.user()}), true
	large := false
	switch rapid.IntRange(0, 6).Draw(rt, "devBody") {
	case 0:
		body, valid = []byte(rapid.SampledFrom([]string{`{"user":""}`, `{"user":"."}`, `{"user":".."}`, `{"user":"a b"}`,
			`{}`, `{"user":"u","admin":true}`, `null`, `{"user":1}`}).Draw(rt, "badDev")), false
	case 1:
		large, valid = true, false
		body = mustMarshal(map[string]string{"user": strings.Repeat("u", httpapi.MaxBody)})
	}
	m.send(call{op: "devToken", method: "POST", target: "/api/v1/dev/token", body: body, hasBody: true, valid: verdict(valid), inProcess: large})
}

// events opens a live stream, judges its status and headers, and hangs up.
func (m *model) events() {
	rt := m.rt
	id, ok := m.saleRef()
	user := m.user()
	q := url.Values{}
	n := rapid.IntRange(0, 9).Draw(rt, "followed")
	if n > 4 {
		n = 0
	}
	if rapid.IntRange(0, 9).Draw(rt, "tooMany") == 0 {
		n = 9
	}
	for i := range n {
		rid := m.prefix + "-nobody-" + strconv.Itoa(i)
		if len(m.res) > 0 {
			rid = rapid.SampledFrom(m.res).Draw(rt, "followRes").id
		}
		q.Add("reservation", rid)
	}
	// libopenapi-validator does not enforce maxItems on an exploded query array, so more than 8
	// reservations get no verdict from the document; the server must refuse them (checked below).
	v := verdict(ok)
	if n > 8 {
		v = nil
	}
	auth := ""
	if rapid.Bool().Draw(rt, "eventsAuth") {
		auth, _ = m.userAuth(user)
	}
	target := "/api/v1/sales/" + url.PathEscape(id) + "/events"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", m.h.st.url+target, nil)
	if err != nil {
		rt.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := m.h.st.client.Do(req)
	if err != nil {
		rt.Fatalf("GET %s: %v", target, err)
	}
	x := exchange{Op: "saleEvents", Method: "GET", Target: target, Header: req.Header, Valid: v,
		Status: res.StatusCode, RespHeader: res.Header}
	if res.StatusCode != http.StatusOK { // a stream is judged by its status and headers only
		x.RespBody, _ = io.ReadAll(res.Body)
	}
	cancel()
	res.Body.Close()
	m.judge(x)
	if n > 8 && x.Status != http.StatusBadRequest {
		rt.Fatalf("[%s engine] %d reservation parameters were answered %d, want 400: %s", m.h.st.name, n, x.Status, x)
	}
}

// room drives one of the waiting room's operations, on a sale of the run (with or without a
// room), an unknown one or an id the document refuses.
func (m *model) room() {
	rt := m.rt
	id, ok := m.saleRef()
	if len(m.rooms) > 0 && rapid.Bool().Draw(rt, "roomSale") {
		id, ok = rapid.SampledFrom(m.rooms).Draw(rt, "room"), true
	}
	base := "/api/v1/sales/" + url.PathEscape(id) + "/waiting-room"
	auth, present := m.userAuth(m.user())
	switch rapid.IntRange(0, 5).Draw(rt, "roomOp") {
	case 0:
		m.send(call{op: "getWaitingRoom", method: "GET", target: base, valid: verdict(ok)})
	case 1:
		body, valid := []byte(rapid.SampledFrom([]string{``, `{}`, `{"pow":{"challenge":"c","solution":"s"}}`}).Draw(rt, "joinBody")), true
		if rapid.IntRange(0, 3).Draw(rt, "badJoin") == 0 {
			body, valid = []byte(rapid.SampledFrom([]string{`null`, `{"pow":1}`, `{"other":true}`, `{"pow":{"challenge":"c"}}`,
				`{"pow":{"challenge":"` + strings.Repeat("c", 300) + `","solution":"s"}}`}).Draw(rt, "badJoinBody")), false
		}
		m.send(call{op: "joinWaitingRoom", method: "POST", target: base + "/join", auth: auth, body: body, hasBody: len(body) > 0,
			valid: verdict(ok && present && valid)})
	case 2:
		m.send(call{op: "waitingRoomChallenge", method: "GET", target: base + "/challenge", auth: auth, valid: verdict(ok && present)})
	case 3:
		m.send(call{op: "waitingRoomTicket", method: "GET", target: base + "/ticket", auth: auth, valid: verdict(ok && present)})
	case 4:
		q, valid := "", ok
		switch rapid.IntRange(0, 4).Draw(rt, "entrantsQuery") {
		case 1:
			q = "?limit=" + strconv.Itoa(rapid.IntRange(1, 1000).Draw(rt, "limit"))
		case 2:
			q, valid = "?limit="+rapid.SampledFrom([]string{"0", "1001", "-1", "x"}).Draw(rt, "badLimit"), false
		case 3:
			q = "?after=" + strings.Repeat("0", 32)
		case 4:
			q, valid = "?after=nothex", false
		}
		m.send(call{op: "waitingRoomEntrants", method: "GET", target: base + "/entrants" + q, valid: verdict(valid)})
	default:
		m.roomEvents(base+"/events", auth, ok && present)
	}
}

// createRoomSale makes a sale with a waiting room, open for joining and started, outside the
// judged exchanges: the room operations act on it (with a room, so their 200s are seen).
func (m *model) createRoomSale() {
	now := m.h.st.clock.Now()
	id := m.prefix + "-room"
	body := mustMarshal(map[string]any{"id": id, "price_cents": 100, "stock": 2, "per_user_limit": 1, "hold_seconds": 30,
		"starts_at": now.Format(time.RFC3339Nano), "ends_at": now.Add(time.Hour).Format(time.RFC3339Nano),
		"waiting_room": map[string]any{"order": "draw", "admit_per_second": 5}})
	req, err := http.NewRequest("POST", m.h.st.url+"/api/v1/sales", bytes.NewReader(body))
	if err != nil {
		m.rt.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := m.h.st.client.Do(req)
	if err != nil {
		m.rt.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		m.rt.Fatalf("create a room sale: %d", res.StatusCode)
	}
	m.rooms = append(m.rooms, id)
}

// roomEvents opens a live ticket stream, judges its status and headers, and hangs up.
func (m *model) roomEvents(target, auth string, valid bool) {
	rt := m.rt
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", m.h.st.url+target, nil)
	if err != nil {
		rt.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := m.h.st.client.Do(req)
	if err != nil {
		rt.Fatalf("GET %s: %v", target, err)
	}
	x := exchange{Op: "waitingRoomEvents", Method: "GET", Target: target, Header: req.Header, Valid: verdict(valid),
		Status: res.StatusCode, RespHeader: res.Header}
	if res.StatusCode != http.StatusOK {
		x.RespBody, _ = io.ReadAll(res.Body)
	}
	cancel()
	res.Body.Close()
	m.judge(x)
}

// advance moves the test clock: holds expire, sales start and end.
func (m *model) advance() {
	d := time.Duration(rapid.IntRange(1, 900).Draw(m.rt, "advanceSeconds")) * time.Second
	m.h.st.clock.Advance(d)
}

// auditAll waits until the audit of every sale of the run is ok (the database catches up with
// the engine asynchronously) and fails the run if one is not within 20 s.
func (m *model) auditAll() {
	for _, id := range m.sales {
		deadline := time.Now().Add(20 * time.Second)
		for {
			x := m.send(call{op: "audit", method: "GET", target: "/api/v1/sales/" + url.PathEscape(id) + "/audit",
				auth: "Bearer " + adminToken, valid: verdict(true)})
			var a service.Audit
			if x.Status == http.StatusOK {
				_ = json.Unmarshal(x.RespBody, &a)
				if a.OK {
					break
				}
			}
			if time.Now().After(deadline) {
				m.rt.Fatalf("[%s engine] audit of sale %s is not ok: %s", m.h.st.name, id, x)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestContractCheckerCatchesDrift is the negative control: a handler that breaks the document
// in one way at a time is served, its exchanges go through the same contract.check, and each
// must be reported. A checker that reported nothing would pass the contract test vacuously.
func TestContractCheckerCatchesDrift(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := newContract(raw)
	if err != nil {
		t.Fatal(err)
	}
	problem := func(status int, code string) []byte {
		return fmt.Appendf(nil, `{"type":"about:blank","title":"T","status":%d,"code":%q}`, status, code)
	}
	sale := `{"id":"s","name":"s","price_cents":1,"stock":1,"holdback":0,"starts_at":"2030-01-01T00:00:00Z",` +
		`"ends_at":"2030-01-01T01:00:00Z","per_user_limit":1,"hold_seconds":60,"queue_limit":10,"currency":"usd","listed":true,"segments":1,"preheat_seconds":300,"status":"active",` +
		`"stock_state":{"sellable":1,"available":1,"held":0,"sold":0,"queued":0},"server_time":"2030-01-01T00:00:00Z"}`
	room := `{"order":"draw","opens_seconds":300,"admit_per_second":5,"max_active":0,"token_seconds":120,"pow_bits":0}`
	type answer struct {
		status int
		ct     string
		body   []byte
		retry  bool
	}
	cases := []struct {
		name  string
		req   exchange
		ans   answer
		drift bool // the checker must report it
	}{
		{"a documented answer", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{200, "application/json", []byte(sale), false}, false},
		{"a sale with its waiting room", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{200, "application/json", []byte(strings.Replace(sale, `"status"`, `"waiting_room":`+room+`,"status"`, 1)), false}, false},
		{"a waiting room without a field", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{200, "application/json", []byte(strings.Replace(sale, `"status"`,
				`"waiting_room":`+strings.Replace(room, `,"pow_bits":0`, "", 1)+`,"status"`, 1)), false}, true},
		{"a waiting room out of bounds", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{200, "application/json", []byte(strings.Replace(sale, `"status"`,
				`"waiting_room":`+strings.Replace(room, `"token_seconds":120`, `"token_seconds":3601`, 1)+`,"status"`, 1)), false}, true},
		{"an undocumented status", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{418, "application/problem+json", problem(418, "internal"), false}, true},
		{"a 500", exchange{Method: "GET", Target: "/api/v1/sales"},
			answer{500, "application/problem+json", problem(500, "internal"), false}, true},
		{"a 503 without Retry-After", exchange{Method: "GET", Target: "/api/v1/sales"},
			answer{503, "application/problem+json", problem(503, "unavailable"), false}, true},
		{"a 503 with Retry-After", exchange{Method: "GET", Target: "/api/v1/sales"},
			answer{503, "application/problem+json", problem(503, "unavailable"), true}, false},
		{"a body off the schema (a field missing)", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{200, "application/json", []byte(strings.Replace(sale, `"status":"active",`, "", 1)), false}, true},
		{"a body off the schema (an undocumented field)", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{200, "application/json", []byte(strings.Replace(sale, `"id":"s"`, `"id":"s","secret":1`, 1)), false}, true},
		{"a time that is not a date-time", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{200, "application/json", []byte(strings.Replace(sale, `"server_time":"2030-01-01T00:00:00Z"`, `"server_time":"now"`, 1)), false}, true},
		{"the wrong content type", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{404, "application/json", problem(404, "not_found"), false}, true},
		{"a code the status cannot carry", exchange{Method: "GET", Target: "/api/v1/sales/s"},
			answer{404, "application/problem+json", problem(404, "sold_out"), false}, true},
		{"a held reservation without expires_at", exchange{Method: "GET", Target: "/api/v1/reservations/r", Header: http.Header{"Authorization": {"Bearer x"}}},
			answer{200, "application/json", []byte(`{"id":"r","sale_id":"s","user_id":"u","quantity":1,"status":"held","amount_cents":1,"created_at":"2030-01-01T00:00:00Z"}`), false}, true},
		{"an invalid request accepted", exchange{Method: "POST", Target: "/api/v1/sales", HasBody: true,
			Header: http.Header{"Authorization": {"Bearer x"}, "Content-Type": {"application/json"}},
			Body:   []byte(`{"price_cents":1,"stock":1,"hold_seconds":0}`)},
			answer{201, "application/json", []byte(sale), false}, true},
		{"a bound missing from the document", exchange{Method: "POST", Target: "/api/v1/sales", HasBody: true, Valid: verdict(false),
			Header: http.Header{"Authorization": {"Bearer x"}, "Content-Type": {"application/json"}},
			Body:   []byte(`{"price_cents":1,"stock":1}`)},
			answer{400, "application/problem+json", problem(400, "invalid_argument"), false}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ans := tc.ans
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", ans.ct)
				if ans.retry {
					w.Header().Set("Retry-After", "1")
				}
				w.WriteHeader(ans.status)
				_, _ = w.Write(ans.body)
			}))
			defer srv.Close()
			x := tc.req
			if x.Header == nil {
				x.Header = http.Header{}
			}
			var body io.Reader
			if x.HasBody {
				body = bytes.NewReader(x.Body)
			}
			req, err := http.NewRequest(x.Method, srv.URL+x.Target, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = x.Header.Clone()
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			x.RespBody, _ = io.ReadAll(res.Body)
			res.Body.Close()
			x.Status, x.RespHeader = res.StatusCode, res.Header
			bad := c.check(x)
			if tc.drift && len(bad) == 0 {
				t.Errorf("the checker passed %s", x)
			}
			if !tc.drift && len(bad) > 0 {
				t.Errorf("the checker refused a documented exchange %s: %v", x, bad)
			}
		})
	}
}
