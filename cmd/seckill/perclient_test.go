package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/client"
)

// The per-client bounds from the outside: one address (127.0.0.2: loopback is a /8 on Linux)
// against `seckill serve`, another (127.0.0.1) reading meanwhile.

// dialFrom connects to addr from the local address from; the test closes it at its end.
func dialFrom(t *testing.T, addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// createTestSale creates sale id through the admin token serve printed.
func createTestSale(t *testing.T, a *servedApp, id string) {
	t.Helper()
	admin := regexp.MustCompile(`SECKILL_ADMIN_TOKEN=([0-9a-f]+)`).FindStringSubmatch(a.out.String())
	if admin == nil {
		t.Fatalf("no admin token printed: %q", a.out.String())
	}
	api := client.New(a.url, client.WithToken(admin[1]))
	if _, err := api.CreateSale(context.Background(), client.NewSale{ID: id, PriceCents: 1, Stock: 10}); err != nil {
		t.Fatal(err)
	}
}

// attackOutcome is what became of one slow-body connection: "closed" (without an answer),
// an HTTP status, or "held" (no answer yet).
func attackOutcome(c net.Conn, wait time.Duration) string {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "held"
	case err != nil:
		return "closed"
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	s := fmt.Sprint(res.StatusCode)
	if res.Close {
		s += " close"
	}
	return s
}

// slowBodies opens n connections to addr from the local address from, each sending the
// headers of a payment webhook (anonymous; its body is read before anything else, since the
// signature is over it) and the first byte of a body that never comes (what a client trickling
// ~1 byte/s does within --read-timeout). The outcome of each (attackOutcome) arrives on the
// channel.
func slowBodies(t *testing.T, addr, from string, n int) ([]net.Conn, <-chan string) {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dialFrom(t, addr, from)
		// Written whatever became of the connection: a write to one closed at once may fail.
		_, _ = io.WriteString(conns[i], "POST /api/v1/payments/webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	}
	outcomes := make(chan string, n)
	for _, c := range conns {
		go func() { outcomes <- attackOutcome(c, 10*time.Second) }()
	}
	return conns, outcomes
}

// victimReads reads the sale s and /readyz of each url rounds times, each on a new
// connection (as other clients come), and answers the failures.
func victimReads(urls []string, rounds int) []string {
	victim := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var failed []string
	for range rounds {
		for _, u := range urls {
			for _, path := range []string{"/api/v1/sales/s", "/readyz"} {
				res, err := victim.Get(u + path)
				if err != nil {
					failed = append(failed, path+": "+err.Error())
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					failed = append(failed, fmt.Sprintf("%s: %d", path, res.StatusCode))
				}
			}
		}
	}
	return failed
}

// perClientArgs are the instance's bounds in the slow-body tests: 64 connections, 16 requests
// in flight, so a client's share is 16 connections and 4 requests; bodies may take a minute.
var perClientArgs = []string{"--max-conns", "64", "--max-inflight", "16", "--read-timeout", "60s"}

// TestPerClientSlowBodies: 80 slow-body connections from one address (slowBodies) against an
// instance of 64 connections and 16 requests in flight. With the per-address bounds (a quarter
// of each: 16 connections, 4 requests) the address keeps 16 connections, 4 of them in
// handlers, the other 12 answered 429 and closed, and the 64 beyond its share closed at once;
// meanwhile every sale read and /readyz of another address answers 200. Negative control: with
// the per-address bounds off, the same attack holds every connection, and all the other
// address's reads fail.
func TestPerClientSlowBodies(t *testing.T) {
	const attack = 80
	for _, bounded := range []bool{true, false} {
		t.Run(fmt.Sprint("bounded=", bounded), func(t *testing.T) {
			args := perClientArgs
			if !bounded {
				args = append(args[:len(args):len(args)], "--max-conns-per-addr", "-1", "--max-inflight-per-addr", "-1")
			}
			a := startServe(t, args...)
			addr := strings.TrimPrefix(a.url, "http://")
			createTestSale(t, a, "s")

			conns, outcomes := slowBodies(t, addr, "127.0.0.2", attack)
			// The attack is in place once every connection but those the server holds got its
			// answer: bounded, 4 in handlers; unbounded, the 16 beyond --max-conns were refused.
			settled := attack - 4
			if !bounded {
				settled = attack - 64
			}
			count := map[string]int{}
			for range settled {
				count[<-outcomes]++
			}
			if bounded && (count["closed"] != attack-16 || count["429 close"] != 12) {
				t.Fatalf("the attacker's connections: %v; want %d closed at once, 12 answered 429 and closed", count, attack-16)
			}
			if !bounded && count["503 close"] != attack-64 {
				t.Fatalf("the attacker's connections: %v; want %d refused 503", count, attack-64)
			}

			failed := victimReads([]string{a.url}, 10)
			if bounded && len(failed) > 0 {
				t.Fatalf("another address during the attack: %d of 20 failed: %v", len(failed), failed)
			}
			if !bounded && len(failed) != 20 {
				t.Fatalf("negative control: with the per-address bounds off, %d of the other address's 20 reads failed (%v); want all", len(failed), failed)
			}
			for _, c := range conns {
				c.Close()
			}
			a.stop(t)
		})
	}
}

// TestPerClientSlowBodiesRedis: the same attack on two Redis-engine instances at once (where
// another address used to get 1 of 78 sale reads and /readyz answered): each instance keeps
// the attacker to its share, and another address's reads of both answer 200. The per-address
// bounds are switched back on (0: the defaults), over launchCluster's oneAddressArgs.
func TestPerClientSlowBodiesRedis(t *testing.T) {
	const attack = 80
	c := startCluster(t, 2, append(slices.Clone(perClientArgs), "--max-conns-per-addr", "0", "--max-inflight-per-addr", "0")...)
	c.admin("create the sale", func(a *client.Client) error {
		_, err := a.CreateSale(context.Background(), client.NewSale{ID: "s", PriceCents: 1, Stock: 10})
		return err
	})
	var urls []string
	for _, in := range c.insts {
		urls = append(urls, in.url)
		_, outcomes := slowBodies(t, strings.TrimPrefix(in.url, "http://"), "127.0.0.2", attack)
		count := map[string]int{}
		for range attack - 4 {
			count[<-outcomes]++
		}
		if count["closed"] != attack-16 || count["429 close"] != 12 {
			t.Fatalf("the attacker's connections to %s: %v; want %d closed at once, 12 answered 429 and closed", in.url, count, attack-16)
		}
	}
	if failed := victimReads(urls, 10); len(failed) > 0 {
		t.Fatalf("another address during the attack: %d of 40 failed: %v", len(failed), failed)
	}
}

// openStream opens a live event stream of sale s from the local address from, with an
// X-Forwarded-For header ("" for none): the status, and the problem's code of a refusal, or
// "" and the Retry-After. A stream that opened stays open until the test ends.
func openStream(t *testing.T, addr, from, xff string) string {
	t.Helper()
	c := dialFrom(t, addr, from)
	h := ""
	if xff != "" {
		h = "X-Forwarded-For: " + xff + "\r\n"
	}
	if _, err := io.WriteString(c, "GET /api/v1/sales/s/events HTTP/1.1\r\nHost: x\r\n"+h+"\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("stream from %s (%q): %v", from, xff, err)
	}
	if res.StatusCode == http.StatusOK {
		return "200"
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	code := regexp.MustCompile(`"code":"([a-z_]+)"`).FindSubmatch(b)
	if code == nil {
		t.Fatalf("stream from %s: %d %s", from, res.StatusCode, b)
	}
	return fmt.Sprintf("%d %s %s", res.StatusCode, code[1], res.Header.Get("Retry-After"))
}

// TestPerClientStreams: one address holds at most --max-streams-per-addr live event streams
// (the next is 429 rate_limited, Retry-After: 5) while another opens one; behind a trusted
// proxy (--trusted-proxies) each X-Forwarded-For client has its own share; from an address
// that is not trusted the header is not believed. Negative control: with the bound off, the
// one address opens more.
func TestPerClientStreams(t *testing.T) {
	a := startServe(t, "--max-streams", "16", "--max-streams-per-addr", "2", "--trusted-proxies", "127.0.0.3")
	addr := strings.TrimPrefix(a.url, "http://")
	createTestSale(t, a, "s")
	want := func(got, want, what string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %s, want %s", what, got, want)
		}
	}
	const refused = "429 rate_limited 5"
	want(openStream(t, addr, "127.0.0.2", ""), "200", "the address's first stream")
	want(openStream(t, addr, "127.0.0.2", ""), "200", "the address's second stream")
	want(openStream(t, addr, "127.0.0.2", ""), refused, "the address's third stream")
	want(openStream(t, addr, "127.0.0.2", "203.0.113.9"), refused, "the address's third, claiming another client in X-Forwarded-For")
	want(openStream(t, addr, "127.0.0.1", ""), "200", "another address's stream")
	want(openStream(t, addr, "127.0.0.3", "203.0.113.1"), "200", "a client behind the proxy, first")
	want(openStream(t, addr, "127.0.0.3", "198.51.100.7, 203.0.113.1"), "200", "the client behind the proxy, second")
	want(openStream(t, addr, "127.0.0.3", "203.0.113.1"), refused, "the client behind the proxy, third")
	want(openStream(t, addr, "127.0.0.3", "203.0.113.2"), "200", "another client behind the proxy")

	off := startServe(t, "--max-streams", "16", "--max-streams-per-addr", "-1")
	createTestSale(t, off, "s")
	for i := range 4 {
		want(openStream(t, strings.TrimPrefix(off.url, "http://"), "127.0.0.2", ""), "200", fmt.Sprintf("negative control: stream %d without the bound", i+1))
	}
	a.stop(t) // the streams still open end with the server
	off.stop(t)
}
