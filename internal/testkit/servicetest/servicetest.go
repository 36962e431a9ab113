// Package servicetest builds a real service.Service for tests outside package service: the
// memory engine and a private in-memory SQLite store, both reading the test's clock. The gateway
// suite (seckilltest.TestGateway) runs its payment stories through it; seckilltest itself cannot
// import the engine and the store (their own tests import seckilltest).
package servicetest

import (
	"context"
	"testing"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/memory"
	"github.com/seckill-go/seckill/service"
	"github.com/seckill-go/seckill/sqlstore"
)

// AuthSecret is the service's purchase-token key.
const AuthSecret = "servicetest-auth-secret-0123456789abcdef"

// New returns a service over a fresh memory engine and SQLite store, reading clock, whose Pay
// starts payments with payments (nil: no gateway). The store is closed when t ends.
func New(t testing.TB, clock seckill.Clock, payments seckill.Payments) *service.Service {
	t.Helper()
	svc, _ := NewWithStore(t, clock, payments)
	return svc
}

// NewWithStore is New that also returns the store, for the background work that runs on it
// (the refunder, the payment closer).
func NewWithStore(t testing.TB, clock seckill.Clock, payments seckill.Payments) (*service.Service, *sqlstore.Store) {
	t.Helper()
	store, err := sqlstore.Open(context.Background(), "sqlite://:memory:")
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	inv := memory.New(clock, memory.WithArchive(store))
	return service.New(service.Config{
		Inventory: inv, Settled: inv, Store: store, Payments: payments, Clock: clock, AuthSecret: []byte(AuthSecret),
	}), store
}
