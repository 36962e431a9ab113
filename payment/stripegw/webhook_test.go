package stripegw

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
)

const testWebhookSecret = "whsec_test_secret"

var testNow = time.Unix(1_900_000_000, 0)

func newParser(t *testing.T) *Gateway {
	t.Helper()
	g, err := New(Config{SecretKey: "sk_test_123", WebhookSecret: testWebhookSecret, SuccessURL: "https://shop.example/"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func paidSession() EventSession {
	return EventSession{ID: "cs_test_1", ReservationID: "r-1", AmountCents: 1999, Status: "complete", PaymentStatus: "paid"}
}

func TestParseMapsEvents(t *testing.T) {
	g := newParser(t)
	unpaid := paidSession()
	unpaid.PaymentStatus = "unpaid"
	expired := paidSession()
	expired.Status, expired.PaymentStatus = "expired", "unpaid"
	cases := []struct {
		typ     string
		session EventSession
		want    payment.Outcome
	}{
		{"checkout.session.completed", paidSession(), payment.OutcomeSucceeded},
		{"checkout.session.async_payment_succeeded", paidSession(), payment.OutcomeSucceeded},
		{"checkout.session.completed", unpaid, payment.OutcomeIgnored}, // async payment still pending
		{"checkout.session.async_payment_failed", unpaid, payment.OutcomeFailed},
		{"checkout.session.expired", expired, payment.OutcomeCancelled},
		{"payment_intent.succeeded", paidSession(), payment.OutcomeIgnored},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s", c.typ, c.session.PaymentStatus), func(t *testing.T) {
			h, body := SignedEvent(testWebhookSecret, "evt_1", c.typ, c.session, testNow)
			n, err := g.Parse(h, body, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if n.Outcome != c.want {
				t.Fatalf("outcome %q, want %q", n.Outcome, c.want)
			}
			if c.want == payment.OutcomeIgnored {
				return
			}
			want := payment.Notification{Outcome: c.want, PaymentID: "cs_test_1", ReservationID: "r-1", AmountCents: 1999, Currency: "usd"}
			if n != want {
				t.Fatalf("got %+v, want %+v", n, want)
			}
		})
	}
}

// The notification carries the session's currency, so that money in another currency than the
// sale's is owed back rather than applied (the engines compare it: seckilltest's
// Rules/ConfirmPayment/OtherCurrency).
func TestParseCarriesTheCurrency(t *testing.T) {
	g := newParser(t)
	s := paidSession()
	s.Currency = "vnd"
	h, body := SignedEvent(testWebhookSecret, "evt_vnd", "checkout.session.completed", s, testNow)
	n, err := g.Parse(h, body, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if n.Currency != "vnd" || n.Confirmation().Currency != "vnd" || n.AmountCents != s.AmountCents {
		t.Fatalf("got %+v, confirmation %+v; want the session's currency vnd", n, n.Confirmation())
	}
}

// A session of ours whose metadata lost its reservation id still names it through
// client_reference_id.
func TestParseFallsBackToClientReference(t *testing.T) {
	g := newParser(t)
	body := []byte(`{"id":"evt_2","object":"event","api_version":"2020-08-27","type":"checkout.session.completed",` +
		`"data":{"object":{"id":"cs_2","object":"checkout.session","status":"complete","payment_status":"paid",` +
		`"amount_total":500,"client_reference_id":"r-2","metadata":{"seckill":"seckill"}}}}`)
	n, err := g.Parse(Sign(testWebhookSecret, body, testNow), body, testNow)
	if err != nil {
		t.Fatal(err) // also: an event of another API version is accepted (the version check is off)
	}
	if n.ReservationID != "r-2" || n.PaymentID != "cs_2" || n.AmountCents != 500 || n.Outcome != payment.OutcomeSucceeded {
		t.Fatalf("got %+v", n)
	}
}

// Stripe sends every checkout.session.* event of the account: a session seckill did not
// create (the shop's own checkout, a Payment Link, another seckill deployment on the same
// account) is acknowledged as ignored, never applied, recorded or refunded (issue 26, "Other
// integrations' sessions are refunded"). A session of ours that names no reservation is still a
// success, so that its money is paid back.
func TestParseIgnoresSessionsSeckillDidNotCreate(t *testing.T) {
	event := func(metadata string) []byte {
		return []byte(`{"id":"evt_3","object":"event","type":"checkout.session.completed",` +
			`"data":{"object":{"id":"cs_shop_1","object":"checkout.session","status":"complete","payment_status":"paid",` +
			`"amount_total":1999,"currency":"usd","client_reference_id":"shop-order-1234","metadata":` + metadata + `}}}`)
	}
	cases := []struct {
		name, group, metadata string
		want                  payment.Outcome
	}{
		{"the shop's checkout", "", `{}`, payment.OutcomeIgnored},
		{"a payment link, no metadata", "", `null`, payment.OutcomeIgnored},
		{"metadata of its own", "", `{"order":"1234","reservation_id":"r-1"}`, payment.OutcomeIgnored},
		{"another deployment", "", `{"seckill":"staging","reservation_id":"r-1"}`, payment.OutcomeIgnored},
		{"the default group, seen by another", "prod", `{"seckill":"seckill","reservation_id":"r-1"}`, payment.OutcomeIgnored},
		{"ours, no reservation", "", `{"seckill":"seckill"}`, payment.OutcomeSucceeded},
		{"ours, group prod", "prod", `{"seckill":"prod","reservation_id":"r-1"}`, payment.OutcomeSucceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := New(Config{SecretKey: "sk_test_123", WebhookSecret: testWebhookSecret, SuccessURL: "https://shop.example/", Group: c.group})
			if err != nil {
				t.Fatal(err)
			}
			body := event(c.metadata)
			n, err := g.Parse(Sign(testWebhookSecret, body, testNow), body, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if n.Outcome != c.want {
				t.Fatalf("outcome %q, want %q (%+v)", n.Outcome, c.want, n)
			}
		})
	}
}

func TestParseRefusesForgedStaleMalformed(t *testing.T) {
	g := newParser(t)
	_, body := SignedEvent(testWebhookSecret, "evt_1", "checkout.session.completed", paidSession(), testNow)
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-3] ^= 1
	malformed := []byte(`{"id":"evt_3","object":"event","type":"checkout.session.completed","data":{"object":{"id":""}}}`)
	notJSON := []byte(`{"id":`)
	cases := []struct {
		name   string
		header http.Header
		body   []byte
		code   seckill.Code
	}{
		{"wrong secret", Sign("whsec_other", body, testNow), body, seckill.CodeInvalidSignature},
		{"tampered body", Sign(testWebhookSecret, body, testNow), tampered, seckill.CodeInvalidSignature},
		{"no header", http.Header{}, body, seckill.CodeInvalidSignature},
		{"garbled header", http.Header{SignatureHeader: {"t=abc,v1=zz"}}, body, seckill.CodeInvalidSignature},
		{"stale", Sign(testWebhookSecret, body, testNow.Add(-301*time.Second)), body, seckill.CodeInvalidSignature},
		{"from the future", Sign(testWebhookSecret, body, testNow.Add(301*time.Second)), body, seckill.CodeInvalidSignature},
		{"no session", Sign(testWebhookSecret, malformed, testNow), malformed, seckill.CodeInvalidArgument},
		{"not JSON", Sign(testWebhookSecret, notJSON, testNow), notJSON, seckill.CodeInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := g.Parse(c.header, c.body, testNow)
			var se *seckill.Error
			if !errors.As(err, &se) || se.Code != c.code {
				t.Fatalf("got %+v, %v; want code %s", n, err, c.code)
			}
		})
	}
	// Within the tolerance either way is fresh.
	for _, d := range []time.Duration{-299 * time.Second, 299 * time.Second} {
		if _, err := g.Parse(Sign(testWebhookSecret, body, testNow.Add(d)), body, testNow); err != nil {
			t.Fatalf("signed %s from now: %v", d, err)
		}
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	ok := Config{SecretKey: "sk", WebhookSecret: "whsec", SuccessURL: "https://shop.example/"}
	for name, mutate := range map[string]func(*Config){
		"no secret key":     func(c *Config) { c.SecretKey = "" },
		"no webhook secret": func(c *Config) { c.WebhookSecret = "" },
		"no success URL":    func(c *Config) { c.SuccessURL = "" },
		"relative success":  func(c *Config) { c.SuccessURL = "/" },
		"bad API URL":       func(c *Config) { c.APIURL = "127.0.0.1:12111" },
		"bad cancel URL":    func(c *Config) { c.CancelURL = "ftp://x" },
		"bad group":         func(c *Config) { c.Group = "shop one" },
	} {
		c := ok
		mutate(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
}

// SessionExpiry depends on the hold alone: 31 minutes after its end, within Stripe's bounds
// (at least 30 minutes after any Start made by 23 h 29 min into the hold, at most 24 hours after
// any Start made once the hold began).
func TestSessionExpiry(t *testing.T) {
	heldAt := testNow
	for _, hold := range []time.Duration{time.Second, 5 * time.Minute, 23*time.Hour + 28*time.Minute, 23*time.Hour + 29*time.Minute, 48 * time.Hour, 7 * 24 * time.Hour} {
		end := heldAt.Add(hold)
		got := SessionExpiry(heldAt, end)
		if max := heldAt.Add(24*time.Hour - time.Minute); got.After(max) {
			t.Errorf("%s hold: expires_at %s after the hold began, Stripe allows at most 24 h from creation", hold, got.Sub(heldAt))
		}
		latestStart := heldAt.Add(min(hold, 23*time.Hour+29*time.Minute))
		if got.Sub(latestStart) < 30*time.Minute {
			t.Errorf("%s hold: expires_at %s after a Start at %s, Stripe needs at least 30 min", hold, got.Sub(latestStart), latestStart.Sub(heldAt))
		}
		if hold <= 23*time.Hour+28*time.Minute && !got.Equal(end.Add(31*time.Minute)) {
			t.Errorf("%s hold: expires_at %s after its end, want 31 min", hold, got.Sub(end))
		}
	}
	// A hold of unknown start: 31 minutes after its end.
	if got := SessionExpiry(time.Time{}, testNow); !got.Equal(testNow.Add(31 * time.Minute)) {
		t.Errorf("unknown start: expires_at %s after the end, want 31 min", got.Sub(testNow))
	}
}

// FuzzParse: whatever the body (signed with the right secret, so that the JSON is reached),
// Parse answers a notification or a coded invalid_signature / invalid_argument error, and
// never panics.
func FuzzParse(f *testing.F) {
	_, good := SignedEvent(testWebhookSecret, "evt_1", "checkout.session.completed", paidSession(), testNow)
	for _, seed := range []string{string(good), `{}`, `{"object":"event"}`, `{"object":"event","type":"checkout.session.expired","data":{"object":null}}`,
		`{"object":"event","type":"checkout.session.completed","data":{"object":{"id":5}}}`, `null`, ``} {
		f.Add([]byte(seed))
	}
	g, err := New(Config{SecretKey: "sk_test_123", WebhookSecret: testWebhookSecret, SuccessURL: "https://shop.example/"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := g.Parse(Sign(testWebhookSecret, body, testNow), body, testNow)
		if err == nil {
			if n.Outcome != payment.OutcomeIgnored && n.PaymentID == "" {
				t.Fatalf("a %s notification without a payment id: %+v", n.Outcome, n)
			}
			return
		}
		if code := seckill.ErrorCode(err); code != seckill.CodeInvalidArgument && code != seckill.CodeInvalidSignature {
			t.Fatalf("error %v coded %q", err, code)
		}
	})
}

// A captured event signed an hour ago, with a fresh t= put in front of its header, is stale:
// stripe-go verifies the signature with the last t=, so freshness must be judged on that one,
// and a header naming more than one timestamp is refused outright (issue 26, "Stale Stripe
// events can be replayed").
func TestParseRefusesAReplayWithAFreshTimestampInFront(t *testing.T) {
	g := newParser(t)
	captured, body := SignedEvent(testWebhookSecret, "evt_old", "checkout.session.completed", paidSession(), testNow.Add(-time.Hour))
	old := captured.Get(SignatureHeader)
	fresh := fmt.Sprintf("t=%d", testNow.Unix())
	for name, header := range map[string]string{
		"fresh t= in front":   fresh + "," + old,
		"fresh t= behind":     old + "," + fresh,
		"two fresh t=":        fresh + "," + Sign(testWebhookSecret, body, testNow).Get(SignatureHeader),
		"the captured header": old,
	} {
		t.Run(name, func(t *testing.T) {
			n, err := g.Parse(http.Header{SignatureHeader: {header}}, body, testNow)
			if code := seckill.ErrorCode(err); code != seckill.CodeInvalidSignature {
				t.Fatalf("Parse(%q) = %+v, %v; want invalid_signature", header, n, err)
			}
		})
	}
}
