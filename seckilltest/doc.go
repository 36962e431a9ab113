// Package seckilltest holds the conformance suites that every implementation of a seckill
// contract runs (docs/MODEL.md): TestInventory for inventory engines, with Model as the plain
// reference engine it compares them against, TestOrderStore for order stores, and TestGateway
// for payment gateways (payment.Gateway). An
// implementation's own test calls the suite with a constructor, for example
//
//	func TestConformance(t *testing.T) {
//		seckilltest.TestInventory(t, func(t *testing.T, c seckill.Clock) seckill.Inventory {
//			return memory.New(c)
//		})
//	}
//
// The suites import "testing" and pgregory.net/rapid, so import this package from tests only.
package seckilltest
