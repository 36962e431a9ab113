package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// worker runs, without an HTTP server, the background work of the redis engine: the consumers
// that store every sale's event stream in the database, and the (leader-elected) sweeper. It
// is for shops that run the stream consumers apart from the API instances (which then run
// with --consume=false); any number of workers may run, the consumer group shares the work.
func worker(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var cfg config
	bindStoreConfig(fs, getenv, &cfg)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if cfg.envErr != nil {
		return cfg.envErr
	}
	if cfg.Engine != "redis" {
		return fmt.Errorf("seckill worker serves the redis engine: set --engine redis (SECKILL_ENGINE=redis) and SECKILL_REDIS_URL; the memory engine needs no worker")
	}
	cfg.NoConsume = false
	cfg.otherSecretsFromEnv(getenv) // only to refuse an export secret equal to one of them
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log.Info("config", "engine", cfg.Engine, "db", maskURL(cfg.DB), "redis_url", maskURL(cfg.RedisURL), "export_secret", mask(cfg.ExportSecret))
	a, err := startApp(ctx, cfg, appOptions{noHTTP: true}, log)
	if err != nil {
		return err
	}
	log.Info("worker running: storing event streams and sweeping expired holds")
	<-ctx.Done()
	return shutdown(a, log)
}
