// Package redistest starts private Redis deployments for the tests that break things: a master,
// its replicas and sentinels, each a redis-server process of the test's own on a loopback port
// of its own (never the shared server of SECKILL_TEST_REDIS), killed and awaited when the test
// ends. Sentinels are `redis-server <conf> --sentinel` (the redis-sentinel binary is the same
// program and is not needed). The engine's Sentinel tests (redisinv) and the fault suite
// (cmd/seckill) share it: a deployment, a way to break each part, and waits bounded in time.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// Proc is one redis-server process.
type Proc struct {
	t        testing.TB
	Port     string
	Dir      string // its working directory (dir), a temporary directory of the test
	Log      string // its log file, shown when a wait fails
	Password string // requirepass, if any: Client authenticates with it
	cmd      *exec.Cmd
}

// Addr is the server's "127.0.0.1:port".
func (p *Proc) Addr() string { return "127.0.0.1:" + p.Port }

// Signal sends sig (SIGKILL, SIGSTOP, SIGCONT) to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("redis %s: signal %v: %v", p.Port, sig, err)
	}
}

// Kill ends the process with SIGKILL and waits until its port refuses connections.
func (p *Proc) Kill() {
	p.t.Helper()
	p.Signal(syscall.SIGKILL)
	WaitUntil(p.t, 5*time.Second, "the killed redis "+p.Port+" closed its port", func() bool {
		c, err := net.DialTimeout("tcp", p.Addr(), 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

// Client is a plain rueidis client of this one server, closed when the test ends.
func (p *Proc) Client() rueidis.Client {
	p.t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true, Password: p.Password,
		Dialer: net.Dialer{Timeout: time.Second}, ConnWriteTimeout: 2 * time.Second})
	if err != nil {
		p.t.Fatalf("connect to redis %s: %v\n%s", p.Port, err, p.Tail())
	}
	p.t.Cleanup(c.Close)
	return c
}

// Tail is the end of the server's log.
func (p *Proc) Tail() string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// LoopbackPort picks a free loopback port.
func LoopbackPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// Start starts redis-server with conf (a configuration file's lines; the port, bind address,
// directory and log file are added) and extra command-line arguments, and waits until it
// answers PING. It skips the test when redis-server is not installed, and fails it under CI=true
// (testenv.Binary).
func Start(t testing.TB, name string, conf []string, extra ...string) *Proc {
	t.Helper()
	bin := testenv.Binary(t, "redis-server")
	dir := t.TempDir()
	p := &Proc{t: t, Port: LoopbackPort(t), Dir: dir, Log: filepath.Join(dir, name+".log")}
	conf = append([]string{"port " + p.Port, "bind 127.0.0.1", "dir " + dir, "logfile " + p.Log}, conf...)
	file := filepath.Join(dir, name+".conf")
	if err := os.WriteFile(file, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, append([]string{file}, extra...)...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // a stopped (SIGSTOP) process dies of SIGKILL too
		_ = p.cmd.Wait()
	})
	WaitUntil(t, 10*time.Second, name+" answers PING", func() bool {
		c, err := net.DialTimeout("tcp", p.Addr(), 200*time.Millisecond)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return false
		}
		buf := make([]byte, 16)
		n, _ := c.Read(buf)
		return strings.HasPrefix(string(buf[:n]), "+PONG") || strings.HasPrefix(string(buf[:n]), "-NOAUTH")
	})
	return p
}

// DataConf is the configuration of a master or replica: no persistence (the tests are about
// replication), and replicas pinged every second.
var DataConf = []string{`save ""`, "appendonly no", "repl-diskless-sync no", "repl-ping-replica-period 1"}

// StartMaster starts a master with DataConf; with a password, it requires it.
func StartMaster(t testing.TB, password ...string) *Proc {
	t.Helper()
	conf := append([]string{}, DataConf...)
	if len(password) > 0 {
		conf = append(conf, "requirepass "+password[0])
	}
	p := Start(t, "master", conf)
	if len(password) > 0 {
		p.Password = password[0]
	}
	return p
}

// StartReplica starts a replica of master (with master's password, which it requires too) and
// waits until its link is up.
func StartReplica(t testing.TB, master *Proc, name string) *Proc {
	t.Helper()
	return StartReplicaVia(t, master, name, master.Addr())
}

// StartReplicaVia is StartReplica with the replica connecting to master at addr: a proxy that
// can hold or cut the replication stream, so that the replica falls behind while it still
// answers the sentinels.
func StartReplicaVia(t testing.TB, master *Proc, name, addr string) *Proc {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	conf := append(append([]string{}, DataConf...), "replicaof "+host+" "+port)
	if master.Password != "" {
		conf = append(conf, "masterauth "+master.Password, "requirepass "+master.Password)
	}
	r := Start(t, name, conf)
	r.Password = master.Password
	WaitLinked(t, r)
	return r
}

// WaitLinked waits until the replica r's link to its master is up.
func WaitLinked(t testing.TB, r *Proc) {
	t.Helper()
	c := r.Client()
	WaitUntil(t, 15*time.Second, "redis "+r.Port+" linked to its master", func() bool {
		info, err := c.Do(context.Background(), c.B().Info().Section("replication").Build()).ToString()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
}

// CutReplicas makes master refuse its replicas from now on: the default user may no longer
// SYNC or PSYNC, and the replicas' connections are closed. The replicas keep trying, stay
// behind while the master takes writes, and keep answering everyone else (the sentinels
// among them, which promote one when the master dies). A proxy between master and replica
// would not do: the sentinels see a replica following another address than the master's and
// point it at the master itself (+fix-slave-config).
func CutReplicas(t testing.TB, master *Proc) {
	t.Helper()
	c := master.Client()
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Arbitrary("ACL", "SETUSER").Args("default", "-sync", "-psync").Build()).Error(); err != nil {
		t.Fatalf("redis %s: ACL SETUSER default -sync -psync: %v", master.Port, err)
	}
	if err := c.Do(ctx, c.B().Arbitrary("CLIENT", "KILL").Args("TYPE", "replica").Build()).Error(); err != nil {
		t.Fatalf("redis %s: CLIENT KILL TYPE replica: %v", master.Port, err)
	}
}

// MasterSet is the master set's name in the tests' sentinels.
const MasterSet = "mymaster"

// SentinelOptions tunes StartSentinels.
type SentinelOptions struct {
	// DownAfter is how long a master may not answer before a sentinel thinks it down
	// (down-after-milliseconds); default 1 s.
	DownAfter time.Duration
	// Password, if set, is required by the sentinels (and used between them).
	Password string
	// Conf replaces the sentinels' configuration (the monitor line and the rest) when set:
	// the lines a document tells an operator to write, for the tests that follow it.
	Conf []string
}

// StartSentinels starts n sentinels watching master with quorum n/2+1 (failover-timeout 10 s,
// parallel-syncs 2), and waits until each knows replicas replicas and the other sentinels (a
// failover needs both). They use master's password.
func StartSentinels(t testing.TB, master *Proc, n, replicas int, o SentinelOptions) []*Proc {
	t.Helper()
	if o.DownAfter == 0 {
		o.DownAfter = time.Second
	}
	var out []*Proc
	for i := range n {
		conf := o.Conf
		if conf == nil {
			conf = []string{
				fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s %d", MasterSet, master.Port, n/2+1),
				fmt.Sprintf("sentinel down-after-milliseconds %s %d", MasterSet, o.DownAfter.Milliseconds()),
				"sentinel failover-timeout " + MasterSet + " 10000",
				"sentinel parallel-syncs " + MasterSet + " 2",
			}
		}
		conf = append([]string{}, conf...)
		if master.Password != "" {
			conf = append(conf, "sentinel auth-pass "+MasterSet+" "+master.Password)
		}
		if o.Password != "" {
			conf = append(conf, "requirepass "+o.Password, "sentinel sentinel-pass "+o.Password)
		}
		s := Start(t, fmt.Sprintf("sentinel%d", i+1), conf, "--sentinel")
		s.Password = o.Password
		out = append(out, s)
	}
	for _, s := range out {
		c := s.Client()
		WaitUntil(t, 20*time.Second, "sentinel "+s.Port+" knows the replicas and the other sentinels", func() bool {
			ctx := context.Background()
			rs, err := c.Do(ctx, c.B().Arbitrary("SENTINEL", "REPLICAS", MasterSet).Build()).ToArray()
			if err != nil || len(rs) < replicas {
				return false
			}
			ss, err := c.Do(ctx, c.B().Arbitrary("SENTINEL", "SENTINELS", MasterSet).Build()).ToArray()
			return err == nil && len(ss) >= n-1
		})
	}
	return out
}

// SentinelURL is the SECKILL_REDIS_URL of a Sentinel deployment.
func SentinelURL(sentinels []*Proc) string {
	var addrs []string
	for _, s := range sentinels {
		addrs = append(addrs, s.Addr())
	}
	return "redis://" + strings.Join(addrs, ",") + "/0?master_set=" + MasterSet
}

// SentinelMasterAddr asks a sentinel where the master is now ("" if it cannot say).
func SentinelMasterAddr(t testing.TB, s *Proc) string {
	c := s.Client()
	a, err := c.Do(context.Background(), c.B().Arbitrary("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterSet).Build()).AsStrSlice()
	if err != nil || len(a) != 2 {
		return ""
	}
	return net.JoinHostPort(a[0], a[1])
}

// SentinelClient is a rueidis client of whichever server the sentinels name master, following
// failovers, closed when the test ends.
func SentinelClient(t testing.TB, sentinels []*Proc) rueidis.Client {
	t.Helper()
	var addrs []string
	for _, s := range sentinels {
		addrs = append(addrs, s.Addr())
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true,
		Sentinel: rueidis.SentinelOption{MasterSet: MasterSet, Password: sentinels[0].Password},
		Dialer:   net.Dialer{Timeout: time.Second}, ConnWriteTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("connect through the sentinels: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// WaitUntil polls ok every 50 ms until it holds, or fails the test after limit.
func WaitUntil(t testing.TB, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
	}
}
