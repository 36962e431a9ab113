package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/service"
)

// TestNginxCachesPublicReads runs the nginx configuration of docs/CDN.md, as written but for
// its listen port, upstream address and cache directory, in front of a server, and counts the
// requests that reach the server (the origin):
//   - 200 anonymous reads of the sale and 200 of the list through nginx, from 20 clients at
//     once, are valid answers and reach the origin a handful of times each: at most one fetch
//     for the first miss and two per second the crowd took (one a second, as the answers'
//     max-age says, doubled for the second's boundaries), far below the 200 sent;
//   - a read with Authorization or Cookie, and a read of an unknown sale (404, no-store), reach
//     the origin every time;
//   - a client's If-None-Match with the ETag it was answered is 304;
//   - negative control: the same crowd in front of an origin that answers no-store reaches it
//     200 times of 200, so the counting sees a cache that does not cache.
func TestNginxCachesPublicReads(t *testing.T) {
	bin := testenv.Nginx(t)
	block := docNginxBlock(t)
	e := newEnv(t)
	e.createSale(t, "phone", nil)

	t.Run("cached", func(t *testing.T) {
		origin := newCountingOrigin(t, e, "")
		base := startNginx(t, bin, block, origin.addr)
		client := proxyClient()
		const n = 200
		start := time.Now()
		statuses := crowd(t, client, base, n)
		secs := math.Ceil(time.Since(start).Seconds())
		bound := 1 + 2*(int(secs)+1)
		t.Logf("%d reads of each in %.0f s (rounded up); X-Cache-Status: %v", n, secs, statuses)
		if bound >= n/2 {
			t.Fatalf("the crowd took %.0f s: too long to tell a cache from none (bound %d of %d)", secs, bound, n)
		}
		for _, path := range []string{"/api/v1/sales/phone", "/api/v1/sales"} {
			if got := origin.count(path); got < 1 || got > bound {
				t.Errorf("%s: the origin got %d of %d reads, want 1 to %d", path, got, n, bound)
			}
		}

		// Reads with credentials and errors go through, every one.
		before := origin.count("/api/v1/sales/phone")
		for _, h := range [][2]string{{"Authorization", admin()}, {"Cookie", "session=x"}} {
			for range 5 {
				r := proxyGet(t, client, base+"/api/v1/sales/phone", h[0], h[1])
				if r.status != http.StatusOK || r.cache != "BYPASS" {
					t.Fatalf("read with %s: %d, X-Cache-Status %q", h[0], r.status, r.cache)
				}
			}
		}
		if got := origin.count("/api/v1/sales/phone") - before; got != 10 {
			t.Errorf("10 reads with Authorization or Cookie: the origin got %d", got)
		}
		for range 10 {
			if r := proxyGet(t, client, base+"/api/v1/sales/nope", "", ""); r.status != http.StatusNotFound {
				t.Fatalf("unknown sale through the proxy: %d", r.status)
			}
		}
		if got := origin.count("/api/v1/sales/nope"); got != 10 {
			t.Errorf("10 reads of an unknown sale (404, no-store): the origin got %d", got)
		}

		// A client's own validator: 304 through the proxy.
		r := proxyGet(t, client, base+"/api/v1/sales/phone", "", "")
		if r.etag == "" {
			t.Fatal("no ETag through the proxy")
		}
		if r := proxyGet(t, client, base+"/api/v1/sales/phone", "If-None-Match", r.etag); r.status != http.StatusNotModified {
			t.Errorf("If-None-Match through the proxy: %d", r.status)
		}
	})

	t.Run("no-store origin", func(t *testing.T) {
		origin := newCountingOrigin(t, e, "no-store")
		base := startNginx(t, bin, block, origin.addr)
		const n = 200
		crowd(t, proxyClient(), base, n)
		for _, path := range []string{"/api/v1/sales/phone", "/api/v1/sales"} {
			if got := origin.count(path); got != n {
				t.Errorf("%s: the origin answering no-store got %d of %d reads, want all", path, got, n)
			}
		}
	})
}

// docNginxBlock is the one ```nginx block of docs/CDN.md.
func docNginxBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "CDN.md"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "```nginx\n")
	if len(parts) != 2 {
		t.Fatalf("docs/CDN.md has %d nginx blocks, want 1", len(parts)-1)
	}
	block, _, ok := strings.Cut(parts[1], "\n```")
	if !ok {
		t.Fatal("docs/CDN.md: the nginx block does not end")
	}
	return block
}

// startNginx runs nginx with the documented block in front of origin (host:port) on a free
// loopback port, and answers its base URL; it is stopped when the test ends.
func startNginx(t *testing.T, bin, block, origin string) string {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, c := range [][2]string{
		{"listen 80;", "listen " + addr + ";"},
		{"server 127.0.0.1:8080;", "server " + origin + ";"},
		{"/var/cache/nginx/seckill", filepath.Join(dir, "cache")},
	} {
		if strings.Count(block, c[0]) != 1 {
			t.Fatalf("docs/CDN.md's nginx block has %q %d times, want once", c[0], strings.Count(block, c[0]))
		}
		block = strings.Replace(block, c[0], c[1], 1)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers write the cache in a directory only root may enter
	}
	conf := fmt.Sprintf(`daemon off;
worker_processes 1;
%[2]s
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 1024; }
http {
access_log off;
client_body_temp_path %[1]s/body;
proxy_temp_path %[1]s/proxy;
fastcgi_temp_path %[1]s/fastcgi;
uwsgi_temp_path %[1]s/uwsgi;
scgi_temp_path %[1]s/scgi;
%[3]s
}
`, dir, user, block)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // the master stops its workers and exits
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	errorLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return out.String() + string(b)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("nginx exited: %v\n%s", err, errorLog())
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not listen on %s: %v\n%s", addr, err, errorLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countingOrigin is the server behind the proxy, counting the requests that reach it by
// path; with a Cache-Control to force, its answers carry that one instead of their own.
type countingOrigin struct {
	addr  string
	force string
	next  http.Handler
	mu    sync.Mutex
	n     map[string]int
}

func newCountingOrigin(t *testing.T, e *env, force string) *countingOrigin {
	t.Helper()
	o := &countingOrigin{force: force, next: e.api.Handler(), n: map[string]int{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: o, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("origin: %v", err)
		}
	})
	o.addr = l.Addr().String()
	return o
}

func (o *countingOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.n[r.URL.Path]++
	o.mu.Unlock()
	if o.force != "" {
		w = &forceCacheControl{ResponseWriter: w, value: o.force}
	}
	o.next.ServeHTTP(w, r)
}

func (o *countingOrigin) count(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[path]
}

// forceCacheControl replaces the answer's Cache-Control as its header is written.
type forceCacheControl struct {
	http.ResponseWriter
	value   string
	written bool
}

func (f *forceCacheControl) WriteHeader(code int) {
	if !f.written {
		f.written = true
		f.Header().Set("Cache-Control", f.value)
	}
	f.ResponseWriter.WriteHeader(code)
}

func (f *forceCacheControl) Write(b []byte) (int, error) {
	if !f.written {
		f.WriteHeader(http.StatusOK)
	}
	return f.ResponseWriter.Write(b)
}

func (f *forceCacheControl) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func proxyClient() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32},
	}
}

type proxyAnswer struct {
	status int
	body   []byte
	etag   string
	cache  string // X-Cache-Status
}

func tryProxyGet(client *http.Client, url, header, value string) (proxyAnswer, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return proxyAnswer{}, err
	}
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := client.Do(req)
	if err != nil {
		return proxyAnswer{}, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		return proxyAnswer{}, err
	}
	return proxyAnswer{resp.StatusCode, b.Bytes(), resp.Header.Get("ETag"), resp.Header.Get("X-Cache-Status")}, nil
}

func proxyGet(t *testing.T, client *http.Client, url, header, value string) proxyAnswer {
	t.Helper()
	r, err := tryProxyGet(client, url, header, value)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// crowd sends n anonymous reads of the sale "phone" and n of the list through the proxy at
// base, from 20 clients at once, checks that each is a valid answer (the sale; a list holding
// it), and answers how many of them each X-Cache-Status had.
func crowd(t *testing.T, client *http.Client, base string, n int) map[string]int {
	t.Helper()
	const clients = 20
	var (
		mu       sync.Mutex
		statuses = map[string]int{}
		wg       sync.WaitGroup
	)
	errs := make(chan error, 2*n)
	for c := range clients {
		wg.Go(func() {
			for i := c; i < 2*n; i += clients {
				path := "/api/v1/sales/phone"
				if i%2 == 1 {
					path = "/api/v1/sales"
				}
				r, err := tryProxyGet(client, base+path, "", "")
				if err == nil {
					err = checkPublicRead(path, r)
				}
				if err != nil {
					errs <- fmt.Errorf("read %d: %w", i, err)
					return
				}
				mu.Lock()
				statuses[r.cache]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return statuses
}

// checkPublicRead: a 200 with the sale "phone" at path, or a list that holds it.
func checkPublicRead(path string, r proxyAnswer) error {
	if r.status != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, r.status, r.body)
	}
	if path == "/api/v1/sales" {
		var page listPage
		if err := json.Unmarshal(r.body, &page); err != nil {
			return fmt.Errorf("GET %s: %w: %s", path, err, r.body)
		}
		if len(page.Sales) != 1 || page.Sales[0].ID != "phone" || page.ServerTime.IsZero() {
			return fmt.Errorf("GET %s: %s", path, r.body)
		}
		return nil
	}
	var v service.SaleView
	if err := json.Unmarshal(r.body, &v); err != nil {
		return fmt.Errorf("GET %s: %w: %s", path, err, r.body)
	}
	if v.ID != "phone" || v.StockState.Sellable != 10 || v.ServerTime.IsZero() {
		return fmt.Errorf("GET %s: %s", path, r.body)
	}
	return nil
}
