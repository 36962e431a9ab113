package lock

import (
	"context"
	"fmt"
	"strconv"
)

// Redis is what a Client needs from a Redis client: running the package's Lua scripts, and a
// pub/sub connection for the unlock notices. Rueidis makes one over a rueidis.Client (what
// seckill uses, so that the lock shares the engine's connections); package lock/goredis makes
// one over a go-redis client. The interface is small so that either client library, or a
// test double, can stand behind it.
type Redis interface {
	// Eval runs s on keys and args: EVALSHA with s.SHA1(), then EVAL of s.Source() (which
	// also caches it) if the server answers NOSCRIPT. The keys of one call share a Cluster
	// hash tag: a Cluster client routes the call by the first. The reply is an int64, a
	// string, nil or a []any of those; a Redis error reply is the error.
	Eval(ctx context.Context, s *Script, keys, args []string) (any, error)
	// PubSub returns a new pub/sub connection, opened lazily.
	PubSub() PubSub
}

// PubSub is one pub/sub connection, used by one goroutine for Receive and by any for the
// rest. It survives a lost connection: Receive returns the error once, and a later call
// reconnects and subscribes again to every channel subscribed and not unsubscribed since
// (their confirmations come as Subscribed events, which is how the Client learns that
// notices may have been missed meanwhile).
type PubSub interface {
	// Subscribe subscribes to channel; its confirmation comes later through Receive. An error
	// is not final: the channel is remembered and subscribed again on reconnection.
	Subscribe(ctx context.Context, channel string) error
	// Unsubscribe unsubscribes from channel; its confirmation comes later through Receive.
	Unsubscribe(ctx context.Context, channel string) error
	// Receive waits for the next event, ctx's end, or Close.
	Receive(ctx context.Context) (Event, error)
	// Close closes the connection. Receive then returns an error.
	Close() error
}

// EventKind says what a pub/sub Event is.
type EventKind int

// The pub/sub events a Client reacts to.
const (
	Message      EventKind = iota // a message published on Channel, with Payload
	Subscribed                    // a SUBSCRIBE to Channel was confirmed
	Unsubscribed                  // an UNSUBSCRIBE from Channel was confirmed
)

// Event is one pub/sub event.
type Event struct {
	Kind             EventKind
	Channel, Payload string
}

// reply is a script's answer, read the way the callers want it.
type reply struct {
	v   any
	err error
}

func (r reply) Result() (any, error) { return r.v, r.err }
func (r reply) Err() error           { return r.err }

func (r reply) Int64() (int64, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, ok := r.v.(int64)
	if !ok {
		return 0, fmt.Errorf("lock: unexpected reply %v, want an integer", r.v)
	}
	return n, nil
}

// run calls the script on r. Arguments are strings or integers, written in decimal.
func (s *Script) run(ctx context.Context, r Redis, keys []string, args ...any) reply {
	strs := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			strs[i] = a
		case int:
			strs[i] = strconv.Itoa(a)
		case int64:
			strs[i] = strconv.FormatInt(a, 10)
		case uint64:
			strs[i] = strconv.FormatUint(a, 10)
		default:
			strs[i] = fmt.Sprint(a)
		}
	}
	v, err := r.Eval(ctx, s, keys, strs)
	return reply{v, err}
}
