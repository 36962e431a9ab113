package main

import (
	"strings"
	"testing"
)

// TestOIDCConfigErrors: an issuer without an audience, or an audience or login URL without an
// issuer, stops the start with a message naming the missing setting; no issuer is no OIDC.
func TestOIDCConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  oidcConfig
		want string // "" for no error
	}{
		{oidcConfig{UserClaim: "sub"}, ""},
		{oidcConfig{Issuer: "https://id.example.com", UserClaim: "sub"}, "SECKILL_OIDC_AUDIENCE"},
		{oidcConfig{Audience: "shop", UserClaim: "sub"}, "SECKILL_OIDC_ISSUER"},
		{oidcConfig{LoginURL: "https://shop.example.com/login", UserClaim: "sub"}, "SECKILL_OIDC_ISSUER"},
		{oidcConfig{Issuer: "http://id.example.com", Audience: "shop", UserClaim: "sub"}, "https"},
	} {
		o, err := tc.cfg.newOIDC(discardLogger())
		switch {
		case tc.want == "" && (err != nil || o != nil):
			t.Errorf("%+v: %v, %v; want no OIDC and no error", tc.cfg, o, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one naming %s", tc.cfg, err, tc.want)
		}
	}
}
