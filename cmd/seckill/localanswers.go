package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/seckill-go/seckill/redisinv"
)

// redisBuyConfig is serve's say over the Redis engine's buys (redisinv/localanswers.go,
// redisinv/inflight.go): whether buys whose answer is already known are answered without
// Redis, and how many buys of one sale may wait for Redis at once.
type redisBuyConfig struct {
	// NoLocalAnswers sends every buy to Redis (--redis-local-answers=false,
	// SECKILL_REDIS_LOCAL_ANSWERS=false): for comparisons, or a Redis without RESP3.
	NoLocalAnswers bool
	// MaxInFlight bounds the buys of one sale waiting for Redis on this instance
	// (--redis-max-inflight, SECKILL_REDIS_MAX_INFLIGHT): 0 the default
	// (redisinv.DefaultMaxInFlight), -1 none.
	MaxInFlight int
}

// bindRedisBuyConfig registers --redis-local-answers and --redis-max-inflight, serve's only
// (`seckill worker` takes no buys).
func bindRedisBuyConfig(fs *flag.FlagSet, getenv func(string) string, c *config) {
	local := func(v string) error {
		b, err := parseBool(v)
		c.RedisBuys.NoLocalAnswers = !b
		return err
	}
	inflight := func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		if err := redisinv.CheckMaxInFlight(n); err != nil {
			return err
		}
		c.RedisBuys.MaxInFlight = n
		return nil
	}
	if s := getenv("SECKILL_REDIS_LOCAL_ANSWERS"); s != "" {
		if err := local(s); err != nil {
			c.envErr = errors.Join(c.envErr, fmt.Errorf("SECKILL_REDIS_LOCAL_ANSWERS: %w", err))
		}
	}
	if s := getenv("SECKILL_REDIS_MAX_INFLIGHT"); s != "" {
		if err := inflight(s); err != nil {
			c.envErr = errors.Join(c.envErr, fmt.Errorf("SECKILL_REDIS_MAX_INFLIGHT: %w", err))
		}
	}
	fs.BoolFunc("redis-local-answers", "redis engine: answer buys of a sale sold out for good, ended or with a full queue without asking Redis (exact: kept current by Redis client-side caching); false sends every buy to Redis (SECKILL_REDIS_LOCAL_ANSWERS, default true)", local)
	fs.Func("redis-max-inflight", fmt.Sprintf("redis engine: at most `n` buys of one sale wait for Redis on this instance, the next is answered 503 with Retry-After; -1 for no bound (SECKILL_REDIS_MAX_INFLIGHT, default %d)",
		redisinv.DefaultMaxInFlight), inflight)
}

// redisBuyOptions are the engine's options for cfg, and the close of what they opened (the
// local answers' client, closed after the engine). A Redis that cannot do client-side caching
// (before 6.0) runs without local answers, with a warning: buys are still answered, by Redis.
func redisBuyOptions(cfg redisBuyConfig, clients *redisinv.Clients, log *slog.Logger) ([]redisinv.Option, func()) {
	opts := []redisinv.Option{redisinv.WithMaxInFlight(cfg.MaxInFlight)}
	inflight := cfg.MaxInFlight
	if inflight == 0 {
		inflight = redisinv.DefaultMaxInFlight
	}
	if cfg.NoLocalAnswers {
		log.Info("redis buys", "local_answers", false, "max_inflight_per_sale", inflight)
		return opts, func() {}
	}
	w, err := clients.NewWatcher()
	if err != nil {
		log.Warn("local answers off: every buy goes to Redis", "err", err, "max_inflight_per_sale", inflight)
		return opts, func() {}
	}
	log.Info("redis buys", "local_answers", true, "max_inflight_per_sale", inflight)
	return append(opts, redisinv.WithLocalAnswers(w)), func() { _ = w.Close() }
}
