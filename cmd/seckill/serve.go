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
	fs.StringVar(&cfg.Pprof, "pprof", getenv("SECKILL_PPROF"), "serve net/http/pprof on this loopback address, e.g. 127.0.0.1:6060; off when empty (SECKILL_PPROF)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if cfg.Pprof != "" {
		if err := checkPprofAddr(cfg.Pprof); err != nil {
			return err
		}
	}
	secretsFile, loaded, generated, saveErr, err := cfg.devSecrets()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	printDevSecrets(stdout, cfg, secretsFile, loaded, generated, saveErr)
	gateway := cfg.Gateway // as given if it is not a gateway's name (the start then stops on it)
	if name, err := cfg.gatewayName(); err == nil {
		gateway = name // the one in effect: --dev without --gateway is the mock
	}
	log.Info("config", "addr", cfg.Addr, "engine", cfg.Engine, "db", maskURL(cfg.DB), "redis_url", maskURL(cfg.RedisURL), "redis_replicas", cfg.RedisReplicas,
		"auth_secret", mask(cfg.AuthSecret), "admin_token", mask(cfg.AdminToken), "payment_secret", mask(cfg.PaymentSecret), "export_secret", mask(cfg.ExportSecret), "dev", cfg.Dev,
		"metrics_addr", cfg.MetricsAddr, "metrics_token", mask(cfg.MetricsToken),
		"gateway", gateway, "stripe_secret_key", mask(cfg.StripeSecretKey), "stripe_webhook_secret", mask(cfg.StripeWebhookSecret),
		"stripe_api_url", maskURL(cfg.StripeAPIURL), "public_url", maskURL(cfg.PublicURL), "pprof", cfg.Pprof, "stripe_group", cfg.StripeGroup,
		"oidc_issuer", cfg.OIDC.Issuer, "oidc_audience", cfg.OIDC.Audience, "oidc_user_claim", cfg.OIDC.UserClaim, "oidc_login_url", maskURL(cfg.OIDC.LoginURL))
	if !cfg.Dev && cfg.MetricsAddr == "" && cfg.MetricsToken == "" {
		log.Warn("/metrics is anonymous on --addr: set --metrics-addr (a private address) or SECKILL_METRICS_TOKEN")
	}
	if !cfg.builtInWebhook() && cfg.PaymentSecret != "" {
		log.Warn("SECKILL_PAYMENT_SECRET is not used: with --gateway stripe the built-in signed webhook is refused (404) unless --accept-webhook is set")
	}
	var prof *pprofServer
	if cfg.Pprof != "" {
		// Bound before the app starts, so a busy or non-loopback address is a startup error.
		if prof, err = listenPprof(cfg.Pprof); err != nil {
			return err
		}
		defer prof.close()
		log.Info("pprof", "url", "http://"+prof.listener.Addr().String()+"/debug/pprof/")
	}
	a, err := startApp(ctx, cfg, appOptions{}, log)
	if err != nil {
		return err
	}
	if prof != nil {
		prof.start(log)
	}
	log.Info("serving", "url", a.url, "storefront", a.url+"/", "dashboard", a.url+"/admin")
	if cfg.Dev {
		printDevReady(stdout, cfg, a.url, secretsFile, loaded, generated, saveErr)
	}
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
	case "SECKILL_EXPORT_SECRET":
		return cfg.ExportSecret
	default:
		return cfg.PaymentSecret
	}
}
