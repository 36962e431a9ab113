package payment

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
)

// DeliverToHandler returns a MockConfig.Deliver function that hands each webhook straight to h,
// as a POST to target (a path such as "/api/v1/payments/webhook", or a full URL), without a
// socket. The demo and tests use it to run the gateway and the API in one process. A panic in h
// is recovered and reported as an error, so that, as with a real server whose connection drops,
// the gateway retries the delivery instead of crashing the process.
func DeliverToHandler(h http.Handler, target string) func(ctx context.Context, body []byte, header string) (int, error) {
	return func(ctx context.Context, body []byte, header string) (status int, err error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(SignatureHeader, header)
		req.Header.Set("User-Agent", "seckill-mock-gateway")
		req.RemoteAddr = "127.0.0.1:0" // handlers that log or rate-limit by address expect one
		w := &discardResponse{header: make(http.Header)}
		defer func() {
			if p := recover(); p != nil {
				status, err = 0, fmt.Errorf("webhook handler panicked: %v", p)
			}
		}()
		h.ServeHTTP(w, req)
		if w.status == 0 {
			w.status = http.StatusOK // as net/http does when a handler writes nothing
		}
		return w.status, nil
	}
}

// discardResponse is the smallest http.ResponseWriter: the gateway needs only the status.
type discardResponse struct {
	header http.Header
	status int
}

func (w *discardResponse) Header() http.Header { return w.header }

func (w *discardResponse) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *discardResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
