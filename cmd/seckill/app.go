package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/closer"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/payment/stripegw"
	"github.com/seckill-go/seckill/pipeline"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/refund"
	"github.com/seckill-go/seckill/retention"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// app is one running seckill server: every component and the goroutines that own them.
// Start order: store, engine (openEngine: the only place that knows which engine runs), the
// engine's feed (memory: the pipeline), gateway, recovery (memory), the background services
// (the engine's sweeper and stream consumers, closer, refunders), HTTP.
// Shutdown order is the reverse: dev gateway (it calls our HTTP), HTTP, the background
// services in reverse start order (background.Runner; the pipeline last, draining), the engine
// (redis: its senders and rebuilds, locks, Redis clients), store.
type app struct {
	log      *slog.Logger
	store    *sqlstore.Store
	inv      seckill.Inventory
	svc      *service.Service
	gateway  *payment.MockGateway // the mock, when it is the gateway (its webhooks call our HTTP)
	payGW    payment.Gateway      // the gateway that starts payments (gatewayName)
	api      *httpapi.Server
	oidc     *httpapi.OIDC // the shop's sign-in provider; nil without --oidc-issuer
	http     *http.Server
	listener net.Listener
	url      string
	metrics  *metricsServer // --metrics-addr; nil: /metrics is on the API's listener

	engine engine             // the configured inventory engine
	export *eventExport       // the event export (docs/EVENTS.md); its exporter is the last service
	pipe   *pipeline.Pipeline // memory engine: its events' way to the store (tests read its backlog)
	bg     *background.Runner // every background service; stops them in reverse start order

	// retention trims the outbox and the dead letters to their bounds (retention.go).
	retention *retention.Trimmer

	// budgets are the request budgets' part of the HTTP API's config (budgetConfig), which the
	// Redis engine's shared check of the buys takes too; sharedLimits: enforce them across
	// instances (Redis engine; appOptions.localLimits turns it off).
	budgets      httpapi.Config
	sharedLimits bool

	serveDone  chan error
	closeOnce  sync.Once
	closeError error
}

// engine is what the configured inventory engine brings to the app; nothing outside openEngine
// asks which engine it is.
type engine struct {
	inv seckill.Inventory
	// windows and settled are the engine's optional capabilities the service is given
	// (service.Config): redis reads a sale's window alone, memory loads settled sales released.
	windows seckill.SaleWindows
	settled seckill.SettledSales
	// onDemand: the engine loads a sale from the database on first use (redis, with its
	// rebuild), so that a sale created before its hot window is not loaded until then.
	onDemand bool
	// feed are the background services that must run before anything uses the engine (memory:
	// the pipeline that stores its events, which recovery already emits).
	feed []background.Service
	// services builds the engine's other background services, in dependency order, once the
	// service.Service exists (memory: the sweeper; redis: the stream consumers and the
	// sweeper).
	services func(svc *service.Service) []background.Service
	// recover: the engine starts empty and is rebuilt from the database before it serves
	// (memory). The Redis engine's state is shared and lives in Redis; a sale missing there is
	// rebuilt on first use.
	recover bool
	// streamLog is a sale's own event log for the export (redis: its stream); nil when the
	// order store's outbox holds every event (memory: EnableOutbox, with an export configured).
	streamLog func(saleID string) events.Log
	// notedSales lists the sales whose streams were notified lately (redis): with the hot
	// sales, the streams the export reads (a cold sale changed again). nil for memory.
	notedSales func() []string
	checks     map[string]func(context.Context) error // /readyz checks beyond the database
	metrics    []prometheus.Collector                 // the engine's own metrics on /metrics
	// cold reports the engine's cold side for GET /api/v1/hot (redis: its cold cache, the
	// sales it cooled and loaded); nil when it has none (memory).
	cold  func() httpapi.ColdView
	close func() error // after its services have stopped; may be nil

	// limiter enforces the budgets of GET /path and POST /pay across instances (redis); nil
	// when each instance keeps its own (memory: one process is exact).
	limiter httpapi.SharedLimiter

	// streamFill reports the fullest sale's stream and the bound, for /metrics (redis); nil
	// when the engine has no streams.
	streamFill func() (entries, most int64)
}

// sweepEvery is the sweepers' period (invariant 8 of docs/MODEL.md).
const sweepEvery = 250 * time.Millisecond

// admitEvery is the admitter's period: a room admits at most a tenth of a second's worth at
// once (seckill.RoomPolicy.RoomBurst), so it is asked ten times a second.
const admitEvery = 100 * time.Millisecond

// roomJournalEvery is how often the joins buffered for the rooms' journal are written: what a
// crash of an instance may lose of them.
const roomJournalEvery = 200 * time.Millisecond

// appOptions are knobs that serve and demo set differently.
type appOptions struct {
	gatewayDelay func(seckill.Reservation) time.Duration // dev gateway's delay per payment
	gatewayDup   float64                                 // dev gateway's duplicate delivery rate
	gatewayFail  float64                                 // dev gateway's failure rate
	buyRate      float64                                 // per-user buy budget; <0 disables
	// localLimits keeps the request budgets per instance with the Redis engine (no shared
	// check): the negative control of the tests of the limits across instances.
	localLimits bool
	noHTTP      bool // worker: no HTTP server, no gateway
	// wrapInventory, if set, wraps the engine: tests use it to serve a deliberately broken
	// engine and show that `seckill bench` catches it.
	wrapInventory func(seckill.Inventory) seckill.Inventory
}

// lockLease is the lease of the rebuild and sweeper locks: short, so that when an instance
// dies another one takes over its rebuilds and the sweeper's reconcile pass within a few
// seconds (the watchdog renews it every lease/3 while the instance lives).
const lockLease = 3 * time.Second

// startApp builds and starts every component. On error, whatever started is shut down.
func startApp(ctx context.Context, cfg config, opts appOptions, log *slog.Logger) (_ *app, err error) {
	a := &app{log: log}
	defer func() {
		if err != nil {
			_ = a.close(context.Background())
		}
	}()
	a.store, err = sqlstore.Open(ctx, cfg.DB)
	if err != nil {
		return nil, scrubError(fmt.Errorf("open database %s: %w", maskURL(cfg.DB), err), urlSecrets(cfg.DB)...)
	}
	a.bg = background.NewRunner(log)
	a.budgets = budgetConfig(cfg, opts)
	a.sharedLimits = !opts.localLimits
	if a.engine, err = a.openEngine(ctx, cfg, log); err != nil {
		return nil, err
	}
	a.inv = a.engine.inv
	if a.export, err = newEventExport(ctx, cfg, a.store, a.engine.streamLog, a.engine.notedSales, log); err != nil {
		return nil, err
	}
	a.retention = newRetention(cfg.Retention, a.store, a.engine.streamFill, log)
	if a.engine.streamLog == nil && len(a.export.sinks) > 0 {
		// The memory engine keeps no event record of its own: the pipeline writes every event to
		// the outbox, in the transaction that stores it. Only while exporting: it costs the
		// pipeline about twice its database time (docs/DECISIONS.md).
		a.store.EnableOutbox()
	}
	a.bg.Start(a.engine.feed...)
	if opts.wrapInventory != nil {
		a.inv = opts.wrapInventory(a.inv)
		// The wrapper stands for the whole engine: capabilities that would bypass it are not used.
		a.engine.windows, a.engine.settled = nil, nil
	}
	if opts.noHTTP {
		a.svc = a.newService(cfg, nil)
		a.bg.Start(a.services(cfg)...)
		return a, nil
	}

	a.listener, err = net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	a.url = "http://" + a.listener.Addr().String()
	if tcp, ok := a.listener.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		a.url = fmt.Sprintf("http://127.0.0.1:%d", tcp.Port)
	}
	if a.payGW, err = a.newGateway(cfg, opts, log); err != nil {
		return nil, err
	}
	// A provider's "too many requests" is honoured by every caller of this instance at once.
	a.payGW = payment.WithBackoff(a.payGW, seckill.SystemClock{})
	a.svc = a.newService(cfg, payment.ForService(a.payGW))
	if a.engine.recover {
		if err := a.svc.Recover(ctx); err != nil {
			return nil, err
		}
	}
	a.bg.Start(a.services(cfg)...)

	if a.oidc, err = cfg.OIDC.newOIDC(log); err != nil {
		return nil, err
	}
	if a.oidc != nil {
		// The keys before the first buyer, bounded; a provider that is down is no reason not to
		// serve: its buyers are answered 503 until it is back.
		if err := a.oidc.Refresh(ctx); err != nil {
			log.Warn("oidc: serving without the provider's keys for now", "issuer", cfg.OIDC.Issuer, "err", err)
		}
	}
	lim := cfg.HTTP.withDefaults()
	a.api = httpapi.New(httpapi.Config{
		Service: a.svc, AuthSecret: []byte(cfg.AuthSecret), AdminToken: cfg.AdminToken, OIDC: a.oidc,
		PaymentSecret: builtInSecret(cfg), Gateways: []payment.Gateway{a.payGW}, Dev: cfg.Dev, Logger: log,
		BuyRate: a.budgets.BuyRate, AddrRate: a.budgets.AddrRate, AddrBurst: a.budgets.AddrBurst, SharedLimiter: a.engine.limiter,
		Checks: a.engine.checks, Collectors: append([]prometheus.Collector{a.bg.Collector(), a.export.x.Collector(), a.retention.Collector()}, a.engine.metrics...),
		Export: a.export.x.Status, Cold: a.engine.cold, MetricsToken: cfg.MetricsToken, MetricsOff: cfg.MetricsAddr != "",
		MaxInFlight: lim.MaxInFlight, MaxStreams: lim.MaxStreams, MaxStreamsPerUser: lim.MaxStreamsPerUser,
		MaxInFlightPerAddr: lim.MaxInFlightPerAddr, MaxStreamsPerAddr: lim.MaxStreamsPerAddr, TrustedProxies: lim.trusted(),
	})
	handler := a.api.Handler()
	if a.gateway != nil {
		// The mock gateway's "payment page": a real gateway would show a form here.
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.HandleFunc("GET /mock-gateway/pay/{id}", gatewayPage(a.gateway))
		handler = mux
	}
	if cfg.MetricsAddr != "" {
		if a.metrics, err = listenMetrics(cfg.MetricsAddr); err != nil {
			return nil, err
		}
		a.metrics.start(a.api.MetricsHandler(), log)
	}
	a.http = newHTTPServer(lim, handler, log)
	log.Info("http limits", "read_timeout", lim.ReadTimeout, "write_timeout", lim.WriteTimeout, "idle_timeout", lim.IdleTimeout,
		"max_conns", lim.MaxConns, "max_inflight", lim.MaxInFlight, "max_streams", lim.MaxStreams, "max_streams_per_user", lim.MaxStreamsPerUser,
		"max_conns_per_addr", lim.MaxConnsPerAddr, "max_inflight_per_addr", lim.MaxInFlightPerAddr, "max_streams_per_addr", lim.MaxStreamsPerAddr,
		"trusted_proxies", lim.TrustedProxies)
	// Event streams never go idle: Shutdown ends them through Close, or it would wait forever.
	a.http.RegisterOnShutdown(func() { _ = a.api.Close() })
	a.serveDone = make(chan error, 1)
	go func() {
		a.serveDone <- a.http.Serve(httpapi.LimitListenerPerAddr(a.listener, lim.MaxConns, lim.MaxConnsPerAddr, lim.trusted()))
	}()
	return a, nil
}

// newService is the service over the engine and the store, starting payments with payments
// (nil: a worker, which starts none).
func (a *app) newService(cfg config, payments seckill.Payments) *service.Service {
	svc := service.New(service.Config{Inventory: a.inv, Store: a.store, Payments: payments,
		Windows: a.engine.windows, Settled: a.engine.settled, LoadOnDemand: a.engine.onDemand, AuthSecret: []byte(cfg.AuthSecret),
		Logger: a.log})
	// The Redis engine's rebuild of a sale with a waiting room restores the room from the
	// journal, whose draw keys only the service can compute (docs/DECISIONS.md "Rooms recover
	// from the database"); the memory engine's rooms are restored by Recover.
	if eng, ok := a.inv.(*redisinv.Engine); ok {
		eng.SetRoomSource(svc.RoomJournal)
	}
	return svc
}

// newGateway builds the configured payment gateway (docs/PAYMENTS.md): the mock posts our signed
// webhook to its own route, /api/v1/payments/webhook/mock; webhook starts no payments (/pay answers 503: the
// shop's payment service starts them); stripe starts Checkout Sessions that send buyers back to
// the sale's page at the public URL.
func (a *app) newGateway(cfg config, opts appOptions, log *slog.Logger) (payment.Gateway, error) {
	name, err := cfg.gatewayName()
	if err != nil {
		return nil, err
	}
	switch name {
	case gatewayMock:
		a.gateway = payment.NewMockGateway(payment.MockConfig{
			WebhookURL:    a.url + client.WebhookPath(payment.MockName),
			Secret:        []byte(cfg.PaymentSecret),
			Delay:         opts.gatewayDelay,
			FailureRate:   opts.gatewayFail,
			DuplicateRate: opts.gatewayDup,
			RedirectBase:  a.url + "/mock-gateway/pay",
			Logger:        log,
		})
		return a.gateway, nil
	case gatewayStripe:
		public := cfg.PublicURL
		if public == "" {
			public = a.url + "/"
		}
		g, err := stripegw.New(stripegw.Config{
			SecretKey: cfg.StripeSecretKey, WebhookSecret: cfg.StripeWebhookSecret, APIURL: cfg.StripeAPIURL,
			SuccessURL: public, Group: cfg.StripeGroup, Logger: log,
		})
		if err != nil {
			return nil, scrubError(fmt.Errorf("stripe gateway: %w", err), cfg.StripeSecretKey, cfg.StripeWebhookSecret)
		}
		return g, nil
	}
	return payment.NewWebhookGateway([]byte(cfg.PaymentSecret)), nil
}

// builtInSecret is the key of the built-in signed webhook as the HTTP API gets it: nil when the
// scheme is off (config.builtInWebhook), so that its routes answer 404 whatever
// SECKILL_PAYMENT_SECRET holds.
func builtInSecret(cfg config) []byte {
	if !cfg.builtInWebhook() || cfg.PaymentSecret == "" {
		return nil
	}
	return []byte(cfg.PaymentSecret)
}

// openEngine builds the configured inventory engine: the one switch on the engine.
func (a *app) openEngine(ctx context.Context, cfg config, log *slog.Logger) (engine, error) {
	switch cfg.Engine {
	case "memory":
		if cfg.RedisReplicas > 0 {
			return engine{}, errors.New("--redis-replicas is for --engine redis")
		}
		engineEvents := make(chan seckill.Event, 1<<16)
		a.pipe = pipeline.New(a.store, engineEvents, pipeline.Config{Logger: log})
		eng := memory.New(seckill.SystemClock{}, memory.WithEvents(engineEvents), memory.WithArchive(a.store))
		return engine{
			inv:      eng,
			settled:  eng,
			feed:     []background.Service{a.pipe},
			services: func(svc *service.Service) []background.Service { return []background.Service{svc.Sweeper(sweepEvery)} },
			recover:  true,
		}, nil
	case "redis":
		if cfg.RedisURL == "" {
			return engine{}, errors.New("--engine redis needs SECKILL_REDIS_URL (or --redis-url), e.g. redis://127.0.0.1:6379/0")
		}
		clients, err := redisinv.Dial(ctx, cfg.RedisURL)
		if err != nil {
			return engine{}, scrubError(fmt.Errorf("connect to redis %s: %w", maskURL(cfg.RedisURL), err), urlSecrets(cfg.RedisURL)...)
		}
		locks := lock.New(clients.Locks, &lock.Options{Lease: lockLease})
		buyOpts, closeBuys := redisBuyOptions(cfg.RedisBuys, clients, log) // localanswers.go
		if a.sharedLimits {
			user, addr := a.budgets.Budgets()
			if err := errors.Join(user.Check(), addr.Check()); err != nil {
				closeBuys()
				clients.Close()
				return engine{}, fmt.Errorf("request budgets (--rate-per-addr, --burst-per-addr): %w", err)
			}
			buyOpts = append(buyOpts, redisinv.WithRateLimits(user, addr))
		}
		eng := redisinv.New(clients.Inventory, append(append([]redisinv.Option{redisinv.WithRebuild(a.store, locks), redisinv.WithLogger(log),
			redisinv.WithReplicas(cfg.RedisReplicas, redisinv.DefaultReplicaTimeout), cfg.Retention.streamLimits()}, testEngineOptions()...), buyOpts...)...)
		var sink redisinv.Sink // nil with --consume=false: `seckill worker` processes store the streams
		if !cfg.NoConsume {
			sink = a.store
		}
		return engine{
			inv:      eng,
			windows:  eng,
			onDemand: true,
			services: func(svc *service.Service) []background.Service {
				return eng.Services(redisinv.ServicesConfig{List: svc.LiveSaleIDs, All: svc.SaleIDs, Locks: locks, Sink: sink,
					SweepEvery: sweepEvery, Consumer: redisinv.ConsumerConfig{Logger: log}})
			},
			streamLog:  func(saleID string) events.Log { return eng.ExportLog(saleID, locks) },
			notedSales: eng.NotedSaleIDs,
			checks:     map[string]func(context.Context) error{"redis": eng.Ping},
			metrics:    []prometheus.Collector{eng.ReplicaCollector(), eng.LocalAnswerCollector(), eng.ColdCollector()},
			cold: func() httpapi.ColdView {
				st := eng.ColdStats()
				return httpapi.ColdView{Entries: st.Entries, Max: redisinv.ColdCacheMax, Cooled: st.Cooled, Loaded: st.Loaded}
			},
			close: func() error {
				err := errors.Join(eng.Close(), locks.Close())
				closeBuys()
				clients.Close()
				return err
			},
			streamFill: eng.StreamFill,
			limiter:    sharedLimiter(a.sharedLimits, eng),
		}, nil
	}
	return engine{}, fmt.Errorf("unknown engine %q: use memory or redis", cfg.Engine)
}

// services are the background services that need the service.Service, in dependency order:
// the engine's, then the closer and the refunders (with a gateway). More services go at the
// end of the list: the runner stops the last one first.
func (a *app) services(cfg config) []background.Service {
	// Every instance admits in the waiting rooms (the engine's Admit is atomic and bounded by
	// each room's policy, so admitters side by side admit no more than one).
	// The rooms' journal writer goes before the admitter, so that it stops after it: its exit
	// writes the joins still buffered (docs/DECISIONS.md "Rooms recover from the database").
	list := append(a.engine.services(a.svc), a.svc.RoomJournaler(roomJournalEvery), a.svc.Admitter(admitEvery))
	if a.payGW != nil {
		// Payments whose hold ended unpaid are closed at the gateway that started them
		// (package closer); refund_required payments are paid back through the gateway that
		// took the money (package refund): the configured one, and the built-in signed-webhook
		// scheme, whose payments (a shop's in-house payment service, the bench's generator)
		// only an operator can pay back: its refunds end refund_failed, listed for one.
		list = append(list, closer.New(a.store, a.payGW, closer.Config{Logger: a.log}))
		refunders := []payment.Gateway{a.payGW}
		if a.payGW.Name() != payment.WebhookName {
			// Its Refund calls nothing and needs no secret: payments it took before a switch
			// to another gateway are still listed for an operator.
			refunders = append(refunders, payment.NewWebhookGateway(builtInSecret(cfg)))
		}
		for _, g := range refunders {
			list = append(list, refund.New(a.store, g, refund.Config{Logger: a.log}))
		}
	}
	// The exporter reads what everything before it writes, and stops first.
	return append(list, a.retention, a.export.x)
}

// close shuts down in reverse dependency order and waits for every goroutine it owns.
func (a *app) close(ctx context.Context) error {
	a.closeOnce.Do(func() {
		var errs []error
		// The dev gateway delivers its webhooks to our own HTTP server, so it stops first:
		// deliveries in flight finish (or are cancelled at ctx's deadline) while HTTP still answers.
		if a.gateway != nil {
			errs = append(errs, a.gateway.Shutdown(ctx))
		}
		if a.http != nil {
			errs = append(errs, a.http.Shutdown(ctx))
			if err := <-a.serveDone; !errors.Is(err, http.ErrServerClosed) {
				errs = append(errs, err)
			}
		} else if a.listener != nil {
			_ = a.listener.Close()
		}
		if a.oidc != nil {
			_ = a.oidc.Close() // a background refresh of the keys, bounded by its fetch timeout
		}
		if a.metrics != nil {
			errs = append(errs, a.metrics.close())
		}
		if a.bg != nil {
			// Last started, first stopped: consumers finish and acknowledge the batch in hand,
			// and the pipeline, stopped after everything that sends to it, drains its channel.
			errs = append(errs, a.bg.Stop(ctx))
		}
		if a.export != nil {
			errs = append(errs, a.export.close()) // its exporter stopped with the services
		}
		if a.engine.close != nil {
			errs = append(errs, a.engine.close())
		}
		if a.store != nil {
			errs = append(errs, a.store.Close())
		}
		a.closeError = errors.Join(errs...)
	})
	return a.closeError
}

// budgetConfig is the request budgets' part of the HTTP API's config: the per-user budget
// (opts.buyRate; negative: off), the per-address one (--rate-per-addr, --burst-per-addr).
func budgetConfig(cfg config, opts appOptions) httpapi.Config {
	return httpapi.Config{BuyRate: opts.buyRate, AddrRate: float64(cfg.HTTP.RatePerAddr), AddrBurst: cfg.HTTP.BurstPerAddr}
}

// sharedLimiter is the engine's Limiter when the budgets are shared, else nil (an interface
// holding no pointer: the HTTP API tells nil from a limiter).
func sharedLimiter(shared bool, eng *redisinv.Engine) httpapi.SharedLimiter {
	if !shared {
		return nil
	}
	return eng.NewLimiter()
}
