// Package goredis runs package lock over a go-redis client, for programs that already have one:
//
//	c := lock.New(goredis.New(rdb), nil) // rdb: any redis.UniversalClient
//
// seckill itself reaches Redis through rueidis only (lock.Rueidis); this adapter is kept for
// other users of package lock and for bench/lockbench, which compares the lock with go-redis
// based libraries over one client.
package goredis

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill/lock"
)

// New adapts rdb (standalone, Sentinel failover or Cluster client) to lock.Redis. Script
// calls use rdb's pool; each lock.Client's pub/sub connection is one of go-redis' PubSub
// connections. rdb stays the caller's to close, after the lock.Clients built on it.
func New(rdb redis.UniversalClient) lock.Redis { return adapter{rdb} }

type adapter struct{ rdb redis.UniversalClient }

// Eval builds the command by hand rather than with redis.Script: the key names are passed
// once, and the uncontended path is short enough for go-redis' extra boxing to show.
func (a adapter) Eval(ctx context.Context, s *lock.Script, keys, args []string) (any, error) {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "evalsha", s.SHA1(), len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	for _, v := range args {
		cmdArgs = append(cmdArgs, v)
	}
	cmd := redis.NewCmd(ctx, cmdArgs...)
	cmd.SetFirstKeyPos(3) // routes the call to the keys' slot on a Cluster
	_ = a.rdb.Process(ctx, cmd)
	if err := cmd.Err(); err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")) {
		cmdArgs[0], cmdArgs[1] = "eval", s.Source()
		cmd = redis.NewCmd(ctx, cmdArgs...)
		cmd.SetFirstKeyPos(3)
		_ = a.rdb.Process(ctx, cmd)
	}
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

func (a adapter) PubSub() lock.PubSub {
	return &pubSub{ps: a.rdb.Subscribe(context.Background())}
}

// pubSub is a go-redis PubSub, which already reconnects and subscribes again by itself.
type pubSub struct{ ps *redis.PubSub }

func (p *pubSub) Subscribe(ctx context.Context, ch string) error   { return p.ps.Subscribe(ctx, ch) }
func (p *pubSub) Unsubscribe(ctx context.Context, ch string) error { return p.ps.Unsubscribe(ctx, ch) }
func (p *pubSub) Close() error                                     { return p.ps.Close() }

// Receive pings an idle connection every 30 s: a failed ping makes go-redis reconnect.
func (p *pubSub) Receive(ctx context.Context) (lock.Event, error) {
	for {
		msg, err := p.ps.ReceiveTimeout(ctx, 30*time.Second)
		if err != nil {
			var nerr interface{ Timeout() bool }
			if errors.As(err, &nerr) && nerr.Timeout() && ctx.Err() == nil {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				_ = p.ps.Ping(pctx)
				cancel()
				continue
			}
			return lock.Event{}, err
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe":
				return lock.Event{Kind: lock.Subscribed, Channel: m.Channel}, nil
			case "unsubscribe":
				return lock.Event{Kind: lock.Unsubscribed, Channel: m.Channel}, nil
			}
		case *redis.Message:
			return lock.Event{Kind: lock.Message, Channel: m.Channel, Payload: m.Payload}, nil
		}
	}
}
