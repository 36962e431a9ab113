package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/seckill-go/seckill/loadgen/strategy"
)

// benchStrategies runs the ways of taking stock that flash-sale write-ups walk through, on
// one load against one Redis, and prints them in one table (loadgen/strategy). The first, a
// read-then-decrement with no lock, must oversell: it is the negative control.
func benchStrategies(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench strategies", flag.ContinueOnError)
	url := getenv("SECKILL_REDIS_URL")
	if url == "" {
		url = strategy.DefaultRedisURL
	}
	var cfg strategy.Config
	fs.StringVar(&cfg.RedisURL, "redis-url", url, "Redis to run against (SECKILL_REDIS_URL); its keys are removed afterwards")
	fs.IntVar(&cfg.Stock, "stock", strategy.DefaultStock, "units to sell")
	fs.IntVar(&cfg.Buyers, "buyers", strategy.DefaultBuyers, "buyers, one unit each (more than the stock)")
	fs.IntVar(&cfg.Workers, "workers", strategy.DefaultWorkers, "buyers in flight")
	markdown := fs.Bool("markdown", false, "print the table as Markdown")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench strategies: %d units, %d buyers, %d in flight, against %s\n\n", cfg.Stock, cfg.Buyers, cfg.Workers, maskURL(cfg.RedisURL))
	rs, err := strategy.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *markdown {
		err = strategy.WriteMarkdown(stdout, rs)
	} else {
		err = strategy.WriteTable(stdout, rs)
	}
	if err != nil {
		return err
	}
	for _, r := range rs {
		if (r.Strategy == "no-lock") == r.Exact {
			return exitError(fmt.Sprintf("strategy %s: %s, but it must %s", r.Strategy, r.Verdict(),
				map[bool]string{true: "oversell (the negative control)", false: "sell exactly the stock"}[r.Strategy == "no-lock"]))
		}
	}
	return nil
}
