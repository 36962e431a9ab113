package rxstamp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// queued is how many bytes wait in c's receive queue (SIOCINQ).
func queued(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatal(errno)
	}
	return int(n)
}

// waitQueued returns once c has at least n bytes to read: ordered, not timed.
func waitQueued(t *testing.T, c *net.TCPConn, n int) {
	t.Helper()
	for queued(t, c) < n {
		time.Sleep(time.Millisecond)
	}
}

// untilStamped returns once a byte srv writes reaches c with a stamp. The first socket to ask
// for receive timestamps has the kernel turn them on for the whole machine in a deferred work
// item (net_enable_timestamp), and data received before that carries none: the tests time
// nothing until the stamps are on (ordered, not timed).
func untilStamped(t *testing.T, c *Conn, srv net.Conn) {
	t.Helper()
	b := make([]byte, 1)
	for {
		if _, err := srv.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Arrived(); ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestArrivedIsWhenTheDataCame: data written while the reader is away is stamped with its
// arrival, not with the late read; a later write gets a later stamp; EOF and deadlines behave
// as on any net.Conn. Without the timestamps (the plain connection, the negative control)
// Arrived says false.
func TestArrivedIsWhenTheDataCame(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted, accepted2 := make(chan net.Conn, 1), make(chan net.Conn, 1)
	go func() {
		for _, ch := range []chan net.Conn{accepted, accepted2} {
			c, err := l.Accept()
			if err != nil {
				close(ch)
				return
			}
			ch <- c
		}
	}()
	nc, err := Dial(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := Of(nc)
	if c == nil {
		t.Fatalf("Dial gave a %T, want a *Conn", nc)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("no connection accepted")
	}
	defer srv.Close()
	if _, ok := c.Arrived(); ok {
		t.Fatal("Arrived before any read")
	}
	untilStamped(t, c, srv)

	before := time.Now()
	if _, err := srv.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	// The reader is away until the data has arrived, and then some: its read comes after.
	waitQueued(t, c.TCPConn, 5)
	readStart := time.Now()
	time.Sleep(50 * time.Millisecond)
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(c, buf, 5)
	if err != nil || string(buf[:n]) != "first" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	at, ok := c.Arrived()
	if !ok {
		t.Fatal("no arrival time after a read")
	}
	// The stamp is from before the data was queued, so before the read began (ordered: the
	// read began after the data was seen waiting).
	if at.Before(before.Add(-time.Millisecond)) || !at.Before(readStart) {
		t.Fatalf("arrived %v; written after %v, read from %v", at, before, readStart)
	}

	if _, err := srv.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	if n, err = io.ReadAtLeast(c, buf, 6); err != nil || string(buf[:n]) != "second" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if at2, _ := c.Arrived(); !at2.After(at) {
		t.Fatalf("second arrival %v not after the first %v", at2, at)
	}

	if err := c.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(buf); err == nil {
		t.Fatal("a read past its deadline returned no error")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("read past its deadline: %v, want a timeout", err)
	} else if oe, ok := err.(*net.OpError); !ok || oe.Op != "read" || errors.As(oe.Err, new(*net.OpError)) {
		t.Fatalf("read past its deadline: %#v, want one *net.OpError of Op read, as net.Conn's", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	srv.Close()
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}

	// Negative control: a connection without the option has no stamps, so a reader that took
	// the read's own time for the arrival would be caught above.
	plain, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if Of(plain) != nil {
		t.Fatal("Of found a *Conn under a plain connection")
	}
	if Of(tls.Client(nc, &tls.Config{})) != c {
		t.Fatal("Of did not find the *Conn under a TLS connection")
	}
	unstamped := &Conn{TCPConn: plain.(*net.TCPConn)}
	srv2 := <-accepted2
	defer srv2.Close()
	if _, err := srv2.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAtLeast(unstamped, buf, 1); err != nil {
		t.Fatal(err)
	}
	if at, ok := unstamped.Arrived(); ok {
		t.Fatalf("a socket without SO_TIMESTAMPNS has an arrival time %v", at)
	}
}

// pair is a stamped connection and the server's end of it.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	nc, err := Dial(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	srv, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	untilStamped(t, Of(nc), srv)
	return Of(nc), srv
}

// TestZeroLengthReadTakesNothing: a Read into an empty buffer returns 0, nil at once, as
// net.Conn's does, and takes no byte of the stream (recvmsg with control space and no buffer
// reads one byte into a scratch byte of its own).
func TestZeroLengthReadTakesNothing(t *testing.T) {
	c, srv := pair(t)
	if _, err := srv.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, c.TCPConn, 3)
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v; want 0, nil", n, err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "abc" {
		t.Fatalf("read %q, %v after an empty read; want \"abc\"", buf, err)
	}
}

// TestCopyIsStamped: io.Copy from a Conn reads through its Read (the embedded TCPConn's
// WriteTo would read around it, unstamped).
func TestCopyIsStamped(t *testing.T) {
	c, srv := pair(t)
	primed, _ := c.Arrived()
	if _, err := srv.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	var got bytes.Buffer
	if _, err := io.Copy(&got, c); err != nil || got.String() != "abc" {
		t.Fatalf("copied %q, %v", got.String(), err)
	}
	if at, _ := c.Arrived(); !at.After(primed) {
		t.Fatalf("arrival %v after io.Copy read the data, not after the priming byte's %v", at, primed)
	}
}

// TestUnstampedReadForgetsTheOldStamp: a read whose data came without a stamp leaves the
// arrival unknown, not the previous read's: an older stamp would date newer data too early.
func TestUnstampedReadForgetsTheOldStamp(t *testing.T) {
	c, srv := pair(t)
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 0)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if _, err := srv.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if at, ok := c.Arrived(); ok {
		t.Fatalf("arrival %v after a read of unstamped data: want unknown", at)
	}
}
