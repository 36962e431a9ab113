package redisinv

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/rueidis"
)

// stateFields are the names of the values packed in a sale's st field (common.lua).
var stateFields = []string{"price", "stock", "holdback", "starts", "ends", "limit", "hold", "qlimit",
	"created", "closed", "avail", "held", "sold", "qunits", "seq", "now", "loading", "qlen", "nexp", "ver"}

// rawState reads a sale's packed state without running one of the engine's scripts (which
// would reclaim and serve the queue on its own): a plain unpack, in Redis.
func rawState(t *testing.T, rdb rueidis.Client, saleKey string) map[string]int64 {
	t.Helper()
	v, err := rdb.Do(context.Background(), rdb.B().Eval().
		Script("local v = redis.call('HGET', KEYS[1], 'st') if not v then return {} end return {cmsgpack.unpack(v)}").
		Numkeys(1).Key(saleKey).Build()).AsIntSlice()
	if err != nil {
		t.Fatalf("read the state of %s: %v", saleKey, err)
	}
	m := map[string]int64{}
	for i, n := range v {
		if i < len(stateFields) {
			m[stateFields[i]] = n
		}
	}
	return m
}

// saleFields is a sale hash as text: its plain fields (name, loader) and the packed state's
// values in decimal.
func saleFields(t *testing.T, rdb rueidis.Client, saleKey string) map[string]string {
	t.Helper()
	m, err := rdb.Do(context.Background(), rdb.B().Hgetall().Key(saleKey).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", saleKey, err)
	}
	delete(m, "st")
	for k, v := range rawState(t, rdb, saleKey) {
		m[k] = strconv.FormatInt(v, 10)
	}
	return m
}
