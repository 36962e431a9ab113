// Command streamidle measures what idle sales cost the Redis engine's stream readers: the
// orders consumer and the event export, over many loaded sales nobody buys from. It loads
// -sales sales under a key prefix of its own on the Redis at -redis, runs one consumer and an
// exporter with -sinks sinks (that take everything at once), lets them settle, and then reports
// over -window the Redis commands per second (INFO commandstats, the whole server: use a
// private one, as bench/streamidle/run.sh does), the server's connected clients, this
// process's goroutines and resident memory, and then how long one buy took to reach the order
// store and the export (the readers' wake-up). It uses only the engine's public API, so that
// run.sh can build it against an older commit and show both side by side.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/delivery"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/lock"
	"github.com/seckill-go/seckill/redisinv"
)

func main() {
	url := flag.String("redis", "redis://127.0.0.1:6391/0", "Redis URL (a private server: the figures are the whole server's)")
	sales := flag.Int("sales", 1000, "idle sales")
	sinks := flag.Int("sinks", 1, "export sinks")
	segments := flag.Int("segments", 1, "segments (event streams) of each sale")
	settle := flag.Duration("settle", 5*time.Second, "time for the readers to start before measuring")
	window := flag.Duration("window", 10*time.Second, "measuring window")
	label := flag.String("label", "", "name of this run in the output")
	flag.Parse()
	ctx := context.Background()

	c, err := redisinv.Dial(ctx, *url)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	prefix := "streamidle-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	e := redisinv.New(c.Inventory, redisinv.WithPrefix(prefix))
	defer e.Close()
	locks := lock.New(c.Locks, nil)
	defer locks.Close()

	now := time.Now().UTC()
	ids := make([]string, *sales)
	for i := range ids {
		ids[i] = fmt.Sprintf("idle%05d", i)
		stock, hold := 100, 60
		def, err := seckill.NewSale(seckill.SaleInput{ID: ids[i], PriceCents: ptr(int64(100)), Stock: &stock, HoldSeconds: &hold, StartsAt: &now}, now)
		if err != nil {
			log.Fatal(err)
		}
		if err := e.LoadSaleSegments(ctx, def, 0, *segments); err != nil {
			log.Fatal(err)
		}
	}
	list := func(context.Context) ([]string, error) { return ids, nil }
	store := &countStore{}
	cons := e.NewConsumer(store, redisinv.ConsumerConfig{List: list})
	var sinkList []events.Sink
	exported := &atomic.Int64{}
	for i := range *sinks {
		sinkList = append(sinkList, countSink{name: fmt.Sprintf("test://sink-%d", i), n: exported})
	}
	logs := make([]events.Log, len(ids))
	for i, id := range ids {
		logs[i] = e.ExportLog(id, locks)
	}
	x := delivery.New(delivery.Config{Sinks: sinkList, Logs: func(context.Context) ([]events.Log, error) { return logs, nil }})

	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = cons.Run(rctx) })
	wg.Go(func() { _ = x.Run(rctx) })
	time.Sleep(*settle)

	before := commandCalls(ctx, c.Inventory)
	time.Sleep(*window)
	after := commandCalls(ctx, c.Inventory)
	clients := info(ctx, c.Inventory, "clients")["connected_clients"]
	perSec := float64(after-before) / window.Seconds()
	goroutines := runtime.NumGoroutine()
	rss := rssMB()

	// One buy: how long until the order store and every sink have it.
	start := time.Now()
	for attempt := 1; ; attempt++ { // a loaded machine may time a call out: the buy is idempotent
		_, err := e.Buy(ctx, seckill.BuyRequest{SaleID: ids[len(ids)/2], UserID: "u1", Quantity: 1, IdempotencyKey: "streamidle-buy"})
		if err == nil {
			break
		}
		if attempt == 5 {
			log.Fatal(err)
		}
	}
	var toStore, toExport time.Duration
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && (toStore == 0 || toExport == 0); time.Sleep(time.Millisecond) {
		if toStore == 0 && store.n.Load() > 0 {
			toStore = time.Since(start)
		}
		if toExport == 0 && exported.Load() >= int64(*sinks) {
			toExport = time.Since(start)
		}
	}
	stop()
	wg.Wait()
	fmt.Printf("%-8s sales=%d segments=%d sinks=%d  redis commands/s=%.0f  redis clients=%s  goroutines=%d  rss=%dMB  buy->store=%v buy->export=%v\n",
		*label, *sales, *segments, *sinks, perSec, clients, goroutines, rss, toStore.Round(time.Millisecond), toExport.Round(time.Millisecond))
}

func ptr[T any](v T) *T { return &v }

// countStore is an order store that takes every event and counts them.
type countStore struct{ n atomic.Int64 }

func (s *countStore) ApplyEvents(_ context.Context, evs []seckill.Event) error {
	s.n.Add(int64(len(evs)))
	return nil
}

// countSink is an export sink that takes every event and counts them.
type countSink struct {
	name string
	n    *atomic.Int64
}

func (s countSink) Name() string { return s.name }
func (s countSink) Publish(_ context.Context, evs []events.Event) error {
	s.n.Add(int64(len(evs)))
	return nil
}
func (s countSink) Close() error { return nil }

// commandCalls is the server's total of command calls (INFO commandstats), less INFO's own.
func commandCalls(ctx context.Context, rdb rueidis.Client) int64 {
	var total int64
	for k, v := range info(ctx, rdb, "commandstats") {
		if !strings.HasPrefix(k, "cmdstat_") || k == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		total += n
	}
	return total
}

func info(ctx context.Context, rdb rueidis.Client, section string) map[string]string {
	s, err := rdb.Do(ctx, rdb.B().Info().Section(section).Build()).ToString()
	if err != nil {
		log.Fatal(err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// rssMB is this process's resident memory in MB (Linux), 0 if unknown.
func rssMB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	return 0
}
