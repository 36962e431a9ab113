#!/usr/bin/env bash
# run.sh: recovery after a FLUSHALL on two commits, side by side in one run (docs/BENCHMARKS.md
# "Recovery after a FLUSHALL").
#
#   bench/recovery/run.sh BASE [HEAD] [ROUNDS]
#
# Runs redisinv's BenchmarkRecovery (1 000 sales in SQLite and a private redis-server, the
# sweeper running, FLUSHALL) on BASE and HEAD alternately, ROUNDS times each. BASE gets HEAD's
# benchmark file, which uses only what the engine had before recovery by demand. Needs
# redis-server on PATH; uses loopback only.
set -euo pipefail

base=${1:?usage: bench/recovery/run.sh BASE [HEAD] [ROUNDS]}
head=${2:-HEAD}
rounds=${3:-2}
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_init recovery

# build REF: redisinv's test binary with HEAD's BenchmarkRecovery.
build() {
  cp "$repo/redisinv/recovery_bench_test.go" "$work/$1/redisinv/"
  (cd "$work/$1" && go test -c -o "$work/redisinv-$1.test" ./redisinv/)
}
bench_checkout "$base" "$head" build

for round in $(seq 1 "$rounds"); do
  for ref in base head; do
    (cd "$work/$ref/redisinv" && "$work/redisinv-$ref.test" -test.run '^$' -test.bench BenchmarkRecovery \
      -test.benchtime 1x 2>/dev/null) | grep '^BenchmarkRecovery' | sed "s/^/round $round $ref: /"
  done
done
