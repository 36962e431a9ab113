package stripegw

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/payment"
)

// TestSecretsNeverLeak: stripe-mock refuses a key that does not look like one and echoes the
// whole Authorization header in its answer, which stripe-go logs and the gateway returns.
// Neither the error nor the log may carry the key (nor the webhook secret).
func TestSecretsNeverLeak(t *testing.T) {
	api := testenv.StripeMock(t)
	const key = "sk_test_not_a_valid_looking_key_0123456789"
	var log testenv.Buffer
	g, err := New(Config{SecretKey: key, WebhookSecret: testWebhookSecret, APIURL: api,
		SuccessURL: "https://shop.example/", Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Start(context.Background(), payment.StartRequest{ReservationID: "r1", UserID: "u1", AmountCents: 100,
		ExpiresAt: time.Now().Add(time.Minute), IdempotencyKey: "r1"})
	if err == nil {
		t.Fatal("stripe-mock accepted a key that does not look like one; this test no longer sees an echo")
	}
	for what, text := range map[string]string{"error": err.Error(), "log": log.String()} {
		if strings.Contains(text, key) || strings.Contains(text, testWebhookSecret) {
			t.Errorf("the %s carries a secret:\n%s", what, text)
		}
	}
	if !strings.Contains(err.Error()+log.String(), "[redacted]") {
		t.Errorf("expected the echoed key to be redacted; error %q, log:\n%s", err, log.String())
	}
}
