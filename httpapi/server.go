// Package httpapi serves the HTTP API of docs/API.md: JSON handlers over service.Service, user
// JWT and admin-token auth, the dynamic purchase path, a per-user rate limit on buys, body size
// limits, problem+json errors, Prometheus metrics, the OpenAPI document and the storefront.
package httpapi

import (
	"context"
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/delivery"
	"github.com/seckill-go/seckill/internal/logsummary"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/service"
)

//go:embed web openapi.json
var assets embed.FS

// Config configures a Server.
type Config struct {
	Service       *service.Service
	AuthSecret    []byte // HS256 key for user JWTs (and, via the service, purchase tokens)
	AdminToken    string
	PaymentSecret []byte // webhook signature key of the built-in scheme (the "webhook" gateway); nil: the scheme is off
	Dev           bool   // enables POST /api/v1/dev/token
	Clock         seckill.Clock
	Logger        *slog.Logger
	// Gateways are the payment gateways whose notifications this server receives, each at
	// POST /api/v1/payments/webhook/{name}. The built-in "webhook" gateway (our signed scheme,
	// keyed by PaymentSecret) is there when PaymentSecret is set, also at POST
	// /api/v1/payments/webhook, unless a gateway of that name is given here; without either,
	// both routes answer 404. The first is the one that takes payments (POST /pay starts
	// them), named in the sales' audit.
	Gateways []payment.Gateway
	// BuyRate and BuyBurst set the per-user request budget (default 10/s, burst 10), which
	// each user has twice, in buckets of their own: one for buys, one for payment starts
	// (POST /pay, whose gateway calls spend the shop's rate limit at the provider). A negative
	// rate disables both (the load generator's own users are not throttled by them).
	BuyRate  float64
	BuyBurst int
	// AddrRate and AddrBurst set the per-client-address budget of the same endpoints (and of
	// GET /path), each endpoint's its own (default DefaultAddrRate/s, burst DefaultAddrBurst);
	// a negative rate disables it. The user's budget also covers GET /path. See ratelimit.go.
	AddrRate  float64
	AddrBurst int
	// SharedLimiter, when set, enforces the budgets of GET /path and POST /pay across every
	// instance sharing it (redisinv.Limiter) after this instance's own; the buy's shared check
	// is the engine's (redisinv.WithRateLimits). nil: this instance's budgets only.
	SharedLimiter SharedLimiter
	// Registry receives the metrics; default a new registry served at /metrics.
	Registry *prometheus.Registry
	// MetricsToken, when set, is the bearer token /metrics requires (401 without one, 403 for
	// another). MetricsOff leaves /metrics off Handler (404): the process serves
	// MetricsHandler on a listener of its own.
	MetricsToken string
	MetricsOff   bool
	// Collectors are registered in Registry too, so that /metrics shows them: the background
	// services' error counter (internal/background), for one.
	Collectors []prometheus.Collector
	// Checks are the engine's readiness checks, by name (e.g. "redis"): /readyz answers 503
	// when one fails. The database is checked too, but only reported ("degraded").
	Checks map[string]func(context.Context) error
	// Export reports the event export's sinks (GET /api/v1/export; /readyz names those far
	// behind); nil when the process exports nothing.
	Export func() []delivery.SinkStatus
	// Cold reports the engine's cold side on this instance (GET /api/v1/hot): its cold cache,
	// the sales it cooled and loaded; nil when the engine has none (memory): zeros.
	Cold func() ColdView
	// EventInterval is how often a sale with live listeners (GET /api/v1/sales/{id}/events)
	// is read for changes; default 250 ms, the sweeper's period.
	EventInterval time.Duration
	// MaxInFlight bounds the requests being handled at once (default DefaultMaxInFlight;
	// negative: no bound). Beyond it a request is answered 503 unavailable, Retry-After: 1.
	// Event streams, /healthz and /readyz are not counted: streams have bounds of their own,
	// and /readyz reports the dependencies, not the load.
	MaxInFlight int
	// MaxStreams bounds the live event streams of this instance (default DefaultMaxStreams),
	// of which anonymous ones may hold three quarters; MaxStreamsPerUser bounds the streams
	// of one signed-in user (default DefaultMaxStreamsPerUser).
	MaxStreams        int
	MaxStreamsPerUser int
	// Per client (internal/clientaddr: an address, or an IPv6 /64; behind TrustedProxies,
	// from X-Forwarded-For): MaxInFlightPerAddr bounds its requests in flight (default a
	// quarter of MaxInFlight), MaxStreamsPerAddr its live event streams (default a quarter of
	// MaxStreams); negative: no bound. Over either, 429 rate_limited.
	MaxInFlightPerAddr int
	MaxStreamsPerAddr  int
	TrustedProxies     TrustedProxies

	// OIDC, if set, also accepts user tokens signed by the shop's OpenID Connect provider
	// (RS256, ES256, EdDSA…; oidc.go), and GET /api/v1/signin tells the storefront where
	// buyers sign in. The caller owns it (Close).
	OIDC *OIDC
}

// Budgets are the per-user and per-address request budgets cfg sets, defaults applied (a
// limit that is off has Rate 0): the engine's shared check of the buys must use the same
// (redisinv.WithRateLimits).
func (cfg Config) Budgets() (user, addr seckill.RateLimit) {
	user = seckill.RateLimit{Rate: cfg.BuyRate, Burst: cfg.BuyBurst}
	if user.Rate == 0 {
		user.Rate = 10
	}
	if user.Burst <= 0 {
		user.Burst = 10
	}
	addr = seckill.RateLimit{Rate: cfg.AddrRate, Burst: cfg.AddrBurst}
	if addr.Rate == 0 {
		addr.Rate = DefaultAddrRate
	}
	if addr.Burst <= 0 {
		addr.Burst = DefaultAddrBurst
	}
	if user.Rate < 0 {
		user = seckill.RateLimit{}
	}
	if addr.Rate < 0 {
		addr = seckill.RateLimit{}
	}
	return user, addr
}

// Server is the HTTP API. Build it with New and serve Handler().
type Server struct {
	cfg      Config
	svc      *service.Service
	log      *slog.Logger
	troubles *logsummary.Summarizer // writeError's lines: a route's 503s during an outage are a line per period
	rates    *rates                 // the request budgets of /path, buys and /pay (ratelimit.go)
	metrics  *metrics
	feeds    *feeds
	rooms    *roomFeeds // the waiting rooms' live ticket streams (roomevents.go)
	activity *activity
	inFlight *inFlight
	streams  *streamLimiter
	ready    readyFlight // /readyz's checks, shared by concurrent probes
	handler  http.Handler
	gateways map[string]payment.Gateway // by name; read-only after New
	cursors  cursors                    // the sale list's page cursors (salelist.go)
}

// route is one entry of the routing table; the OpenAPI test checks the table against the
// document so that the two cannot drift apart.
type route struct {
	method, pattern string
	handler         func(http.ResponseWriter, *http.Request) error
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Clock == nil {
		cfg.Clock = seckill.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// Each defaults on its own: a rate without a burst would otherwise refuse every buy.
	if cfg.BuyRate == 0 {
		cfg.BuyRate = 10
	}
	if cfg.BuyBurst <= 0 {
		cfg.BuyBurst = 10
	}
	user, addr := cfg.Budgets()
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := &Server{cfg: cfg, svc: cfg.Service, log: cfg.Logger}
	s.rates = newRates(user, addr, cfg.TrustedProxies, cfg.SharedLimiter)
	s.troubles = logsummary.New(cfg.Logger, 0)
	s.cursors = newCursors(cfg.AuthSecret)
	s.gateways = gatewaysByName(cfg)
	s.metrics = newMetrics(cfg.Registry, cfg.Service)
	cfg.Registry.MustRegister(cfg.Collectors...)
	if cfg.EventInterval <= 0 {
		cfg.EventInterval = 250 * time.Millisecond
		s.cfg.EventInterval = cfg.EventInterval
	}
	s.activity = newActivity()
	s.feeds = newFeeds(cfg.Service, cfg.EventInterval, s.metrics.streamsDropped.Inc)
	s.rooms = newRoomFeeds(cfg.Service, cfg.EventInterval)
	s.limits(cfg)
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		h := rt.handler
		if !unbounded(rt.pattern) {
			h = s.inFlight.bound(h)
		}
		mux.Handle(rt.method+" "+rt.pattern, s.instrument(rt.method, rt.pattern, h))
	}
	web, _ := fs.Sub(assets, "web")
	site, err := loadStatic(web)
	if err != nil {
		panic("httpapi: embedded web/ unreadable: " + err.Error()) // embedded at build time
	}
	notFound := func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, seckill.Errorf(seckill.CodeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	}
	mux.Handle("GET /{$}", s.inFlight.boundHandler(site.page("index.html")))
	mux.Handle("GET /admin", s.inFlight.boundHandler(site.page("admin.html")))
	mux.Handle("GET /assets/{name}", s.inFlight.boundHandler(site.asset(notFound)))
	if !cfg.MetricsOff {
		mux.Handle("GET /metrics", s.inFlight.boundHandler(s.MetricsHandler()))
	}
	mux.Handle("/", s.inFlight.boundHandler(http.HandlerFunc(notFound)))
	s.handler = mux
	return s
}

// Close ends every live event stream and waits for the feeds behind them; it returns nil.
// http.Server's Shutdown does not end streams by itself (they never go idle): register Close
// with RegisterOnShutdown, or call it first.
func (s *Server) Close() error {
	s.feeds.close()
	s.rooms.close()
	return nil
}

// Handler is the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) now() time.Time { return s.cfg.Clock.Now() }

func (s *Server) routes() []route {
	return []route{
		{"POST", "/api/v1/sales", s.createSale},
		{"GET", "/api/v1/sales", s.listSales},
		{"GET", "/api/v1/sales/{id}", s.getSale},
		{"PATCH", "/api/v1/sales/{id}", s.updateSale},
		{"DELETE", "/api/v1/sales/{id}", s.deleteSale},
		{"GET", "/api/v1/sales/{id}/path", s.purchasePath},
		{"GET", "/api/v1/sales/{id}/waiting-room", s.roomView},
		{"POST", "/api/v1/sales/{id}/waiting-room/join", s.joinRoom},
		{"GET", "/api/v1/sales/{id}/waiting-room/challenge", s.roomChallenge},
		{"GET", "/api/v1/sales/{id}/waiting-room/ticket", s.roomTicket},
		{"GET", "/api/v1/sales/{id}/waiting-room/entrants", s.roomEntrants},
		{"GET", "/api/v1/sales/{id}/waiting-room/events", s.roomEvents},
		{"GET", "/api/v1/sales/{id}/events", s.saleEvents},
		{"GET", "/api/v1/sales/{id}/activity", s.saleActivity},
		{"POST", "/api/v1/sales/{id}/buy/{token}", s.buy},
		{"GET", "/api/v1/reservations/{rid}", s.getReservation},
		{"DELETE", "/api/v1/reservations/{rid}", s.cancelReservation},
		{"POST", "/api/v1/reservations/{rid}/pay", s.pay},
		{"POST", "/api/v1/payments/webhook", s.webhook},
		{"POST", "/api/v1/payments/webhook/{gateway}", s.gatewayWebhook},
		{"GET", "/api/v1/orders", s.orders},
		{"GET", "/api/v1/sales/{id}/audit", s.audit},
		{"GET", "/api/v1/refunds", s.refunds},
		{"GET", "/api/v1/export", s.exportStatus},
		{"GET", "/api/v1/hot", s.hotStatus},
		{"POST", "/api/v1/sales/{id}/stock", s.addStock},
		{"POST", "/api/v1/sales/{id}/close", s.closeSale},
		{"POST", "/api/v1/dev/token", s.devToken},
		{"GET", "/api/v1/signin", s.signIn},
		{"GET", "/healthz", s.healthz},
		{"GET", "/readyz", s.readyz},
		{"GET", "/openapi.json", s.openapi},
	}
}

// instrument turns a handler that returns an error into an http.Handler that writes the error
// as problem+json and counts the request by route and status.
func (s *Server) instrument(method, pattern string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	// The route's series are looked up once, here, not per request (metrics.route).
	m := s.metrics.route(method + " " + pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		if err := h(rec, r); err != nil {
			s.writeError(rec, r, err)
		}
		m.observe(rec.status, time.Since(start))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

// Unwrap lets http.ResponseController reach the connection (flushes, write deadlines).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
