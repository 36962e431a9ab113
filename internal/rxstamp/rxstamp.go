// Package rxstamp tells when the bytes a TCP connection read reached this machine: the kernel's
// receive timestamp of the newest data each read returned (SO_TIMESTAMPNS), not the moment the
// reading goroutine got them. A load generator that runs thousands of simulated clients on a
// small machine reads late when it is short of CPU; the arrival time is when a real client,
// on a machine of its own, would have had the bytes (bench --waiting-room's "told", docs/
// DECISIONS.md "A buyer is told when the close reaches the buyer's socket").
package rxstamp

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// Conn is a TCP connection whose reads record the arrival of the data they return.
type Conn struct {
	*net.TCPConn
	arrived atomic.Int64 // UnixNano of the newest data the last read returned; 0: unknown
}

// Arrived is the kernel's receive time of the newest data the last Read that returned data
// returned, and false when that read's data came without a stamp (a platform without the
// timestamps, data received before the kernel turned them on) or nothing was read yet.
func (c *Conn) Arrived() (time.Time, bool) {
	n := c.arrived.Load()
	if n == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// Dial connects as net.Dialer does and asks the kernel for receive timestamps: an
// http.Transport's DialContext. Where the platform has none, the Conn still reads, and Arrived
// says false.
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 30 * time.Second, Control: control}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	return &Conn{TCPConn: tc}, nil
}

// Of is the Conn under c (under its TLS too), or nil when there is none.
func Of(c net.Conn) *Conn {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		c = tc.NetConn()
	}
	rc, _ := c.(*Conn)
	return rc
}
