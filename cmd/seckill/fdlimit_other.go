//go:build !unix

package main

// openFileLimit is unknown here: MaxConns 0 means defaultMaxConns.
func openFileLimit() (uint64, bool) { return 0, false }
