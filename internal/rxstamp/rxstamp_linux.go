package rxstamp

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// control asks for SO_TIMESTAMPNS before the connection is made.
func control(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// oobSize holds one SCM_TIMESTAMPNS message (a header and a timespec) with room to spare.
const oobSize = 64

// Read reads as net.Conn does, through recvmsg, and keeps the receive timestamp that comes
// with the data. It waits for data through the runtime's poller (RawConn.Read), so deadlines
// and Close work as on any net.Conn.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		// As net.Conn's: recvmsg with room for control messages and no buffer would read one
		// byte of the stream into a scratch byte of its own (syscall.Recvmsg), and return 1.
		return 0, nil
	}
	rc, err := c.TCPConn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		n, oobn int
		rerr    error
		oob     [oobSize]byte
	)
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), p, oob[:], 0)
			if rerr != syscall.EINTR {
				return rerr != syscall.EAGAIN // EAGAIN: wait for the poller, then again
			}
		}
	})
	var oe *net.OpError
	if errors.As(err, &oe) { // the poller's (a deadline, a Close), named as net.Conn's Read names it
		oe.Op = "read"
		return 0, oe
	}
	if err == nil && rerr != nil {
		err = os.NewSyscallError("recvmsg", rerr)
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if n == 0 {
		return 0, io.EOF
	}
	c.record(oob[:oobn])
	return n, nil
}

// WriteTo copies through Read, so that io.Copy from a Conn is stamped: the embedded
// TCPConn's WriteTo would read the socket itself.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, struct{ io.Reader }{c})
}

// record keeps the timestamp of a read's control messages, or forgets the last one when they
// carry none (data received before the kernel turned stamps on, or a socket without them):
// an older stamp would date this read's newer data too early.
func (c *Conn) record(oob []byte) {
	var at int64
	if msgs, err := syscall.ParseSocketControlMessage(oob); err == nil {
		for _, m := range msgs {
			var ts syscall.Timespec
			if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(ts)) {
				copy(unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts)), m.Data)
				at = ts.Nano()
			}
		}
	}
	c.arrived.Store(at)
}
