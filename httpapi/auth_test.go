package httpapi_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
)

// rawJWT builds a compact JWT with any header and claims, "signed" with HMAC-SHA256 under key
// whatever the header's alg says. It builds the classic forgeries: alg none, and the
// RS256 ⇄ HS256 confusion where an attacker HMACs with a key the server uses elsewhere.
func rawJWT(header, claims map[string]any, key []byte) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	in := enc(header) + "." + enc(claims)
	if key == nil {
		return in + "."
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// badUserAuth lists Authorization headers that must all be 401 unauthorized on every user
// endpoint.
func badUserAuth(t *testing.T, e *env) map[string]string {
	t.Helper()
	now := e.clock.Now()
	good := e.user(t, "alice")
	claims := func(sub string) map[string]any {
		return map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	}
	hs256 := map[string]any{"alg": "HS256", "typ": "JWT"}
	other, _ := httpapi.MintToken([]byte("another-secret"), "alice", now, time.Hour)
	expired, _ := httpapi.MintToken([]byte(authSecret), "alice", now.Add(-2*time.Hour), time.Hour)
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims(claims("alice"))).SignedString([]byte(authSecret))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims(claims("alice"))).SignedString(jwt.UnsafeAllowNoneSignatureType)
	// Flip one character of the signature: a forged token with the right header and claims.
	sig := good[len(good)-5:]
	forged := good[:len(good)-5] + strings.Map(func(r rune) rune {
		if r == 'A' {
			return 'B'
		}
		return 'A'
	}, sig)
	notYet := rawJWT(hs256, map[string]any{"sub": "alice", "nbf": now.Add(time.Hour).Unix(), "exp": now.Add(2 * time.Hour).Unix()}, []byte(authSecret))
	return map[string]string{
		"missing":           "",
		"basic scheme":      "Basic YWxpY2U6cHc=",
		"bearer only":       "Bearer",
		"not a jwt":         "Bearer not-a-jwt",
		"forged signature":  forged,
		"expired":           "Bearer " + expired,
		"not yet valid":     "Bearer " + notYet,
		"other secret":      "Bearer " + other,
		"alg none":          "Bearer " + none,
		"alg none unsigned": "Bearer " + rawJWT(map[string]any{"alg": "none"}, claims("alice"), nil),
		"RS256 header":      "Bearer " + rawJWT(map[string]any{"alg": "RS256", "typ": "JWT"}, claims("alice"), []byte(authSecret)),
		"HS512":             "Bearer " + hs512,
		"empty sub":         "Bearer " + rawJWT(hs256, claims(""), []byte(authSecret)),
		"no sub":            "Bearer " + rawJWT(hs256, map[string]any{"exp": now.Add(time.Hour).Unix()}, []byte(authSecret)),
		"sub with space":    "Bearer " + rawJWT(hs256, claims("al ice"), []byte(authSecret)),
		"sub with slash":    "Bearer " + rawJWT(hs256, claims("../admin"), []byte(authSecret)),
		"sub too long":      "Bearer " + rawJWT(hs256, claims(strings.Repeat("a", 65)), []byte(authSecret)),
		"sub not a string":  "Bearer " + rawJWT(hs256, map[string]any{"sub": 42, "exp": now.Add(time.Hour).Unix()}, []byte(authSecret)),
		"admin token":       admin(),
	}
}

// TestUserAuth sends every bad credential to every user endpoint: each is 401 unauthorized and
// changes nothing, even where the rest of the request (a valid purchase path, a held
// reservation) would succeed.
func TestUserAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", nil)
	path := e.path(t, "alice", "s1")
	e.mustBuy(t, "bob", "s1", http.StatusCreated)
	aliceRes := e.mustBuy(t, "alice", "s1", http.StatusCreated)
	endpoints := []struct{ method, path string }{
		{"GET", "/api/v1/sales/s1/path"},
		{"POST", path},
		{"GET", "/api/v1/reservations/" + aliceRes.ID},
		{"DELETE", "/api/v1/reservations/" + aliceRes.ID},
		{"POST", "/api/v1/reservations/" + aliceRes.ID + "/pay"},
		{"GET", "/api/v1/orders"},
	}
	for name, auth := range badUserAuth(t, e) {
		for i, ep := range endpoints {
			t.Run(fmt.Sprintf("%s/%d_%s", name, i, ep.method), func(t *testing.T) {
				e.refused(t, http.StatusUnauthorized, seckill.CodeUnauthorized, func() response {
					return e.do(t, ep.method, ep.path, auth, nil)
				})
			})
		}
	}
}

// TestUserAuthExpiresOnClock checks that expiry is judged by the injected clock: a token valid
// now is refused once the clock passes exp (plus the 5 s leeway).
func TestUserAuthExpiresOnClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok, err := httpapi.MintToken([]byte(authSecret), "carol", e.clock.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", "Bearer "+tok, nil), http.StatusOK)
	e.clock.Advance(time.Minute + 4*time.Second) // inside the leeway
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", "Bearer "+tok, nil), http.StatusOK)
	e.clock.Advance(2 * time.Second)
	wantProblem(t, e.do(t, "GET", "/api/v1/orders", "Bearer "+tok, nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
	// The scheme is case-insensitive (RFC 9110 §11.1).
	fresh, _ := httpapi.MintToken([]byte(authSecret), "carol", e.clock.Now(), time.Minute)
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", "bearer "+fresh, nil), http.StatusOK)
}

// TestAdminAuth: each admin endpoint is 401 without a bearer token, 403 with a user's JWT or a
// wrong admin token, and changes nothing either way; the right token works.
func TestAdminAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createSale(t, "s1", map[string]any{"stock": 1, "queue_limit": 5})
	e.mustBuy(t, "alice", "s1", http.StatusCreated)
	e.mustBuy(t, "bob", "s1", http.StatusAccepted)
	newSale := map[string]any{"id": "s2", "price_cents": 1, "stock": 1}
	endpoints := []struct {
		name, method, path string
		body               any
	}{
		{"create", "POST", "/api/v1/sales", newSale},
		{"audit", "GET", "/api/v1/sales/s1/audit", nil},
		{"stock", "POST", "/api/v1/sales/s1/stock", map[string]int{"add": 5}},
		{"close", "POST", "/api/v1/sales/s1/close", nil},
	}
	cases := []struct {
		name   string
		auth   string
		status int
		code   seckill.Code
	}{
		{"missing", "", http.StatusUnauthorized, seckill.CodeUnauthorized},
		{"basic", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+adminToken)), http.StatusUnauthorized, seckill.CodeUnauthorized},
		{"user jwt", e.user(t, "alice"), http.StatusForbidden, seckill.CodeForbidden},
		{"wrong token", "Bearer wrong-admin-token", http.StatusForbidden, seckill.CodeForbidden},
		{"token prefix", "Bearer " + adminToken[:len(adminToken)-1], http.StatusForbidden, seckill.CodeForbidden},
		{"token plus", "Bearer " + adminToken + "x", http.StatusForbidden, seckill.CodeForbidden},
	}
	for _, c := range cases {
		for _, ep := range endpoints {
			t.Run(c.name+"/"+ep.name, func(t *testing.T) {
				e.refused(t, c.status, c.code, func() response { return e.do(t, ep.method, ep.path, c.auth, ep.body) })
			})
		}
	}
	// And with the admin token each one works.
	wantStatus(t, e.do(t, "POST", "/api/v1/sales", admin(), newSale), http.StatusCreated)
	wantStatus(t, e.do(t, "GET", "/api/v1/sales/s1/audit", admin(), nil), http.StatusOK)
	wantStatus(t, e.do(t, "POST", "/api/v1/sales/s1/stock", admin(), map[string]int{"add": 1}), http.StatusOK)
	wantStatus(t, e.do(t, "POST", "/api/v1/sales/s1/close", admin(), nil), http.StatusOK)
}

// TestUnconfiguredSecrets: a Server built without an admin token or an auth secret must not
// let anyone in. An empty HMAC key is public knowledge (anyone can sign with it), and an empty
// admin token would match a bearer token that trims to nothing (a non-breaking space survives
// net/http's header trimming but not strings.TrimSpace). cmd/seckill refuses to start without
// secrets, but httpapi.New is exported and must be safe on its own, as payment.Verify is.
func TestUnconfiguredSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withServer(func(c *httpapi.Config) { c.AdminToken = ""; c.AuthSecret = nil }))
	sale := map[string]any{"id": "s1", "price_cents": 1, "stock": 1}
	for _, auth := range []string{"Bearer \u00a0", "Bearer \u3000", "Bearer \u0085"} {
		e.refused(t, http.StatusForbidden, seckill.CodeForbidden, func() response {
			return e.do(t, "POST", "/api/v1/sales", auth, sale)
		})
	}
	wantProblem(t, e.do(t, "POST", "/api/v1/sales", "Bearer anything", sale), http.StatusForbidden, seckill.CodeForbidden)
	emptyKey := "Bearer " + rawJWT(map[string]any{"alg": "HS256", "typ": "JWT"},
		map[string]any{"sub": "mallory", "exp": e.clock.Now().Add(time.Hour).Unix()}, []byte{})
	wantProblem(t, e.do(t, "GET", "/api/v1/orders", emptyKey, nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
}
