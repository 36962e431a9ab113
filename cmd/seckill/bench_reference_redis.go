package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/redisinv"
)

// refStock is the calibration's second reference (`seckill bench-reference --redis URL`): the
// bare handler plus the least a server that keeps its stock in Redis does per buy, one
// check-and-take script call, answered as the bare handler answers. Beside the bare handler it
// shows how much of the buy path's gap on this machine is the Redis round trip and Redis's own
// CPU, which no server of that design avoids (docs/DECISIONS.md "A second reference: the bare
// handler with one Redis call").
type refStock struct {
	c      rueidis.Client
	key    string
	script *rueidis.Lua
}

// refStockUnits is a 201 reference's stock: more than any flood takes.
const refStockUnits = 1_000_000_000_000_000

// refStockTTL bounds the life of a reference's key that close did not remove (a reference
// killed because it did not stop on the interrupt): far longer than any calibration.
const refStockTTL = 24 * time.Hour

// takeScript takes one unit if there is one: 1 taken, 0 none left.
const takeScript = `local left = tonumber(redis.call('GET', KEYS[1]) or '0')
if left < 1 then return 0 end
redis.call('DECR', KEYS[1])
return 1`

// newRefStock connects to the Redis rawURL names and sets its own stock key to units (a key of
// this process's: two references never share one).
func newRefStock(ctx context.Context, rawURL string, units int64) (*refStock, error) {
	c, err := redisinv.Dial(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	r := &refStock{c: c.Inventory, script: rueidis.NewLuaScript(takeScript),
		key: fmt.Sprintf("seckill-bench-reference:%d:%d", os.Getpid(), time.Now().UnixNano())}
	if err := r.c.Do(ctx, r.c.B().Set().Key(r.key).Value(strconv.FormatInt(units, 10)).Ex(refStockTTL).Build()).Error(); err != nil {
		r.c.Close()
		return nil, err
	}
	return r, nil
}

// take runs the script once.
func (r *refStock) take(ctx context.Context) error {
	return r.script.Exec(ctx, r.c, []string{r.key}, nil).Error()
}

// close removes the key and disconnects.
func (r *refStock) close() {
	_ = r.c.Do(context.Background(), r.c.B().Del().Key(r.key).Build()).Error()
	r.c.Close()
}
