package redisinv

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
)

// Private Redis deployments for the tests that break things: a master, its replicas and
// sentinels, each a redis-server process of the test's own on a loopback port of its own
// (never the shared server of SECKILL_TEST_REDIS), killed and awaited at the test's end.
// Sentinels are `redis-server <conf> --sentinel`. The helpers are written for the fault suite
// to reuse: a deployment, a way to break each part, and waits bounded in time.

// redisProc is one redis-server process.
type redisProc struct {
	t        testing.TB
	port     string
	cmd      *exec.Cmd
	log      string // its log file, shown when a wait fails
	password string // requirepass, if any: client() authenticates with it
}

func (p *redisProc) addr() string { return "127.0.0.1:" + p.port }

// signal sends sig (SIGKILL, SIGSTOP, SIGCONT) to the process.
func (p *redisProc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("redis %s: signal %v: %v", p.port, sig, err)
	}
}

// client is a plain rueidis client of this one server.
func (p *redisProc) client() rueidis.Client {
	p.t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.addr()}, DisableCache: true, Password: p.password,
		Dialer: net.Dialer{Timeout: time.Second}, ConnWriteTimeout: 2 * time.Second})
	if err != nil {
		p.t.Fatalf("connect to redis %s: %v\n%s", p.port, err, p.tail())
	}
	p.t.Cleanup(c.Close)
	return c
}

func (p *redisProc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// loopbackPort picks a free loopback port.
func loopbackPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// startRedisProc starts redis-server with conf (a configuration file's lines, the port and
// directory added) and extra command-line arguments, and waits until it answers PING.
func startRedisProc(t testing.TB, name string, conf []string, extra ...string) *redisProc {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed")
	}
	dir := t.TempDir()
	p := &redisProc{t: t, port: loopbackPort(t), log: filepath.Join(dir, name+".log")}
	conf = append([]string{"port " + p.port, "bind 127.0.0.1", "dir " + dir, "logfile " + p.log}, conf...)
	file := filepath.Join(dir, name+".conf")
	if err := os.WriteFile(file, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command("redis-server", append([]string{file}, extra...)...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // a stopped (SIGSTOP) process dies of SIGKILL too
		_ = p.cmd.Wait()
	})
	waitUntil(t, 10*time.Second, name+" answers PING", func() bool {
		c, err := net.DialTimeout("tcp", p.addr(), 200*time.Millisecond)
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

// dataConf is the configuration of a master or replica: no persistence (the tests are about
// replication), and replicas that answer reads while they resynchronise.
var dataConf = []string{`save ""`, "appendonly no", "repl-diskless-sync no", "repl-ping-replica-period 1"}

// startMaster starts a master; with a password, it requires it.
func startMaster(t testing.TB, password ...string) *redisProc {
	conf := append([]string{}, dataConf...)
	if len(password) > 0 {
		conf = append(conf, "requirepass "+password[0])
	}
	p := startRedisProc(t, "master", conf)
	if len(password) > 0 {
		p.password = password[0]
	}
	return p
}

// startReplica starts a replica of master (with master's password, which it requires too) and
// waits until its link is up.
func startReplica(t testing.TB, master *redisProc, name string) *redisProc {
	t.Helper()
	return startReplicaVia(t, master, name, master.addr())
}

// startReplicaVia is startReplica with the replica connecting to master at addr: a proxy that
// can hold the replication stream (gateProxy), so that the replica falls behind while it still
// answers the sentinels.
func startReplicaVia(t testing.TB, master *redisProc, name, addr string) *redisProc {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	conf := append(append([]string{}, dataConf...), "replicaof "+host+" "+port)
	if master.password != "" {
		conf = append(conf, "masterauth "+master.password, "requirepass "+master.password)
	}
	r := startRedisProc(t, name, conf)
	r.password = master.password
	c := r.client()
	waitUntil(t, 15*time.Second, name+" linked to its master", func() bool {
		info, err := c.Do(context.Background(), c.B().Info().Section("replication").Build()).ToString()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	return r
}

// sentinelMaster is the master set's name in the tests' sentinels.
const sentinelMaster = "mymaster"

// startSentinels starts n sentinels watching master with quorum n/2+1, a master declared down
// after 1 s without an answer, and waits until each knows the replicas and the other
// sentinels (a failover needs both). They use master's password; with sentinelPassword they
// require one of their own (and use it with each other).
func startSentinels(t testing.TB, master *redisProc, n, replicas int, sentinelPassword string) []*redisProc {
	t.Helper()
	var out []*redisProc
	for i := range n {
		conf := []string{
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s %d", sentinelMaster, master.port, n/2+1),
			"sentinel down-after-milliseconds " + sentinelMaster + " 1000",
			"sentinel failover-timeout " + sentinelMaster + " 10000",
			"sentinel parallel-syncs " + sentinelMaster + " 2",
		}
		if master.password != "" {
			conf = append(conf, "sentinel auth-pass "+sentinelMaster+" "+master.password)
		}
		if sentinelPassword != "" {
			conf = append(conf, "requirepass "+sentinelPassword, "sentinel sentinel-pass "+sentinelPassword)
		}
		s := startRedisProc(t, fmt.Sprintf("sentinel%d", i+1), conf, "--sentinel")
		s.password = sentinelPassword
		out = append(out, s)
	}
	for _, s := range out {
		c := s.client()
		waitUntil(t, 20*time.Second, "sentinel "+s.port+" knows the replicas and the other sentinels", func() bool {
			ctx := context.Background()
			rs, err := c.Do(ctx, c.B().Arbitrary("SENTINEL", "REPLICAS", sentinelMaster).Build()).ToArray()
			if err != nil || len(rs) < replicas {
				return false
			}
			ss, err := c.Do(ctx, c.B().Arbitrary("SENTINEL", "SENTINELS", sentinelMaster).Build()).ToArray()
			return err == nil && len(ss) >= n-1
		})
	}
	return out
}

// sentinelURL is the SECKILL_REDIS_URL of a Sentinel deployment.
func sentinelURL(sentinels []*redisProc) string {
	var addrs []string
	for _, s := range sentinels {
		addrs = append(addrs, s.addr())
	}
	return "redis://" + strings.Join(addrs, ",") + "/0?master_set=" + sentinelMaster
}

// sentinelMasterAddr asks a sentinel where the master is now.
func sentinelMasterAddr(t testing.TB, s *redisProc) string {
	c := s.client()
	a, err := c.Do(context.Background(), c.B().Arbitrary("SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinelMaster).Build()).AsStrSlice()
	if err != nil || len(a) != 2 {
		return ""
	}
	return net.JoinHostPort(a[0], a[1])
}

// waitUntil polls ok every 50 ms until it holds, or fails the test after limit.
func waitUntil(t testing.TB, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
	}
}
