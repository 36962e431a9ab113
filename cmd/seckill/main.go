// Command seckill runs the flash-sale backend: `serve` the HTTP API, `worker` the Redis
// engine's stream consumers without HTTP, `bench` a crowd of buyers against running instances
// (and `bench strategies`), `demo` a complete flash sale in process, `events` the event
// export, `stripe-rehearse` a Stripe stand-in for a rehearsal on a laptop, `version`.
// `seckill <command> -h` lists a command's flags; the README has the configuration.
package main

import (
	"context"
	"os"
)

func main() {
	testDataRace()
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
