// Package stripetest is a Stripe API stand-in for tests and the bench: the few Checkout Session
// and Refund endpoints the Stripe gateway calls, with the state stripe-mock does not keep.
//
// stripe-mock checks every request against Stripe's OpenAPI specification but remembers nothing
// (it answers any id with the same fixture). Server forwards each request to a stripe-mock
// first, so a malformed call fails as it would at Stripe, and then answers from its own record:
// sessions created per idempotency key (a key reused with other parameters is refused, as
// Stripe does), Stripe's expires_at bounds, expiring only an open session, refunds against a
// session's PaymentIntent, at most the amount paid. Settle plays the buyer paying on the hosted
// page; Refunds and Requests are the request log a test or the bench checks.
package stripetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a running stand-in. It is safe for concurrent use; it handles one request at a
// time, which is what makes its idempotency exact.
type Server struct {
	// URL is the base URL to give the gateway as its APIURL.
	URL string

	srv    *httptest.Server
	mock   string
	client *http.Client

	mu       sync.Mutex
	n        int
	sessions map[string]*session
	byIntent map[string]string // payment intent id -> session id
	idem     map[string]cached // idempotency key -> the first answer
	requests []Request
}

// Request is one request the stand-in received.
type Request struct {
	Method, Path, IdempotencyKey string
	Status                       int
}

type session struct {
	id, status, paymentStatus, currency, clientRef, intent string
	amount, expiresAt, created                             int64
	metadata                                               map[string]string
	refunds                                                []string
	refunded                                               int64
}

type cached struct {
	fingerprint string
	status      int
	body        []byte
}

// NewServer starts a stand-in on a loopback port. mockURL is the stripe-mock that validates
// every request ("" validates nothing). Close it when done.
func NewServer(mockURL string) *Server {
	s := &Server{
		mock:     strings.TrimRight(mockURL, "/"),
		client:   &http.Client{Timeout: 30 * time.Second},
		sessions: map[string]*session{},
		byIntent: map[string]string{},
		idem:     map[string]cached{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() {
	s.srv.Close()
	s.client.CloseIdleConnections()
}

// Settle makes the buyer pay an open session now: it becomes complete and paid, with a
// PaymentIntent. It fails for a session that is unknown or not open (expired: too late to pay).
func (s *Server) Settle(sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, ok := s.sessions[sessionID]
	if !ok {
		return fmt.Errorf("stripetest: no session %s", sessionID)
	}
	if cs.status != "open" {
		return fmt.Errorf("stripetest: session %s is %s, not open", sessionID, cs.status)
	}
	cs.status, cs.paymentStatus = "complete", "paid"
	cs.intent = "pi_test_" + strings.TrimPrefix(cs.id, "cs_test_")
	s.byIntent[cs.intent] = cs.id
	return nil
}

// Refunds is the number of refunds made of a session's payment.
func (s *Server) Refunds(sessionID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs, ok := s.sessions[sessionID]; ok {
		return len(cs.refunds)
	}
	return 0
}

// Requests is the log of every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ControlPrefix starts the paths of the stand-in's own endpoints, for a generator in another
// process (seckill bench): POST /_stripetest/sessions/{id}/settle is Settle (200, or 409 when
// the session is not open); GET /_stripetest/refunds answers {"sessions": {id: refunds made},
// "requests": refund requests answered 200} — the request log a run checks refunds against.
// They are the stand-in's, never forwarded to stripe-mock.
const ControlPrefix = "/_stripetest/"

func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, ControlPrefix), "/")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "sessions" && parts[2] == "settle":
		if err := s.Settle(parts[1]); err != nil {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_, _ = w.Write([]byte(`{"settled":true}`))
	case r.Method == http.MethodGet && len(parts) == 1 && parts[0] == "refunds":
		s.mu.Lock()
		out := struct {
			Sessions map[string]int `json:"sessions"`
			Requests int            `json:"requests"`
		}{Sessions: map[string]int{}}
		for id, cs := range s.sessions {
			if len(cs.refunds) > 0 {
				out.Sessions[id] = len(cs.refunds)
			}
		}
		for _, q := range s.requests {
			if q.Method == http.MethodPost && q.Path == "/v1/refunds" && q.Status == http.StatusOK {
				out.Requests++
			}
		}
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(out)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, ControlPrefix) {
		s.control(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	form, _ := url.ParseQuery(string(body))
	if r.Method == http.MethodGet {
		form = r.URL.Query()
	}
	key := r.Header.Get("Idempotency-Key")

	s.mu.Lock()
	defer s.mu.Unlock()
	status, out := s.handle(r, body, form, key)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, IdempotencyKey: key, Status: status})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// handle answers one request; s.mu is held.
func (s *Server) handle(r *http.Request, body []byte, form url.Values, key string) (int, []byte) {
	fingerprint := r.Method + " " + r.URL.Path + "?" + form.Encode()
	if key != "" && r.Method == http.MethodPost {
		if c, ok := s.idem[key]; ok {
			if c.fingerprint != fingerprint {
				return stripeError(http.StatusBadRequest, "idempotency_error", "",
					"Keys for idempotent requests can only be used with the same parameters they were first used with.")
			}
			return c.status, c.body
		}
	}
	status, fixture := s.validate(r, body)
	if status >= 300 {
		return status, fixture // a request Stripe would refuse: not recorded, as at Stripe
	}
	status, out := s.route(r, form, fixture)
	// Stripe keeps the answer of a request that ran, errors included, but not of one refused by
	// validation; here only successes are kept, which the gateway's callers cannot tell apart
	// (Close and Refund decide by the state they read back, not by a replayed error).
	if key != "" && r.Method == http.MethodPost && status < 300 {
		s.idem[key] = cached{fingerprint: fingerprint, status: status, body: out}
	}
	return status, out
}

// validate forwards the request to stripe-mock and returns its answer (its fixture, when the
// request is well-formed).
func (s *Server) validate(r *http.Request, body []byte) (int, []byte) {
	if s.mock == "" {
		return http.StatusOK, []byte("{}")
	}
	req, err := http.NewRequest(r.Method, s.mock+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return stripeError(http.StatusInternalServerError, "api_error", "", err.Error())
	}
	for _, h := range []string{"Authorization", "Content-Type", "Stripe-Version"} {
		req.Header.Set(h, r.Header.Get(h))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return stripeError(http.StatusBadGateway, "api_error", "", "stripe-mock: "+err.Error())
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, out
}

func (s *Server) route(r *http.Request, form url.Values, fixture []byte) (int, []byte) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/checkout/sessions":
		return s.create(form, fixture)
	case r.Method == http.MethodGet && len(parts) == 4 && parts[1] == "checkout" && parts[2] == "sessions":
		return s.retrieve(parts[3], form, fixture)
	case r.Method == http.MethodPost && len(parts) == 5 && parts[1] == "checkout" && parts[4] == "expire":
		return s.expire(parts[3], fixture)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/refunds":
		return s.refund(form, fixture)
	}
	return http.StatusOK, fixture // any other call: stripe-mock's answer
}

func (s *Server) create(form url.Values, fixture []byte) (int, []byte) {
	now := time.Now().Unix()
	expiresAt := now + 24*3600
	if v := form.Get("expires_at"); v != "" {
		expiresAt, _ = strconv.ParseInt(v, 10, 64)
		if expiresAt < now+30*60 || expiresAt > now+24*3600 {
			return stripeError(http.StatusBadRequest, "invalid_request_error", "",
				"The `expires_at` timestamp must be between 30 minutes and 24 hours from Checkout Session creation.")
		}
	}
	unit, _ := strconv.ParseInt(form.Get("line_items[0][price_data][unit_amount]"), 10, 64)
	qty, _ := strconv.ParseInt(form.Get("line_items[0][quantity]"), 10, 64)
	s.n++
	cs := &session{
		id: fmt.Sprintf("cs_test_%d_%d", time.Now().UnixNano(), s.n), status: "open", paymentStatus: "unpaid",
		currency: form.Get("line_items[0][price_data][currency]"), clientRef: form.Get("client_reference_id"),
		amount: unit * qty, expiresAt: expiresAt, created: now, metadata: map[string]string{},
	}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok {
			cs.metadata[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	s.sessions[cs.id] = cs
	return http.StatusOK, s.render(cs, nil, fixture)
}

func (s *Server) retrieve(id string, form url.Values, fixture []byte) (int, []byte) {
	cs, ok := s.sessions[id]
	if !ok {
		return stripeError(http.StatusNotFound, "invalid_request_error", "resource_missing", "No such checkout.session: '"+id+"'")
	}
	return http.StatusOK, s.render(cs, form["expand[0]"], fixture)
}

func (s *Server) expire(id string, fixture []byte) (int, []byte) {
	cs, ok := s.sessions[id]
	if !ok {
		return stripeError(http.StatusNotFound, "invalid_request_error", "resource_missing", "No such checkout.session: '"+id+"'")
	}
	if cs.status != "open" {
		return stripeError(http.StatusBadRequest, "invalid_request_error", "",
			"Only Checkout Sessions with a status in [\"open\"] can be expired. This Checkout Session has a status of \""+cs.status+"\".")
	}
	cs.status = "expired"
	return http.StatusOK, s.render(cs, nil, fixture)
}

func (s *Server) refund(form url.Values, fixture []byte) (int, []byte) {
	pi := form.Get("payment_intent")
	cs, ok := s.sessions[s.byIntent[pi]]
	if !ok {
		return stripeError(http.StatusBadRequest, "invalid_request_error", "resource_missing", "No such payment_intent: '"+pi+"'")
	}
	amount := cs.amount - cs.refunded
	if v := form.Get("amount"); v != "" {
		amount, _ = strconv.ParseInt(v, 10, 64)
	}
	switch {
	case cs.refunded >= cs.amount:
		return stripeError(http.StatusBadRequest, "invalid_request_error", "charge_already_refunded", "Charge for "+pi+" has already been refunded.")
	case amount <= 0 || amount > cs.amount-cs.refunded:
		return stripeError(http.StatusBadRequest, "invalid_request_error", "amount_too_large", "Refund amount is greater than unrefunded amount on charge.")
	}
	id := fmt.Sprintf("re_test_%d_%d", time.Now().UnixNano(), len(cs.refunds))
	cs.refunds = append(cs.refunds, id)
	cs.refunded += amount
	return http.StatusOK, overlay(fixture, map[string]any{
		"id": id, "object": "refund", "amount": amount, "currency": cs.currency, "payment_intent": pi, "status": "succeeded",
	})
}

// render is the session as Stripe answers it: stripe-mock's fixture with this session's fields,
// the PaymentIntent (and its charge) expanded when asked.
func (s *Server) render(cs *session, expand []string, fixture []byte) []byte {
	fields := map[string]any{
		"id": cs.id, "object": "checkout.session", "mode": "payment", "status": cs.status,
		"payment_status": cs.paymentStatus, "amount_total": cs.amount, "amount_subtotal": cs.amount,
		"currency": cs.currency, "client_reference_id": cs.clientRef, "metadata": cs.metadata,
		"expires_at": cs.expiresAt, "created": cs.created, "url": "https://checkout.stripe.com/c/pay/" + cs.id,
		"payment_intent": nil,
	}
	if cs.status != "open" {
		fields["url"] = nil
	}
	if cs.intent != "" {
		fields["payment_intent"] = cs.intent
		for _, e := range expand {
			if e == "payment_intent" || strings.HasPrefix(e, "payment_intent.") {
				charge := any("ch_" + cs.intent)
				if e == "payment_intent.latest_charge" {
					charge = map[string]any{"id": "ch_" + cs.intent, "object": "charge", "amount": cs.amount,
						"amount_refunded": cs.refunded, "refunded": cs.refunded >= cs.amount, "paid": true, "status": "succeeded"}
				}
				fields["payment_intent"] = map[string]any{"id": cs.intent, "object": "payment_intent", "amount": cs.amount,
					"amount_received": cs.amount, "currency": cs.currency, "status": "succeeded", "latest_charge": charge}
			}
		}
	}
	return overlay(fixture, fields)
}

// overlay sets fields over a JSON object (stripe-mock's fixture), keeping its other fields.
func overlay(fixture []byte, fields map[string]any) []byte {
	obj := map[string]any{}
	_ = json.Unmarshal(fixture, &obj)
	for k, v := range fields {
		obj[k] = v
	}
	out, err := json.Marshal(obj)
	if err != nil {
		panic(err) // values decoded from JSON, strings and numbers always marshal
	}
	return out
}

func stripeError(status int, typ, code, msg string) (int, []byte) {
	e := map[string]string{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	out, _ := json.Marshal(map[string]any{"error": e})
	return status, out
}
