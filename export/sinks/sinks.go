// Package sinks opens export sinks from the URLs of SECKILL_EXPORT (docs/EVENTS.md), each kind
// from its own package.
package sinks

import (
	"context"
	"fmt"
	"net/url"
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

// OpenAll opens every sink of a comma-separated list; on an error it closes those it opened.
func OpenAll(ctx context.Context, list string, opts export.Options) ([]export.Sink, error) {
	var out []export.Sink
	for _, raw := range strings.Split(list, ",") {
		if strings.TrimSpace(raw) == "" {
			continue
		}
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
