package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/redis/rueidis"
)

// Tests on the shared server (SECKILL_TEST_REDIS) keep to a key prefix of their own, so that
// they can run side by side and leave nothing behind.

// KeyPrefix is a key prefix no other test uses ("seckilltest:<12 hex digits>:").
func KeyPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "seckilltest:" + hex.EncodeToString(b[:]) + ":"
}

// DropPrefix deletes every key under prefix on every node of rdb (every master of a Cluster).
func DropPrefix(t testing.TB, rdb rueidis.Client, prefix string) {
	ctx := context.Background()
	for _, node := range rdb.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Logf("cleanup scan: %v", err)
				break
			}
			for _, k := range e.Elements {
				_ = rdb.Do(ctx, rdb.B().Unlink().Key(k).Build()).Error()
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
}
