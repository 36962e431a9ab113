package lock_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
)

// lockRedis is a lock.Redis over a rueidis client to rdb's server, closed when the test ends:
// the tests drive the lock the way seckill does (lock.Rueidis), and look into Redis with
// go-redis.
func lockRedis(t testing.TB, rdb *redis.Client) lock.Redis {
	t.Helper()
	c, err := newRueidis(rdb.Options())
	if err != nil {
		t.Fatalf("rueidis client for %s: %v", rdb.Options().Addr, err)
	}
	t.Cleanup(c.Close)
	return lock.Rueidis(c)
}

// newRueidis makes a rueidis client with o's address, credentials and database. A client
// that does not retry (a quorum node, killed on purpose) gets o's short timeouts too.
func newRueidis(o *redis.Options) (rueidis.Client, error) {
	opt := rueidis.ClientOption{InitAddress: []string{o.Addr}, Username: o.Username, Password: o.Password,
		SelectDB: o.DB, DisableCache: true}
	if o.MaxRetries < 0 {
		opt.DisableRetry = true
		opt.Dialer.Timeout = o.DialTimeout
		opt.ConnWriteTimeout = o.WriteTimeout
	}
	return rueidis.NewClient(opt)
}

// redisClient connects to the test Redis (skips without SECKILL_TEST_REDIS, fails under CI).
func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testenv.Redis(t))
	if err != nil {
		t.Fatalf("bad %s: %v", testenv.RedisVar, err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("test Redis unreachable: %v", err)
	}
	return rdb
}

// redisNode is a throw-away redis-server child process for quorum tests.
type redisNode struct {
	port int
	cmd  *exec.Cmd
	rdb  *redis.Client
}

// startNodes starts n redis-server processes on free ports, each killed in t.Cleanup. Like
// testenv, it skips when redis-server is not on PATH, except under CI=true, where it fails.
func startNodes(t testing.TB, n int) []*redisNode {
	t.Helper()
	testenv.Redis(t) // quorum tests run only where Redis tests run
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("redis-server not on PATH: under CI=true the quorum tests must run")
		}
		t.Skip("redis-server not on PATH; skipping quorum test")
	}
	nodes := make([]*redisNode, n)
	for i := range nodes {
		nodes[i] = startNode(t, bin)
	}
	return nodes
}

func startNode(t testing.TB, bin string) *redisNode {
	t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		port := freePort(t)
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no")
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatalf("start redis-server: %v", err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
		nd := &redisNode{port: port, cmd: cmd, rdb: rdb}
		ok := false
		for i := 0; i < 100; i++ {
			if rdb.Ping(context.Background()).Err() == nil {
				ok = true
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if ok {
			t.Cleanup(func() {
				_ = rdb.Close()
				cancel()
				_ = cmd.Wait()
			})
			return nd
		}
		_ = rdb.Close()
		cancel()
		_ = cmd.Wait()
	}
	t.Fatal("could not start redis-server")
	return nil
}

// stop kills the node's process (the node is "down").
func (n *redisNode) stop() {
	_ = n.cmd.Process.Kill()
	_ = n.cmd.Wait()
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// uniquePrefix keeps each test's keys apart on the shared Redis, and deletes them (fence
// counters never expire) when the test ends.
func uniquePrefix(t testing.TB, rdb *redis.Client) string {
	prefix := fmt.Sprintf("locktest:%d:", time.Now().UnixNano())
	t.Cleanup(func() { deletePrefix(rdb, prefix) })
	return prefix
}

func deletePrefix(rdb *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// startCluster starts a three-master Redis Cluster of child processes (no replicas) and
// returns a go-redis client for it, and a lock.Redis over a rueidis client. Same skip/fail rule as startNodes; it also needs redis-cli.
func startCluster(t testing.TB) (*redis.ClusterClient, lock.Redis) {
	t.Helper()
	testenv.Redis(t)
	bin, err := exec.LookPath("redis-server")
	cli, cerr := exec.LookPath("redis-cli")
	if err != nil || cerr != nil {
		if testenv.InCI() {
			t.Fatalf("redis-server/redis-cli not on PATH: under CI=true the cluster test must run")
		}
		t.Skip("redis-server or redis-cli not on PATH; skipping cluster test")
	}
	dir := t.TempDir()
	var addrs []string
	for i := 0; i < 3; i++ {
		port := freePort(t)
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--cluster-enabled", "yes",
			"--cluster-config-file", fmt.Sprintf("%s/nodes-%d.conf", dir, port), "--dir", dir)
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); _ = cmd.Wait() })
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
			if i > 100 {
				t.Fatalf("cluster node %s did not start", a)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Close()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		// the cluster is usable once every slot is served
		info, err := rdb.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") && rdb.Set(ctx, "probe{a}", 1, 0).Err() == nil &&
			rdb.Set(ctx, "probe{b}", 1, 0).Err() == nil && rdb.Set(ctx, "probe{c}", 1, 0).Err() == nil {
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
			if err != nil {
				t.Fatalf("rueidis cluster client: %v", err)
			}
			t.Cleanup(rc.Close)
			return rdb, lock.Rueidis(rc)
		}
		if ctx.Err() != nil {
			t.Fatalf("cluster not ready: %v %q", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
