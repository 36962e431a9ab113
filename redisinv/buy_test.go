package redisinv

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/testkit/testenv"
)

// gateProxy forwards TCP to a target and can hold every byte in transit (Pause) until Resume:
// a Redis that has stopped answering, for as long as the test wants.
type gateProxy struct {
	addr   string
	ln     net.Listener
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newGateProxy(t *testing.T, target string) *gateProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gateProxy{addr: ln.Addr().String(), ln: ln}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(out, in) })
			p.wg.Go(func() { p.pipe(in, out) })
		}
	})
	return p
}

func (p *gateProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (p *gateProxy) pause() { p.mu.Lock(); p.paused = true; p.mu.Unlock() }

func (p *gateProxy) resume() {
	p.mu.Lock()
	p.paused = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *gateProxy) close() {
	p.resume()
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// goroutinesIn counts the goroutines whose stack has fn in it: the detector of a sender
// (drain) still running.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(fn)) {
			n++
		}
	}
	return n
}

const senderFunc = "redisinv.(*Engine).drain"

// TestCloseAwaitsSenders: Close returns only once the sender goroutine of a buy in flight has
// ended (goleak and a stack detector); a buy after Close starts no goroutine.
func TestCloseAwaitsSenders(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ep, err := ParseURL(testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newGateProxy(t, ep.Addrs[0])
	defer proxy.close()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{proxy.addr}, Username: ep.Username,
		Password: ep.Password, SelectDB: ep.DB, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	prefix := testPrefix()
	defer dropPrefix(t, rdb, prefix)
	e := New(rdb, WithPrefix(prefix), WithTimeout(30*time.Second))
	now := time.Now().UTC()
	def, _ := seckill.NewSale(seckill.SaleInput{ID: "cl", PriceCents: ptr(int64(1)), Stock: ptr(10), HoldSeconds: ptr(60), StartsAt: &now}, now)
	if err := e.LoadSale(t.Context(), def, 0); err != nil {
		t.Fatal(err)
	}

	proxy.pause() // Redis "stops answering": the sender's call hangs
	bought := make(chan error, 1)
	go func() {
		_, err := e.Buy(context.Background(), seckill.BuyRequest{SaleID: "cl", UserID: "u1", Quantity: 1})
		bought <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); goroutinesIn("redisinv.(*Engine).sendBatch") == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the buy never reached its sender")
		}
	}
	// Negative control: the detector sees the sender in flight.
	if goroutinesIn(senderFunc) == 0 {
		t.Fatal("the detector does not see a sender in flight")
	}
	left := make(chan int, 1)
	go func() {
		_ = e.Close()
		left <- goroutinesIn(senderFunc) // at the moment Close returns
	}()
	proxy.resume()
	if n := <-left; n != 0 {
		t.Fatalf("Close returned with %d sender goroutines still running", n)
	}
	if err := <-bought; err != nil {
		t.Fatalf("the buy in flight during Close: %v", err)
	}
	// After Close a buy is still answered, by a sender in its own goroutine.
	if _, err := e.Buy(context.Background(), seckill.BuyRequest{SaleID: "cl", UserID: "u2", Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	if n := goroutinesIn(senderFunc); n != 0 {
		t.Fatalf("%d sender goroutines after a buy on a closed engine", n)
	}
}
