package toxic

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with itself.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					_, _ = c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

// TestCutAndRestore: traffic passes, a cut breaks an open connection and refuses new ones,
// and a restore lets them through again.
func TestCutAndRestore(t *testing.T) {
	p := New(t, echoServer(t))
	if err := roundTrip(p.Addr); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	open, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	time.Sleep(50 * time.Millisecond) // let the proxy start its links
	p.Cut()
	_ = open.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = open.Write([]byte("ping\n"))
	if _, err := bufio.NewReader(open).ReadString('\n'); err == nil {
		t.Fatal("an open connection still answered after the cut")
	}
	if err := roundTrip(p.Addr); err == nil {
		t.Fatal("a new connection got through while cut")
	}
	p.Restore()
	if err := roundTrip(p.Addr); err != nil {
		t.Fatalf("after the restore: %v", err)
	}
}

// TestStopAndStart: Stop refuses new connections, Start lets them through on the same address.
func TestStopAndStart(t *testing.T) {
	p := New(t, echoServer(t))
	p.Stop()
	if err := roundTrip(p.Addr); err == nil {
		t.Fatal("a new connection got through while stopped")
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(p.Addr); err != nil {
		t.Fatalf("after the start: %v", err)
	}
}
