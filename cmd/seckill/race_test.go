//go:build race

package main

// raceBuild: the tests run with -race, and so does the seckill binary they build and run as
// child processes (seckillBinary), whose race reports fail the test that ran them.
const raceBuild = true
