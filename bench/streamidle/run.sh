#!/usr/bin/env bash
# run.sh: what idle sales cost the stream readers (consumer + export), two commits side by
# side in one run (docs/BENCHMARKS.md "Idle sales and the stream readers").
#
#   bench/streamidle/run.sh BASE [HEAD] [SALES] [SINKS] [SEGMENTS]
#
# Builds this directory's program against each commit (copied into BASE's tree, so that BASE
# needs only the engine's public API) and runs each on a private redis-server on :6391 (no
# persistence, started fresh for each run, so that INFO's figures are the program's own).
# STREAMIDLE_FLAGS adds flags to both runs (e.g. "-settle 70s -window 20s").
set -euo pipefail

base=${1:?usage: bench/streamidle/run.sh BASE [HEAD] [SALES] [SINKS] [SEGMENTS]}
head=${2:-HEAD}
sales=${3:-1000}
sinks=${4:-1}
segments=${5:-1}
port=6391
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_init streamidle

# build REF: this directory's program (HEAD's main.go) against REF.
build() {
  mkdir -p "$work/$1/bench/streamidle"
  cp "$repo/bench/streamidle/main.go" "$work/$1/bench/streamidle/main.go"
  (cd "$work/$1" && go build -o "$work/streamidle-$1" ./bench/streamidle)
}
bench_checkout "$base" "$head" build

for ref in base head; do
  bench_redis $port "$work/redis-$ref.log" --maxclients 20000
  "$work/streamidle-$ref" -redis "redis://127.0.0.1:$port/0" -sales "$sales" -sinks "$sinks" -segments "$segments" -label "$ref" ${STREAMIDLE_FLAGS:-}
  bench_stop "$redis_pid"
done
