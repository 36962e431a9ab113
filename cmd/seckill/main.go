// Command seckill runs the flash-sale backend: `serve` the HTTP API, `demo` a complete flash
// sale in process, `version`. See the README for configuration.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
