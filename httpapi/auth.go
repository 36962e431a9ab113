package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/seckill-go/seckill"
)

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(h[len(p):]), true
}

// userOf authenticates a user: a JWT signed with HS256 and the auth secret, whose `sub` is a
// valid user id (exp and nbf are checked when present), or, with OIDC configured, a JWT signed
// by the shop's provider with a public-key algorithm (oidc.go). The header's alg decides which
// of the two verifies a token, and each accepts only its own algorithms: an HS256 token is never
// checked against a public key, nor an RS256 one against the secret.
func (s *Server) userOf(r *http.Request) (string, error) {
	tok, ok := bearer(r)
	if !ok {
		return "", seckill.Errorf(seckill.CodeUnauthorized, "missing bearer token")
	}
	if s.cfg.OIDC != nil && s.cfg.OIDC.takes(tok) {
		return s.cfg.OIDC.user(r.Context(), tok)
	}
	if len(s.cfg.AuthSecret) == 0 { // anyone can sign with an empty key
		return "", seckill.Errorf(seckill.CodeUnauthorized, "user authentication is not configured")
	}
	now := s.now()
	// Tokens of the usual shape are verified without encoding/json (jwtfast.go); whatever the
	// fast path does not accept, golang-jwt decides, as it always did.
	if user, ok := fastUser(tok, s.cfg.AuthSecret, now); ok {
		return user, nil
	}
	return parseUser(tok, s.cfg.AuthSecret, now)
}

// parseUser verifies tok with golang-jwt: HS256 with secret only, exp and nbf checked against
// now when present, with jwtLeeway; the subject must be a valid user id.
func parseUser(tok string, secret []byte, now time.Time) (string, error) {
	claims := jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithTimeFunc(func() time.Time { return now }), jwt.WithLeeway(jwtLeeway))
	if err != nil {
		return "", seckill.Errorf(seckill.CodeUnauthorized, "invalid token: %v", err)
	}
	if !seckill.ValidID(claims.Subject) {
		return "", seckill.Errorf(seckill.CodeUnauthorized, "token subject must be 1–64 of [A-Za-z0-9_.-]")
	}
	return claims.Subject, nil
}

// checkAdmin compares the bearer token with the admin token in constant time. An empty token
// (or an unconfigured admin token) never matches: a header such as "Bearer \u00a0" trims to "".
func (s *Server) checkAdmin(r *http.Request) error {
	tok, ok := bearer(r)
	if !ok {
		return seckill.Errorf(seckill.CodeUnauthorized, "missing bearer token")
	}
	if tok == "" || s.cfg.AdminToken == "" {
		return seckill.Errorf(seckill.CodeForbidden, "admin token required")
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) != 1 {
		return seckill.Errorf(seckill.CodeForbidden, "admin token required")
	}
	return nil
}

// MintToken signs a user token valid for ttl, as the dev endpoint and the load generator do.
func MintToken(secret []byte, user string, now time.Time, ttl time.Duration) (string, error) {
	claims := jwt.RegisteredClaims{
		Subject:   user,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}
