package redisinv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/lock"
)

// Clients is how a Redis-engine instance reaches one Redis deployment: one rueidis client,
// Inventory (automatic pipelining: concurrent scripts share round trips), for the engine, its
// streams, and the rebuild and sweeper locks (Locks, package lock's view of the same client).
// One client means one set of connections per process: the lock's scripts ride the engine's
// pipelines, and only a lock waiter adds a connection (its pub/sub one, lock.Rueidis).
type Clients struct {
	Inventory rueidis.Client
	// Locks is Inventory as package lock's client interface: lock.New(c.Locks, …).
	Locks lock.Redis
	// Cluster tells whether the deployment is a Redis Cluster.
	Cluster bool
	// MasterSet is the master's name when the deployment is found through Redis Sentinel
	// (master_set); empty otherwise.
	MasterSet string
	// Addrs are the addresses the URL named (the sentinels' with master_set).
	Addrs []string
	// opt is Inventory's option, from which NewWatcher makes the local answers' client
	// (localanswers.go).
	opt rueidis.ClientOption
}

// Close closes the client and returns nil. Close the lock.Clients made over Locks first.
func (c *Clients) Close() error {
	c.Inventory.Close()
	return nil
}

// Endpoint is a parsed SECKILL_REDIS_URL.
type Endpoint struct {
	Addrs    []string
	Username string
	Password string
	DB       int
	TLS      bool
	Cluster  bool // asked for with ?cluster=1 or by naming several addresses
	// MasterSet is the name of the master the sentinels at Addrs watch (?master_set=name):
	// the deployment is a master with replicas, found and failed over by Redis Sentinel.
	MasterSet string
	// SentinelPassword authenticates to the sentinels (?sentinel_password=…), for sentinels
	// configured with requirepass; empty: the sentinels take no password. Username and
	// Password are the master's (and its replicas'), never sent to the sentinels.
	SentinelPassword string
}

// ParseURL reads a Redis URL:
//
//	redis://[user[:password]@]host[:port][/db]            a standalone server (db 0–15, default 0)
//	redis://[user[:password]@]h1:p1,h2:p2,h3:p3           a Redis Cluster, by some of its nodes
//	redis://[user[:password]@]host:port?cluster=1         a Redis Cluster, by one node
//	redis://[user[:password]@]s1:p1,s2:p2,s3:p3[/db]?master_set=name
//	                                                      a master found through Redis Sentinel,
//	                                                      by some of its sentinels (one is allowed)
//	rediss://…                                            the same over TLS
//
// The port defaults to 6379 (26379 with master_set, Sentinel's own). A server that answers as
// a cluster node is used as a cluster even without cluster=1 (Dial asks it). A cluster has only
// db 0; master_set and cluster=1 exclude each other. With master_set, user and password are the
// master's; sentinels that require a password of their own are given it with
// sentinel_password=… (percent-encoded). No password ever appears in errors.
func ParseURL(raw string) (Endpoint, error) {
	var ep Endpoint
	scheme, rest, ok := strings.Cut(raw, "://")
	switch {
	case !ok:
		return ep, fmt.Errorf("redis URL %q has no scheme; want redis://host:port", redactURL(raw))
	case scheme == "rediss":
		ep.TLS = true
	case scheme != "redis":
		return ep, fmt.Errorf("redis URL scheme %q is not supported; want redis:// or rediss://", scheme)
	}
	rest, query, _ := strings.Cut(rest, "?")
	rest, path, _ := strings.Cut(rest, "/")
	if strings.Contains(path, "@") || strings.Contains(query, "@") {
		// An unencoded '/' or '?' in the password moved its end, and the '@', past the host:
		// what is left would be parsed, and quoted in errors, as a host made of the password.
		return ep, fmt.Errorf("redis URL: percent-encode '/', '?' and '@' in the user name and password")
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, pass, _ := strings.Cut(rest[:at], ":")
		var err error
		if ep.Username, err = url.PathUnescape(user); err != nil {
			return ep, fmt.Errorf("redis URL: bad user name")
		}
		if ep.Password, err = url.PathUnescape(pass); err != nil {
			return ep, fmt.Errorf("redis URL: bad password encoding")
		}
		rest = rest[at+1:]
	}
	if rest == "" {
		return ep, fmt.Errorf("redis URL %q names no host", redactURL(raw))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		// Not wrapped: the parser's error quotes the text, which may be a password.
		return ep, fmt.Errorf("redis URL: bad query (percent-encode '&', '=', '%%' and ';' in values)")
	}
	for k, v := range q {
		switch k {
		case "cluster", "master_set", "sentinel_password":
		default:
			return ep, fmt.Errorf("redis URL: unknown option %q (only cluster, master_set and sentinel_password)", k)
		}
		if len(v) != 1 {
			return ep, fmt.Errorf("redis URL: option %q given %d times", k, len(v))
		}
	}
	ep.MasterSet = q.Get("master_set")
	ep.SentinelPassword = q.Get("sentinel_password")
	if q.Has("master_set") && ep.MasterSet == "" {
		return ep, fmt.Errorf("redis URL: master_set is empty; want the master's name in the sentinels' configuration")
	}
	if ep.SentinelPassword != "" && ep.MasterSet == "" {
		return ep, fmt.Errorf("redis URL: sentinel_password without master_set")
	}
	defaultPort := "6379"
	if ep.MasterSet != "" {
		defaultPort = "26379"
	}
	for _, h := range strings.Split(rest, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, defaultPort
		}
		if host == "" || strings.ContainsAny(host, "[]") && !strings.HasPrefix(h, "[") {
			return ep, fmt.Errorf("redis URL: bad host %q", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return ep, fmt.Errorf("redis URL: bad port in %q", h)
		}
		ep.Addrs = append(ep.Addrs, net.JoinHostPort(host, port))
	}
	if path != "" {
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 || db > 15 {
			return ep, fmt.Errorf("redis URL: database %q must be 0 to 15", path)
		}
		ep.DB = db
	}
	switch c := q.Get("cluster"); c {
	case "", "0", "false":
	case "1", "true":
		ep.Cluster = true
	default:
		return ep, fmt.Errorf("redis URL: cluster=%q; want 1 or 0", c)
	}
	if ep.MasterSet != "" {
		if ep.Cluster {
			return ep, fmt.Errorf("redis URL: master_set (Sentinel) and cluster=1 exclude each other")
		}
		return ep, nil
	}
	if len(ep.Addrs) > 1 {
		ep.Cluster = true
	}
	if ep.Cluster && ep.DB != 0 {
		return ep, fmt.Errorf("redis URL: a cluster has only database 0")
	}
	return ep, nil
}

// redactURL hides a password in a URL so that errors can quote it: the user info, and the
// query, which may hold sentinel_password.
func redactURL(raw string) string {
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		if i := strings.Index(raw, "://"); i >= 0 && i < at {
			raw = raw[:i+3] + "…" + raw[at:]
		} else {
			raw = "…" + raw[at:]
		}
	}
	if i := strings.Index(raw, "?"); i >= 0 {
		raw = raw[:i] + "?…"
	}
	return raw
}

// dialTimeout bounds connecting to a node; ioTimeout a command on a connection that stopped
// answering (the engine's own per-call timeout is shorter).
const (
	dialTimeout = 2 * time.Second
	ioTimeout   = 5 * time.Second
)

// Dial connects to the deployment that raw (ParseURL) names and checks that it answers.
//
// With master_set (Sentinel), the client asks the sentinels for the master, follows their
// failover announcements (+switch-master) and re-asks them every sentinelRefresh as well, so
// that an instance moves to the promoted replica without a restart; calls in flight during the
// switch fail as unavailable (503) and the next ones go to the new master.
func Dial(ctx context.Context, raw string) (*Clients, error) {
	ep, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	var tlsConf *tls.Config
	if ep.TLS {
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
		if ep.MasterSet == "" {
			// With Sentinel the master's host is learnt at run time: crypto/tls then checks
			// the certificate against the host each connection dials.
			tlsConf.ServerName, _, _ = net.SplitHostPort(ep.Addrs[0])
		}
	}
	opt := rueidis.ClientOption{
		InitAddress:      ep.Addrs,
		Username:         ep.Username,
		Password:         ep.Password,
		SelectDB:         ep.DB,
		TLSConfig:        tlsConf,
		DisableCache:     true, // no client-side caching: every read must see the scripts' writes
		ConnWriteTimeout: ioTimeout,
		Dialer:           net.Dialer{Timeout: dialTimeout},
	}
	if ep.MasterSet != "" {
		opt.Sentinel = rueidis.SentinelOption{
			MasterSet: ep.MasterSet, Password: ep.SentinelPassword, TLSConfig: tlsConf,
			Dialer: net.Dialer{Timeout: dialTimeout}, TopologyRefreshInterval: sentinelRefresh,
		}
	}
	inv, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("redis %s: %w", strings.Join(ep.Addrs, ","), err)
	}
	cluster := false
	if ep.MasterSet == "" { // a master found through Sentinel is never a cluster node
		if cluster, err = isCluster(ctx, inv); err != nil {
			inv.Close()
			return nil, fmt.Errorf("redis %s: %w", strings.Join(ep.Addrs, ","), err)
		}
	}
	return &Clients{Inventory: inv, Locks: lock.Rueidis(inv), Cluster: cluster, MasterSet: ep.MasterSet,
		Addrs: ep.Addrs, opt: opt}, nil
}

// sentinelRefresh is how often the engine's client re-asks the sentinels for the master, in
// case it missed a +switch-master announcement (a sentinel restarted, a dropped connection):
// without it, a client that missed one would stay on the demoted master, which answers
// READONLY (unavailable) for ever.
const sentinelRefresh = 2 * time.Second

// isCluster asks a node whether it runs in cluster mode.
func isCluster(ctx context.Context, c rueidis.Client) (bool, error) {
	info, err := c.Do(ctx, c.B().Info().Section("cluster").Build()).ToString()
	if err != nil {
		return false, err
	}
	return strings.Contains(info, "cluster_enabled:1"), nil
}
