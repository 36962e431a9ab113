package clientaddr

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseTrusted(t *testing.T) {
	tr, err := ParseTrusted(" 10.0.0.0/8, 192.0.2.7 ,fd00::/8,::ffff:172.16.0.1,")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.String(), "10.0.0.0/8,192.0.2.7,fd00::/8,172.16.0.1"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	for a, want := range map[string]bool{"10.1.2.3": true, "192.0.2.7": true, "192.0.2.8": false, "fd12::1": true,
		"::ffff:10.0.0.1": true, "172.16.0.1": true, "11.0.0.1": false, "2001:db8::1": false} {
		if got := tr.Contains(netip.MustParseAddr(a)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", a, got, want)
		}
	}
	if none, err := ParseTrusted(""); err != nil || !none.None() || none.Contains(netip.MustParseAddr("127.0.0.1")) {
		t.Fatalf("empty list: %v %v", none, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "localhost", "10.0.0.1/8/9", "1.2.3", "::ffff:0:0/80",
		strings.Repeat("10.0.0.1,", MaxTrusted+1)} {
		if _, err := ParseTrusted(bad); err == nil {
			t.Errorf("ParseTrusted(%q) accepted", bad)
		}
	}
}

func TestClient(t *testing.T) {
	tr, _ := ParseTrusted("10.0.0.0/8,2001:db8:ffff::/48")
	cases := []struct {
		remote string
		xff    []string
		want   string
	}{
		{"192.0.2.1:5000", nil, "192.0.2.1"},
		{"192.0.2.1:5000", []string{"203.0.113.9"}, "192.0.2.1"}, // not a trusted peer: XFF ignored
		{"10.0.0.5:5000", nil, "10.0.0.5"},                       // a trusted peer without XFF: itself
		{"10.0.0.5:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"10.0.0.5:5000", []string{"1.1.1.1, 203.0.113.9"}, "203.0.113.9"},           // the left is the client's own text
		{"10.0.0.5:5000", []string{"1.1.1.1, 203.0.113.9, 10.9.9.9"}, "203.0.113.9"}, // through two proxies
		{"10.0.0.5:5000", []string{"1.1.1.1", "203.0.113.9, 10.9.9.9"}, "203.0.113.9"},
		{"10.0.0.5:5000", []string{"1.1.1.1, 10.1.1.1", "10.9.9.9"}, "1.1.1.1"},
		{"10.0.0.5:5000", []string{"10.1.1.1, 10.2.2.2"}, "10.1.1.1"}, // all trusted: the leftmost
		{"10.0.0.5:5000", []string{"1.1.1.1, nonsense, 10.2.2.2"}, "10.2.2.2"},
		{"10.0.0.5:5000", []string{"nonsense"}, "10.0.0.5"},
		{"10.0.0.5:5000", []string{"203.0.113.9:4711"}, "203.0.113.9"},
		{"10.0.0.5:5000", []string{"[2001:db8::7]:4711"}, "2001:db8::7"},
		{"10.0.0.5:5000", []string{"[2001:db8::7]"}, "2001:db8::7"},
		{"10.0.0.5:5000", []string{"fe80::1%eth0"}, "10.0.0.5"},
		{"10.0.0.5:5000", []string{"203.0.113.9,, "}, "203.0.113.9"},
		{"10.0.0.5:5000", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"[::ffff:10.0.0.5]:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"[2001:db8:ffff::1]:5000", []string{"2001:db8:1::1"}, "2001:db8:1::1"},
	}
	for _, c := range cases {
		got, ok := tr.Client(c.remote, c.xff)
		if !ok || got.String() != c.want {
			t.Errorf("Client(%q, %q) = %v %v, want %s", c.remote, c.xff, got, ok, c.want)
		}
	}
	if _, ok := tr.Client("@", []string{"1.1.1.1"}); ok {
		t.Error("a peer that is no address has a client address")
	}
}

func TestKey(t *testing.T) {
	for a, want := range map[string]string{"192.0.2.1": "192.0.2.1/32", "::ffff:192.0.2.1": "192.0.2.1/32",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64", "fe80::1%eth0": "fe80::/64"} {
		if got := Key(netip.MustParseAddr(a)).String(); got != want {
			t.Errorf("Key(%s) = %s, want %s", a, got, want)
		}
	}
	if Key(netip.MustParseAddr("2001:db8:1:2::1")) != Key(netip.MustParseAddr("2001:db8:1:2:ffff::9")) {
		t.Error("two addresses of one /64 have different keys")
	}
}

// FuzzClient: whatever X-Forwarded-For says, the client is the peer or one of the hops it
// lists, never a trusted proxy unless every hop up to it is trusted, never a zoned address,
// and an untrusted peer is always its own client.
func FuzzClient(f *testing.F) {
	f.Add("10.0.0.5:1", "1.1.1.1, 203.0.113.9, 10.9.9.9", "")
	f.Add("10.0.0.5:1", "[2001:db8::7]:4711", "x, ,")
	f.Add("192.0.2.1:1", "203.0.113.9", "1.1.1.1")
	f.Add("10.0.0.5:1", "fe80::1%eth0,::ffff:1.2.3.4", "[::1]")
	tr, _ := ParseTrusted("10.0.0.0/8,2001:db8:ffff::/48")
	f.Fuzz(func(t *testing.T, remote, xff1, xff2 string) {
		xff := []string{xff1, xff2}
		got, ok := tr.Client(remote, xff)
		peer, peerOK := Peer(remote)
		if ok != peerOK {
			t.Fatalf("ok %v, peer ok %v", ok, peerOK)
		}
		if !ok {
			return
		}
		if !tr.Contains(peer) {
			if got != peer {
				t.Fatalf("untrusted peer %v: client %v", peer, got)
			}
			return
		}
		if got.Zone() != "" || got.Is4In6() {
			t.Fatalf("client %v: zoned or mapped", got)
		}
		if got == peer {
			return
		}
		// got is one of the hops, and every hop right of it is trusted.
		var hops []string
		for _, v := range xff {
			hops = append(hops, strings.Split(v, ",")...)
		}
		for i := len(hops) - 1; i >= 0; i-- {
			h := strings.TrimSpace(hops[i])
			if h == "" {
				continue
			}
			a, good := ParseHop(h)
			if !good {
				t.Fatalf("walked past %q to %v", h, got)
			}
			if a == got {
				return
			}
			if !tr.Contains(a) {
				t.Fatalf("client %v, but %v right of it is not trusted", got, a)
			}
		}
		t.Fatalf("client %v is neither the peer nor a hop of %q", got, xff)
	})
}
