package httpapi_test

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/internal/testkit/oidctest"
)

// newOIDCEnv is an env whose server also accepts the tokens of the stand-in provider p, on the
// env's clock (tokens are issued on it too: oidcToken). tweak adjusts the verifier's settings.
func newOIDCEnv(t *testing.T, p *oidctest.Provider, tweak func(*httpapi.OIDCConfig)) (*env, *httpapi.OIDC) {
	t.Helper()
	var o *httpapi.OIDC
	e := newEnv(t, withServer(func(c *httpapi.Config) {
		cfg := httpapi.OIDCConfig{Issuer: p.URL, Audience: oidctest.Audience, Clock: c.Clock}
		if tweak != nil {
			tweak(&cfg)
		}
		var err error
		if o, err = httpapi.NewOIDC(cfg); err != nil {
			t.Fatal(err)
		}
		c.OIDC = o
	}))
	t.Cleanup(func() { _ = o.Close() }) // registered after the env's: runs before the server stops
	return e, o
}

// startProvider starts a stand-in provider for the test.
func startProvider(t *testing.T, alg string) *oidctest.Provider {
	p := oidctest.Start(alg)
	t.Cleanup(p.Close)
	return p
}

// oidcAuth is an Authorization header with an ID token for user signed by k, issued on the
// env's clock; edit changes its claims.
func oidcAuth(e *env, p *oidctest.Provider, k *oidctest.Key, user string, edit func(jwt.MapClaims)) string {
	c := p.Claims(user, e.clock.Now())
	if edit != nil {
		edit(c)
	}
	return "Bearer " + k.Sign(c)
}

// TestOIDCAlgorithms: tokens of the shop's provider signed with RS256, ES256 or EdDSA sign a
// buyer in for the whole purchase (path, buy, reservation, orders). On the code before OIDC
// support every one of them was 401: only HS256 with the shared secret was accepted.
func TestOIDCAlgorithms(t *testing.T) {
	t.Parallel()
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			p := startProvider(t, alg)
			e, _ := newOIDCEnv(t, p, nil)
			e.createSale(t, "s1", nil)
			auth := oidcAuth(e, p, p.SigningKey(), "alice", nil)
			var path struct{ Path string }
			r := e.do(t, "GET", "/api/v1/sales/s1/path", auth, nil)
			wantStatus(t, r, http.StatusOK)
			r.decode(t, &path)
			r = e.do(t, "POST", path.Path, auth, map[string]any{"quantity": 1}, "Idempotency-Key", "k1")
			wantStatus(t, r, http.StatusCreated)
			var res seckill.Reservation
			r.decode(t, &res)
			if res.UserID != "alice" {
				t.Fatalf("reservation of %q, want alice", res.UserID)
			}
			wantStatus(t, e.do(t, "GET", "/api/v1/reservations/"+res.ID, auth, nil), http.StatusOK)
			// The same user through the shared secret is the same buyer.
			wantStatus(t, e.do(t, "GET", "/api/v1/reservations/"+res.ID, e.user(t, "alice"), nil), http.StatusOK)
		})
	}
}

// TestOIDCBadTokens: every token of the provider's kind that must not sign anyone in is 401
// unauthorized and changes nothing, a valid one beside them is accepted, and HS256 tokens of
// the shared secret still work next to the provider's.
func TestOIDCBadTokens(t *testing.T) {
	t.Parallel()
	p := startProvider(t, "RS256")
	e, _ := newOIDCEnv(t, p, nil)
	e.createSale(t, "s1", nil)
	k := p.SigningKey()
	stranger := oidctest.NewKey("RS256")
	stranger.KID = k.KID // the right kid, the wrong key
	unpublished := oidctest.NewKey("ES256")
	now := e.clock.Now()
	der, err := x509.MarshalPKIXPublicKey(k.Signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	claims := func(sub string) map[string]any { return map[string]any(p.Claims(sub, now)) }
	hs256kid := map[string]any{"alg": "HS256", "typ": "JWT", "kid": k.KID}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, p.Claims("alice", now)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	bad := map[string]string{
		"wrong issuer":   oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { c["iss"] = p.URL + "/other" }),
		"no issuer":      oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { delete(c, "iss") }),
		"wrong audience": oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { c["aud"] = "another-client" }),
		"no audience":    oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { delete(c, "aud") }),
		"expired":        oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }),
		"no exp":         oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { delete(c, "exp") }),
		"not yet valid":  oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }),
		"sub missing":    oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { delete(c, "sub") }),
		"sub invalid":    oidcAuth(e, p, k, "auth0|alice", nil),
		"sub too long":   oidcAuth(e, p, k, strings.Repeat("a", 65), nil),
		"sub a number":   oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { c["sub"] = 42 }),
		"other key":      oidcAuth(e, p, stranger, "alice", nil),
		"unknown kid":    oidcAuth(e, p, unpublished, "alice", nil),
		"alg none":       "Bearer " + none,
		"alg none, kid":  "Bearer " + rawJWT(map[string]any{"alg": "none", "kid": k.KID}, claims("alice"), nil),
		// Alg confusion: HMAC keyed with the provider's public key, which anyone can fetch.
		"HS256 with the public key (PEM)": "Bearer " + rawJWT(hs256kid, claims("alice"), pemKey),
		"HS256 with the public key (DER)": "Bearer " + rawJWT(hs256kid, claims("alice"), der),
		// And the other way: an RS256 header over an HMAC with the shared secret.
		"RS256 header, HMAC of the secret": "Bearer " + rawJWT(map[string]any{"alg": "RS256", "kid": k.KID}, claims("alice"), []byte(authSecret)),
	}
	for name, auth := range bad {
		t.Run(name, func(t *testing.T) {
			e.refused(t, http.StatusUnauthorized, seckill.CodeUnauthorized, func() response {
				return e.do(t, "GET", "/api/v1/sales/s1/path", auth, nil)
			})
		})
	}
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, k, "alice", nil), nil), http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", e.user(t, "bob"), nil), http.StatusOK)
}

// TestOIDCUserClaim: with another user claim, its value is the user id, and it must be one.
func TestOIDCUserClaim(t *testing.T) {
	t.Parallel()
	p := startProvider(t, "ES256")
	e, _ := newOIDCEnv(t, p, func(c *httpapi.OIDCConfig) { c.UserClaim = "shop_uid" })
	e.createSale(t, "s1", nil)
	k := p.SigningKey()
	ok := oidcAuth(e, p, k, "auth0|ignored", func(c jwt.MapClaims) { c["shop_uid"] = "u-123" })
	e.track(e.mustBuyAs(t, ok, "s1").ID, "u-123")
	for name, auth := range map[string]string{
		"claim missing": oidcAuth(e, p, k, "alice", nil),
		"claim invalid": oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { c["shop_uid"] = "a b" }),
		"claim empty":   oidcAuth(e, p, k, "alice", func(c jwt.MapClaims) { c["shop_uid"] = "" }),
	} {
		t.Run(name, func(t *testing.T) {
			e.refused(t, http.StatusUnauthorized, seckill.CodeUnauthorized, func() response {
				return e.do(t, "GET", "/api/v1/sales/s1/path", auth, nil)
			})
		})
	}
}

// mustBuyAs buys one unit of saleID with the Authorization header auth.
func (e *env) mustBuyAs(t *testing.T, auth, saleID string) seckill.Reservation {
	t.Helper()
	r := e.do(t, "GET", "/api/v1/sales/"+saleID+"/path", auth, nil)
	wantStatus(t, r, http.StatusOK)
	var path struct{ Path string }
	r.decode(t, &path)
	r = e.do(t, "POST", path.Path, auth, map[string]any{"quantity": 1}, "Idempotency-Key", "buy-"+saleID)
	wantStatus(t, r, http.StatusCreated)
	var res seckill.Reservation
	r.decode(t, &res)
	return res
}

// TestOIDCRotation: the provider replaces its key; the first token with the new kid refreshes
// the keys once and is accepted, and the withdrawn key is no longer.
func TestOIDCRotation(t *testing.T) {
	t.Parallel()
	p := startProvider(t, "RS256")
	e, o := newOIDCEnv(t, p, nil)
	if err := o.Refresh(t.Context()); err != nil { // as serve does at start
		t.Fatal(err)
	}
	old := p.SigningKey()
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, old, "alice", nil), nil), http.StatusOK)
	before := p.JWKSFetches()
	next := p.Rotate("ES256")
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, next, "alice", nil), nil), http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, next, "bob", nil), nil), http.StatusOK)
	if got := p.JWKSFetches() - before; got != 1 {
		t.Fatalf("the rotation cost %d JWKS fetches, want 1", got)
	}
	wantProblem(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, old, "alice", nil), nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
}

// TestOIDCUnknownKidRateLimited: a flood of tokens with made-up kids refreshes the keys once per
// MinRefresh of the clock, not once per token, and each is 401.
func TestOIDCUnknownKidRateLimited(t *testing.T) {
	t.Parallel()
	p := startProvider(t, "EdDSA")
	e, o := newOIDCEnv(t, p, nil)
	if err := o.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := p.JWKSFetches()
	flood := func() {
		for i := range 20 {
			k := oidctest.NewKey("EdDSA")
			k.KID = fmt.Sprintf("made-up-%d", i)
			wantProblem(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, k, "alice", nil), nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
		}
	}
	flood()
	if got := p.JWKSFetches() - before; got != 1 {
		t.Fatalf("20 unknown kids cost %d JWKS fetches, want 1", got)
	}
	e.clock.Advance(httpapi.DefaultOIDCMinRefresh)
	flood()
	if got := p.JWKSFetches() - before; got != 2 {
		t.Fatalf("after MinRefresh, 20 more unknown kids cost %d JWKS fetches in all, want 2", got)
	}
	// Known kids are served all along, from memory.
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, p.SigningKey(), "alice", nil), nil), http.StatusOK)
	if got := p.JWKSFetches() - before; got != 2 {
		t.Fatalf("a known kid fetched the JWKS (%d fetches)", got)
	}
}

// TestOIDCProviderDown: keys that cannot be fetched are 503 unavailable with Retry-After, not
// 401, and the request does not wait beyond FetchTimeout (a JWKS that never answers); a known
// kid never waits for the provider at all.
func TestOIDCProviderDown(t *testing.T) {
	t.Parallel()
	t.Run("never fetched", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t, "RS256")
		e, _ := newOIDCEnv(t, p, nil)
		e.createSale(t, "s1", nil)
		p.SetJWKS(http.StatusInternalServerError, false)
		auth := oidcAuth(e, p, p.SigningKey(), "alice", nil)
		var r response
		e.unchanged(t, func() { r = e.do(t, "GET", "/api/v1/sales/s1/path", auth, nil) })
		wantProblem(t, r, http.StatusServiceUnavailable, seckill.CodeUnavailable)
		if r.Header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
		// Within MinRefresh the provider is not asked again: the last outcome stands.
		before := p.JWKSFetches()
		wantProblem(t, e.do(t, "GET", "/api/v1/orders", auth, nil), http.StatusServiceUnavailable, seckill.CodeUnavailable)
		if p.JWKSFetches() != before {
			t.Fatal("a second request within MinRefresh fetched the JWKS again")
		}
		// Back up, and MinRefresh later: the keys are fetched and the token accepted.
		p.SetJWKS(0, false)
		e.clock.Advance(httpapi.DefaultOIDCMinRefresh)
		wantStatus(t, e.do(t, "GET", "/api/v1/orders", auth, nil), http.StatusOK)
	})
	t.Run("hangs", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t, "ES256")
		// The JWKS never answers until the test ends: the request below returns only because
		// the fetch is bounded.
		e, _ := newOIDCEnv(t, p, func(c *httpapi.OIDCConfig) { c.FetchTimeout = 50 * time.Millisecond })
		p.SetJWKS(0, true)
		wantProblem(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, p.SigningKey(), "alice", nil), nil), http.StatusServiceUnavailable, seckill.CodeUnavailable)
	})
	t.Run("known kid", func(t *testing.T) {
		t.Parallel()
		p := startProvider(t, "EdDSA")
		// With an hour's fetch bound, a request that waited for the hanging JWKS would not
		// return before the test's own timeout.
		e, o := newOIDCEnv(t, p, func(c *httpapi.OIDCConfig) { c.FetchTimeout = time.Hour })
		if err := o.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		p.SetJWKS(0, true)
		before := p.JWKSFetches()
		wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, p.SigningKey(), "alice", nil), nil), http.StatusOK)
		if p.JWKSFetches() != before {
			t.Fatal("a known kid fetched the JWKS")
		}
		p.SetJWKS(0, false) // the keys' background refresh, if any, must end before Close
	})
}

// TestOIDCKeysBounded: only the first 100 keys of a JWKS are kept, and a JWKS over 256 KiB is
// a failed fetch (503), so the provider's answer bounds the memory the keys take.
func TestOIDCKeysBounded(t *testing.T) {
	t.Parallel()
	p := startProvider(t, "EdDSA")
	e, o := newOIDCEnv(t, p, nil)
	keys := make([]*oidctest.Key, 150)
	for i := range keys {
		keys[i] = oidctest.NewKey("EdDSA")
	}
	p.Publish(keys...)
	if err := o.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, keys[99], "alice", nil), nil), http.StatusOK)
	wantProblem(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, keys[100], "alice", nil), nil), http.StatusUnauthorized, seckill.CodeUnauthorized)

	big := make([]*oidctest.Key, 3000) // ~100 bytes of JSON each: over 256 KiB
	for i := range big {
		big[i] = keys[0]
	}
	p.Publish(big...)
	if err := o.Refresh(t.Context()); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("refresh of a JWKS over 256 KiB: %v, want an error about its size", err)
	}
}

// TestOIDCDiscovery: a discovery document that names another issuer is refused (503: the
// operator's configuration, not the buyer's token), and GET /api/v1/signin tells the storefront
// the provider's login URL and client id, or just the dev setting without OIDC.
func TestOIDCDiscovery(t *testing.T) {
	t.Parallel()
	p := startProvider(t, "RS256")
	e, _ := newOIDCEnv(t, p, func(c *httpapi.OIDCConfig) { c.Issuer = strings.Replace(p.URL, "127.0.0.1", "localhost", 1) })
	wantProblem(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, p.SigningKey(), "alice", nil), nil), http.StatusServiceUnavailable, seckill.CodeUnavailable)

	e, _ = newOIDCEnv(t, p, nil)
	var got httpapi.SignIn
	r := e.do(t, "GET", "/api/v1/signin", "", nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &got)
	if want := (httpapi.SignIn{LoginURL: p.URL + "/authorize", ClientID: oidctest.Audience, UserClaim: "sub"}); got != want {
		t.Fatalf("signin = %+v, want %+v", got, want)
	}
	e = newEnv(t, withServer(func(c *httpapi.Config) { c.Dev = true }))
	got = httpapi.SignIn{}
	r = e.do(t, "GET", "/api/v1/signin", "", nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &got)
	if want := (httpapi.SignIn{UserClaim: "sub", DevTokens: true}); got != want {
		t.Fatalf("signin without OIDC = %+v, want %+v", got, want)
	}
}

// TestNewOIDCConfig: settings that cannot work are refused before anything runs.
func TestNewOIDCConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]httpapi.OIDCConfig{
		"no audience":        {Issuer: "https://id.example.com"},
		"plain http":         {Issuer: "http://id.example.com", Audience: "a"},
		"relative issuer":    {Issuer: "/realms/shop", Audience: "a"},
		"login over http":    {Issuer: "https://id.example.com", Audience: "a", LoginURL: "http://shop.example.com/login"},
		"issuer with a user": {Issuer: "https://u:p@id.example.com", Audience: "a"},
	} {
		if _, err := httpapi.NewOIDC(cfg); err == nil {
			t.Errorf("%s: NewOIDC(%+v) accepted", name, cfg)
		}
	}
	for _, iss := range []string{"https://id.example.com/", "http://127.0.0.1:9/realms/x", "http://localhost:8081", "http://[::1]:1"} {
		if _, err := httpapi.NewOIDC(httpapi.OIDCConfig{Issuer: iss, Audience: "a"}); err != nil {
			t.Errorf("NewOIDC(%s): %v", iss, err)
		}
	}
}

// TestOIDCWithdrawnKey: keys older than MaxAge are refreshed in the background by the request
// that notices, which is still answered from memory; once the refresh is done, a key the
// provider withdrew no longer signs anyone in.
func TestOIDCWithdrawnKey(t *testing.T) {
	t.Parallel()
	p := startProvider(t, "RS256")
	e, o := newOIDCEnv(t, p, nil)
	if err := o.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	k := p.SigningKey()
	p.Publish(oidctest.NewKey("RS256")) // k withdrawn
	e.clock.Advance(httpapi.DefaultOIDCMaxAge - time.Second)
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, k, "alice", nil), nil), http.StatusOK)
	o.Close() // no refresh was started: the keys are not old yet
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, k, "alice", nil), nil), http.StatusOK)
	e.clock.Advance(2 * time.Second)
	wantStatus(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, k, "alice", nil), nil), http.StatusOK)
	o.Close() // waits for the background refresh that request started
	wantProblem(t, e.do(t, "GET", "/api/v1/orders", oidcAuth(e, p, k, "alice", nil), nil), http.StatusUnauthorized, seckill.CodeUnauthorized)
}
