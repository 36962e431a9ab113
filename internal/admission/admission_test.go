package admission

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/internal/purchasetoken"
)

func TestCheck(t *testing.T) {
	key, other := Key([]byte("secret-one")), Key([]byte("secret-two"))
	now := time.UnixMilli(1_800_000_000_000)
	exp := now.Add(2 * time.Minute)
	tok := New(key, "s1", "alice", exp)
	if got, ok := Check(key, "s1", "alice", tok, now); !ok || !got.Equal(exp) {
		t.Fatalf("valid token refused: %v %v", got, ok)
	}
	bad := map[string]func() (string, string, string, []byte, time.Time){
		"other user": func() (string, string, string, []byte, time.Time) { return "s1", "bob", tok, key, now },
		"other sale": func() (string, string, string, []byte, time.Time) { return "s2", "alice", tok, key, now },
		"other key":  func() (string, string, string, []byte, time.Time) { return "s1", "alice", tok, other, now },
		"expired":    func() (string, string, string, []byte, time.Time) { return "s1", "alice", tok, key, exp },
		"expiry moved": func() (string, string, string, []byte, time.Time) {
			_, mac, _ := strings.Cut(tok, ".")
			return "s1", "alice", "9" + strings.Repeat("0", 14) + "." + mac, key, now
		},
		"empty": func() (string, string, string, []byte, time.Time) { return "s1", "alice", "", key, now },
		"no dot": func() (string, string, string, []byte, time.Time) {
			return "s1", "alice", strings.ReplaceAll(tok, ".", ""), key, now
		},
		"too long": func() (string, string, string, []byte, time.Time) {
			return "s1", "alice", tok + strings.Repeat("A", 100), key, now
		},
		"signed +ms": func() (string, string, string, []byte, time.Time) { return "s1", "alice", "+" + tok, key, now },
		"purchase label": func() (string, string, string, []byte, time.Time) {
			// A token made with the purchase-path key (another label) is not an admission.
			return "s1", "alice", New(purchaseKey(), "s1", "alice", exp), key, now
		},
	}
	for name, f := range bad {
		sale, user, tk, k, at := f()
		if _, ok := Check(k, sale, user, tk, at); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

func purchaseKey() []byte { return purchasetoken.Key([]byte("secret-one")) }
