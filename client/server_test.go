package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/pipeline"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// The examples and tests run against a real server in this process: the memory engine and
// its event pipeline into SQLite, the mock payment gateway delivering its signed webhooks to
// the server, and the HTTP API on a loopback port, on the wall clock.

const (
	adminToken    = "client-test-admin-token-0123456789"
	authSecret    = "client-test-auth-secret-0123456789abcdef"
	paymentSecret = "client-test-payment-secret-0123456789"
)

// serverURL is the server every example talks to (TestMain starts it).
var serverURL string

func TestMain(m *testing.M) {
	url, stop, err := startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the server:", err)
		os.Exit(1)
	}
	serverURL = url
	code := m.Run()
	stop()
	os.Exit(code)
}

// startServer starts the whole stack; stop shuts it down in dependency order (the gateway
// calls the API, the API the engine, the engine feeds the pipeline, the pipeline the store).
func startServer() (url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "seckill-client-test-")
	if err != nil {
		return "", nil, err
	}
	store, err := sqlstore.Open(context.Background(), "sqlite://"+filepath.Join(dir, "seckill.db"))
	if err != nil {
		return "", nil, err
	}
	clock := seckill.SystemClock{}
	events := make(chan seckill.Event, 1<<16)
	engine := memory.New(clock, memory.WithEvents(events))
	pipe := pipeline.New(store, events, pipeline.Config{FlushEvery: 2 * time.Millisecond})
	piped := make(chan error, 1)
	go func() { piped <- pipe.Run(context.Background()) }()

	var api http.Handler // set below: the gateway and the API need each other
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.ServeHTTP(w, r) }))
	gw := payment.NewMockGateway(payment.MockConfig{
		Secret: []byte(paymentSecret), WebhookURL: srv.URL + "/api/v1/payments/webhook",
		Delay:        func(seckill.Reservation) time.Duration { return 10 * time.Millisecond },
		RedirectBase: srv.URL + "/mock-gateway/pay",
	})
	svc := service.New(service.Config{
		Inventory: engine, Settled: engine, Store: store, Payments: payment.ForService(gw), Clock: clock, AuthSecret: []byte(authSecret),
	})
	server := httpapi.New(httpapi.Config{
		Service: svc, AuthSecret: []byte(authSecret), AdminToken: adminToken,
		PaymentSecret: []byte(paymentSecret), Clock: clock, Dev: true, BuyRate: -1,
		EventInterval: 20 * time.Millisecond,
	})
	api = server.Handler()
	admitting, stopAdmitting := context.WithCancel(context.Background())
	admitted := make(chan struct{})
	go func() { // the waiting rooms' admitter, as every instance runs it
		defer close(admitted)
		_ = svc.Admitter(10 * time.Millisecond).Run(admitting)
	}()
	return srv.URL, func() {
		stopAdmitting()
		<-admitted
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = gw.Shutdown(ctx)
		server.Close()
		srv.Close()
		close(events)
		<-piped
		_ = store.Close()
		_ = os.RemoveAll(dir)
	}, nil
}

// holdOne is the start of a buyer's rush (Example), for the examples about what follows: the
// admin creates sale, and user holds one unit of it.
func holdOne(ctx context.Context, sale client.NewSale, user string) (*client.Client, client.Bought) {
	admin := client.New(serverURL, client.WithToken(adminToken))
	if _, err := admin.CreateSale(ctx, sale); err != nil {
		log.Fatal(err)
	}
	token, err := admin.DevToken(ctx, user)
	if err != nil {
		log.Fatal(err)
	}
	buyer := admin.WithToken(token)
	path, err := buyer.Path(ctx, sale.ID)
	if err != nil {
		log.Fatal(err)
	}
	hold, err := buyer.Buy(ctx, path.Path, 1, "")
	if err != nil {
		log.Fatal(err)
	}
	return buyer, hold
}
