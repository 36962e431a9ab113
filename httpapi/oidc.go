package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/seckill-go/seckill"
)

// The shop's own sign-in (docs/SECURITY.md, Sign-in): user tokens signed by the shop's OpenID
// Connect provider with a public-key algorithm, verified against the provider's JWKS. The keys
// are found by discovery (<issuer>/.well-known/openid-configuration -> jwks_uri) and kept in
// memory; keyfunc matches a token's kid and alg to them, jwkset parses them. What this file owns
// is when the provider is asked: a request whose kid is known never waits for the network; an
// unknown kid refreshes the keys at most once per MinRefresh (all the requests that arrive
// meanwhile share that one fetch), bounded by FetchTimeout; keys older than MaxAge are
// refreshed in the background; and a provider that cannot be reached is 503, not 401.

// oidcMethods are the algorithms accepted from the provider: public-key signatures only. HS256
// tokens never reach the provider's keys (userOf routes by alg), and this list, given to
// golang-jwt, refuses any other alg even if one did.
var oidcMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Bounds of what the provider can make us hold (docs/SECURITY.md, Limits).
const (
	// maxOIDCDocBytes bounds a discovery document or JWKS read from the provider; a larger one
	// is a failed fetch.
	maxOIDCDocBytes = 256 << 10
	// maxJWKSKeys bounds the keys kept: the first ones of the JWKS. Unknown kids are never
	// remembered, so a flood of made-up kids grows nothing.
	maxJWKSKeys = 100
)

// Defaults of OIDCConfig.
const (
	DefaultOIDCFetchTimeout = 2 * time.Second
	DefaultOIDCMinRefresh   = 10 * time.Second
	DefaultOIDCMaxAge       = time.Hour
)

// errKeysUnavailable marks a failure to get the provider's keys: 503, not the token's fault.
var errKeysUnavailable = errors.New("the sign-in provider's keys cannot be fetched")

// OIDCConfig configures the verification of the shop's own sign-in tokens.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL: tokens must carry exactly this `iss`, and discovery
	// reads <Issuer without its trailing slash>/.well-known/openid-configuration. https, or
	// http on a loopback host (a local stand-in).
	Issuer string
	// Audience must be one of a token's `aud` values: for ID tokens, the client id the shop
	// registered for the storefront. Required.
	Audience string
	// UserClaim is the claim that holds the user id (default "sub"); its value must be a valid
	// user id (seckill.ValidID), else the token is refused.
	UserClaim string
	// LoginURL is where the storefront sends buyers to sign in; default the discovery
	// document's authorization_endpoint.
	LoginURL string
	// Client fetches discovery and the JWKS; default a plain http.Client (FetchTimeout bounds
	// each fetch in any case).
	Client *http.Client
	// FetchTimeout bounds one refresh of the keys (discovery, if not done yet, and the JWKS).
	FetchTimeout time.Duration
	// MinRefresh is how often requests may make us refresh the keys (unknown kid, keys missing
	// or old): one refresh, then the next after MinRefresh at the earliest.
	MinRefresh time.Duration
	// MaxAge is how long fetched keys are used before a request refreshes them in the
	// background (a key the provider withdrew is then no longer accepted).
	MaxAge time.Duration
	Clock  seckill.Clock
	Logger *slog.Logger
}

// OIDC verifies user tokens issued by the shop's OpenID Connect provider. Build it with NewOIDC;
// Close it when done (it may have a background refresh running).
type OIDC struct {
	cfg    OIDCConfig
	keys   jwkset.Storage  // the keys of the last JWKS fetched
	kf     keyfunc.Keyfunc // matches a token's kid and alg to them
	parser *jwt.Parser

	mu       sync.Mutex
	limiter  *rate.Limiter // refreshes triggered by requests
	fetching chan struct{} // closed when the refresh in flight ends; nil when none
	lastErr  error         // outcome of the last refresh; errNotFetched before the first
	loadedAt time.Time     // when the keys were last fetched
	jwksURL  string        // from discovery
	loginURL string        // cfg.LoginURL, or discovery's authorization_endpoint
	bg       sync.WaitGroup
}

var errNotFetched = fmt.Errorf("%w: not fetched yet", errKeysUnavailable)

// NewOIDC checks cfg and returns a verifier. It does not reach the provider: Refresh does, and
// so does the first token that needs the keys.
func NewOIDC(cfg OIDCConfig) (*OIDC, error) {
	if err := checkProviderURL("issuer", cfg.Issuer); err != nil {
		return nil, err
	}
	if cfg.Audience == "" {
		return nil, errors.New("an OIDC issuer needs an audience (the client id its tokens are issued to)")
	}
	if cfg.LoginURL != "" {
		if err := checkProviderURL("login URL", cfg.LoginURL); err != nil {
			return nil, err
		}
	}
	if cfg.UserClaim == "" {
		cfg.UserClaim = "sub"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultOIDCFetchTimeout
	}
	if cfg.MinRefresh <= 0 {
		cfg.MinRefresh = DefaultOIDCMinRefresh
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultOIDCMaxAge
	}
	if cfg.Clock == nil {
		cfg.Clock = seckill.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	o := &OIDC{
		cfg: cfg, keys: jwkset.NewMemoryStorage(), lastErr: errNotFetched, loginURL: cfg.LoginURL,
		limiter: rate.NewLimiter(rate.Every(cfg.MinRefresh), 1),
	}
	// Keys marked for encryption ("use":"enc") never verify a signature.
	kf, err := keyfunc.New(keyfunc.Options{Storage: oidcKeys{o}, UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		return nil, err
	}
	o.kf = kf
	o.parser = jwt.NewParser(jwt.WithValidMethods(oidcMethods), jwt.WithIssuer(cfg.Issuer), jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(), jwt.WithLeeway(jwtLeeway), jwt.WithTimeFunc(o.now))
	return o, nil
}

// checkProviderURL accepts an absolute https URL, or http on a loopback host: keys fetched over
// plain http from elsewhere could be anyone's.
func checkProviderURL(what, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("OIDC %s %q: want an absolute https URL", what, raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "localhost" || net.ParseIP(h).IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("OIDC %s %q: want https (plain http only on a loopback host)", what, raw)
}

func (o *OIDC) now() time.Time { return o.cfg.Clock.Now() }

// Close waits for a background refresh, if one runs; it returns nil.
func (o *OIDC) Close() error {
	o.bg.Wait()
	return nil
}

// Refresh fetches the keys now (and discovery, the first time), whatever MinRefresh says: at
// start, so that the first buyers do not wait for it.
func (o *OIDC) Refresh(ctx context.Context) error { return o.refresh(ctx, false) }

// refresh fetches the keys, or joins the fetch in flight. limited: only if the limiter allows
// one now; otherwise the outcome of the last fetch is returned (nil: the keys are current).
func (o *OIDC) refresh(ctx context.Context, limited bool) error {
	o.mu.Lock()
	if ch := o.fetching; ch != nil {
		o.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", errKeysUnavailable, ctx.Err())
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.lastErr
	}
	if limited && !o.limiter.AllowN(o.now(), 1) {
		defer o.mu.Unlock()
		return o.lastErr
	}
	ch := make(chan struct{})
	o.fetching = ch
	jwksURL := o.jwksURL
	o.mu.Unlock()

	// The fetch has its own bound, not the caller's context: the requests that joined it wait
	// for its outcome, not for the first caller's patience.
	fctx, cancel := context.WithTimeout(context.Background(), o.cfg.FetchTimeout)
	defer cancel()
	disc, set, err := o.fetch(fctx, jwksURL)
	if err == nil {
		err = o.keys.KeyReplaceAll(fctx, set)
	}
	if err != nil {
		o.cfg.Logger.Warn("oidc: cannot fetch the sign-in keys", "issuer", o.cfg.Issuer, "err", err)
		err = fmt.Errorf("%w: %v", errKeysUnavailable, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastErr = err
	if err == nil {
		o.loadedAt = o.now()
	}
	if disc.JWKSURI != "" {
		o.jwksURL = disc.JWKSURI
		if o.cfg.LoginURL == "" {
			o.loginURL = disc.AuthorizationEndpoint
		}
	}
	o.fetching = nil
	close(ch)
	return err
}

// discovery is what seckill reads of the provider's discovery document.
type discovery struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
}

// fetch reads discovery (when jwksURL is not known yet) and the JWKS. disc is set when
// discovery was read and checked, even if the JWKS then failed.
func (o *OIDC) fetch(ctx context.Context, jwksURL string) (disc discovery, keys []jwkset.JWK, err error) {
	if jwksURL == "" {
		u := strings.TrimSuffix(o.cfg.Issuer, "/") + "/.well-known/openid-configuration"
		if err := o.getJSON(ctx, u, &disc); err != nil {
			return discovery{}, nil, err
		}
		// OpenID Connect Discovery 1.0, 4.3: the document must name the issuer it was read from.
		if disc.Issuer != o.cfg.Issuer {
			return discovery{}, nil, fmt.Errorf("discovery at %s names issuer %q, not %q", u, disc.Issuer, o.cfg.Issuer)
		}
		if err := checkProviderURL("jwks_uri", disc.JWKSURI); err != nil {
			return discovery{}, nil, err
		}
		if disc.AuthorizationEndpoint != "" && o.cfg.LoginURL == "" {
			if err := checkProviderURL("authorization_endpoint", disc.AuthorizationEndpoint); err != nil {
				return discovery{}, nil, err
			}
		}
		jwksURL = disc.JWKSURI
	}
	var set jwkset.JWKSMarshal
	if err := o.getJSON(ctx, jwksURL, &set); err != nil {
		return disc, nil, err
	}
	for _, m := range set.Keys {
		if len(keys) == maxJWKSKeys {
			break
		}
		// Public keys only: a private member in a published JWKS is the provider's mistake, and
		// never needed to verify.
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			continue // an unsupported or malformed key: the others still serve
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return disc, nil, fmt.Errorf("the JWKS at %s has no usable key", jwksURL)
	}
	return disc, keys, nil
}

// getJSON GETs u and decodes its JSON answer into v, reading at most maxOIDCDocBytes.
func (o *OIDC) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxOIDCDocBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if len(b) > maxOIDCDocBytes {
		return fmt.Errorf("GET %s: answer over %d bytes", u, maxOIDCDocBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// staleCheck starts a background refresh when the keys are older than MaxAge (at most once per
// MinRefresh): the request that noticed does not wait for it.
func (o *OIDC) staleCheck() {
	o.mu.Lock()
	stale := o.fetching == nil && o.now().Sub(o.loadedAt) > o.cfg.MaxAge && o.limiter.AllowN(o.now(), 1)
	if stale {
		o.bg.Add(1)
	}
	o.mu.Unlock()
	if stale {
		go func() {
			defer o.bg.Done()
			_ = o.refresh(context.Background(), false)
		}()
	}
}

// oidcKeys is the key storage keyfunc reads: the fetched keys, refreshed as OIDC's policy says
// when a kid is not among them.
type oidcKeys struct{ o *OIDC }

var _ jwkset.Storage = oidcKeys{}

func (k oidcKeys) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	jwk, err := k.o.keys.KeyRead(ctx, kid)
	if err == nil {
		k.o.staleCheck()
		return jwk, nil
	}
	if !errors.Is(err, jwkset.ErrKeyNotFound) {
		return jwk, err
	}
	if err := k.o.refresh(ctx, true); err != nil {
		return jwkset.JWK{}, err
	}
	return k.o.keys.KeyRead(ctx, kid)
}

// KeyReadAll serves a token without a kid: every key is tried.
func (k oidcKeys) KeyReadAll(ctx context.Context) ([]jwkset.JWK, error) {
	all, err := k.o.keys.KeyReadAll(ctx)
	if err == nil && len(all) == 0 {
		if err := k.o.refresh(ctx, true); err != nil {
			return nil, err
		}
		return k.o.keys.KeyReadAll(ctx)
	}
	k.o.staleCheck()
	return all, err
}

// The rest of jwkset.Storage is never called by keyfunc; the keys change only by refresh.
var errReadOnlyKeys = errors.New("the provider's keys are read-only")

func (oidcKeys) KeyDelete(context.Context, string) (bool, error) { return false, errReadOnlyKeys }
func (oidcKeys) KeyReplaceAll(context.Context, []jwkset.JWK) error {
	return errReadOnlyKeys
}
func (oidcKeys) KeyWrite(context.Context, jwkset.JWK) error { return errReadOnlyKeys }
func (k oidcKeys) JSON(ctx context.Context) (json.RawMessage, error) {
	return k.o.keys.JSONPublic(ctx)
}
func (k oidcKeys) JSONPublic(ctx context.Context) (json.RawMessage, error) {
	return k.o.keys.JSONPublic(ctx)
}
func (k oidcKeys) JSONPrivate(ctx context.Context) (json.RawMessage, error) {
	return k.o.keys.JSONPublic(ctx)
}
func (k oidcKeys) JSONWithOptions(ctx context.Context, m jwkset.JWKMarshalOptions, v jwkset.JWKValidateOptions) (json.RawMessage, error) {
	m.Private = false
	return k.o.keys.JSONWithOptions(ctx, m, v)
}
func (k oidcKeys) Marshal(ctx context.Context) (jwkset.JWKSMarshal, error) {
	return k.o.keys.MarshalWithOptions(ctx, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
}
func (k oidcKeys) MarshalWithOptions(ctx context.Context, m jwkset.JWKMarshalOptions, v jwkset.JWKValidateOptions) (jwkset.JWKSMarshal, error) {
	m.Private = false
	return k.o.keys.MarshalWithOptions(ctx, m, v)
}

// takes reports whether tok is for this verifier: its header's alg is a public-key algorithm.
// Only a routing decision: whichever verifier gets a token checks its alg again, so a header
// read differently here can only be refused, never accepted with the other's key.
func (o *OIDC) takes(tok string) bool {
	head, _, ok := strings.Cut(tok, ".")
	if !ok || len(head) > 1024 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var h map[string]any
	if json.Unmarshal(b, &h) != nil {
		return false
	}
	alg, _ := h["alg"].(string)
	return slices.Contains(oidcMethods, alg)
}

// user verifies tok against the provider's keys (signature, iss, aud, exp required, nbf) and
// returns its user claim. A provider that cannot be reached is 503 unavailable.
func (o *OIDC) user(ctx context.Context, tok string) (string, error) {
	claims := jwt.MapClaims{}
	// The request's context: a buyer who leaves stops waiting for a refresh.
	if _, err := o.parser.ParseWithClaims(tok, claims, o.kf.KeyfuncCtx(ctx)); err != nil {
		if errors.Is(err, errKeysUnavailable) {
			return "", seckill.Errorf(seckill.CodeUnavailable, "%v", errKeysUnavailable)
		}
		return "", seckill.Errorf(seckill.CodeUnauthorized, "invalid token: %v", err)
	}
	user, _ := claims[o.cfg.UserClaim].(string)
	if !seckill.ValidID(user) {
		return "", seckill.Errorf(seckill.CodeUnauthorized, "token claim %q must be a user id: 1–64 of [A-Za-z0-9_.-]", o.cfg.UserClaim)
	}
	return user, nil
}

// SignIn is what the storefront needs to sign buyers in (GET /api/v1/signin).
type SignIn struct {
	// LoginURL is where buyers sign in; empty without OIDC.
	LoginURL string `json:"login_url,omitempty"`
	// ClientID is sent as client_id (the OIDC audience).
	ClientID string `json:"client_id,omitempty"`
	// UserClaim names the user id's claim in the returned token.
	UserClaim string `json:"user_claim"`
	// DevTokens: POST /api/v1/dev/token hands out tokens (--dev).
	DevTokens bool `json:"dev_tokens"`
}

// signIn answers the storefront's sign-in settings. The login URL may come from discovery: when
// it is not known yet, one refresh is tried (as MinRefresh allows), else 503.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) error {
	out := SignIn{UserClaim: "sub", DevTokens: s.cfg.Dev}
	if o := s.cfg.OIDC; o != nil {
		o.mu.Lock()
		login := o.loginURL
		o.mu.Unlock()
		if login == "" {
			if err := o.refresh(r.Context(), true); err != nil {
				return seckill.Errorf(seckill.CodeUnavailable, "%v", errKeysUnavailable)
			}
			o.mu.Lock()
			login = o.loginURL
			o.mu.Unlock()
		}
		if login == "" {
			return seckill.Errorf(seckill.CodeUnavailable, "the sign-in provider names no authorization_endpoint: set the login URL")
		}
		out.LoginURL, out.ClientID, out.UserClaim = login, o.cfg.Audience, o.cfg.UserClaim
	}
	return writeJSON(w, http.StatusOK, out)
}
