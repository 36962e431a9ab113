package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/internal/testkit/redistest"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// readmeBlock returns the README's fenced shell block that contains marker, without its fences
// and with the list item's indentation removed.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(readme), "```sh\n")[1:] {
		body, _, ok := strings.Cut(block, "```")
		if ok && strings.Contains(body, marker) {
			var lines []string
			for _, l := range strings.Split(body, "\n") {
				lines = append(lines, strings.TrimPrefix(l, "   "))
			}
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("the README has no shell block with %q", marker)
	return ""
}

// TestReadmeRedisCluster runs the README's Redis Cluster recipe as written, with its ports
// 7001–7003 replaced by free ones, in a directory of its own; writes a key to every node; then
// restarts one node from the same line of the recipe and checks that it comes back with its
// own keys only. The recipe once gave the three nodes one directory, so a restarted node
// loaded the others' keys ("I have keys for slot 4719, but the slot is assigned to another
// node"); this test fails on that recipe.
func TestReadmeRedisCluster(t *testing.T) {
	skipShort(t)
	testenv.Binary(t, "redis-server")
	testenv.Binary(t, "redis-cli")
	script := readmeBlock(t, "--cluster-enabled yes")
	ports := []string{redistest.LoopbackPort(t), redistest.LoopbackPort(t), redistest.LoopbackPort(t)}
	for i, p := range []string{"7001", "7002", "7003"} {
		script = strings.ReplaceAll(script, p, ports[i])
	}
	dir := t.TempDir()
	cli := func(port string, args ...string) string {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, "redis-cli", append([]string{"-p", port}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	t.Cleanup(func() {
		for _, p := range ports {
			cli(p, "shutdown", "nosave")
		}
	})
	runScript := func(script string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the README's recipe failed: %v\n%s\n--- the recipe:\n%s", err, out, script)
		}
	}
	// Each node judges the cluster's state on its own, from the gossip it has had: one that
	// says ok may redirect a SET to one that still says CLUSTERDOWN. Wait for all three.
	allOK := func() bool {
		for _, p := range ports {
			if !strings.Contains(cli(p, "cluster", "info"), "cluster_state:ok") {
				return false
			}
		}
		return true
	}
	runScript(script)
	redistest.WaitUntil(t, 30*time.Second, "every node sees the cluster ok", allOK)

	// Keys spread over the slots; each node's own count, before and after its restart.
	for i := range 300 {
		out := cli(ports[0], "-c", "set", "readme:"+strconv.Itoa(i), "v")
		for try := 0; strings.HasPrefix(out, "CLUSTERDOWN") && try < 50; try++ {
			time.Sleep(100 * time.Millisecond) // a node that has not heard the last gossip yet
			out = cli(ports[0], "-c", "set", "readme:"+strconv.Itoa(i), "v")
		}
		if out != "OK" {
			t.Fatalf("SET through the cluster: %q", out)
		}
	}
	restarted := ports[1]
	before := cli(restarted, "dbsize")
	if n, _ := strconv.Atoi(before); n == 0 || n == 300 {
		t.Fatalf("node %s holds %s of the 300 keys; want some, not all", restarted, before)
	}
	cli(restarted, "shutdown") // saves its AOF
	// The recipe's loop again, for that node alone.
	end := strings.Index(script, "\ndone")
	if end < 0 || !strings.Contains(script, "for p in "+strings.Join(ports, " ")) {
		t.Fatalf("the recipe has no loop over the three ports:\n%s", script)
	}
	runScript(strings.Replace(script[:end+len("\ndone")], "for p in "+strings.Join(ports, " "), "for p in "+restarted, 1))
	redistest.WaitUntil(t, 30*time.Second, "the restarted node is back in an ok cluster", allOK)
	if after := cli(restarted, "dbsize"); after != before {
		t.Fatalf("node %s held %s keys before its restart and %s after: it loaded keys that are not its own", restarted, before, after)
	}
}

// TestReadmeAPITour runs the README's API tour as written (curl and jq) against `serve --dev`
// on a free port: the admin token line is given the token the server printed and
// localhost:8080 its address. Every command must succeed, the hold be paid by the mock gateway
// and the audit be ok.
func TestReadmeAPITour(t *testing.T) {
	testenv.Binary(t, "curl") // .ci/run installs both
	testenv.Binary(t, "jq")
	a := startServe(t)
	token := regexp.MustCompile(`SECKILL_ADMIN_TOKEN=([0-9a-f]+)`).FindStringSubmatch(a.out.String())
	if token == nil {
		t.Fatalf("serve --dev printed no admin token: %q", a.out.String())
	}
	tour := readmeBlock(t, "ADMIN=...")
	tour = regexp.MustCompile(`(?m)^ADMIN=\.\.\..*$`).ReplaceAllString(tour, "ADMIN="+token[1])
	tour = strings.ReplaceAll(tour, "localhost:8080", strings.TrimPrefix(a.url, "http://"))
	if strings.Contains(tour, "...") || !strings.Contains(tour, "/pay") {
		t.Fatalf("the tour's layout changed under this test:\n%s", tour)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", tour).CombinedOutput()
	if err != nil {
		t.Fatalf("the README's API tour failed: %v\n%s", err, out)
	}
	for _, want := range []string{`"redirect_url"`, `"ok":true`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tour's output lacks %s:\n%s", want, out)
		}
	}
	// The mock gateway pays ~100 ms after /pay: alice's order is listed soon after.
	tok, err := client.New(a.url).DevToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	alice := client.New(a.url, client.WithToken(tok))
	redistest.WaitUntil(t, 10*time.Second, "alice's order is listed", func() bool {
		orders, err := alice.Orders(ctx)
		return err == nil && len(orders) == 1 && orders[0].Status == seckill.StatusPaid
	})
}
