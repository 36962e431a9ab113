package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/seckill-go/seckill/events"
)

// minSecretLen is the shortest secret (SECKILL_AUTH_SECRET, SECKILL_ADMIN_TOKEN,
// SECKILL_PAYMENT_SECRET, SECKILL_EXPORT_SECRET, SECKILL_METRICS_TOKEN) accepted outside
// --dev: 32 bytes, the output size of the HMAC-SHA256 they key (HS256 JWTs, purchase tokens,
// webhook and callback signatures) and, for the tokens, far beyond guessing over the network. `openssl rand -hex 32` makes one of 64 characters.
const minSecretLen = 32

// secretHint tells how to make a secret long enough.
const secretHint = "generate one with `openssl rand -hex 32`"

// secrets fills missing secrets in dev mode (returning which were generated) and refuses to
// start without them otherwise. Outside dev mode every secret must be at least minSecretLen
// bytes: a short admin token or signing key can be guessed or brute-forced offline. A secret
// the configuration does not use (SECKILL_PAYMENT_SECRET when the built-in webhook is off) is
// neither required nor generated.
func (c *config) secrets() (generated []string, err error) {
	if c.envErr != nil {
		return nil, c.envErr
	}
	var missing, short []string
	for _, f := range c.secretFields() {
		if !f.used {
			continue
		}
		switch {
		case *f.v == "" && c.Dev:
			*f.v = randomSecret()
			generated = append(generated, f.name)
		case *f.v == "" && f.required:
			missing = append(missing, f.name)
		case *f.v == "":
		case !c.Dev && len(*f.v) < minSecretLen:
			short = append(short, f.name+" "+mask(*f.v))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing secrets: %s; set them in the environment or flags (at least %d bytes each: %s), or run with --dev to generate them",
			strings.Join(missing, ", "), minSecretLen, secretHint)
	}
	if len(short) > 0 {
		return nil, fmt.Errorf("secrets too short: %s; each needs at least %d bytes outside --dev: %s",
			strings.Join(short, ", "), minSecretLen, secretHint)
	}
	if _, err := c.exportOptions(); err != nil {
		return nil, err
	}
	if err := c.checkMetricsToken(); err != nil {
		return nil, err
	}
	return generated, nil
}

// otherSecrets are c's secrets whose purpose is not signing the export's callbacks, by their
// environment names.
func (c *config) otherSecrets() []secretField {
	return []secretField{
		{name: "SECKILL_AUTH_SECRET", v: &c.AuthSecret}, {name: "SECKILL_ADMIN_TOKEN", v: &c.AdminToken},
		{name: "SECKILL_PAYMENT_SECRET", v: &c.PaymentSecret}, {name: "SECKILL_STRIPE_SECRET_KEY", v: &c.StripeSecretKey},
		{name: "SECKILL_STRIPE_WEBHOOK_SECRET", v: &c.StripeWebhookSecret}, {name: "SECKILL_METRICS_TOKEN", v: &c.MetricsToken},
	}
}

// checkMetricsToken refuses a metrics token that is not a secret of its own (ownSecret):
// whoever scrapes the metrics holds it, and must not thereby be an admin.
func (c *config) checkMetricsToken() error {
	others := append(c.otherSecrets(), secretField{name: "SECKILL_EXPORT_SECRET", v: &c.ExportSecret})
	return c.ownSecret("SECKILL_METRICS_TOKEN", &c.MetricsToken, "whoever scrapes the metrics holds the token", others)
}

// ownSecret refuses the secret name (at v, when set) if it is shorter than minSecretLen outside
// --dev or equal to one of others: each secret has one purpose, and holder (who else holds it)
// must not thereby hold another secret's power. The message names the clash, never a value.
func (c *config) ownSecret(name string, v *string, holder string, others []secretField) error {
	if *v == "" {
		return nil
	}
	if !c.Dev && len(*v) < minSecretLen {
		return fmt.Errorf("secrets too short: %s %s; it needs at least %d bytes outside --dev: %s", name, mask(*v), minSecretLen, secretHint)
	}
	for _, f := range others {
		if f.v != v && *f.v == *v {
			return fmt.Errorf("%s equals %s: each secret has one purpose, and %s; %s", name, f.name, holder, secretHint)
		}
	}
	return nil
}

// otherSecretsFromEnv fills c's other secrets from the environment, for the commands that
// export without serving (worker, events): only to refuse an export secret equal to one.
func (c *config) otherSecretsFromEnv(getenv func(string) string) {
	for _, f := range c.otherSecrets() {
		*f.v = getenv(f.name)
	}
}

// exportOptions are the options of the export's sinks: HTTP callbacks are signed with
// SECKILL_EXPORT_SECRET (or a sink's own secret_env secret), and never with a secret of
// another purpose: every callback receiver holds the key, which must not sign in users,
// administer sales or mint payments. An export secret equal to another secret, or shorter than
// minSecretLen outside --dev, is refused here; a secret_env secret equal to another secret is
// refused by the sink (events.Options.Refused).
func (c *config) exportOptions() (events.Options, error) {
	if err := c.ownSecret("SECKILL_EXPORT_SECRET", &c.ExportSecret, "every callback receiver holds the export secret", c.otherSecrets()); err != nil {
		return events.Options{}, err
	}
	var refused [][]byte
	for _, f := range c.otherSecrets() {
		if *f.v != "" {
			refused = append(refused, []byte(*f.v))
		}
	}
	return events.Options{Secret: []byte(c.ExportSecret), Refused: refused}, nil
}

// randomSecret is a generated dev secret: 32 random bytes in hex, so it passes the length
// check outside --dev too.
func randomSecret() string {
	var b [minSecretLen]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// mask shows a secret's length only: not one character of it (a prefix would narrow a guess
// and tie log lines to one key).
func mask(s string) string {
	if s == "" {
		return "(unset)"
	}
	if len(s) == 1 {
		return "(1 byte)"
	}
	return fmt.Sprintf("(%d bytes)", len(s))
}

// maskedValue replaces a hidden part of a URL.
const maskedValue = "****"

// maskURL hides every secret in a database or Redis URL so that it can be logged: the password
// of the user info, and the value of every query parameter whose name speaks of a secret
// (password, sslpassword, secret, token, …). It works on the text, not url.Parse (which refuses
// a Redis Cluster's "h1:p1,h2:p2" and an unencoded character in a password). When the user
// info cannot be told apart from the rest (an '@' after a '/', '?' or '#'), all of it before
// the last '@' is hidden. A value without a scheme is hidden whole if it looks like key=value
// pairs or has user info.
func maskURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if strings.ContainsAny(raw, "@=") {
			return maskedValue
		}
		return raw
	}
	userinfo := ""
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo, rest = rest[:at], rest[at+1:]
		user, _, hasPass := strings.Cut(userinfo, ":")
		switch {
		case strings.ContainsAny(userinfo, "/?#"):
			userinfo = maskedValue + "@"
		case hasPass:
			userinfo = user + ":" + maskedValue + "@"
		default:
			userinfo = user + "@"
		}
	}
	rest, fragment, hasFragment := strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	out := scheme + "://" + userinfo + rest
	if hasQuery {
		out += "?" + maskQuery(query)
	}
	if hasFragment && fragment != "" {
		out += "#" + maskedValue
	}
	return out
}

// maskQuery hides the values of the secret parameters of a URL query.
func maskQuery(query string) string {
	parts := strings.Split(query, "&")
	for i, p := range parts {
		k, _, hasValue := strings.Cut(p, "=")
		if hasValue && secretParam(k) {
			parts[i] = k + "=" + maskedValue
		}
	}
	return strings.Join(parts, "&")
}

// secretParam reports whether a query parameter's name says its value is a secret.
func secretParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, word := range []string{"pass", "pwd", "secret", "token", "credential"} {
		if strings.Contains(name, word) {
			return true
		}
	}
	return false
}

// urlSecrets returns the secret pieces of a URL (as written and percent-decoded): the user
// info's password and the values of its secret query parameters. scrubError removes them
// from error messages.
func urlSecrets(raw string) []string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil
	}
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if d, err := url.PathUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		_, pass, _ := strings.Cut(rest[:at], ":")
		add(pass)
		// The user info may have swallowed a query (an '@' in a parameter's value): its
		// secret parameters count too.
		if _, q, ok := strings.Cut(rest[:at], "?"); ok {
			querySecrets(q, add)
		}
		rest = rest[at+1:]
	}
	rest, _, _ = strings.Cut(rest, "#")
	if _, q, ok := strings.Cut(rest, "?"); ok {
		querySecrets(q, add)
	}
	return out
}

// querySecrets calls add with the value of every secret parameter of query.
func querySecrets(query string, add func(string)) {
	for _, p := range strings.Split(query, "&") {
		if k, v, ok := strings.Cut(p, "="); ok && secretParam(k) {
			add(v)
		}
	}
}

// scrubError replaces every given secret in err's message with ****, keeping err for
// errors.Is and errors.As. Drivers' errors are not ours to vouch for: whatever a database or
// Redis client quotes of the URL it was given, the message that reaches the log or the
// terminal holds none of its secrets.
func scrubError(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	scrubbed := msg
	for _, s := range secrets {
		if len(s) > 0 {
			scrubbed = strings.ReplaceAll(scrubbed, s, maskedValue)
		}
	}
	if scrubbed == msg {
		return err
	}
	return &scrubbedError{msg: scrubbed, err: err}
}

// scrubbedError is an error whose message had a secret in it, with the secret replaced.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
