package redisinv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/background"
	"github.com/seckill-go/seckill/internal/wait"
	"github.com/seckill-go/seckill/lock"
)

// SaleLister lists the ids of the sales to work on (the order store's sales, through
// service.Service.LiveSaleIDs). The sweeper and the consumer call it about once a second.
type SaleLister func(ctx context.Context) ([]string, error)

// listEvery is how often the sweeper and the consumer look for new sales.
const listEvery = time.Second

// Sweeper returns the engine's sweeper, a background.Service named "sweeper": it reclaims
// expired holds every interval (250 ms, invariant 8 of docs/MODEL.md) until it is stopped, so
// that counts stay fresh without traffic. With many instances, one sweeps each sale at a time: the
// holder of the lock "seckill:sweep:<sale>" from locks. The others try to take it on every tick,
// so when the sweeping instance dies, another one takes over within the lock's lease (renewed
// every lease/3 while it lives; give locks a short lease, a few seconds). Correctness never
// depends on the sweeper: every script reclaims first. A sale whose keys are missing is handed
// to the rebuilder, so a flushed Redis is noticed without traffic too. A sale that list no
// longer returns is let go (its lock released). Its exit: every lock it holds is released,
// then Run returns nil. A failed listing, lock or reclaim is reported (background.Report) and
// tried again at the next tick.
func (e *Engine) Sweeper(interval time.Duration, list SaleLister, locks *lock.Client) background.Service {
	return &sweeper{e: e, interval: interval, list: list, locks: locks}
}

// sweeper sees of the engine only its Reclaim.
type sweeper struct {
	e interface {
		Reclaim(ctx context.Context, saleID string) (int, error)
	}
	interval time.Duration
	list     SaleLister
	locks    *lock.Client
}

func (s *sweeper) Name() string { return "sweeper" }

func (s *sweeper) Run(ctx context.Context) error {
	e, interval, list, locks := s.e, s.interval, s.list, s.locks
	leaders := map[string]*sweepLeader{}
	defer func() {
		for _, l := range leaders {
			l.release()
		}
	}()
	var ids []string
	var listed time.Time
	wait.Every(ctx, interval, func(ctx context.Context) {
		if time.Since(listed) >= listEvery {
			if got, err := list(ctx); err != nil {
				background.Report(ctx, fmt.Errorf("list sales: %w", err))
			} else {
				ids, listed = got, time.Now()
				keep := make(map[string]bool, len(ids))
				for _, id := range ids {
					keep[id] = true
				}
				for id, l := range leaders {
					if !keep[id] { // over: nothing left to sweep; give the lock back
						l.release()
						delete(leaders, id)
					}
				}
			}
		}
		for _, id := range ids {
			l := leaders[id]
			if l == nil {
				l = &sweepLeader{m: locks.NewMutex("seckill:sweep:" + id)}
				leaders[id] = l
			}
			if l.lead(ctx) {
				if _, err := e.Reclaim(ctx, id); err != nil && !isCode(err, seckill.CodeNotFound) {
					// Not found: the sale is gone from Redis and the database alike (deleted).
					background.Report(ctx, fmt.Errorf("sweep sale %s: %w", id, err))
				}
			}
		}
	})
	return nil
}

// sweepLeader is this instance's claim to sweep one sale.
type sweepLeader struct {
	m     *lock.Mutex
	lease *lock.Lease
}

// lead reports whether this instance sweeps the sale now, taking the lock if it is free.
func (l *sweepLeader) lead(ctx context.Context) bool {
	if l.lease != nil {
		select {
		case <-l.lease.Done(): // lost: the lease ran out or the key vanished (a flushed Redis)
			l.lease = nil
		default:
			return true
		}
	}
	lease, err := l.m.TryLock(ctx, 0, 0)
	if err != nil {
		if !errors.Is(err, lock.ErrNotAcquired) { // another instance sweeps it: not an error
			background.Report(ctx, fmt.Errorf("take the sweep lock: %w", err))
		}
		return false
	}
	l.lease = lease
	return true
}

func (l *sweepLeader) release() {
	if l.lease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.m.Unlock(ctx)
	}
}
