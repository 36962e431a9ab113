// Package oidctest is a local stand-in for a shop's OpenID Connect provider, for tests and for
// trying the sign-in by hand: it serves discovery, a JWKS, and a login page that sends the
// browser back to the storefront with a freshly signed ID token in the fragment, as the
// implicit flow (response_type=id_token) does. Nothing of it reaches the network.
package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// Audience is the client id the stand-in issues ID tokens to (their aud).
const Audience = "seckill-storefront"

// Key is a signing key of the provider.
type Key struct {
	KID    string
	Alg    string // RS256, ES256 or EdDSA
	Signer crypto.Signer
}

// NewKey generates a key for alg: RS256 (2048 bits), ES256 (P-256) or EdDSA (Ed25519).
func NewKey(alg string) *Key {
	var s crypto.Signer
	var err error
	switch alg {
	case "RS256":
		s, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		s, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, s, err = ed25519.GenerateKey(rand.Reader)
	default:
		panic("oidctest: unknown alg " + alg)
	}
	if err != nil {
		panic(err)
	}
	return &Key{KID: alg + "-" + rand.Text()[:8], Alg: alg, Signer: s}
}

// Sign signs claims with k, kid in the header.
func (k *Key) Sign(claims jwt.Claims) string {
	t := jwt.NewWithClaims(jwt.GetSigningMethod(k.Alg), claims)
	t.Header["kid"] = k.KID
	s, err := t.SignedString(k.Signer)
	if err != nil {
		panic(err)
	}
	return s
}

// Provider is a running stand-in. Its issuer is URL.
type Provider struct {
	URL string
	srv *httptest.Server

	mu        sync.Mutex
	signing   *Key   // the key new tokens are signed with
	published []*Key // the keys the JWKS lists
	jwksDown  int    // >0: the JWKS answers this status
	hang      chan struct{}

	jwksFetches atomic.Int64
}

// Start starts a provider whose tokens are signed with a new key of alg. Close it when done.
func Start(alg string) *Provider {
	p := &Provider{}
	k := NewKey(alg)
	p.signing, p.published = k, []*Key{k}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.loginPage)
	mux.HandleFunc("POST /authorize", p.login)
	p.srv = httptest.NewServer(mux)
	p.URL = p.srv.URL
	return p
}

// Close releases a hanging JWKS and stops the server.
func (p *Provider) Close() {
	p.SetJWKS(0, false)
	p.srv.Close()
}

// SigningKey is the key new tokens are signed with.
func (p *Provider) SigningKey() *Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signing
}

// Rotate signs new tokens with a new key of alg and publishes only that one: the old key is
// withdrawn, as after a rotation.
func (p *Provider) Rotate(alg string) *Key {
	k := NewKey(alg)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signing, p.published = k, []*Key{k}
	return k
}

// SetJWKS makes the JWKS answer status (0: serve the keys), or, with hang, not answer until
// the next SetJWKS or Close.
func (p *Provider) SetJWKS(status int, hang bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jwksDown = status
	if p.hang != nil {
		close(p.hang)
		p.hang = nil
	}
	if hang {
		p.hang = make(chan struct{})
	}
}

// JWKSFetches is how many times the JWKS was asked for.
func (p *Provider) JWKSFetches() int { return int(p.jwksFetches.Load()) }

// Publish makes the JWKS list exactly keys (the signing key stays).
func (p *Provider) Publish(keys ...*Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.published = keys
}

// Claims are the claims of an ID token for user issued at now, valid for an hour.
func (p *Provider) Claims(user string, now time.Time) jwt.MapClaims {
	return jwt.MapClaims{"iss": p.URL, "aud": Audience, "sub": user, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// Token is an ID token for user issued now, signed with the signing key.
func (p *Provider) Token(user string) string { return p.SigningKey().Sign(p.Claims(user, time.Now())) }

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer": p.URL, "jwks_uri": p.URL + "/jwks", "authorization_endpoint": p.URL + "/authorize",
		"response_types_supported": []string{"id_token"}, "id_token_signing_alg_values_supported": []string{"RS256", "ES256", "EdDSA"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, r *http.Request) {
	p.jwksFetches.Add(1)
	p.mu.Lock()
	down, hang, keys := p.jwksDown, p.hang, p.published
	p.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		return
	}
	if down != 0 {
		http.Error(w, "down", down)
		return
	}
	var set jwkset.JWKSMarshal
	for _, k := range keys {
		j, err := jwkset.NewJWKFromKey(k.Signer.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{
			ALG: jwkset.ALG(k.Alg), KID: k.KID, USE: jwkset.UseSig,
		}})
		if err != nil {
			panic(err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	writeJSON(w, set)
}

var page = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Shop sign-in (stand-in)</title></head><body>
<h1>Sign in to the shop</h1>
<form method="post" action="/authorize">
<input type="hidden" name="redirect_uri" value="{{.RedirectURI}}">
<input type="hidden" name="state" value="{{.State}}">
<input type="hidden" name="nonce" value="{{.Nonce}}">
<label>User <input id="user" name="user" data-testid="oidc-user" autocomplete="username"></label>
<button id="login" data-testid="oidc-login" type="submit">Sign in</button>
</form></body></html>`))

// loginPage is the provider's sign-in form. Like a real provider, it takes the implicit flow's
// parameters; it checks client_id and response_type, and trusts any redirect_uri (a real one
// accepts only the URIs registered for the client).
func (p *Provider) loginPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != Audience || q.Get("response_type") != "id_token" || q.Get("redirect_uri") == "" {
		http.Error(w, "want client_id="+Audience+", response_type=id_token and a redirect_uri", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, map[string]string{"RedirectURI": q.Get("redirect_uri"), "State": q.Get("state"), "Nonce": q.Get("nonce")})
}

// login signs the user in: back to redirect_uri with #id_token=…&state=….
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	claims := p.Claims(r.PostForm.Get("user"), time.Now())
	if n := r.PostForm.Get("nonce"); n != "" {
		claims["nonce"] = n
	}
	frag := url.Values{"id_token": {p.SigningKey().Sign(claims)}, "state": {r.PostForm.Get("state")}}
	http.Redirect(w, r, r.PostForm.Get("redirect_uri")+"#"+frag.Encode(), http.StatusSeeOther)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint("oidctest: ", err))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
