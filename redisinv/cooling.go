package redisinv

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-go/seckill/internal/background"
)

// Cooling (docs/MODEL.md "Hot and cold sales"): the sweeper removes the keys of the sales that
// have left their hot window and settled (lua/cool.lua). Its candidates are the sales whose
// sweep found them ended with nothing due (every instance: the sales it changed), and, on the
// instance that reconciles, the sales that left the listing of hot sales, and, once per
// leadership, the sales outside it whose keys are still in Redis (leftovers: their instances
// may all have restarted before they cooled). Each is tried when
// cool.lua says its window is over, then every coolRetry while something is still live or
// unread (a hold, a sink behind), until its keys are gone.
const (
	coolRetry   = 10 * time.Second
	coolPerPass = 64 // attempts per sweeper pass at most: a day's end cools over a few passes
)

// cooling is the sweeper's cooling candidates: sale → when to try next. Only the sweeper's
// goroutine uses it.
type cooling struct {
	next   map[string]time.Time
	listed map[string]bool      // the hot sales of the last reconcile
	seen   map[string]time.Time // the notifications of each sale taken already (noted)
}

func newCooling() *cooling {
	return &cooling{next: map[string]time.Time{}, listed: map[string]bool{}, seen: map[string]time.Time{}}
}

// noted takes the sales whose streams were notified lately (notify.go notedSales): a sale
// notified since it was last taken is a candidate (a cold sale that a late change loaded
// again cools once its events are read; a hot one is told to wait).
func (c *cooling) noted(noted map[string]time.Time, now time.Time) {
	for id, at := range noted {
		if at.After(c.seen[id]) {
			c.seen[id] = at
			c.add(id, now)
		}
	}
	for id := range c.seen {
		if _, ok := noted[id]; !ok {
			delete(c.seen, id)
		}
	}
}

// add makes the sale a candidate, tried at now unless it is one already.
func (c *cooling) add(id string, now time.Time) {
	if _, ok := c.next[id]; !ok {
		c.next[id] = now
	}
}

// left takes the reconcile's listing of hot sales: those listed last time and not now have
// left their window (or were deleted: cool.lua then finds nothing).
func (c *cooling) left(ids []string, now time.Time) {
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
	}
	for id := range c.listed {
		if !listed[id] {
			c.add(id, now)
		}
	}
	c.listed = listed
}

// due returns up to coolPerPass candidates due at now.
func (c *cooling) due(now time.Time) []string {
	var ids []string
	for id, t := range c.next {
		if len(ids) == coolPerPass {
			break
		}
		if !t.After(now) {
			ids = append(ids, id)
		}
	}
	return ids
}

// cool tries the due candidates, sweepParallel at a time.
func (s *sweeper) cool(ctx context.Context, idx *dueIndex, c *cooling, now time.Time) {
	ids := c.due(now)
	if len(ids) == 0 {
		return
	}
	type result struct {
		out   coolOutcome
		after time.Duration
		err   error
	}
	results := make([]result, len(ids))
	sweepEach(len(ids), func(i int) { results[i].out, results[i].after, results[i].err = s.e.cool(ctx, ids[i]) })
	for i, id := range ids {
		r := results[i]
		switch {
		case r.err != nil && ctx.Err() != nil:
			return
		case r.err != nil:
			background.Report(ctx, fmt.Errorf("cool sale %s: %w", id, r.err))
			c.next[id] = now.Add(coolRetry)
		case r.out == coolDone:
			delete(c.next, id)
			idx.drop(id)
		case r.out == coolWait:
			c.next[id] = now.Add(max(r.after, s.interval))
		default:
			c.next[id] = now.Add(coolRetry)
		}
	}
}

// leftovers makes candidates of the sales outside the hot listing whose hash is still in Redis:
// one pipelined EXISTS per sale, once per leadership (a few round trips for 10 000 sales). It
// reports whether it looked (false: no lister, or a failure to report and try again).
func (s *sweeper) leftovers(ctx context.Context, c *cooling, now time.Time) bool {
	if s.all == nil {
		return true
	}
	ids, err := s.all(ctx)
	if err != nil {
		background.Report(ctx, fmt.Errorf("list every sale: %w", err))
		return false
	}
	cold := make([]string, 0, len(ids))
	for _, id := range ids {
		if !c.listed[id] {
			cold = append(cold, id)
		}
	}
	found, err := s.e.existing(ctx, cold)
	if err != nil {
		background.Report(ctx, fmt.Errorf("look for leftover keys: %w", err))
		return false
	}
	for _, id := range found {
		c.add(id, now)
	}
	return true
}

// existing returns those of ids whose sale hash (segment 0's) is in Redis.
func (e *Engine) existing(ctx context.Context, ids []string) ([]string, error) {
	var out []string
	for from := 0; from < len(ids); from += probeChunk {
		part := ids[from:min(len(ids), from+probeChunk)]
		cmds := make(rueidis.Commands, len(part))
		for i, id := range part {
			cmds[i] = e.rdb.B().Exists().Key(e.keys(id)[0]).Build()
		}
		cctx, cancel := context.WithTimeout(ctx, e.timeout)
		results := e.rdb.DoMulti(cctx, cmds...)
		cancel()
		for i, res := range results {
			n, err := res.AsInt64()
			if err != nil {
				return nil, errUnavailable(fmt.Errorf("redisinv: look for sale %s: %w", part[i], err))
			}
			if n == 1 {
				out = append(out, part[i])
			}
		}
	}
	return out, nil
}
