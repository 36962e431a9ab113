// Package clientaddr is the one definition of "a client" for the per-client bounds of the
// HTTP server (connections, requests in flight, live event streams): the address a request
// comes from, as the connection's peer gives it, or, when that peer is a proxy the operator
// trusts (--trusted-proxies), as the rightmost X-Forwarded-For hop that is not itself trusted.
// X-Forwarded-For is never believed from a peer that is not trusted: anyone can send it.
package clientaddr

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Trusted is the set of proxies whose X-Forwarded-For is believed. The zero value trusts none.
type Trusted struct {
	prefixes []netip.Prefix
}

// ParseTrusted parses a comma-separated list of CIDRs and addresses ("10.0.0.0/8, 192.0.2.7,
// fd00::/8"); "" trusts none.
func ParseTrusted(s string) (Trusted, error) {
	var t Trusted
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var p netip.Prefix
		var err error
		if strings.Contains(part, "/") {
			p, err = netip.ParsePrefix(part)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(part); err == nil {
				p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
			}
		}
		if err != nil {
			return Trusted{}, fmt.Errorf("%q is neither an IP address nor a CIDR", part)
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return Trusted{}, fmt.Errorf("%q: an IPv4-mapped prefix must be at least /96", part)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	if len(t.prefixes) > MaxTrusted {
		return Trusted{}, errors.New("too many trusted proxies: at most " + fmt.Sprint(MaxTrusted) + " CIDRs")
	}
	return t, nil
}

// MaxTrusted bounds the list of trusted proxies (each request may compare against all of them).
const MaxTrusted = 64

// String is the list as ParseTrusted reads it.
func (t Trusted) String() string {
	s := make([]string, len(t.prefixes))
	for i, p := range t.prefixes {
		if p.IsSingleIP() {
			s[i] = p.Addr().String()
		} else {
			s[i] = p.String()
		}
	}
	return strings.Join(s, ",")
}

// None says whether no proxy is trusted.
func (t Trusted) None() bool { return len(t.prefixes) == 0 }

// Contains says whether a is a trusted proxy.
func (t Trusted) Contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Peer is the address of a connection's remote end from its "host:port" (http.Request's
// RemoteAddr, net.Conn's RemoteAddr().String()); ok is false when it is not an IP address
// (a Unix socket, a test's fake).
func Peer(remote string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remote)
	if err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(remote)
	if err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}

// Client is the client's address of a request whose connection comes from remote and that
// carries the X-Forwarded-For values xff (http.Header.Values, in order): the peer itself,
// unless it is trusted; then the rightmost hop that is not trusted, walking from the right.
// A hop that is not an address (garbage a client sent, or a proxy that does not append)
// stops the walk: the client is then the last trusted hop seen, so that whoever sent the
// garbage is bounded with that proxy's own traffic rather than as anyone they like. ok is
// false when remote is not an IP address (no per-client bound applies then).
func (t Trusted) Client(remote string, xff []string) (addr netip.Addr, ok bool) {
	addr, ok = Peer(remote)
	if !ok || !t.Contains(addr) {
		return addr, ok
	}
	for i := len(xff) - 1; i >= 0; i-- {
		v := xff[i]
		for {
			hop := v
			j := strings.LastIndexByte(v, ',')
			if j >= 0 {
				hop, v = v[j+1:], v[:j]
			}
			hop = strings.TrimSpace(hop)
			if hop != "" { // an empty element ("a,,b"): skipped, as proxies do
				a, good := ParseHop(hop)
				if !good {
					return addr, true
				}
				addr = a
				if !t.Contains(a) {
					return addr, true
				}
			}
			if j < 0 {
				break
			}
		}
	}
	return addr, true
}

// ParseHop parses one X-Forwarded-For element: an address, possibly with a port
// ("192.0.2.1:4711", "[2001:db8::1]:4711") or in brackets ("[2001:db8::1]"), as some proxies
// write them. A zone ("fe80::1%eth0") is not a client's address: refused.
func ParseHop(hop string) (netip.Addr, bool) {
	if len(hop) > 64 { // the longest address with a port is 47 bytes
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(hop)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(hop)
		if err2 != nil {
			if len(hop) > 2 && hop[0] == '[' && hop[len(hop)-1] == ']' {
				a, err = netip.ParseAddr(hop[1 : len(hop)-1])
			}
			if err != nil {
				return netip.Addr{}, false
			}
		} else {
			a = ap.Addr()
		}
	}
	if a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Key is the unit a per-client bound counts: an IPv4 address, or the /64 of an IPv6 address
// (a single host is commonly given a whole /64, so one client's addresses share a key).
func Key(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.WithZone("").Prefix(64)
	return p
}
