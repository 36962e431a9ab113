package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/service"
)

func (s *Server) createSale(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	// ID shadows SaleInput's: it tells "id": "" (refused, as any id out of bounds) from an
	// omitted id (a random one).
	var in struct {
		seckill.SaleInput
		ID *string `json:"id"`
	}
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.ID != nil {
		in.SaleInput.ID, in.IDGiven = *in.ID, true
	}
	v, err := s.svc.CreateSale(r.Context(), in.SaleInput)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, v)
}

// getSale answers a sale, the same for every caller (an admin sees what a shopper sees), so
// the answer is public and a cache keeps it for a second (cache.go); its ETag is of the sale
// and its stock, not of server_time.
func (s *Server) getSale(w http.ResponseWriter, r *http.Request) error {
	v, err := s.svc.Sale(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	b, unclocked, err := renderSale(v, v.ServerTime)
	if err != nil {
		return fmt.Errorf("render answer: %w", err)
	}
	writeCacheable(w, r, b, unclocked)
	return nil
}

func (s *Server) purchasePath(w http.ResponseWriter, r *http.Request) error {
	user, err := s.userOf(r)
	if err != nil {
		return err
	}
	if _, err := s.rates.spend(r, scopePath, user, s.now()); err != nil {
		return err
	}
	// A sale with a waiting room needs the admission its room gave this user (room.go).
	p, err := s.svc.PurchasePathAdmitted(r.Context(), r.PathValue("id"), user, r.Header.Get(AdmissionHeader))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, purchasePathAnswer{Path: buyPath(p.SaleID, p.Token), ExpiresAt: p.ExpiresAt})
}

// purchasePathAnswer is the body of GET /api/v1/sales/{id}/path.
type purchasePathAnswer struct {
	Path      string    `json:"path"`
	ExpiresAt time.Time `json:"expires_at"`
}

// buyPath is the route POST /api/v1/sales/{id}/buy/{token} for a sale and a purchase token
// (sale ids and tokens are URL-safe: ValidID, base64url).
func buyPath(saleID, token string) string { return "/api/v1/sales/" + saleID + "/buy/" + token }

// BuyBody is the body of a buy; empty means quantity 1.
type BuyBody struct {
	Quantity *int `json:"quantity"`
}

// maxIdempotencyKey bounds the Idempotency-Key header so keys cannot bloat engine memory.
const maxIdempotencyKey = 128

// buy runs the checks in docs/API.md's order: auth, rate limit, sale, token, body, then the
// engine (window, idempotent replay, per-user limit, stock).
func (s *Server) buy(w http.ResponseWriter, r *http.Request) error {
	user, err := s.userOf(r)
	if err != nil {
		return err
	}
	saleID, now := r.PathValue("id"), s.now()
	addr, err := s.rates.spend(r, scopeBuy, user, now)
	if err != nil {
		s.countBuy(saleID, string(seckill.CodeRateLimited), now, true) // decided before the sale is looked up
		return err
	}
	if err := s.svc.CheckPurchaseToken(r.Context(), saleID, r.PathValue("token"), user); err != nil {
		if seckill.ErrorCode(err) == seckill.CodeInvalidToken { // the sale exists
			s.countBuy(saleID, string(seckill.CodeInvalidToken), now, false)
		}
		return err
	}
	q, err := buyQuantity(w, r)
	if err != nil {
		return err
	}
	if q < 1 {
		return seckill.Errorf(seckill.CodeInvalidArgument, "quantity must be at least 1")
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey {
		return seckill.Errorf(seckill.CodeInvalidArgument, "Idempotency-Key is longer than %d bytes", maxIdempotencyKey)
	}
	res, err := s.svc.Buy(r.Context(), seckill.BuyRequest{SaleID: saleID, UserID: user, Quantity: q, IdempotencyKey: key, ClientAddr: addr})
	if err != nil {
		s.countBuy(saleID, string(seckill.ErrorCode(err)), now, false)
		return err
	}
	status, outcome := http.StatusCreated, "held"
	switch {
	case res.Replayed:
		status, outcome = http.StatusOK, "replayed"
	case res.Reservation.Status == seckill.StatusQueued:
		status, outcome = http.StatusAccepted, "queued"
	}
	s.countBuy(saleID, outcome, now, false)
	return writeReservation(w, status, res.Reservation)
}

// countBuy counts a buy's outcome in /metrics and in the sale's activity for the dashboard.
// A sale that is missing, or could not be reached, gets no activity; onlyKnown adds it only
// for a sale that already has some (see activity.record).
func (s *Server) countBuy(saleID, outcome string, now time.Time, onlyKnown bool) {
	s.metrics.outcome(outcome)
	if outcome != string(seckill.CodeNotFound) && outcome != string(seckill.CodeUnavailable) {
		s.activity.record(saleID, outcome, now, onlyKnown)
	}
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) error {
	return s.onReservation(w, r, s.svc.Reservation)
}

func (s *Server) cancelReservation(w http.ResponseWriter, r *http.Request) error {
	return s.onReservation(w, r, func(ctx context.Context, id, user string) (seckill.Reservation, error) {
		res, err := s.svc.Cancel(ctx, id, user)
		if err == nil {
			s.metrics.outcome("cancelled")
		}
		return res, err
	})
}

// onReservation answers op (a read, a cancel) on the signed-in user's reservation that the
// path names with the reservation as op left it.
func (s *Server) onReservation(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, id, user string) (seckill.Reservation, error)) error {
	user, err := s.userOf(r)
	if err != nil {
		return err
	}
	res, err := op(r.Context(), r.PathValue("rid"), user)
	if err != nil {
		return err
	}
	return writeReservation(w, http.StatusOK, res)
}

// pay starts (or answers again) the payment of the user's hold, within the user's budget of
// payment starts, decided before the reservation is read.
func (s *Server) pay(w http.ResponseWriter, r *http.Request) error {
	user, err := s.userOf(r)
	if err != nil {
		return err
	}
	if _, err := s.rates.spend(r, scopePay, user, s.now()); err != nil {
		return err
	}
	intent, err := s.svc.Pay(r.Context(), r.PathValue("rid"), user)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, intent)
}

// gatewaysByName is the server's gateways: the built-in "webhook" one when its key is set, then
// cfg.Gateways (a configured gateway named "webhook" replaces the built-in one). A gateway that
// is not configured has no route: its notifications are 404, never verified with some key.
func gatewaysByName(cfg Config) map[string]payment.Gateway {
	m := map[string]payment.Gateway{}
	if len(cfg.PaymentSecret) > 0 {
		m[payment.WebhookName] = payment.NewWebhookGateway(cfg.PaymentSecret)
	}
	for _, g := range cfg.Gateways {
		if g != nil {
			m[g.Name()] = g
		}
	}
	return m
}

// webhook receives the built-in signed scheme at its original route (404 when it is off).
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) error {
	g, ok := s.gateways[payment.WebhookName]
	if !ok {
		return seckill.Errorf(seckill.CodeNotFound, "the built-in signed webhook is not accepted by this server")
	}
	return s.notification(w, r, g)
}

// gatewayWebhook receives the notifications of the gateway named in the path. The name is
// looked up before the body is read: another name is not_found (not echoed: it is the
// caller's text).
func (s *Server) gatewayWebhook(w http.ResponseWriter, r *http.Request) error {
	g, ok := s.gateways[r.PathValue("gateway")]
	if !ok {
		return seckill.Errorf(seckill.CodeNotFound, "no payment gateway of that name is configured")
	}
	return s.notification(w, r, g)
}

// notification has the gateway verify (signature, freshness) and parse the raw body, and does
// nothing else with a notification it refuses; then it applies the payment. It answers 200 only
// after the payment transaction committed, so the gateway retries anything that did not. A
// cancelled payment (closed or expired unpaid) and an event of no interest are acknowledged
// and change nothing.
func (s *Server) notification(w http.ResponseWriter, r *http.Request, g payment.Gateway) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	n, err := g.Parse(r.Header, body, s.now())
	if err != nil {
		return err
	}
	result := seckill.PaymentIgnored
	if n.Outcome == payment.OutcomeSucceeded || n.Outcome == payment.OutcomeFailed {
		conf := n.Confirmation()
		conf.Gateway = g.Name() // the gateway that took the money pays back any refund owed
		result, err = s.svc.ApplyPayment(r.Context(), conf, n.Outcome == payment.OutcomeSucceeded)
		if err != nil {
			return err
		}
	}
	s.metrics.payment(string(result))
	return writeJSON(w, http.StatusOK, map[string]string{"result": string(result)})
}

func (s *Server) orders(w http.ResponseWriter, r *http.Request) error {
	user, err := s.userOf(r)
	if err != nil {
		return err
	}
	orders, err := s.svc.Orders(r.Context(), user)
	if err != nil {
		return err
	}
	if orders == nil {
		orders = []seckill.Order{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"orders": orders})
}

func (s *Server) audit(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	a, err := s.svc.Audit(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	out := auditAnswer{Audit: a}
	if len(s.cfg.Gateways) > 0 {
		out.Gateway = s.cfg.Gateways[0].Name()
	}
	return writeJSON(w, http.StatusOK, out)
}

// auditAnswer is a sale's audit with the name of the gateway that takes this instance's
// payments (Config.Gateways[0]), so that a load generator pays as the shop's buyers do: through
// POST /pay, on Stripe's page, or, for the built-in webhook scheme, by signed webhooks.
type auditAnswer struct {
	service.Audit
	Gateway string `json:"gateway,omitempty"`
}

// StockBody is the body of POST /sales/{id}/stock.
type StockBody struct {
	Add *int `json:"add"`
}

func (s *Server) addStock(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	var in StockBody
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.Add == nil || *in.Add < 1 {
		return seckill.Errorf(seckill.CodeInvalidArgument, "add must be a positive number of units")
	}
	v, err := s.svc.AddStock(r.Context(), r.PathValue("id"), *in.Add)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) closeSale(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkAdmin(r); err != nil {
		return err
	}
	v, err := s.svc.CloseSale(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

// DevTokenBody is the body of POST /api/v1/dev/token.
type DevTokenBody struct {
	User string `json:"user"`
}

func (s *Server) devToken(w http.ResponseWriter, r *http.Request) error {
	if !s.cfg.Dev {
		return seckill.Errorf(seckill.CodeNotFound, "no such endpoint (start with --dev)")
	}
	var in DevTokenBody
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if !seckill.ValidID(in.User) {
		return seckill.Errorf(seckill.CodeInvalidArgument, "user must be 1–64 of [A-Za-z0-9_.-]")
	}
	tok, err := MintToken(s.cfg.AuthSecret, in.User, s.now(), 24*time.Hour)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]string{"token": tok})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says whether this instance can serve buys: 200 while every engine check
// (Config.Checks, e.g. "redis") passes, else 503 problem+json (code unavailable, with
// Retry-After) whose detail names each check and its state, e.g. "not ready: database ok,
// redis unavailable". The database is reported but does not decide: while it is down, buys
// still work and payments are settled in the engine and recorded on the gateway's retry
// (Service.ApplyPayment), so the answer is 200 {"status":"degraded","checks":{"database":
// "unavailable",…}}, not a 503 that would make a load balancer pull every instance at once.
// The checks run side by side, each bounded (Service.Ready 1 s, Redis calls 2 s), so a
// database that hangs cannot make the probe time out. Failure details go to the log only.
// /readyz is not counted by the in-flight bounds (an instance at its bound is busy, not
// unready); concurrent probes share one run of the checks (readyFlight).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	answer, err := s.ready.do(r.Context(), s.readiness)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, answer)
}

// readiness runs the checks once for readyz.
func (s *Server) readiness(ctx context.Context) (map[string]any, error) {
	names := make([]string, 0, len(s.cfg.Checks)+1)
	for name := range s.cfg.Checks {
		names = append(names, name)
	}
	sort.Strings(names)
	names = append([]string{"database"}, names...)
	type outcome struct {
		name string
		err  error
	}
	done := make(chan outcome, len(names))
	for _, name := range names {
		var check func(context.Context) error = s.cfg.Checks[name]
		if name == "database" {
			check = s.svc.Ready
		}
		go func() { done <- outcome{name, check(ctx)} }()
	}
	checks := make(map[string]string, len(names))
	engineDown := false
	for range names {
		o := <-done
		checks[o.name] = "ok"
		if o.err != nil {
			s.log.Warn("readiness check failed", "check", o.name, "err", o.err)
			checks[o.name] = "unavailable"
			engineDown = engineDown || o.name != "database"
		}
	}
	if engineDown {
		parts := make([]string, 0, len(names))
		for _, name := range names {
			parts = append(parts, name+" "+checks[name])
		}
		return nil, seckill.Errorf(seckill.CodeUnavailable, "not ready: %s", strings.Join(parts, ", "))
	}
	status := "ready"
	if checks["database"] != "ok" {
		status = "degraded"
	}
	answer := map[string]any{"status": status, "checks": checks}
	if behind := s.exportBehind(); len(behind) > 0 {
		answer["export_behind"] = behind // reported only: a slow shop endpoint keeps nobody out
	}
	return answer, nil
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) error {
	b, err := assets.ReadFile("openapi.json")
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
	return nil
}
