package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// serve runs the HTTP API until ctx is cancelled (SIGINT/SIGTERM), then shuts down gracefully.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var cfg config
	bindConfig(fs, getenv, &cfg)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	generated, err := cfg.secrets()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if len(generated) > 0 {
		fmt.Fprintln(stdout, "dev mode: generated secrets (set them in the environment to keep them):")
		for _, name := range generated {
			fmt.Fprintf(stdout, "  %s=%s\n", name, secretValue(cfg, name))
		}
	}
	log.Info("config", "addr", cfg.Addr, "engine", cfg.Engine, "db", maskURL(cfg.DB), "redis_url", maskURL(cfg.RedisURL),
		"auth_secret", mask(cfg.AuthSecret), "admin_token", mask(cfg.AdminToken), "payment_secret", mask(cfg.PaymentSecret), "dev", cfg.Dev)
	a, err := startApp(ctx, cfg, appOptions{}, log)
	if err != nil {
		return err
	}
	log.Info("serving", "url", a.url, "storefront", a.url+"/", "dashboard", a.url+"/admin")
	select {
	case <-ctx.Done():
	case err := <-a.serveDone:
		a.serveDone <- err // let close see it
	}
	return shutdown(a, log)
}

// shutdown closes the app in order within 15 s, logging the steps.
func shutdown(a *app, log *slog.Logger) error {
	log.Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := a.close(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

func secretValue(cfg config, name string) string {
	switch name {
	case "SECKILL_AUTH_SECRET":
		return cfg.AuthSecret
	case "SECKILL_ADMIN_TOKEN":
		return cfg.AdminToken
	default:
		return cfg.PaymentSecret
	}
}
