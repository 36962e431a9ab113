# lib.sh: what the scripts that compare two commits share (compare.sh, commands.sh,
# recovery/run.sh, streamidle/run.sh). Source it after `set -euo pipefail`; it defines
# functions only, and bench_init sets the variables they use.

# bench_init NAME: repo (the checkout the script runs from), work (a fresh /tmp/seckill-NAME.*
# directory), pids (processes to kill on exit) and the exit trap that cleans them all up, so
# that an interrupted run leaves no worktree, server or temporary file behind.
bench_init() {
  repo=$(git rev-parse --show-toplevel)
  work=$(mktemp -d "/tmp/seckill-$1.XXXXXX")
  pids=()
  trap bench_cleanup EXIT
}

# bench_cleanup: kills what the script started and removes the worktrees and $work.
bench_cleanup() {
  local p ref
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for ref in base head; do git -C "$repo" worktree remove --force "$work/$ref" 2>/dev/null || true; done
  rm -rf "$work"
}

# bench_checkout BASE HEAD PREPARE: checks BASE and HEAD out, detached, at $work/base and
# $work/head; in each, calls PREPARE REF (the script's function that copies its files in and
# builds) and prints "REF = <short hash>".
bench_checkout() {
  local ref rev
  for ref in base head; do
    rev=$([ $ref = base ] && echo "$1" || echo "$2")
    git -C "$repo" worktree add -q --detach "$work/$ref" "$rev"
    "$3" "$ref"
    echo "$ref = $(git -C "$repo" rev-parse --short "$rev")"
  done
}

# bench_redis PORT LOG [ARGS…]: starts a private redis-server on PORT without persistence
# (ARGS are more of its flags), logging to LOG; sets redis_pid and waits up to 5 s for it to
# answer, so that the first command does not meet a server still starting.
bench_redis() {
  local port=$1 log=$2
  shift 2
  redis-server --port "$port" --save "" --appendonly no --daemonize no "$@" >"$log" 2>&1 &
  redis_pid=$!
  pids+=("$redis_pid")
  for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

# bench_stop PID: stops a process the script started and waits for it to go.
bench_stop() {
  kill "$1"
  wait "$1" 2>/dev/null || true
}

# bench_wait_up URL: until the server answers /readyz.
bench_wait_up() {
  for _ in $(seq 1 100); do curl -fsS -o /dev/null "$1/readyz" 2>/dev/null && return 0; sleep 0.2; done
  echo "no answer from $1" >&2
  return 1
}
