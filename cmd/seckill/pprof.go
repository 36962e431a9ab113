package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofServer serves net/http/pprof on a listener of its own (never on the API's), from its
// own mux: the handlers net/http/pprof registers on http.DefaultServeMux are not served.
type pprofServer struct {
	listener net.Listener
	http     *http.Server
	done     chan struct{} // closed when the serving goroutine returns; nil until start
}

// listenPprof binds addr, which checkPprofAddr accepted. The bound address is checked again:
// "localhost" is resolved by the system, and must not end up on a routable interface.
func listenPprof(addr string) (*pprofServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: listen on %s: %w", addr, err)
	}
	if tcp, ok := l.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		_ = l.Close()
		return nil, fmt.Errorf("--pprof %q: resolved to %s, which is not a loopback address", addr, l.Addr())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return &pprofServer{listener: l, http: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}, nil
}

// start serves in a goroutine of its own, once the app is up; close ends it.
func (p *pprofServer) start(log *slog.Logger) {
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		if err := p.http.Serve(p.listener); !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof server stopped", "err", err)
		}
	}()
}

// close stops the profiling server at once (a CPU profile in progress is cut short rather
// than delaying shutdown) and waits for its goroutine, if it was started.
func (p *pprofServer) close() {
	_ = p.http.Close()
	_ = p.listener.Close()
	if p.done != nil {
		<-p.done
	}
}
