// Command standin runs the stand-in OpenID Connect provider of package oidctest until
// interrupted, for trying the shop's sign-in by hand (docs/SECURITY.md, Sign-in):
//
//	go run ./internal/oidctest/standin            # prints its issuer URL
//	SECKILL_OIDC_ISSUER=<that URL> SECKILL_OIDC_AUDIENCE=seckill-storefront go run ./cmd/seckill serve --dev
//
// -alg chooses the signing algorithm: RS256 (default), ES256 or EdDSA.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/seckill-go/seckill/internal/testkit/oidctest"
)

func main() {
	alg := flag.String("alg", "RS256", "signing algorithm: RS256, ES256 or EdDSA")
	flag.Parse()
	p := oidctest.Start(*alg)
	defer p.Close()
	fmt.Printf("issuer %s\naudience %s\n", p.URL, oidctest.Audience)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	<-stop
}
