package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill/exporter"
	"github.com/seckill-go/seckill/payment/stripegw"
	"github.com/seckill-go/seckill/redisinv"
)

var errFlagHelp = errors.New("help requested")

// config is the effective configuration: defaults, overridden by the environment, overridden
// by flags (README, Configuration).
type config struct {
	Addr          string
	Engine        string
	DB            string
	RedisURL      string
	AuthSecret    string
	AdminToken    string
	PaymentSecret string
	Dev           bool
	// Gateway is the payment gateway that starts payments: mock, webhook or stripe (--gateway,
	// SECKILL_GATEWAY); empty means mock with --dev, else webhook (gatewayName).
	Gateway string
	// Stripe's settings, used with --gateway stripe. The key and the webhook secret are
	// secrets: logged masked.
	StripeSecretKey     string
	StripeWebhookSecret string
	StripeAPIURL        string
	// StripeGroup marks the Checkout Sessions this deployment creates (--stripe-group,
	// SECKILL_STRIPE_GROUP; stripegw.Config.Group): events of other sessions are ignored.
	StripeGroup string
	// PublicURL is where buyers reach the storefront (--public-url, SECKILL_PUBLIC_URL): Stripe's
	// hosted page sends them back there. Empty: the server's own address.
	PublicURL string
	// RedisReplicas is how many replicas must have each state change before it is answered
	// (--redis-replicas, SECKILL_REDIS_REPLICAS; redisinv.WithReplicas); 0: off.
	RedisReplicas int
	// NoConsume leaves the Redis streams to `seckill worker` processes (--consume=false).
	NoConsume bool
	// Export is the comma-separated list of sink URLs that receive every reservation event
	// (--export, SECKILL_EXPORT; docs/EVENTS.md); empty: no export.
	Export string
	// ExportGiveUp is how long a sink's batch is retried before it goes to the dead letters
	// (--export-give-up, SECKILL_EXPORT_GIVE_UP).
	ExportGiveUp time.Duration
	// Pprof is serve's net/http/pprof listen address (--pprof, SECKILL_PPROF); empty: off.
	Pprof string
	// HTTP holds serve's HTTP timeouts and bounds (--read-timeout, --max-conns, …).
	HTTP httpLimits
	// RedisBuys holds serve's local answers and in-flight bound (localanswers.go).
	RedisBuys redisBuyConfig
	// envErr is an environment value that could not be read; secrets reports it.
	envErr error
}

// bindConfig registers the shared flags on fs with defaults taken from the environment.
func bindConfig(fs *flag.FlagSet, getenv func(string) string, c *config) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	bindStoreConfig(fs, getenv, c)
	fs.StringVar(&c.Addr, "addr", env("SECKILL_ADDR", ":8080"), "listen address (SECKILL_ADDR)")
	fs.StringVar(&c.AuthSecret, "auth-secret", env("SECKILL_AUTH_SECRET", ""), "HS256 key for user JWTs and purchase tokens (SECKILL_AUTH_SECRET)")
	fs.StringVar(&c.AdminToken, "admin-token", env("SECKILL_ADMIN_TOKEN", ""), "bearer token for admin calls (SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&c.PaymentSecret, "payment-secret", env("SECKILL_PAYMENT_SECRET", ""), "webhook signature key (SECKILL_PAYMENT_SECRET)")
	bindGatewayConfig(fs, env, c)
	consume := getenv("SECKILL_CONSUME")
	fs.BoolFunc("consume", "redis engine: store the event streams in the database from this process; false when seckill worker does it (SECKILL_CONSUME, default true)", func(v string) error {
		b, err := parseBool(v)
		c.NoConsume = !b
		return err
	})
	if consume != "" {
		b, err := parseBool(consume)
		if err != nil {
			c.envErr = fmt.Errorf("SECKILL_CONSUME: %w", err)
		}
		c.NoConsume = !b
	}
	bindRedisReplicas(fs, getenv, c)
	bindRedisBuyConfig(fs, getenv, c)
	dev := getenv("SECKILL_DEV")
	fs.BoolVar(&c.Dev, "dev", dev == "1" || strings.EqualFold(dev, "true"), "development mode: generate missing secrets, mock payment gateway, token endpoint (SECKILL_DEV=1)")

	// HTTP timeouts and resource bounds (httplimits.go).
	bindHTTPLimits(fs, getenv, c)
}

// bindStoreConfig registers the flags of the inventory engine, the order store and the event
// export: all that `seckill worker` uses (it has no HTTP, no secrets and no gateway).
func bindStoreConfig(fs *flag.FlagSet, getenv func(string) string, c *config) {
	bindEngineStoreConfig(fs, getenv, c)
	bindExportConfig(fs, getenv, c)
}

// bindEngineStoreConfig registers the flags of the inventory engine and the order store.
func bindEngineStoreConfig(fs *flag.FlagSet, getenv func(string) string, c *config) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&c.Engine, "engine", env("SECKILL_ENGINE", "memory"), "inventory engine: memory (one process) or redis (SECKILL_ENGINE)")
	fs.StringVar(&c.DB, "db", env("SECKILL_DB", "sqlite://./seckill.db"), "order store URL: sqlite://file, mysql://user:pass@host:port/db or postgres://user:pass@host:port/db (SECKILL_DB)")
	fs.StringVar(&c.RedisURL, "redis-url", env("SECKILL_REDIS_URL", ""), "Redis URL for the redis engine: redis://host:port/db, a cluster as redis://h1:p1,h2:p2, Sentinel as redis://s1:26379,s2:26379/db?master_set=name (SECKILL_REDIS_URL)")
}

// bindRedisReplicas registers --redis-replicas, serve's only (it is about what a buyer is
// answered; `seckill worker` answers nobody).
func bindRedisReplicas(fs *flag.FlagSet, getenv func(string) string, c *config) {
	set := func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		if err := redisinv.CheckReplicas(n, redisinv.DefaultReplicaTimeout); err != nil {
			return err
		}
		c.RedisReplicas = n
		return nil
	}
	if s := getenv("SECKILL_REDIS_REPLICAS"); s != "" {
		if err := set(s); err != nil {
			c.envErr = errors.Join(c.envErr, fmt.Errorf("SECKILL_REDIS_REPLICAS: %w", err))
		}
	}
	fs.Func("redis-replicas", fmt.Sprintf("redis engine: answer a state change only once `n` replicas have it (WAIT, %v timeout, else 503, the change kept); 0 to %d, default 0 (off) (SECKILL_REDIS_REPLICAS)",
		redisinv.DefaultReplicaTimeout, redisinv.MaxReplicas), set)
}

// bindExportConfig registers the event export's flags (docs/EVENTS.md): serve and worker both
// export.
func bindExportConfig(fs *flag.FlagSet, getenv func(string) string, c *config) {
	fs.StringVar(&c.Export, "export", getenv("SECKILL_EXPORT"), "comma-separated URLs of sinks that receive every reservation event: http(s)://, amqp://, nats://, kafka://, options as query parameters (docs/EVENTS.md) (SECKILL_EXPORT)")
	c.ExportGiveUp = exporter.DefaultGiveUp
	v := durationValue{&c.ExportGiveUp}
	if s := getenv("SECKILL_EXPORT_GIVE_UP"); s != "" {
		if err := v.Set(s); err != nil {
			c.envErr = errors.Join(c.envErr, fmt.Errorf("SECKILL_EXPORT_GIVE_UP: %w", err))
		}
	}
	fs.Var(v, "export-give-up", "how long a sink's events are retried before they go to the dead letters for an operator to replay (SECKILL_EXPORT_GIVE_UP)")
}

// bindGatewayConfig registers the payment gateway's flags.
func bindGatewayConfig(fs *flag.FlagSet, env func(name, def string) string, c *config) {
	fs.StringVar(&c.Gateway, "gateway", env("SECKILL_GATEWAY", ""), "payment gateway that starts payments: mock (--dev only), webhook (the shop's own payment service posts our signed webhook; /pay answers 503) or stripe; default mock with --dev, else webhook (SECKILL_GATEWAY)")
	fs.StringVar(&c.StripeSecretKey, "stripe-secret-key", env("SECKILL_STRIPE_SECRET_KEY", ""), "Stripe API secret key, for --gateway stripe (SECKILL_STRIPE_SECRET_KEY)")
	fs.StringVar(&c.StripeWebhookSecret, "stripe-webhook-secret", env("SECKILL_STRIPE_WEBHOOK_SECRET", ""), "signing secret (whsec_...) of the Stripe webhook endpoint /api/v1/payments/webhook/stripe, for --gateway stripe (SECKILL_STRIPE_WEBHOOK_SECRET)")
	fs.StringVar(&c.StripeAPIURL, "stripe-api-url", env("SECKILL_STRIPE_API_URL", ""), "Stripe API base URL, e.g. a local stripe-mock; default Stripe's own (SECKILL_STRIPE_API_URL)")
	fs.StringVar(&c.StripeGroup, "stripe-group", env("SECKILL_STRIPE_GROUP", stripegw.DefaultGroup), "names this deployment in the metadata of the Stripe Checkout Sessions it creates; events of sessions without it (the shop's own checkout, Payment Links, another deployment on the account) are ignored; every instance of a deployment shares it (SECKILL_STRIPE_GROUP)")
	fs.StringVar(&c.PublicURL, "public-url", env("SECKILL_PUBLIC_URL", ""), "absolute URL at which buyers reach the storefront; Stripe's payment page sends them back there; default the server's own address (SECKILL_PUBLIC_URL)")
}

// Gateway names accepted by --gateway.
const (
	gatewayMock    = "mock"
	gatewayWebhook = "webhook"
	gatewayStripe  = "stripe"
)

// gatewayName is the configured gateway, defaulted and checked: mock only with --dev (it takes
// no money, so a production server must never hand out goods on its word), stripe only with
// its key and webhook secret.
func (c *config) gatewayName() (string, error) {
	name := strings.ToLower(strings.TrimSpace(c.Gateway))
	switch name {
	case "":
		if c.Dev {
			return gatewayMock, nil
		}
		return gatewayWebhook, nil
	case gatewayMock:
		if !c.Dev {
			return "", errors.New("--gateway mock is for --dev only: the mock takes no money; use webhook (the shop's payment service) or stripe")
		}
	case gatewayWebhook:
	case gatewayStripe:
		var missing []string
		if c.StripeSecretKey == "" {
			missing = append(missing, "SECKILL_STRIPE_SECRET_KEY")
		}
		if c.StripeWebhookSecret == "" {
			missing = append(missing, "SECKILL_STRIPE_WEBHOOK_SECRET")
		}
		if len(missing) > 0 {
			return "", fmt.Errorf("--gateway stripe needs %s (or the matching flags)", strings.Join(missing, " and "))
		}
	default:
		return "", fmt.Errorf("unknown gateway %q: use mock (--dev only), webhook or stripe", c.Gateway)
	}
	return name, nil
}

// parseBool reads a boolean flag or environment value.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean (true or false)", v)
}

// parseFlags parses args, turning -h into errFlagHelp after printing the command's usage
// (printUsage). The flag package's own messages are silenced: a bad flag is returned as one
// error, which run prints once, with a pointer to -h rather than the whole usage.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stderr, fs)
			return errFlagHelp
		}
		return usageError{fmt.Errorf("%s: %w (see \"seckill %s -h\")", fs.Name(), err, fs.Name())}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("%s: unexpected arguments %q (see \"seckill %s -h\")", fs.Name(), fs.Args(), fs.Name())}
	}
	return nil
}

// checkPprofAddr accepts only a loopback host:port for --pprof: profiles and goroutine dumps
// show request data and cost CPU on demand, so they must never be reachable from the network.
// An empty host (":6060") would listen on every interface and is refused too.
func checkPprofAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("--pprof %q: want a loopback host:port such as 127.0.0.1:6060", addr)
	}
	if !isLoopbackHost(host) {
		return fmt.Errorf("--pprof %q: the profiling endpoint listens on loopback only (127.0.0.1, ::1 or localhost), not %q", addr, host)
	}
	return nil
}

// isLoopbackHost reports whether host is "localhost" or a loopback IP literal.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
