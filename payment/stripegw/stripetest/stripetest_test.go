package stripetest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// post sends a form as stripe-go does and decodes the answer.
func post(t *testing.T, s *Server, path, key string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return resp.StatusCode, out
}

func sessionForm(expiresAt time.Time) url.Values {
	return url.Values{
		"mode": {"payment"}, "client_reference_id": {"r-1"}, "metadata[reservation_id]": {"r-1"},
		"line_items[0][quantity]": {"1"}, "line_items[0][price_data][currency]": {"usd"},
		"line_items[0][price_data][unit_amount]": {"1999"}, "expires_at": {strconv.FormatInt(expiresAt.Unix(), 10)},
	}
}

// The stand-in holds the gateway to Stripe's rules: one session per idempotency key, a key
// reused with other parameters refused, expires_at within 30 min … 24 h, expire only an open
// session, refund at most what was paid.
func TestStandInKeepsStripesRules(t *testing.T) {
	s := NewServer("")
	defer s.Close()
	ok := time.Now().Add(40 * time.Minute)

	if code, out := post(t, s, "/v1/checkout/sessions", "k1", sessionForm(time.Now().Add(10*time.Minute))); code != 400 {
		t.Fatalf("expires_at in 10 min: %d %v, want 400", code, out)
	}
	code, first := post(t, s, "/v1/checkout/sessions", "k1", sessionForm(ok))
	if code != 200 || first["status"] != "open" || first["amount_total"] != float64(1999) {
		t.Fatalf("create: %d %v", code, first)
	}
	if _, again := post(t, s, "/v1/checkout/sessions", "k1", sessionForm(ok)); again["id"] != first["id"] {
		t.Fatalf("same key, same parameters: %v then %v", first["id"], again["id"])
	}
	if code, _ := post(t, s, "/v1/checkout/sessions", "k1", sessionForm(ok.Add(time.Second))); code != 400 {
		t.Fatalf("same key, other parameters: %d, want 400", code)
	}
	if _, other := post(t, s, "/v1/checkout/sessions", "k2", sessionForm(ok)); other["id"] == first["id"] {
		t.Fatal("two keys made one session")
	}

	id := first["id"].(string)
	if err := s.Settle(id); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, s, "/v1/checkout/sessions/"+id+"/expire", "", nil); code != 400 {
		t.Fatalf("expire a paid session: %d, want 400", code)
	}
	pi := url.Values{"payment_intent": {"pi_test_" + strings.TrimPrefix(id, "cs_test_")}, "amount": {"1999"}}
	if code, out := post(t, s, "/v1/refunds", "refund-1", pi); code != 200 || out["status"] != "succeeded" {
		t.Fatalf("refund: %d %v", code, out)
	}
	if code, out := post(t, s, "/v1/refunds", "refund-other-key", pi); code != 400 || out["error"].(map[string]any)["code"] != "charge_already_refunded" {
		t.Fatalf("second refund under another key: %d %v", code, out)
	}
	if n := s.Refunds(id); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}
