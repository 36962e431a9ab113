//go:build !race

package main

// raceBuild: the tests run without -race (race_test.go).
const raceBuild = false
