// Package stripetest is a Stripe stand-in for tests, the bench and a shop owner's rehearsal on a
// laptop (`seckill stripe-rehearse`): the few Checkout Session and Refund endpoints the Stripe
// gateway calls, with the state stripe-mock does not keep, the hosted payment page, and Stripe's
// signed webhooks.
//
// stripe-mock checks every request against Stripe's OpenAPI specification but remembers nothing
// (it answers any id with the same fixture) and sends no webhooks. Server forwards each request
// to a stripe-mock first, so a malformed call fails as it would at Stripe, and then answers from
// its own record: sessions created per idempotency key (a key reused with other parameters is
// refused, as Stripe does), Stripe's expires_at bounds, expiring only an open session, refunds
// against a session's PaymentIntent, at most the amount paid. A session's url is the stand-in's
// own hosted page, where a buyer clicks "Pay" (Settle does the same from code). With a webhook
// target (Config.WebhookURL), every session that completes or expires is announced there as
// Stripe does: a checkout.session.completed or checkout.session.expired event whose data is the
// session, signed with the endpoint's secret, retried until it is answered 2xx. Refunds and
// Requests are the request log a test or the bench checks.
package stripetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill/internal/wait"
	"github.com/stripe/stripe-go/v85"
)

// Server is a running stand-in. It is safe for concurrent use; it handles one request at a
// time, which is what makes its idempotency exact.
type Server struct {
	// URL is the base URL to give the gateway as its APIURL.
	URL string

	srv    *http.Server
	served chan struct{} // closed when srv.Serve has returned
	mock   string
	client *http.Client
	cfg    Config

	// Webhook deliveries in flight: each runs in a goroutine of its own, which Close cancels
	// (stop) and waits for (deliveries).
	stop       context.CancelFunc
	stopCtx    context.Context
	deliveries sync.WaitGroup

	mu       sync.Mutex
	n        int
	sessions map[string]*session
	byIntent map[string]string // payment intent id -> session id
	idem     map[string]cached // idempotency key -> the first answer
	requests []Request
}

// Config configures a stand-in started with Start.
type Config struct {
	// Addr is the listen address (default 127.0.0.1:0, a port the system picks).
	Addr string
	// MockURL is the stripe-mock that validates every request ("" validates nothing).
	MockURL string
	// WebhookURL, if set, is the webhook endpoint Stripe would post its events to (the shop's
	// /api/v1/payments/webhook/stripe); WebhookSecret is that endpoint's signing secret
	// (whsec_…). Without it the stand-in sends no events: a test or the bench plays them.
	WebhookURL, WebhookSecret string
	// Logger receives one line per event delivered or given up. Default: discard.
	Logger *slog.Logger
}

// Bounds of a webhook delivery: at most deliveryTries posts, the first deliveryPause apart and
// doubling (about 50 s in all), each given deliveryTimeout. Stripe retries for three days; a
// stand-in on a laptop gives up sooner and logs it.
const (
	deliveryTries   = 10
	deliveryPause   = 100 * time.Millisecond
	deliveryTimeout = 10 * time.Second
)

// Request is one request the stand-in received.
type Request struct {
	Method, Path, IdempotencyKey string
	Status                       int
}

type session struct {
	id, status, paymentStatus, currency, clientRef, intent string
	successURL, cancelURL, name                            string
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

// NewServer starts a stand-in on a loopback port that sends no webhooks. mockURL is the
// stripe-mock that validates every request ("" validates nothing). Close it when done.
func NewServer(mockURL string) *Server {
	s, err := Start(Config{MockURL: mockURL})
	if err != nil {
		panic("stripetest: " + err.Error()) // a loopback port the system picks
	}
	return s
}

// Start starts a stand-in as cfg says. Close it when done.
func Start(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.WebhookURL != "" {
		if u, err := url.Parse(cfg.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("the webhook URL must be an absolute http(s) URL, got %q", cfg.WebhookURL)
		}
		if cfg.WebhookSecret == "" {
			return nil, errors.New("a webhook URL needs the endpoint's signing secret (whsec_…) to sign the events with")
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:      "http://" + l.Addr().String(),
		mock:     strings.TrimRight(cfg.MockURL, "/"),
		client:   &http.Client{Timeout: 30 * time.Second},
		cfg:      cfg,
		served:   make(chan struct{}),
		sessions: map[string]*session{},
		byIntent: map[string]string{},
		idem:     map[string]cached{},
	}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(l) // ends with ErrServerClosed at Close
	}()
	return s, nil
}

// Close stops the server and the webhook deliveries still under way, and waits for them.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.served
	s.stop()
	s.deliveries.Wait()
	s.client.CloseIdleConnections()
}

// Settle makes the buyer pay an open session now: it becomes complete and paid, with a
// PaymentIntent. It fails for a session that is unknown or not open (expired: too late to pay).
// It sends no event: the caller plays Stripe's (Pay is the buyer's click that does).
func (s *Server) Settle(sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.settle(sessionID)
	return err
}

// Pay is the buyer paying on the hosted page: Settle, then, with a webhook target, Stripe's
// checkout.session.completed event. It returns where the page sends the buyer back to.
func (s *Server) Pay(sessionID string) (successURL string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, err := s.settle(sessionID)
	if err != nil {
		return "", err
	}
	s.announce("checkout.session.completed", cs)
	return cs.successURL, nil
}

// errNoSession is a session id the stand-in never created.
var errNoSession = errors.New("stripetest: no session")

// settle is Settle with s.mu held.
func (s *Server) settle(sessionID string) (*session, error) {
	cs, ok := s.sessions[sessionID]
	if !ok {
		return nil, fmt.Errorf("%w %s", errNoSession, sessionID)
	}
	if cs.status != "open" {
		return nil, fmt.Errorf("stripetest: session %s is %s, not open", sessionID, cs.status)
	}
	cs.status, cs.paymentStatus = "complete", "paid"
	cs.intent = "pi_test_" + strings.TrimPrefix(cs.id, "cs_test_")
	s.byIntent[cs.intent] = cs.id
	return cs, nil
}

// announce delivers a Stripe event about the session as it is now to the webhook target, if
// there is one, in a goroutine of its own; s.mu is held. The event's data is the session as
// the API shows it, as at Stripe.
func (s *Server) announce(eventType string, cs *session) {
	if s.cfg.WebhookURL == "" {
		return
	}
	var object map[string]any
	_ = json.Unmarshal(s.render(cs, nil, nil), &object)
	s.n++
	body, err := json.Marshal(map[string]any{
		"id": fmt.Sprintf("evt_test_%d_%d", time.Now().UnixNano(), s.n), "object": "event",
		"api_version": stripe.APIVersion, "created": time.Now().Unix(), "type": eventType,
		"livemode": false, "data": map[string]any{"object": object},
	})
	if err != nil {
		panic(err) // decoded JSON always marshals
	}
	s.deliveries.Add(1)
	go func() {
		defer s.deliveries.Done()
		s.deliver(eventType, cs.id, body)
	}()
}

// deliver posts one event to the webhook target until it answers 2xx, signed anew for each
// attempt as Stripe does, within the delivery bounds.
func (s *Server) deliver(eventType, sessionID string, body []byte) {
	log := s.cfg.Logger.With("event", eventType, "session", sessionID)
	pause := deliveryPause
	var last string
	for try := 1; try <= deliveryTries; try++ {
		signed := stripe.GenerateTestSignedPayload(&stripe.UnsignedPayload{Payload: body, Secret: s.cfg.WebhookSecret, Timestamp: time.Now()})
		ctx, cancel := context.WithTimeout(s.stopCtx, deliveryTimeout)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
		if err != nil {
			cancel()
			log.Warn("stripe stand-in: event not delivered", "err", err)
			return
		}
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		req.Header.Set("Stripe-Signature", signed.Header)
		resp, err := s.client.Do(req)
		if err == nil {
			answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				cancel()
				log.Info("stripe stand-in: event delivered", "answer", strings.TrimSpace(string(answer)))
				return
			}
			last = resp.Status + " " + strings.TrimSpace(string(answer))
		} else {
			last = err.Error()
		}
		cancel()
		if !wait.Sleep(s.stopCtx, pause) {
			return
		}
		pause *= 2
	}
	log.Warn("stripe stand-in: event given up", "tries", deliveryTries, "last", last)
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
	if strings.HasPrefix(r.URL.Path, PagePrefix) {
		s.page(w, r)
		return
	}
	if auth := r.Header.Get("Authorization"); strings.Contains(auth, "_live_") {
		// A live key sent to a stand-in is a configuration mistake; say so rather than play along.
		status, out := stripeError(http.StatusUnauthorized, "invalid_request_error", "",
			"The Stripe stand-in takes test keys (sk_test_…) only; a live key belongs to Stripe itself.")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(out)
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
		successURL: form.Get("success_url"), cancelURL: form.Get("cancel_url"),
		name: form.Get("line_items[0][price_data][product_data][name]"),
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
	s.announce("checkout.session.expired", cs)
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
		"expires_at": cs.expiresAt, "created": cs.created, "url": s.URL + PagePrefix + cs.id,
		"success_url": cs.successURL, "cancel_url": cs.cancelURL,
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

// PagePrefix starts the path of a session's hosted page, its url: GET {URL}/checkout/{id}
// shows what the buyer pays and a "Pay" button, which POSTs to the same address (Pay), and the
// buyer is sent on to the session's success_url (a session no longer open answers 409: too
// late to pay). The card is always accepted: the stand-in rehearses the flow, not the card.
const PagePrefix = "/checkout/"

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Stripe stand-in: {{.Name}}</title></head>
<body style="font-family: sans-serif; max-width: 32em; margin: 3em auto">
<p><small>Stripe stand-in (rehearsal): no card is charged.</small></p>
<h1>{{.Name}}</h1>
<p>{{.Amount}} {{.Currency}}. Session <code>{{.ID}}</code>, {{.Status}}.</p>
{{if .Open}}<form method="post" action="{{.Action}}"><button type="submit" name="pay" value="1">Pay</button></form>
{{if .CancelURL}}<p><a href="{{.CancelURL}}">Back to the shop without paying</a></p>{{end}}
{{else}}<p>{{.Closed}}</p>{{end}}
</body></html>
`))

// page serves the hosted payment page of a session (PagePrefix).
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, PagePrefix)
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		cs, ok := s.sessions[id]
		var view map[string]any
		if ok {
			name := cs.name
			if name == "" {
				name = "Checkout"
			}
			closed := "This payment is complete."
			if cs.status == "expired" {
				closed = "This session has expired: it can no longer be paid."
			}
			view = map[string]any{"Name": name, "Amount": fmt.Sprintf("%d.%02d", cs.amount/100, cs.amount%100),
				"Currency": strings.ToUpper(cs.currency), "ID": cs.id, "Status": cs.status, "Open": cs.status == "open",
				"Action": PagePrefix + cs.id, "CancelURL": cs.cancelURL, "Closed": closed}
		}
		s.mu.Unlock()
		if !ok {
			http.Error(w, "no such checkout session", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = pageTemplate.Execute(w, view)
	case http.MethodPost:
		back, err := s.Pay(id)
		switch {
		case errors.Is(err, errNoSession):
			http.Error(w, err.Error(), http.StatusNotFound)
		case err != nil:
			http.Error(w, err.Error()+": too late to pay", http.StatusConflict)
		case back != "":
			http.Redirect(w, r, back, http.StatusSeeOther)
		default:
			_, _ = io.WriteString(w, "paid\n")
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}
