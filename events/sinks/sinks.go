// Package sinks opens export sinks from the URLs of SECKILL_EXPORT (docs/EVENTS.md), each kind
// from its own package.
package sinks

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/amqpsink"
	"github.com/seckill-go/seckill/events/httpsink"
	"github.com/seckill-go/seckill/events/kafkasink"
	"github.com/seckill-go/seckill/events/natssink"
)

// Open builds a sink from one entry of SECKILL_EXPORT. An unknown scheme or option is an
// error wrapping events.ErrBadURL, so that a typo fails the start rather than silently
// exporting nothing. The name option (OpenAll) is accepted and left out of the sink's URL, so
// that naming a sink does not change its identity (events.Sink.Name).
func Open(ctx context.Context, raw string, opts events.Options) (events.Sink, error) {
	raw, _, err := cutName(raw)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("%w: %q: want scheme://host[:port][/path][?options]", events.ErrBadURL, events.Redact(raw))
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
		events.ErrBadURL, events.Redact(raw), u.Scheme)
}

// OpenAll opens every sink of a list (Split), each labelled (events.Labeled) by its name option
// or else by its scheme and its place in the list ("http-0", "kafka-1"); on an error it closes
// those it opened. A name must be an id (seckill.ValidID) and the labels unique.
func OpenAll(ctx context.Context, list string, opts events.Options) ([]events.Sink, error) {
	var out []events.Sink
	fail := func(err error) ([]events.Sink, error) {
		for _, o := range out {
			_ = o.Close()
		}
		return nil, err
	}
	seen := map[string]bool{}
	for i, raw := range Split(list) {
		_, name, err := cutName(raw)
		if err != nil {
			return fail(err)
		}
		if name == "" {
			scheme, _, _ := strings.Cut(raw, "://")
			name = fmt.Sprintf("%s-%d", strings.ToLower(scheme), i)
		}
		if seen[name] {
			return fail(fmt.Errorf("%w: %q: another sink has the name %q; give each its own name= option", events.ErrBadURL, events.Redact(raw), name))
		}
		seen[name] = true
		s, err := Open(ctx, raw, opts)
		if err != nil {
			return fail(err)
		}
		out = append(out, events.WithLabel(s, name))
	}
	return out, nil
}

// cutName removes the name option from a sink URL's query, returning the URL without it and
// the name ("" when there is none). A name that is not an id, or given twice, is an error.
func cutName(raw string) (rest, name string, err error) {
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, "", nil
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	var kept []string
	found := false
	for _, p := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(p, "=")
		if k != "name" {
			kept = append(kept, p)
			continue
		}
		if found {
			return "", "", fmt.Errorf("%w: %q: option name is given twice", events.ErrBadURL, events.Redact(raw))
		}
		found = true
		if name, err = url.QueryUnescape(v); err != nil || !seckill.ValidID(name) {
			return "", "", fmt.Errorf("%w: %q: name: want 1-%d of [A-Za-z0-9_.-], other than \".\" and \"..\"", events.ErrBadURL, events.Redact(raw), seckill.MaxIDBytes)
		}
	}
	rest = base
	if len(kept) > 0 {
		rest += "?" + strings.Join(kept, "&")
	}
	if hasFragment {
		rest += "#" + fragment
	}
	return rest, name, nil
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
