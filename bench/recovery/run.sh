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
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/seckill-recovery.XXXXXX)

cleanup() {
  for ref in base head; do git -C "$repo" worktree remove --force "$work/$ref" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

for ref in base head; do
  rev=$([ $ref = base ] && echo "$base" || echo "$head")
  git -C "$repo" worktree add -q --detach "$work/$ref" "$rev"
  cp "$repo/redisinv/recovery_bench_test.go" "$work/$ref/redisinv/"
  (cd "$work/$ref" && go test -c -o "$work/redisinv-$ref.test" ./redisinv/)
  echo "$ref = $(git -C "$repo" rev-parse --short "$rev")"
done

for round in $(seq 1 "$rounds"); do
  for ref in base head; do
    (cd "$work/$ref/redisinv" && "$work/redisinv-$ref.test" -test.run '^$' -test.bench BenchmarkRecovery \
      -test.benchtime 1x 2>/dev/null) | grep '^BenchmarkRecovery' | sed "s/^/round $round $ref: /"
  done
done
