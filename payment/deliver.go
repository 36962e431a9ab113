package payment

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"
)

// SignedBody is one signed payment notification as a gateway posts it: the raw body and the
// header that signs it (Header: Value). Its receiver checks the signature over these very
// bytes, so the body is sent as it is.
type SignedBody struct {
	Body          []byte
	Header, Value string
}

// Signed is the built-in scheme's notification of body, signed with secret at t (Sign).
func Signed(secret []byte, t time.Time, body []byte) SignedBody {
	return SignedBody{Body: body, Header: SignatureHeader, Value: Sign(secret, t, body)}
}

// NewRequest is the POST of n to url: the one place a notification becomes an HTTP request,
// for the mock gateway (over HTTP or in process, DeliverToHandler) and for package client's
// webhook calls (which the load generator and the bench use).
func NewRequest(ctx context.Context, url string, n SignedBody) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(n.Body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(n.Header, n.Value)
	return req, nil
}

// mockUserAgent names the mock gateway's requests.
const mockUserAgent = "seckill-mock-gateway"

// DeliverToHandler returns a MockConfig.Deliver function that hands each webhook straight to h,
// as a POST to target (a path such as "/api/v1/payments/webhook", or a full URL), without a
// socket. The demo and tests use it to run the gateway and the API in one process. A panic in h
// is recovered and reported as an error, so that, as with a real server whose connection drops,
// the gateway retries the delivery instead of crashing the process.
func DeliverToHandler(h http.Handler, target string) func(ctx context.Context, body []byte, header string) (int, error) {
	return func(ctx context.Context, body []byte, header string) (status int, err error) {
		req, err := NewRequest(ctx, target, SignedBody{Body: body, Header: SignatureHeader, Value: header})
		if err != nil {
			return 0, err
		}
		req.Header.Set("User-Agent", mockUserAgent)
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
