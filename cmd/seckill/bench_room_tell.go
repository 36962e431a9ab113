package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/wait"
)

// The tell's reference (docs/BENCHMARKS.md "The tell against a bare reference",
// DECISIONS "The tell has a bare reference"). The room's buyers read the closing ticket later
// than the servers write it; whether the gap is the bench's own client (50 000 goroutines
// reading streams, starved of CPU on a small machine) is measured as --calibrate measures the
// buy path: against a bare net/http server in a process of its own, `seckill bench-reference
// --tell`. It holds as many live streams as the targets had open at the close, writes each one
// closing ticket of the room's own bytes at one instant, and the bench reads them with the
// buyers' own code (roomRun.stream: the client package's RoomEvents, one goroutine a stream).
// What the bench's reading adds to a bare server's write is its floor for "told sold out".

// tellReference is the bare server: every GET of a room's live stream is answered the opening
// ticket, then waits; POST /tell releases every waiting stream at once to write the closing one.
type tellReference struct {
	opening, closing []byte // whole events
	mute             bool   // write no closing ticket (a test's broken reference)

	mu         sync.Mutex
	open       int           // streams written their opening ticket, waiting for the tell
	told       bool          // the tell was given (once)
	want       int           // streams waiting at the tell
	wrote      int           // of those, written the closing ticket (or gone) since
	release    chan struct{} // closed at the tell
	allWritten chan struct{} // closed when wrote reaches want
}

// newTellReference serves closing (the room's closing ticket, JSON) as the tell, and the same
// ticket in state waiting on connect, as the room's streams do.
func newTellReference(closing []byte) (*tellReference, error) {
	d := json.NewDecoder(bytes.NewReader(closing))
	d.UseNumber() // the ticket's numbers written back as they were
	var t map[string]any
	if err := d.Decode(&t); err != nil {
		return nil, fmt.Errorf("bench-reference: --ticket is not a ticket: %w", err)
	}
	t["state"] = seckill.TicketWaiting
	opening, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	return &tellReference{opening: ticketEvent(opening), closing: ticketEvent(closing),
		release: make(chan struct{}), allWritten: make(chan struct{})}, nil
}

// ticketEvent is data as the room's streams write a ticket: one event, its JSON on one line.
func ticketEvent(data []byte) []byte {
	return []byte("event: ticket\ndata: " + string(bytes.TrimSpace(data)) + "\n\n")
}

func (t *tellReference) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/sales/{id}/waiting-room/events", t.stream)
	mux.HandleFunc("POST /tell", t.tell)
	return mux
}

// stream is one live stream: the opening ticket, then the closing one at the tell. It stays
// open after, as the room's do, until the client goes.
func (t *tellReference) stream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(t.opening); err != nil || rc.Flush() != nil {
		return
	}
	t.mu.Lock()
	counted := !t.told // a stream opened after the tell is written the close at once, uncounted
	if counted {
		t.open++
	}
	t.mu.Unlock()
	select {
	case <-t.release:
	case <-r.Context().Done():
		t.mu.Lock()
		if !t.told {
			t.open--
			t.mu.Unlock()
			return
		}
		t.mu.Unlock() // gone as the tell came: counted written (its write fails at once)
	}
	if !t.mute {
		if _, err := w.Write(t.closing); err == nil {
			_ = rc.Flush()
		}
	}
	if counted {
		t.mu.Lock()
		if t.wrote++; t.wrote == t.want {
			close(t.allWritten)
		}
		t.mu.Unlock()
	}
	<-r.Context().Done()
}

// tellAnswer is POST /tell's answer: the streams released, when the release was given and
// when the last of them had been written (Unix ns, this machine's clock).
type tellAnswer struct {
	Streams  int   `json:"streams"`
	Started  int64 `json:"started_unix_nano"`
	Finished int64 `json:"finished_unix_nano"`
}

// tell is POST /tell?streams=N&wait=D: once N streams wait (or D has passed), every waiting
// stream is released to write its closing ticket; answered when all have.
func (t *tellReference) tell(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.URL.Query().Get("streams"))
	d, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	by := time.Now().Add(d)
	for {
		t.mu.Lock()
		open, told := t.open, t.told
		t.mu.Unlock()
		if told {
			http.Error(w, "told already", http.StatusConflict)
			return
		}
		if open >= n || !time.Now().Before(by) || !wait.Sleep(r.Context(), 10*time.Millisecond) {
			break
		}
	}
	t.mu.Lock()
	t.told, t.want = true, t.open
	started := time.Now()
	if t.want == 0 {
		close(t.allWritten)
	}
	close(t.release)
	t.mu.Unlock()
	select {
	case <-t.allWritten:
	case <-r.Context().Done():
		return
	}
	a := tellAnswer{Streams: t.want, Started: started.UnixNano(), Finished: time.Now().UnixNano()}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}

// serveTellReference is `seckill bench-reference --tell`: the reference on listeners
// addresses (one per target of the room, so that the streams spread over as many ports as the
// buyers' did: one client address has some 28 000 ports to each), printed on one line,
// comma-separated; it serves until ctx is done.
func serveTellReference(ctx context.Context, listeners int, ticket string, stdout io.Writer) error {
	t, err := newTellReference([]byte(ticket))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: t.handler(), ReadHeaderTimeout: 5 * time.Second}
	var addrs []string
	errs := make(chan error, max(1, listeners))
	for range max(1, listeners) {
		l, err := listen("127.0.0.1:0")
		if err != nil {
			_ = srv.Close()
			return err
		}
		addrs = append(addrs, l.Addr().String())
		go func() { errs <- srv.Serve(l) }()
	}
	fmt.Fprintln(stdout, strings.Join(addrs, ","))
	select {
	case <-ctx.Done():
		_ = srv.Close()
		return nil
	case err := <-errs:
		_ = srv.Close()
		return err
	}
}

// startTellReference runs `seckill bench-reference --tell` in a process of its own with the
// closing ticket, and returns its listeners' URLs.
func startTellReference(listeners int, ticket []byte) ([]string, func(), error) {
	line, stop, err := startReferenceProcess("--tell", "--listeners", strconv.Itoa(listeners), "--ticket", string(ticket))
	if err != nil {
		return nil, nil, err
	}
	var urls []string
	for _, a := range strings.Split(line, ",") {
		urls = append(urls, "http://"+a)
	}
	return urls, stop, nil
}

// tellReferenceJSON is the reference's figures in the report.
type tellReferenceJSON struct {
	Streams int `json:"streams"` // opened: as many as the targets had open at the close
	Open    int `json:"open"`    // waiting at the reference's tell
	Told    int `json:"told"`    // read the closing ticket
	// WrittenMs is the reference's own: from its tell to the last stream written.
	WrittenMs float64 `json:"written_all_ms"`
	// Read… are from the reference's tell to each stream's reading of it, in the bench.
	ReadP50Ms    float64 `json:"read_p50_ms"`
	ReadP99Ms    float64 `json:"read_p99_ms"`
	ReadMaxMs    float64 `json:"read_max_ms"`
	Within       int     `json:"read_within"` // read within WithinMs (--told-within)
	WithinMs     float64 `json:"within_ms"`
	FirstFailure string  `json:"first_failure,omitempty"` // a stream's error, if any
}

// Bounds of a reference measurement: streams are opened at most tellOpenRate a second (a
// crowd's connects at once would overflow the listen backlog); the tell waits tellOpenWait
// more for the last to open, and the bench tellGrace after the reference has written for its
// streams to read it (then the rest count as not told).
const (
	tellOpenRate = 10000
	tellOpenWait = 60 * time.Second
	tellGrace    = 30 * time.Second
)

// tellRun is a run aimed at the reference's urls that reads its streams as rr's buyers read
// theirs (the same client, transport and code).
func (rr *roomRun) tellRun(urls []string) *roomRun {
	o := rr.o
	o.targets = urls
	return &roomRun{o: o, r: rr.r, saleID: "tell-reference", room: true, shc: rr.shc, streams: make([]atomic.Int64, len(urls))}
}

// measureTell opens streams on the reference through rr (a tellRun), one goroutine each as a
// buyer's, tells them, and times each reading from the reference's tell. Streams not told
// within grace of the reference's last write are not told.
func measureTell(ctx context.Context, rr *roomRun, streams int, grace time.Duration) (tellReferenceJSON, error) {
	out := tellReferenceJSON{Streams: streams, WithinMs: msOf(rr.r.toldWithin)}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	buyers := make([]*roomBuyer, streams)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range buyers {
		b := &roomBuyer{user: fmt.Sprintf("tell-%d", i)}
		buyers[i] = b
		at := t0.Add(time.Duration(i) * time.Second / tellOpenRate)
		wg.Go(func() {
			if !wait.Sleep(sctx, time.Until(at)) {
				return
			}
			if _, err := rr.stream(sctx, i, b); err != nil && sctx.Err() == nil {
				b.failure = err.Error()
			}
		})
	}
	a, err := askTell(ctx, rr.o.targets[0], streams, time.Duration(streams)*time.Second/tellOpenRate+tellOpenWait)
	if err != nil {
		cancel()
		wg.Wait()
		return out, err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cancel()
		<-done
	}
	started := time.Unix(0, a.Started)
	out.Open, out.WrittenMs = a.Streams, msOf(time.Duration(a.Finished-a.Started))
	var read []time.Duration
	for _, b := range buyers {
		if b.failure != "" && out.FirstFailure == "" {
			out.FirstFailure = b.failure
		}
		if b.by == "stream" && b.state == seckill.TicketSoldOut {
			d := max(0, b.told.Sub(started))
			read = append(read, d)
			if d <= rr.r.toldWithin {
				out.Within++
			}
		}
	}
	out.Told = len(read)
	out.ReadP50Ms, out.ReadP99Ms, out.ReadMaxMs = msOf(quantile(read, .5)), msOf(quantile(read, .99)), msOf(quantile(read, 1))
	return out, nil
}

// askTell is the bench's POST /tell to the reference.
func askTell(ctx context.Context, ref string, streams int, openWait time.Duration) (tellAnswer, error) {
	var a tellAnswer
	u := ref + "/tell?" + url.Values{"streams": {strconv.Itoa(streams)}, "wait": {openWait.String()}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return a, err
	}
	res, err := (&http.Client{Timeout: openWait + tellGrace}).Do(req)
	if err != nil {
		return a, fmt.Errorf("tell the reference: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return a, fmt.Errorf("tell the reference: %s %s", res.Status, bytes.TrimSpace(b))
	}
	return a, json.NewDecoder(res.Body).Decode(&a)
}

// toldByStream counts the buyers who read sold out on their live stream.
func toldByStream(buyers []*roomBuyer) int {
	n := 0
	for _, b := range buyers {
		if b.by == "stream" && b.state == seckill.TicketSoldOut {
			n++
		}
	}
	return n
}

// closingTicket is the room's closing ticket as a target answers a buyer told by stream (GET
// …/waiting-room/ticket, the JSON its stream wrote): the reference writes these bytes.
func (rr *roomRun) closingTicket(ctx context.Context) ([]byte, error) {
	for i, b := range rr.buyers {
		if b.by != "stream" || b.state != seckill.TicketSoldOut {
			continue
		}
		tok, err := httpapi.MintToken([]byte(rr.o.authSecret), b.user, time.Now(), time.Hour)
		if err != nil {
			return nil, err
		}
		u := rr.o.targets[i%len(rr.o.targets)] + "/api/v1/sales/" + url.PathEscape(rr.saleID) + "/waiting-room/ticket"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := rr.hc.Do(req)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		_ = res.Body.Close()
		if err != nil {
			return nil, err
		}
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s answered %s", u, res.Status)
		}
		return bytes.TrimSpace(body), nil
	}
	return nil, errors.New("no buyer was told sold out by stream")
}

// tellReference measures the room's tell against the reference: as many streams as were
// open on the targets at the close (the servers' count of closing tickets written; without
// it, the buyers told by stream, who include those that connected after the close), the
// room's closing ticket.
func (rr *roomRun) tellReference(ctx context.Context, written *closeWrittenJSON, stderr io.Writer) (*tellReferenceJSON, error) {
	n := toldByStream(rr.buyers)
	if written != nil && written.Streams > 0 {
		n = int(written.Streams)
	}
	ticket, err := rr.closingTicket(ctx)
	if err != nil {
		return nil, err
	}
	urls, stop, err := startTellReference(len(rr.o.targets), ticket)
	if err != nil {
		return nil, err
	}
	defer stop()
	fmt.Fprintf(stderr, "tell reference: %d live streams on a bare SSE server (bench-reference --tell, %s), read as the buyers read theirs…\n",
		n, strings.Join(urls, ", "))
	t, err := measureTell(ctx, rr.tellRun(urls), n, tellGrace)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// writeText is the reference's line under the room's tell.
func (t *tellReferenceJSON) writeText(w io.Writer) {
	fmt.Fprintf(w, "  a bare SSE server (its own process) told %d streams at once, wrote them all in %.0f ms; this client read it p50 %.0f ms, p99 %.0f ms, max %.0f ms after: %d of %d within %.0f ms\n",
		t.Open, t.WrittenMs, t.ReadP50Ms, t.ReadP99Ms, t.ReadMaxMs, t.Within, t.Streams, t.WithinMs)
	if t.Told < t.Streams {
		fmt.Fprintf(w, "  the reference's measure is short: %d of %d streams NOT told (first failure: %s)\n", t.Streams-t.Told, t.Streams, cmp.Or(t.FirstFailure, "none: never read"))
	}
}
