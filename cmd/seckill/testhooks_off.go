//go:build !seckill_testhooks

package main

import "github.com/seckill-go/seckill/redisinv"

// testEngineOptions is empty in every build but the tests' (testhooks.go): a release binary has
// no switch that weakens the engine.
func testEngineOptions() []redisinv.Option { return nil }

// testDataRace does nothing but in the tests' build (testhooks.go).
func testDataRace() {}
