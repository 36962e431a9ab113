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

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/closer"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/payment/stripegw"
	"github.com/seckill-go/seckill/pipeline"
	"github.com/seckill-go/seckill/redisinv"
	"github.com/seckill-go/seckill/refund"
	"github.com/seckill-go/seckill/sqlstore"
)

// app is one running seckill server: every component and the goroutines that own them.
// Start order: store, engine (memory: + recovery and pipeline; redis: clients, locks), sweeper
// and stream consumers, gateway, HTTP.
// Shutdown order is the reverse: dev gateway (it calls our HTTP), HTTP, sweeper and consumers,
// pipeline drain (memory) or engine (redis: its rebuilds), locks, Redis clients, store.
type app struct {
	log      *slog.Logger
	store    *sqlstore.Store
	inv      seckill.Inventory
	svc      *seckill.Service
	gateway  *payment.MockGateway // the mock, when it is the gateway (its webhooks call our HTTP)
	payGW    payment.Gateway      // the gateway that starts payments (gatewayName)
	api      *httpapi.Server
	http     *http.Server
	listener net.Listener
	url      string

	// memory engine: events go through an in-process channel to the pipeline.
	events   chan seckill.Event
	pipe     *pipeline.Pipeline
	pipeDone chan error

	// redis engine: events go through each sale's stream to the consumers.
	redis    *redisinv.Clients
	locks    *lock.Client
	rengine  *redisinv.Engine
	consumer *redisinv.Consumer

	bgStop     context.CancelFunc // stops the sweeper and the consumers
	bgWG       sync.WaitGroup
	serveDone  chan error
	closeOnce  sync.Once
	closeError error
}

// appOptions are knobs that serve and demo set differently.
type appOptions struct {
	gatewayDelay func(seckill.Reservation) time.Duration // dev gateway's delay per payment
	gatewayDup   float64                                 // dev gateway's duplicate delivery rate
	gatewayFail  float64                                 // dev gateway's failure rate
	buyRate      float64                                 // per-user buy budget; <0 disables
	noHTTP       bool                                    // worker: no HTTP server, no gateway
	// wrapInventory, if set, wraps the engine: tests use it to serve a deliberately broken
	// engine and show that `seckill bench` catches it.
	wrapInventory func(seckill.Inventory) seckill.Inventory
}

// lockLease is the lease of the rebuild and sweeper locks: short, so that when an instance
// dies another one takes over its sales' sweeping within a few seconds (the watchdog renews
// it every lease/3 while the instance lives).
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
	switch cfg.Engine {
	case "memory":
		a.events = make(chan seckill.Event, 1<<16)
		a.inv = memory.New(seckill.SystemClock{}, memory.WithEvents(a.events), memory.WithArchive(a.store))
		a.pipe = pipeline.New(a.store, a.events, pipeline.Config{Logger: log})
		a.pipeDone = make(chan error, 1)
		go func() { a.pipeDone <- a.pipe.Run(context.Background()) }()
	case "redis":
		if cfg.RedisURL == "" {
			return nil, errors.New("--engine redis needs SECKILL_REDIS_URL (or --redis-url), e.g. redis://127.0.0.1:6379/0")
		}
		a.redis, err = redisinv.Dial(ctx, cfg.RedisURL)
		if err != nil {
			return nil, scrubError(fmt.Errorf("connect to redis %s: %w", maskURL(cfg.RedisURL), err), urlSecrets(cfg.RedisURL)...)
		}
		a.locks = lock.New(a.redis.Locks, &lock.Options{Lease: lockLease})
		a.rengine = redisinv.New(a.redis.Inventory, redisinv.WithRebuild(a.store, a.locks), redisinv.WithLogger(log))
		a.inv = a.rengine
	default:
		return nil, fmt.Errorf("unknown engine %q: use memory or redis", cfg.Engine)
	}
	if opts.wrapInventory != nil {
		a.inv = opts.wrapInventory(a.inv)
	}
	if opts.noHTTP {
		a.svc = seckill.NewService(seckill.ServiceConfig{Inventory: a.inv, Store: a.store, AuthSecret: []byte(cfg.AuthSecret)})
		a.startBackground(cfg)
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
	a.svc = seckill.NewService(seckill.ServiceConfig{
		Inventory: a.inv, Store: a.store, Payments: payment.ForService(a.payGW), AuthSecret: []byte(cfg.AuthSecret),
	})
	if a.rengine == nil {
		// The memory engine starts empty: rebuild it from the database. The Redis engine's state
		// is shared and lives in Redis; a sale missing there is rebuilt on first use.
		if err := a.svc.Recover(ctx); err != nil {
			return nil, err
		}
	}
	a.startBackground(cfg)

	lim := cfg.HTTP.withDefaults()
	a.api = httpapi.New(httpapi.Config{
		Service: a.svc, AuthSecret: []byte(cfg.AuthSecret), AdminToken: cfg.AdminToken,
		PaymentSecret: []byte(cfg.PaymentSecret), Gateways: []payment.Gateway{a.payGW}, Dev: cfg.Dev, Logger: log, BuyRate: opts.buyRate,
		Checks:      a.readiness(),
		MaxInFlight: lim.MaxInFlight, MaxStreams: lim.MaxStreams, MaxStreamsPerUser: lim.MaxStreamsPerUser,
	})
	handler := a.api.Handler()
	if a.gateway != nil {
		// The mock gateway's "payment page": a real gateway would show a form here.
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.HandleFunc("GET /mock-gateway/pay/{id}", gatewayPage(a.gateway))
		handler = mux
	}
	a.http = newHTTPServer(lim, handler, log)
	log.Info("http limits", "read_timeout", lim.ReadTimeout, "write_timeout", lim.WriteTimeout, "idle_timeout", lim.IdleTimeout,
		"max_conns", lim.MaxConns, "max_inflight", lim.MaxInFlight, "max_streams", lim.MaxStreams, "max_streams_per_user", lim.MaxStreamsPerUser)
	// Event streams never go idle: Shutdown ends them through Close, or it would wait forever.
	a.http.RegisterOnShutdown(a.api.Close)
	a.serveDone = make(chan error, 1)
	go func() { a.serveDone <- a.http.Serve(httpapi.LimitListener(a.listener, lim.MaxConns)) }()
	return a, nil
}

// newGateway builds the configured payment gateway (docs/PAYMENTS.md): the mock posts our signed
// webhook to its own route, /api/v1/payments/webhook/mock; webhook starts no payments (/pay answers 503: the
// shop's payment service starts them); stripe starts Checkout Sessions that send buyers back to
// the public URL.
func (a *app) newGateway(cfg config, opts appOptions, log *slog.Logger) (payment.Gateway, error) {
	name, err := cfg.gatewayName()
	if err != nil {
		return nil, err
	}
	switch name {
	case gatewayMock:
		a.gateway = payment.NewMockGateway(payment.MockConfig{
			WebhookURL:    a.url + "/api/v1/payments/webhook/" + payment.MockName,
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
			SuccessURL: public, Logger: log,
		})
		if err != nil {
			return nil, scrubError(fmt.Errorf("stripe gateway: %w", err), cfg.StripeSecretKey, cfg.StripeWebhookSecret)
		}
		return g, nil
	}
	return payment.NewWebhookGateway([]byte(cfg.PaymentSecret)), nil
}

// startBackground starts the sweeper and, on the redis engine, the stream consumers (unless
// cfg.NoConsume: `seckill worker` processes run them instead).
func (a *app) startBackground(cfg config) {
	ctx, cancel := context.WithCancel(context.Background())
	a.bgStop = cancel
	if a.payGW != nil {
		// Payments whose hold ended unpaid are closed at the gateway that started them
		// (package closer); refund_required payments are paid back through the gateway that
		// took the money (package refund): the configured one, and the built-in signed-webhook
		// scheme, whose payments (a shop's in-house payment service, the bench's generator)
		// only an operator can pay back: its refunds end refund_failed, listed for one.
		a.bgWG.Go(func() { closer.New(a.store, a.payGW, closer.Config{Logger: a.log}).Run(ctx) })
		refunders := []payment.Gateway{a.payGW}
		if a.payGW.Name() != payment.WebhookName && cfg.PaymentSecret != "" {
			refunders = append(refunders, payment.NewWebhookGateway([]byte(cfg.PaymentSecret)))
		}
		for _, g := range refunders {
			a.bgWG.Go(func() { refund.New(a.store, g, refund.Config{Logger: a.log}).Run(ctx) })
		}
	}
	if a.rengine == nil {
		a.bgWG.Go(func() { a.svc.Sweep(ctx, 250*time.Millisecond) })
		return
	}
	a.bgWG.Go(func() { a.rengine.Sweep(ctx, 250*time.Millisecond, a.svc.LiveSaleIDs, a.locks) })
	if !cfg.NoConsume {
		a.consumer = a.rengine.NewConsumer(a.store, redisinv.ConsumerConfig{Logger: a.log})
		a.bgWG.Go(func() { a.consumer.Run(ctx, a.svc.LiveSaleIDs) })
	}
}

// readiness are the checks of /readyz beyond the database: Redis on the redis engine.
func (a *app) readiness() map[string]func(context.Context) error {
	if a.rengine == nil {
		return nil
	}
	return map[string]func(context.Context) error{"redis": a.rengine.Ping}
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
		if a.bgStop != nil {
			a.bgStop() // consumers finish and acknowledge the batch in hand
			a.bgWG.Wait()
		}
		if a.events != nil && a.pipeDone != nil {
			close(a.events) // nothing sends any more: HTTP, gateway and sweeper are stopped
			errs = append(errs, <-a.pipeDone)
		}
		if a.rengine != nil {
			errs = append(errs, a.rengine.Close())
		}
		if a.locks != nil {
			errs = append(errs, a.locks.Close())
		}
		if a.redis != nil {
			a.redis.Close()
		}
		if a.store != nil {
			errs = append(errs, a.store.Close())
		}
		a.closeError = errors.Join(errs...)
	})
	return a.closeError
}
