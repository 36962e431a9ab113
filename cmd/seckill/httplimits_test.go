package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
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

// closedWithin reads c until the server closes it, and fails if that takes more than 10 s:
// the server's timeouts in these tests are a fraction of a second, so 10 s means never.
func closedWithin(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the connection is still open after 10 s", what)
	}
}

// TestServeTimeouts: with small timeouts, serve closes a connection whose body trickles in
// and a kept-alive connection left idle, while a live event stream outlives both the read and
// the write timeout and still delivers events.
func TestServeTimeouts(t *testing.T) {
	a := startServe(t, "--read-timeout", "300ms", "--write-timeout", "300ms", "--idle-timeout", "300ms")
	addr := strings.TrimPrefix(a.url, "http://")
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// A webhook body at one byte per 100 ms: 1 000 bytes would take 100 s.
	slow := dial()
	fmt.Fprintf(slow, "POST /api/v1/payments/webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := slow.Write([]byte{'x'}); err != nil {
				return
			}
		}
	}()
	closedWithin(t, slow, "a trickling body")
	close(stop)
	<-trickled

	// A kept-alive connection after one answer.
	idle := dial()
	fmt.Fprintf(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(idle)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", res, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	closedWithin(t, idle, "an idle kept-alive connection")

	// A live event stream, open for several times both timeouts, then a change.
	admin := regexp.MustCompile(`SECKILL_ADMIN_TOKEN=([0-9a-f]+)`).FindStringSubmatch(a.out.String())
	if admin == nil {
		t.Fatalf("no admin token printed: %q", a.out.String())
	}
	ctx := context.Background()
	api := client.New(a.url, client.WithToken(admin[1]))
	if _, err := api.CreateSale(ctx, client.NewSale{ID: "t", PriceCents: 1, Stock: 10}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sales := make(chan client.Sale, 100)
	go func() {
		defer close(sales)
		for ev, err := range client.New(a.url).Events(sctx, "t") {
			if err != nil {
				return
			}
			if ev.Type == client.EventSale {
				sales <- *ev.Sale
			}
		}
	}()
	if _, open := <-sales; !open { // the sale, on connect
		t.Fatal("events: the stream did not open")
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := api.AddStock(ctx, "t", 5); err != nil {
		t.Fatal(err)
	}
	for timeout := time.After(10 * time.Second); ; {
		select {
		case sale, open := <-sales:
			if !open {
				t.Fatal("the event stream ended: the server's timeouts cut it")
			}
			if sale.Stock == 15 {
				cancel()
				for range sales {
				}
				a.stop(t)
				return
			}
		case <-timeout:
			t.Fatal("no sale event for the restock within 10 s")
		}
	}
}

// TestHTTPLimitFlags: the limits are read from flags and SECKILL_* variables (flags win), and
// a bad value is an error naming its source.
func TestHTTPLimitFlags(t *testing.T) {
	env := map[string]string{"SECKILL_READ_TIMEOUT": "3s", "SECKILL_MAX_STREAMS": "7", "SECKILL_MAX_CONNS": "100"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var c config
	bindConfig(fs, func(k string) string { return env[k] }, &c)
	if err := fs.Parse([]string{"--max-conns", "50", "--idle-timeout", "1m"}); err != nil {
		t.Fatal(err)
	}
	want := httpLimits{ReadTimeout: 3 * time.Second, WriteTimeout: defaultWriteTimeout, IdleTimeout: time.Minute,
		MaxConns: 50, MaxInFlight: 1024, MaxStreams: 7, MaxStreamsPerUser: 4}
	if c.HTTP != want || c.envErr != nil {
		t.Fatalf("limits %+v (%v), want %+v", c.HTTP, c.envErr, want)
	}
	wantRefused(t, "SECKILL_MAX_INFLIGHT", "lots", [][]string{{"--read-timeout", "0s"}, {"--max-streams", "0"}, {"--max-conns", "-1"}, {"--idle-timeout", "soon"}})
	if d := (httpLimits{}).withDefaults(); d.ReadTimeout != defaultReadTimeout || d.MaxConns < 16 || d.MaxStreams != 1024 ||
		d.MaxConnsPerAddr != d.MaxConns/4 || d.MaxInFlightPerAddr != 256 || d.MaxStreamsPerAddr != 256 {
		t.Fatalf("defaults of a zero config: %+v", d)
	}
}

// TestPerAddrFlags: the per-address bounds and --trusted-proxies from flags and variables;
// 0 is a quarter of the instance's bound, -1 none; a bad list of proxies is an error.
func TestPerAddrFlags(t *testing.T) {
	env := map[string]string{"SECKILL_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7", "SECKILL_MAX_STREAMS_PER_ADDR": "3"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var c config
	bindConfig(fs, func(k string) string { return env[k] }, &c)
	if err := fs.Parse([]string{"--max-conns", "100", "--max-inflight-per-addr", "-1"}); err != nil || c.envErr != nil {
		t.Fatal(err, c.envErr)
	}
	l := c.HTTP.withDefaults()
	if l.MaxConnsPerAddr != 25 || l.MaxInFlightPerAddr != -1 || l.MaxStreamsPerAddr != 3 || l.TrustedProxies != "10.0.0.0/8,192.0.2.7" {
		t.Fatalf("per-address limits %+v", l)
	}
	if tr := l.trusted(); tr.String() != l.TrustedProxies {
		t.Fatalf("trusted %v", tr)
	}
	wantRefused(t, "SECKILL_TRUSTED_PROXIES", "everyone", [][]string{{"--trusted-proxies", "10.0.0.0/33"}, {"--trusted-proxies", "proxy.local"}, {"--max-conns-per-addr", "-2"}})
}

// TestOneAddressOff: what the tests' crowds run with switches every per-address bound off and
// keeps it off through the defaults: launchCluster's flags (oneAddressArgs) and the in-process
// config (withoutPerAddr). Control: a test of the bounds that passes "0" after them, as
// TestPerClientSlowBodiesRedis does, gets the defaults back.
func TestOneAddressOff(t *testing.T) {
	parse := func(args ...string) httpLimits {
		t.Helper()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var c config
		bindConfig(fs, noEnv, &c)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return c.HTTP.withDefaults()
	}
	off := func(l httpLimits) bool {
		return l.MaxConnsPerAddr == -1 && l.MaxInFlightPerAddr == -1 && l.MaxStreamsPerAddr == -1
	}
	if l := parse(oneAddressArgs...); !off(l) {
		t.Errorf("serve %v: %+v; want every per-address bound -1", oneAddressArgs, l)
	}
	if l := (httpLimits{}).withoutPerAddr().withDefaults(); !off(l) {
		t.Errorf("withoutPerAddr: %+v; want every per-address bound -1", l)
	}
	on := parse(append(slices.Clone(oneAddressArgs), "--max-conns", "64", "--max-inflight", "16", "--max-conns-per-addr", "0", "--max-inflight-per-addr", "0")...)
	if on.MaxConnsPerAddr != 16 || on.MaxInFlightPerAddr != 4 {
		t.Errorf("control: \"0\" after oneAddressArgs gives %+v; want the quarters back (16 connections, 4 requests)", on)
	}
}

// wantRefused checks that each of the flag lists bad is refused, and that variable key set to
// val is an error that names it.
func wantRefused(t *testing.T, key, val string, bad [][]string) {
	t.Helper()
	for _, args := range bad {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c config
		bindConfig(fs, noEnv, &c)
		if err := fs.Parse(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	var c config
	bindConfig(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) string {
		if k == key {
			return val
		}
		return ""
	}, &c)
	if c.envErr == nil || !strings.Contains(c.envErr.Error(), key) {
		t.Fatalf("a bad %s: %v", key, c.envErr)
	}
}
