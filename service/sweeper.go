package service

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/wait"
)

// Sweeper returns the memory engine's sweeper, a background.Service named "sweeper": every
// interval until it is stopped it reclaims the expired holds of every live sale, so counts stay
// fresh without traffic (250 ms, invariant 8 of docs/MODEL.md). Correctness never depends on
// it: every engine call reclaims first. Its exit is immediate (Run returns nil). A failed
// listing or reclaim is reported (background.Report) and tried again at the next tick; a sale
// the engine does not have (created a moment ago, not yet loaded) is not an error. The Redis
// engine has its own, leader-elected sweeper (redisinv.Engine.Sweeper).
func (s *Service) Sweeper(interval time.Duration) background.Service {
	return &sweeper{s: s, interval: interval}
}

type sweeper struct {
	s        *Service
	interval time.Duration
}

func (w *sweeper) Name() string { return "sweeper" }

func (w *sweeper) Run(ctx context.Context) error {
	wait.Every(ctx, w.interval, func(ctx context.Context) {
		ids, err := w.s.LiveSaleIDs(ctx)
		if err != nil {
			background.Report(ctx, fmt.Errorf("list sales: %w", err))
			return
		}
		for _, id := range ids {
			if _, err := w.s.inv.Reclaim(ctx, id); err != nil && seckill.ErrorCode(err) != seckill.CodeNotFound {
				background.Report(ctx, fmt.Errorf("sweep sale %s: %w", id, err))
			}
		}
	})
	return nil
}
