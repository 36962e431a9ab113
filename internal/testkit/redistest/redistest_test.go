package redistest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestStartWithoutRedisServer: with no redis-server on PATH, Start skips the test, and fails it
// under CI=true (where a skipped integration test would let CI pass without running it). The
// test runs itself again, as a child process with an empty PATH, for each case.
func TestStartWithoutRedisServer(t *testing.T) {
	if os.Getenv("REDISTEST_CHILD") == "1" {
		Start(t, "missing", nil)
		t.Fatal("Start returned without a redis-server")
	}
	for ci, want := range map[string]string{
		"true": "--- FAIL: TestStartWithoutRedisServer",
		"":     "--- SKIP: TestStartWithoutRedisServer",
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStartWithoutRedisServer$", "-test.v")
		cmd.Env = append(os.Environ(), "REDISTEST_CHILD=1", "PATH="+t.TempDir(), "CI="+ci)
		out, err := cmd.CombinedOutput()
		if !strings.Contains(string(out), want) || (ci == "true") != (err != nil) {
			t.Errorf("CI=%q without redis-server: exit %v, want %q in:\n%s", ci, err, want, out)
		}
	}
}
