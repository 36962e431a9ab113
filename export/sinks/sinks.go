// Package sinks opens export sinks from the URLs of SECKILL_EXPORT (docs/EVENTS.md), each kind
// from its own package.
package sinks

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/seckill-go/seckill/export"
	"github.com/seckill-go/seckill/export/amqpsink"
	"github.com/seckill-go/seckill/export/httpsink"
	"github.com/seckill-go/seckill/export/kafkasink"
	"github.com/seckill-go/seckill/export/natssink"
)

// Open builds a sink from one entry of SECKILL_EXPORT. An unknown scheme or option is an
// error wrapping export.ErrBadURL, so that a typo fails the start rather than silently
// exporting nothing.
func Open(ctx context.Context, raw string, opts export.Options) (export.Sink, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("%w: %q: want scheme://host[:port][/path][?options]", export.ErrBadURL, export.Redact(raw))
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return httpsink.Open(raw, opts)
	case "kafka":
		return kafkasink.Open(raw)
	case "amqp", "amqps":
		s, err := amqpsink.Open(ctx, raw, opts)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return s, nil
	case "nats":
		s, err := natssink.Open(ctx, raw, opts)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("%w: %q: unknown scheme %q (want http, https, amqp, amqps, nats or kafka)",
		export.ErrBadURL, export.Redact(raw), u.Scheme)
}

// OpenAll opens every sink of a list (Split); on an error it closes those it opened.
func OpenAll(ctx context.Context, list string, opts export.Options) ([]export.Sink, error) {
	var out []export.Sink
	for _, raw := range Split(list) {
		s, err := Open(ctx, raw, opts)
		if err != nil {
			for _, o := range out {
				_ = o.Close()
			}
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// nextURL matches a comma that starts the next URL of a list: the comma, optional spaces, and
// a scheme (RFC 3986: a letter, then letters, digits, '+', '-' or '.') followed by "://".
var nextURL = regexp.MustCompile(`,\s*[A-Za-z][A-Za-z0-9+.-]*://`)

// Split cuts a SECKILL_EXPORT list into its URLs, trimmed, empty ones dropped. A comma ends a
// URL only when the next URL's scheme:// follows it: a comma inside a URL (the brokers of
// kafka://k1:9092,k2:9092?topic=…, a query value) stays in it (docs/EVENTS.md).
func Split(list string) []string {
	var out []string
	add := func(s string) {
		if s = strings.Trim(s, " \t\r\n,"); s != "" {
			out = append(out, s)
		}
	}
	start := 0
	for _, m := range nextURL.FindAllStringIndex(list, -1) {
		add(list[start:m[0]])
		start = m[0] + 1
	}
	add(list[start:])
	return out
}
