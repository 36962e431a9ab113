package lock

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/rueidis"
)

// Rueidis adapts a rueidis client (standalone, Sentinel or Cluster) to Redis. Script calls
// share the client's pipelined connections; each Client's pub/sub connection is a dedicated
// connection of the client's, closed (not returned to its pool) when the Client is closed. The
// client stays the caller's to close, after the Clients built on it.
func Rueidis(c rueidis.Client) Redis { return rueidisRedis{c} }

type rueidisRedis struct{ c rueidis.Client }

func (r rueidisRedis) Eval(ctx context.Context, s *Script, keys, args []string) (any, error) {
	res := r.c.Do(ctx, r.c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if err, ok := rueidis.IsRedisErr(res.Error()); ok && err.IsNoScript() {
		res = r.c.Do(ctx, r.c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	v, err := res.ToAny()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	return v, err
}

func (r rueidisRedis) PubSub() PubSub {
	return &rueidisPubSub{c: r.c, chans: make(map[string]struct{}), wake: make(chan struct{}, 1)}
}

// errPubSubClosed is what Receive returns after Close.
var errPubSubClosed = errors.New("lock: pub/sub connection closed")

// rueidisPubSub is a PubSub over a dedicated rueidis connection with pub/sub hooks. rueidis
// calls the hooks on the connection's reader goroutine, which must not block: they queue
// events for Receive. A lost connection is closed and forgotten; the next Receive (or
// Subscribe) dedicates a new one and subscribes again to every channel in chans.
type rueidisPubSub struct {
	c rueidis.Client

	mu     sync.Mutex // guards the fields below; held across a (UN)SUBSCRIBE so they keep their order
	conn   rueidis.DedicatedClient
	cancel func()
	lost   <-chan error // the hooks' channel: an error (or its close) ends conn
	chans  map[string]struct{}
	closed bool

	qmu   sync.Mutex
	queue []Event
	wake  chan struct{} // capacity 1: an event was queued, or the connection changed
}

func (p *rueidisPubSub) Subscribe(ctx context.Context, ch string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errPubSubClosed
	}
	p.chans[ch] = struct{}{}
	if p.conn == nil {
		return p.connectLocked(ctx) // subscribes to ch with the others
	}
	return p.conn.Do(ctx, p.conn.B().Subscribe().Channel(ch).Build()).Error()
}

func (p *rueidisPubSub) Unsubscribe(ctx context.Context, ch string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.chans, ch)
	if p.conn == nil {
		return nil
	}
	return p.conn.Do(ctx, p.conn.B().Unsubscribe().Channel(ch).Build()).Error()
}

func (p *rueidisPubSub) Receive(ctx context.Context) (Event, error) {
	for {
		if ev, ok := p.pop(); ok {
			return ev, nil
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return Event{}, errPubSubClosed
		}
		if p.conn == nil && len(p.chans) > 0 {
			if err := p.connectLocked(ctx); err != nil {
				p.mu.Unlock()
				return Event{}, err
			}
		}
		lost := p.lost
		p.mu.Unlock()
		select {
		case <-p.wake:
		case err := <-lost:
			p.mu.Lock()
			if p.lost == lost {
				p.dropLocked()
			}
			p.mu.Unlock()
			if err == nil {
				err = errors.New("lock: pub/sub connection lost")
			}
			return Event{}, err
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

func (p *rueidisPubSub) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.conn != nil {
		p.dropLocked()
	}
	p.mu.Unlock()
	p.signal()
	return nil
}

// connectLocked dedicates a connection, hooks it, and subscribes to every channel wanted.
func (p *rueidisPubSub) connectLocked(ctx context.Context) error {
	conn, cancel := p.c.Dedicate()
	p.lost = conn.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			p.push(Event{Kind: Message, Channel: m.Channel, Payload: m.Message})
		},
		OnSubscription: func(s rueidis.PubSubSubscription) {
			switch s.Kind {
			case "subscribe":
				p.push(Event{Kind: Subscribed, Channel: s.Channel})
			case "unsubscribe":
				p.push(Event{Kind: Unsubscribed, Channel: s.Channel})
			}
		},
	})
	p.conn, p.cancel = conn, cancel
	p.signal() // a Receive waiting on the old (or no) connection watches the new one
	if len(p.chans) == 0 {
		return nil
	}
	chans := make([]string, 0, len(p.chans))
	for ch := range p.chans {
		chans = append(chans, ch)
	}
	if err := conn.Do(ctx, conn.B().Subscribe().Channel(chans...).Build()).Error(); err != nil {
		p.dropLocked()
		return err
	}
	return nil
}

// dropLocked closes the connection, so that it never goes back to the client's pool with
// subscriptions or hooks, and forgets it.
func (p *rueidisPubSub) dropLocked() {
	p.conn.Close()
	p.cancel()
	p.conn, p.cancel, p.lost = nil, nil, nil
}

func (p *rueidisPubSub) push(ev Event) {
	p.qmu.Lock()
	p.queue = append(p.queue, ev)
	p.qmu.Unlock()
	p.signal()
}

func (p *rueidisPubSub) pop() (Event, bool) {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if len(p.queue) == 0 {
		return Event{}, false
	}
	ev := p.queue[0]
	p.queue[0] = Event{}
	p.queue = p.queue[1:]
	return ev, true
}

func (p *rueidisPubSub) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}
