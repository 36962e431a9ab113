package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/clientaddr"
)

// httpLimits bound what clients can make `seckill serve` hold: how long a request may take to
// arrive, how long a kept-alive connection may sit idle, and how many connections, requests
// and live event streams are served at once, in all and per client address. Each is a flag and a SECKILL_* variable; zero
// values (a config built in code, as demo does) take the defaults.
type httpLimits struct {
	ReadTimeout       time.Duration // a whole request, body included, must arrive within this
	WriteTimeout      time.Duration // an answer must be written within this (event streams excepted)
	IdleTimeout       time.Duration // a kept-alive connection with no request is closed after this
	MaxConns          int           // open connections; 0: automatic, from the open-file limit
	MaxInFlight       int           // requests being handled at once
	MaxStreams        int           // live event streams
	MaxStreamsPerUser int           // live event streams of one signed-in user
	// Per client address (internal/clientaddr): 0 takes a quarter of the instance's bound
	// (httpapi.PerAddrShare), -1 is no bound.
	MaxConnsPerAddr    int
	MaxInFlightPerAddr int
	MaxStreamsPerAddr  int
	// TrustedProxies is the comma-separated CIDRs and addresses of the proxies whose
	// X-Forwarded-For is believed (clientaddr.ParseTrusted; checked when set); "": none.
	TrustedProxies string
}

const (
	defaultReadTimeout  = 10 * time.Second // 64 KiB bodies: at least 6.5 KB/s
	defaultWriteTimeout = 30 * time.Second // above the slowest handler (a queued Redis buy: 4 s)
	defaultIdleTimeout  = 75 * time.Second // above common load balancers' 60 s idle timeout
	// defaultMaxConns is the most connections MaxConns 0 allows; fewer if the open-file limit
	// is low (half of it, leaving the rest for the database, Redis and refusals).
	defaultMaxConns = 4096
	// readHeaderTimeout bounds the request line and headers (at most ReadTimeout).
	readHeaderTimeout = 5 * time.Second
)

// bindHTTPLimits registers the flags of httpLimits on fs, with defaults from the environment.
func bindHTTPLimits(fs *flag.FlagSet, getenv func(string) string, c *config) {
	l := &c.HTTP
	*l = httpLimits{
		ReadTimeout: defaultReadTimeout, WriteTimeout: defaultWriteTimeout, IdleTimeout: defaultIdleTimeout,
		MaxInFlight: httpapi.DefaultMaxInFlight, MaxStreams: httpapi.DefaultMaxStreams,
		MaxStreamsPerUser: httpapi.DefaultMaxStreamsPerUser,
	}
	durations := []struct {
		p           *time.Duration
		name, usage string
	}{
		{&l.ReadTimeout, "read-timeout", "serve: a whole request, body included, must arrive within this, or the connection is closed"},
		{&l.WriteTimeout, "write-timeout", "serve: most time to answer a request (live event streams excepted: they have a deadline per write)"},
		{&l.IdleTimeout, "idle-timeout", "serve: a kept-alive connection without a request is closed after this"},
	}
	for _, d := range durations {
		env := envName(d.name)
		v := durationValue{d.p}
		if s := getenv(env); s != "" {
			if err := v.Set(s); err != nil {
				c.envErr = errors.Join(c.envErr, fmt.Errorf("%s: %w", env, err))
			}
		}
		fs.Var(v, d.name, d.usage+" ("+env+")")
	}
	ints := []struct {
		p           *int
		min         int
		name, usage string
	}{
		{&l.MaxConns, 0, "max-conns", "serve: most open connections; more are answered 503 and closed; 0: half the open-file limit, at most " + strconv.Itoa(defaultMaxConns)},
		{&l.MaxInFlight, 1, "max-inflight", "serve: most requests handled at once (live event streams and /healthz excepted); more are answered 503"},
		{&l.MaxStreams, 1, "max-streams", "serve: most live event streams; anonymous ones may take three quarters; more are answered 503"},
		{&l.MaxStreamsPerUser, 1, "max-streams-per-user", "serve: most live event streams of one signed-in user; more are answered 429"},
		{&l.MaxConnsPerAddr, -1, "max-conns-per-addr", "serve: most open connections of one client address (an IPv6 /64; trusted proxies excepted); more are closed at once; 0: a quarter of --max-conns, -1: no bound"},
		{&l.MaxInFlightPerAddr, -1, "max-inflight-per-addr", "serve: most requests of one client address handled at once; more are answered 429; 0: a quarter of --max-inflight, -1: no bound"},
		{&l.MaxStreamsPerAddr, -1, "max-streams-per-addr", "serve: most live event streams of one client address; more are answered 429; 0: a quarter of --max-streams, -1: no bound"},
	}
	for _, n := range ints {
		env := envName(n.name)
		v := intValue{n.p, n.min}
		if s := getenv(env); s != "" {
			if err := v.Set(s); err != nil {
				c.envErr = errors.Join(c.envErr, fmt.Errorf("%s: %w", env, err))
			}
		}
		fs.Var(v, n.name, n.usage+" ("+env+")")
	}
	tp := trustedValue{&l.TrustedProxies}
	if s := getenv("SECKILL_TRUSTED_PROXIES"); s != "" {
		if err := tp.Set(s); err != nil {
			c.envErr = errors.Join(c.envErr, fmt.Errorf("SECKILL_TRUSTED_PROXIES: %w", err))
		}
	}
	fs.Var(tp, "trusted-proxies", "serve: comma-separated CIDRs and addresses of the proxies in front whose X-Forwarded-For is believed: a client is then the rightmost hop that is not one of them (docs/SECURITY.md); default none: the connection's address (SECKILL_TRUSTED_PROXIES)")
}

// trustedValue is the flag.Value of --trusted-proxies: checked by clientaddr.ParseTrusted,
// kept as written in canonical form.
type trustedValue struct{ p *string }

func (v trustedValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v trustedValue) Set(s string) error {
	t, err := clientaddr.ParseTrusted(s)
	if err != nil {
		return err
	}
	*v.p = t.String()
	return nil
}

// envName is a flag's environment variable: --max-conns is SECKILL_MAX_CONNS.
func envName(flag string) string {
	b := []byte("SECKILL_" + flag)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// durationValue is a flag.Value of a positive duration.
type durationValue struct{ p *time.Duration }

func (v durationValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (e.g. 10s)", s)
	}
	if d <= 0 {
		return fmt.Errorf("%q: must be positive", s)
	}
	*v.p = d
	return nil
}

// intValue is a flag.Value of an integer at least min.
type intValue struct {
	p   *int
	min int
}

func (v intValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.Itoa(*v.p)
}

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	if n < v.min {
		return fmt.Errorf("%d: must be at least %d", n, v.min)
	}
	*v.p = n
	return nil
}

// withDefaults fills zero values with the defaults, and MaxConns 0 from the open-file limit.
func (l httpLimits) withDefaults() httpLimits {
	set := func(p *time.Duration, d time.Duration) {
		if *p <= 0 {
			*p = d
		}
	}
	set(&l.ReadTimeout, defaultReadTimeout)
	set(&l.WriteTimeout, defaultWriteTimeout)
	set(&l.IdleTimeout, defaultIdleTimeout)
	if l.MaxConns <= 0 {
		l.MaxConns = autoMaxConns()
	}
	for _, n := range []struct {
		p *int
		d int
	}{
		{&l.MaxInFlight, httpapi.DefaultMaxInFlight}, {&l.MaxStreams, httpapi.DefaultMaxStreams},
		{&l.MaxStreamsPerUser, httpapi.DefaultMaxStreamsPerUser},
	} {
		if *n.p <= 0 {
			*n.p = n.d
		}
	}
	for _, n := range []struct{ p, of *int }{
		{&l.MaxConnsPerAddr, &l.MaxConns}, {&l.MaxInFlightPerAddr, &l.MaxInFlight}, {&l.MaxStreamsPerAddr, &l.MaxStreams},
	} {
		if *n.p == 0 {
			*n.p = httpapi.PerAddrShare(*n.of)
		}
	}
	return l
}

// withoutPerAddr is l with every per-address bound off (-1). For an instance whose whole crowd
// comes from one address, as demo's and the tests' rushes do: a load test from one machine is
// one client, and with the bounds on it would measure them (429s once it holds a quarter of the
// instance) rather than the instance (docs/SECURITY.md "Per-client bounds").
func (l httpLimits) withoutPerAddr() httpLimits {
	l.MaxConnsPerAddr, l.MaxInFlightPerAddr, l.MaxStreamsPerAddr = -1, -1, -1
	return l
}

// trusted is TrustedProxies parsed (it was checked when set; a config built in code with a
// bad list trusts none).
func (l httpLimits) trusted() clientaddr.Trusted {
	t, _ := clientaddr.ParseTrusted(l.TrustedProxies)
	return t
}

// autoMaxConns is half the process's open-file limit, at most defaultMaxConns (and at least
// 16): the other half is left for the database and Redis pools, files, and the refusals.
func autoMaxConns() int {
	n := defaultMaxConns
	if limit, ok := openFileLimit(); ok && limit/2 < uint64(n) {
		n = int(limit / 2)
	}
	return max(n, 16)
}

// newHTTPServer is serve's http.Server: every timeout set, so that a slow or idle client
// cannot hold a connection for ever. Live event streams lift the read and write deadlines of
// their own connection (httpapi/events.go).
func newHTTPServer(l httpLimits, handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(readHeaderTimeout, l.ReadTimeout),
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
