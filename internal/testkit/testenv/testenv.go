// Package testenv finds the external services that integration tests need. A test asks for a
// service by its environment variable; when the variable is unset the test is skipped, except
// under CI=true, where a missing service is a failure so that CI can never pass by skipping.
package testenv

import (
	"net/url"
	"os"
	"os/exec"
	"testing"
)

// Environment variables naming the test services.
const (
	RedisVar    = "SECKILL_TEST_REDIS"         // e.g. redis://127.0.0.1:6379/0
	ClusterVar  = "SECKILL_TEST_REDIS_CLUSTER" // e.g. redis://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
	MySQLVar    = "SECKILL_TEST_MYSQL"         // e.g. mysql://root@127.0.0.1:3306/seckill_test
	PostgresVar = "SECKILL_TEST_POSTGRES"      // e.g. postgres://postgres@127.0.0.1:5432/seckill_test
	// StripeMockVar names a running stripe-mock (github.com/stripe/stripe-mock), the Stripe API
	// the Stripe gateway's tests call instead of Stripe's own.
	StripeMockVar = "SECKILL_TEST_STRIPE_MOCK" // e.g. http://127.0.0.1:12111
	AMQPVar       = "SECKILL_TEST_AMQP"        // e.g. amqp://guest:guest@127.0.0.1:5672/
	NATSVar       = "SECKILL_TEST_NATS"        // e.g. nats://127.0.0.1:4222 (JetStream enabled)
	// NginxVar names the nginx binary the caching-proxy test runs in front of a server.
	NginxVar = "SECKILL_TEST_NGINX" // e.g. /usr/sbin/nginx
)

// Redis returns the test Redis URL or skips (fails under CI=true).
func Redis(t testing.TB) string { return lookup(t, RedisVar) }

// RedisCluster returns the test Redis Cluster URL or skips (fails under CI=true).
func RedisCluster(t testing.TB) string { return lookup(t, ClusterVar) }

// MySQL returns the test MySQL URL or skips (fails under CI=true).
func MySQL(t testing.TB) string { return lookup(t, MySQLVar) }

// Postgres returns the test PostgreSQL URL or skips (fails under CI=true).
func Postgres(t testing.TB) string { return lookup(t, PostgresVar) }

// StripeMock returns the test stripe-mock's base URL or skips (fails under CI=true).
func StripeMock(t testing.TB) string { return lookup(t, StripeMockVar) }

// AMQP returns the test RabbitMQ URL or skips (fails under CI=true).
func AMQP(t testing.TB) string { return lookup(t, AMQPVar) }

// NATS returns the test NATS server's URL (JetStream enabled) or skips (fails under CI=true).
func NATS(t testing.TB) string { return lookup(t, NATSVar) }

// Nginx returns the path of the nginx binary or skips (fails under CI=true).
func Nginx(t testing.TB) string { return lookup(t, NginxVar) }

// Binary returns the path of the program name (redis-server, say) on PATH or skips (fails under
// CI=true): a test that needs a program is an integration test like any other.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if InCI() {
		t.Fatalf("%s is not installed: under CI=true every integration test must run", name)
	}
	t.Skipf("%s is not installed; skipping integration test", name)
	return ""
}

// InCI reports whether the tests run under CI=true.
func InCI() bool { return os.Getenv("CI") == "true" }

// HostPort is the host:port of a service's URL (AMQP's, NATS's), for a proxy in front of it.
func HostPort(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func lookup(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if InCI() {
		t.Fatalf("%s is not set: under CI=true every integration test must run", name)
	}
	t.Skipf("%s is not set; skipping integration test", name)
	return ""
}
