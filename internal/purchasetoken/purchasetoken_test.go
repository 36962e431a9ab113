package purchasetoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"testing"
	"time"
)

// TestTokenIsTheDocumentedHMAC: New is the HMAC of docs/DECISIONS.md, computed here without the
// pool; Valid accepts it and refuses it for another user, sale, start or key, and any change of
// its length.
func TestTokenIsTheDocumentedHMAC(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	key := Key([]byte("k"))
	k := hmac.New(sha256.New, []byte("k"))
	k.Write([]byte("seckill purchase path v1"))
	mac := hmac.New(sha256.New, k.Sum(nil))
	fmt.Fprintf(mac, "s1\x00alice\x00%d", start.UnixMilli())
	token := New(key, "s1", "alice", start)
	if want := base64.RawURLEncoding.EncodeToString(mac.Sum(nil)); token != want {
		t.Fatalf("token %q, want %q", token, want)
	}
	if !Valid(key, "s1", "alice", start, token) {
		t.Fatal("Valid refused the token")
	}
	for _, c := range []struct {
		key         []byte
		sale, user  string
		start       time.Time
		token, what string
	}{
		{key, "s1", "bob", start, token, "another user"},
		{key, "s2", "alice", start, token, "another sale"},
		{key, "s1", "alice", start.Add(time.Millisecond), token, "another start"},
		{Key([]byte("other")), "s1", "alice", start, token, "another key"},
		{key, "s1", "alice", start, token[1:], "a character cut"},
		{key, "s1", "alice", start, token + "A", "a character added"},
		{key, "s1", "alice", start, "", "no token"},
	} {
		if Valid(c.key, c.sale, c.user, c.start, c.token) {
			t.Errorf("Valid accepted the token with %s", c.what)
		}
	}
}
