package httpsink

import (
	"net/http"

	"github.com/seckill-go/seckill/events"
)

// SetTransport makes a sink trust a test server's certificate (httptest.Server.Client).
func SetTransport(s events.Sink, rt http.RoundTripper) { s.(*Sink).client.Transport = rt }
