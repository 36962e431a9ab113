package httpapi_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every test environment owns
// an HTTP server, a pipeline goroutine and its forwarder, and must stop all of them in Cleanup.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
