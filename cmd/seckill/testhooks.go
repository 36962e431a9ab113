//go:build seckill_testhooks

package main

import (
	"os"

	"github.com/seckill-go/seckill/redisinv"
)

// testEngineOptions are the Redis engine's test switches, honoured only by a binary built with
// the seckill_testhooks tag (the cluster tests build theirs so): SECKILL_TEST_NO_VERSION_CHECK=1
// switches off the check that refuses a Redis that went back in time, for the negative control
// of the Sentinel fault rows, which must see the stale answer served.
func testEngineOptions() []redisinv.Option {
	if os.Getenv("SECKILL_TEST_NO_VERSION_CHECK") == "1" {
		return []redisinv.Option{redisinv.WithoutVersionCheckForTests()}
	}
	return nil
}

// testDataRace, with SECKILL_TEST_DATA_RACE=1, writes one variable from two goroutines without
// synchronisation: the negative control of the multi-process tests' race check
// (TestChildRaceIsReported), which must see a binary built with -race report it.
func testDataRace() {
	if os.Getenv("SECKILL_TEST_DATA_RACE") != "1" {
		return
	}
	var n int
	done := make(chan struct{})
	go func() { n++; close(done) }()
	n++
	<-done
}
