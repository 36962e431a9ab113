package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill/delivery"
	"github.com/seckill-go/seckill/httpapi"
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
	// AcceptWebhook keeps the built-in signed webhook (SECKILL_PAYMENT_SECRET) beside --gateway
	// stripe (--accept-webhook, SECKILL_ACCEPT_WEBHOOK): off, only Stripe's events pay.
	AcceptWebhook bool
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
	// (--export, SECKILL_EXPORT; docs/EVENTS.md); empty: no events.
	Export string
	// ExportSecret signs HTTP callbacks without their own secret_env (--export-secret,
	// SECKILL_EXPORT_SECRET): its one purpose, so that a callback receiver holds no other key.
	ExportSecret string
	// ExportGiveUp is how long a sink's batch is retried before it goes to the dead letters
	// (--export-give-up, SECKILL_EXPORT_GIVE_UP).
	ExportGiveUp time.Duration
	// Retention holds the bounds of the outbox, the dead letters and the streams (retention.go).
	Retention retentionConfig
	// MetricsAddr serves /metrics on a listener of its own instead of Addr; MetricsToken is the
	// bearer token it requires (metrics.go).
	MetricsAddr, MetricsToken string
	// Pprof is serve's net/http/pprof listen address (--pprof, SECKILL_PPROF); empty: off.
	Pprof string
	// HTTP holds serve's HTTP timeouts and bounds (--read-timeout, --max-conns, …).
	HTTP httpLimits
	// RedisBuys holds serve's local answers and in-flight bound (localanswers.go).
	RedisBuys redisBuyConfig
	// OIDC is the shop's own sign-in (--oidc-issuer, …; bindOIDCConfig).
	OIDC oidcConfig
	// envErr is an environment value that could not be read; secrets reports it.
	envErr error
}

// envOr reads configuration from getenv with a default: env(name, def) is the variable's
// value, or def when it is unset or empty. Flags take it as their default, so that a flag
// overrides the environment, which overrides the default.
func envOr(getenv func(string) string) func(name, def string) string {
	return func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
}

// bindConfig registers the shared flags on fs with defaults taken from the environment.
func bindConfig(fs *flag.FlagSet, getenv func(string) string, c *config) {
	env := envOr(getenv)
	bindStoreConfig(fs, getenv, c)
	fs.StringVar(&c.Addr, "addr", env("SECKILL_ADDR", ":8080"), "listen address (SECKILL_ADDR)")
	fs.StringVar(&c.AuthSecret, "auth-secret", env("SECKILL_AUTH_SECRET", ""), "HS256 key for user JWTs and purchase tokens (SECKILL_AUTH_SECRET)")
	fs.StringVar(&c.AdminToken, "admin-token", env("SECKILL_ADMIN_TOKEN", ""), "bearer token for admin calls (SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&c.PaymentSecret, "payment-secret", env("SECKILL_PAYMENT_SECRET", ""), "webhook signature key (SECKILL_PAYMENT_SECRET)")
	bindGatewayConfig(fs, env, c)
	bindOIDCConfig(fs, env, c)
	bindMetricsConfig(fs, env, c)
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
	bindRetentionConfig(fs, getenv, c)
}

// bindEngineStoreConfig registers the flags of the inventory engine and the order store.
func bindEngineStoreConfig(fs *flag.FlagSet, getenv func(string) string, c *config) {
	env := envOr(getenv)
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
// events.
func bindExportConfig(fs *flag.FlagSet, getenv func(string) string, c *config) {
	fs.StringVar(&c.Export, "export", getenv("SECKILL_EXPORT"), "comma-separated URLs of sinks that receive every reservation event: http(s)://, amqp://, nats://, kafka://, options as query parameters (docs/EVENTS.md) (SECKILL_EXPORT)")
	fs.StringVar(&c.ExportSecret, "export-secret", getenv("SECKILL_EXPORT_SECRET"), "key that signs HTTP callbacks without their own secret_env; no other secret may equal it (SECKILL_EXPORT_SECRET)")
	c.ExportGiveUp = delivery.DefaultGiveUp
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
	fs.BoolVar(&c.AcceptWebhook, "accept-webhook", parseBoolEnv(env("SECKILL_ACCEPT_WEBHOOK", ""), "SECKILL_ACCEPT_WEBHOOK", c), "with --gateway stripe, also accept the built-in signed webhook (SECKILL_PAYMENT_SECRET) at /api/v1/payments/webhook, e.g. from a shop's own payment service; off by default (SECKILL_ACCEPT_WEBHOOK)")
	fs.StringVar(&c.StripeGroup, "stripe-group", env("SECKILL_STRIPE_GROUP", stripegw.DefaultGroup), "names this deployment in the metadata of the Stripe Checkout Sessions it creates; events of sessions without it (the shop's own checkout, Payment Links, another deployment on the account) are ignored; every instance of a deployment shares it (SECKILL_STRIPE_GROUP)")
	fs.StringVar(&c.PublicURL, "public-url", env("SECKILL_PUBLIC_URL", ""), "absolute URL at which buyers reach the storefront; Stripe's payment page sends them back there; default the server's own address (SECKILL_PUBLIC_URL)")
}

// oidcConfig is the shop's OpenID Connect provider, whose tokens sign buyers in next to the
// HS256 tokens of the auth secret (docs/SECURITY.md, Sign-in).
type oidcConfig struct {
	Issuer, Audience, UserClaim, LoginURL string
}

// bindOIDCConfig registers the flags of the shop's own sign-in.
func bindOIDCConfig(fs *flag.FlagSet, env func(name, def string) string, c *config) {
	fs.StringVar(&c.OIDC.Issuer, "oidc-issuer", env("SECKILL_OIDC_ISSUER", ""), "issuer URL of the shop's OpenID Connect provider: user tokens signed by it (RS256, ES256, EdDSA…, keys found by discovery) sign buyers in; empty: HS256 tokens of the auth secret only (SECKILL_OIDC_ISSUER)")
	fs.StringVar(&c.OIDC.Audience, "oidc-audience", env("SECKILL_OIDC_AUDIENCE", ""), "the aud the provider's tokens must carry: the client id of the storefront; required with --oidc-issuer (SECKILL_OIDC_AUDIENCE)")
	fs.StringVar(&c.OIDC.UserClaim, "oidc-user-claim", env("SECKILL_OIDC_USER_CLAIM", "sub"), "claim of the provider's tokens that holds the user id (1–64 of [A-Za-z0-9_.-]) (SECKILL_OIDC_USER_CLAIM)")
	fs.StringVar(&c.OIDC.LoginURL, "oidc-login-url", env("SECKILL_OIDC_LOGIN_URL", ""), "where the storefront sends buyers to sign in; default the provider's authorization_endpoint (SECKILL_OIDC_LOGIN_URL)")
}

// newOIDC is the verifier of the provider's tokens, or nil when no issuer is configured.
func (c oidcConfig) newOIDC(log *slog.Logger) (*httpapi.OIDC, error) {
	if c.Issuer == "" {
		if c.Audience != "" || c.LoginURL != "" {
			return nil, errors.New("--oidc-audience and --oidc-login-url need --oidc-issuer (SECKILL_OIDC_ISSUER)")
		}
		return nil, nil
	}
	if c.Audience == "" {
		return nil, errors.New("--oidc-issuer needs --oidc-audience (SECKILL_OIDC_AUDIENCE): the client id the provider issues the storefront's tokens to")
	}
	return httpapi.NewOIDC(httpapi.OIDCConfig{Issuer: c.Issuer, Audience: c.Audience, UserClaim: c.UserClaim, LoginURL: c.LoginURL, Logger: log})
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
		if err := checkLivePublicURL(c.StripeSecretKey, c.PublicURL); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("unknown gateway %q: use mock (--dev only), webhook or stripe", c.Gateway)
	}
	return name, nil
}

// checkLivePublicURL refuses a live Stripe key (sk_live_…, or a restricted rk_live_…) unless
// --public-url is an https URL: Stripe's hosted page sends paying buyers back there, and the
// default, the server's own plain-http address, would send real customers to an address they
// cannot reach, or over an unencrypted connection.
func checkLivePublicURL(key, publicURL string) error {
	if !strings.HasPrefix(key, "sk_live_") && !strings.HasPrefix(key, "rk_live_") {
		return nil
	}
	if u, err := url.Parse(publicURL); err == nil && u.Scheme == "https" && u.Host != "" {
		return nil
	}
	if publicURL == "" {
		return errors.New("a live Stripe key needs --public-url (SECKILL_PUBLIC_URL), the https address where buyers reach the shop: Stripe's page sends them back there")
	}
	return fmt.Errorf("a live Stripe key needs an https --public-url (SECKILL_PUBLIC_URL), not %q: Stripe's page sends paying buyers back there", publicURL)
}

// builtInWebhook reports whether the built-in signed webhook scheme (SECKILL_PAYMENT_SECRET) is
// accepted: it is the webhook gateway's, and the mock's (which signs with the same secret);
// beside stripe only when the operator asks for it (--accept-webhook), for otherwise its
// secret would mint payments that Stripe never took.
func (c *config) builtInWebhook() bool {
	return !strings.EqualFold(strings.TrimSpace(c.Gateway), gatewayStripe) || c.AcceptWebhook
}

// parseBoolEnv reads the boolean environment variable name (value v, "" for unset: false); a
// bad value is kept in c.envErr, which secrets reports.
func parseBoolEnv(v, name string, c *config) bool {
	if v == "" {
		return false
	}
	b, err := parseBool(v)
	if err != nil {
		c.envErr = errors.Join(c.envErr, fmt.Errorf("%s: %w", name, err))
	}
	return b
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
