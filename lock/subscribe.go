package lock

import (
	"context"
	"strings"
	"sync"
	"time"
)

// subscriber multiplexes the pub/sub channels of all locks one Client waits on over a single
// connection per Redis node. Waiters join a channel before their last try (so a release that
// happens after that try is never missed), and the dispatcher routes each hand-off message to
// the one waiter it names. Channels are reference counted: the last waiter to leave
// unsubscribes.
//
// Goroutine: run, started with the first join, is the only reader of the connection. It exits
// when close is called (Client.Close), which also closes the connection.
type subscriber struct {
	r Redis

	mu      sync.Mutex
	ps      PubSub
	closed  bool
	chans   map[string]*channelState
	unsubs  map[string]int // UNSUBSCRIBEs sent whose confirmation has not been read yet
	stopped chan struct{}  // closed by close
	exited  chan struct{}  // closed when run returns
}

type channelState struct {
	refs    int
	ready   chan struct{} // closed when the SUBSCRIBE is confirmed
	isReady bool
	waiters map[string]chan string // queue entry -> mailbox
}

// mailbox messages: a fencing token ("<digits>") means the lock was handed to this waiter;
// nudge means "something changed, try again".
const nudge = ""

func newSubscriber(r Redis) *subscriber {
	return &subscriber{
		r:       r,
		chans:   make(map[string]*channelState),
		unsubs:  make(map[string]int),
		stopped: make(chan struct{}),
		exited:  make(chan struct{}),
	}
}

// isReady reports whether the channel is subscribed and confirmed right now.
func (s *subscriber) isReady(ch string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[ch]
	return st != nil && st.isReady
}

// join registers entry as a waiter on ch with mailbox mb (capacity >= 1), subscribing first if
// nobody in this process waits on ch yet. It returns a channel closed once the subscription is
// active.
func (s *subscriber) join(ch, entry string, mb chan string) (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.ps == nil {
		s.ps = s.r.PubSub()
		go s.run(s.ps)
	}
	st := s.chans[ch]
	if st == nil {
		st = &channelState{ready: make(chan struct{}), waiters: make(map[string]chan string)}
		s.chans[ch] = st
		// An error is not fatal: the PubSub keeps the channel and subscribes again when it
		// reconnects; until then the waiter falls back to its timer.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = s.ps.Subscribe(ctx, ch)
		cancel()
	}
	st.refs++
	st.waiters[entry] = mb
	return st.ready, nil
}

// leave removes entry from ch and unsubscribes when it was the last waiter.
func (s *subscriber) leave(ch, entry string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chans[ch]
	if st == nil {
		return
	}
	delete(st.waiters, entry)
	st.refs--
	if st.refs > 0 || s.closed {
		return
	}
	delete(s.chans, ch)
	s.unsubs[ch]++
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = s.ps.Unsubscribe(ctx, ch)
	cancel()
}

// deliver posts a hand-off token to the waiter with that entry, if it waits in this process.
func (s *subscriber) deliver(ch, entry, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.chans[ch]; st != nil {
		if mb := st.waiters[entry]; mb != nil {
			post(mb, token)
		}
	}
}

// close stops the dispatcher and closes the pub/sub connection. Idempotent.
func (s *subscriber) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stopped)
	ps := s.ps
	s.mu.Unlock()
	if ps == nil {
		return
	}
	_ = ps.Close()
	<-s.exited
}

func (s *subscriber) run(ps PubSub) {
	defer close(s.exited)
	backoff := 10 * time.Millisecond
	for {
		ev, err := ps.Receive(context.Background()) // close closes ps, which ends the wait
		select {
		case <-s.stopped:
			return
		default:
		}
		if err != nil {
			// The connection broke: confirmations of UNSUBSCRIBEs in flight will never come;
			// the next Receive reconnects and subscribes again to every channel it knows.
			s.mu.Lock()
			clear(s.unsubs)
			s.mu.Unlock()
			select {
			case <-s.stopped:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		s.dispatch(ev)
	}
}

func (s *subscriber) dispatch(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Kind {
	case Subscribed:
		if s.unsubs[ev.Channel] > 0 {
			return // confirms a SUBSCRIBE sent before an UNSUBSCRIBE still in flight
		}
		st := s.chans[ev.Channel]
		if st == nil {
			return
		}
		if !st.isReady {
			st.isReady = true
			close(st.ready)
			return
		}
		// subscribed again after a reconnect: messages may have been lost meanwhile
		for _, mb := range st.waiters {
			post(mb, nudge)
		}
	case Unsubscribed:
		if n := s.unsubs[ev.Channel]; n > 1 {
			s.unsubs[ev.Channel] = n - 1
		} else {
			delete(s.unsubs, ev.Channel)
		}
	case Message:
		st := s.chans[ev.Channel]
		if st == nil {
			return
		}
		i := strings.LastIndexByte(ev.Payload, '|')
		if i < 0 { // "free" (quorum mode) or unknown: everyone here tries again
			for _, mb := range st.waiters {
				post(mb, nudge)
			}
			return
		}
		if mb := st.waiters[ev.Payload[:i]]; mb != nil {
			post(mb, ev.Payload[i+1:])
		}
	}
}

// post delivers without blocking. A dropped message is harmless: a waiter whose mailbox is
// full has a message pending and will try again, and a try claims a hand-off it missed.
func post(mb chan string, v string) {
	select {
	case mb <- v:
	default:
	}
}
