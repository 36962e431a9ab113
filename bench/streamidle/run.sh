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
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/seckill-streamidle.XXXXXX)
port=6391
srv=

cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null || true
  for ref in base head; do git -C "$repo" worktree remove --force "$work/$ref" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

for ref in base head; do
  rev=$([ $ref = base ] && echo "$base" || echo "$head")
  git -C "$repo" worktree add -q --detach "$work/$ref" "$rev"
  mkdir -p "$work/$ref/bench/streamidle"
  cp "$repo/bench/streamidle/main.go" "$work/$ref/bench/streamidle/main.go"
  (cd "$work/$ref" && go build -o "$work/streamidle-$ref" ./bench/streamidle)
  echo "$ref = $(git -C "$repo" rev-parse --short "$rev")"
done

for ref in base head; do
  redis-server --port $port --save '' --appendonly no --maxclients 20000 --daemonize no >"$work/redis-$ref.log" 2>&1 &
  srv=$!
  for _ in $(seq 1 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
  "$work/streamidle-$ref" -redis "redis://127.0.0.1:$port/0" -sales "$sales" -sinks "$sinks" -segments "$segments" -label "$ref" ${STREAMIDLE_FLAGS:-}
  kill "$srv"
  wait "$srv" 2>/dev/null || true
  srv=
done
