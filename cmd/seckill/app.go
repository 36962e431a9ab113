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
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/pipeline"
	"github.com/seckill-go/seckill/sqlstore"
)

// app is one running seckill server: every component and the goroutines that own them.
// Start order: store, engine (+ recovery), pipeline, sweeper, gateway, HTTP.
// Shutdown order is the reverse: dev gateway (it calls our HTTP), HTTP, sweeper, pipeline
// drain, store.
type app struct {
	log      *slog.Logger
	store    *sqlstore.Store
	engine   *memory.Engine
	events   chan seckill.Event
	pipe     *pipeline.Pipeline
	svc      *seckill.Service
	gateway  *payment.MockGateway
	api      *httpapi.Server
	http     *http.Server
	listener net.Listener
	url      string

	pipeDone   chan error
	sweepStop  context.CancelFunc
	sweepWG    sync.WaitGroup
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
}

// startApp builds and starts every component. On error, whatever started is shut down.
func startApp(ctx context.Context, cfg config, opts appOptions, log *slog.Logger) (_ *app, err error) {
	if cfg.Engine != "memory" {
		return nil, fmt.Errorf("engine %q is not available yet: use memory", cfg.Engine)
	}
	a := &app{log: log}
	defer func() {
		if err != nil {
			_ = a.close(context.Background())
		}
	}()
	a.store, err = sqlstore.Open(ctx, cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", maskURL(cfg.DB), err)
	}
	a.events = make(chan seckill.Event, 1<<16)
	a.engine = memory.New(seckill.SystemClock{}, memory.WithEvents(a.events))
	a.pipe = pipeline.New(a.store, a.events, pipeline.Config{Logger: log})
	a.pipeDone = make(chan error, 1)
	go func() { a.pipeDone <- a.pipe.Run(context.Background()) }()

	a.listener, err = net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	a.url = "http://" + a.listener.Addr().String()
	if tcp, ok := a.listener.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		a.url = fmt.Sprintf("http://127.0.0.1:%d", tcp.Port)
	}
	var payments seckill.Payments
	if cfg.Dev {
		a.gateway = payment.NewMockGateway(payment.MockConfig{
			WebhookURL:    a.url + "/api/v1/payments/webhook",
			Secret:        []byte(cfg.PaymentSecret),
			Delay:         opts.gatewayDelay,
			FailureRate:   opts.gatewayFail,
			DuplicateRate: opts.gatewayDup,
			RedirectBase:  a.url + "/mock-gateway/pay",
			Logger:        log,
		})
		payments = a.gateway
	}
	a.svc = seckill.NewService(seckill.ServiceConfig{
		Inventory: a.engine, Store: a.store, Payments: payments, AuthSecret: []byte(cfg.AuthSecret),
	})
	if err := a.svc.Recover(ctx); err != nil {
		return nil, err
	}
	sweepCtx, cancel := context.WithCancel(context.Background())
	a.sweepStop = cancel
	a.sweepWG.Add(1)
	go func() { defer a.sweepWG.Done(); a.svc.Sweep(sweepCtx, 250*time.Millisecond) }()

	a.api = httpapi.New(httpapi.Config{
		Service: a.svc, AuthSecret: []byte(cfg.AuthSecret), AdminToken: cfg.AdminToken,
		PaymentSecret: []byte(cfg.PaymentSecret), Dev: cfg.Dev, Logger: log, BuyRate: opts.buyRate,
	})
	handler := a.api.Handler()
	if a.gateway != nil {
		// The mock gateway's "payment page": a real gateway would show a form here.
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.HandleFunc("GET /mock-gateway/pay/{id}", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintf(w, "seckill mock gateway: payment %s is being processed; its signed webhook will confirm it shortly.\n", r.PathValue("id"))
		})
		handler = mux
	}
	a.http = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	a.serveDone = make(chan error, 1)
	go func() { a.serveDone <- a.http.Serve(a.listener) }()
	return a, nil
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
		if a.sweepStop != nil {
			a.sweepStop()
			a.sweepWG.Wait()
		}
		if a.events != nil && a.pipeDone != nil {
			close(a.events) // nothing sends any more: HTTP, gateway and sweeper are stopped
			errs = append(errs, <-a.pipeDone)
		}
		if a.store != nil {
			errs = append(errs, a.store.Close())
		}
		a.closeError = errors.Join(errs...)
	})
	return a.closeError
}
