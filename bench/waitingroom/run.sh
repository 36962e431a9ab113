#!/usr/bin/env bash
# run.sh: the start instant of a sale with a waiting room (docs/BENCHMARKS.md "The waiting room
# at the start instant"), on INSTANCES `seckill serve --engine redis` over the Redis Cluster
# of .ci/redis-cluster.sh (127.0.0.1:7001-7003) and MariaDB, then the same crowd without a room.
#
#   bench/waitingroom/run.sh [BUYERS] [INSTANCES] [-- more bench flags]
#
# The instances listen on 127.0.0.1:18101…, with the per-address bounds off (every buyer comes
# from loopback) and room for the crowd's live streams; a fresh MariaDB database
# seckill_roombench holds the orders. ROOMBENCH_STREAMS (20 000) is each instance's --max-streams;
# nine tenths of it are the bench's live ticket streams per instance, the other buyers poll.
# ROOMBENCH_NICE (0) runs the instances at that niceness, so that on one small machine the
# bench's buyers read what the servers wrote before the servers' next work (docs/BENCHMARKS.md).
set -euo pipefail

buyers=${1:-50000}
instances=${2:-3}
shift $(( $# < 2 ? $# : 2 ))
[ "${1:-}" = "--" ] && shift
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/seckill-roombench.XXXXXX)
secret=roombench-auth-secret-0123456789abcdef-0123456789
admin=roombench-admin-token-0123456789abcdef-0123456789
payment=roombench-webhook-secret-0123456789abcdef-0123456789
streams=${ROOMBENCH_STREAMS:-20000}
niceness=${ROOMBENCH_NICE:-0}
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$repo" && go build -o "$work/seckill" ./cmd/seckill)
redis-cli -p 7001 ping >/dev/null || bash "$repo/.ci/redis-cluster.sh"
mysql -uroot -h127.0.0.1 -e 'drop database if exists seckill_roombench; create database seckill_roombench'
ulimit -n 200000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

targets=()
for i in $(seq 1 "$instances"); do
  port=$((18100 + i))
  SECKILL_AUTH_SECRET=$secret SECKILL_ADMIN_TOKEN=$admin nice -n "$niceness" "$work/seckill" serve --addr "127.0.0.1:$port" \
    --engine redis --redis-url redis://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 \
    --db mysql://root@127.0.0.1:3306/seckill_roombench \
    --gateway webhook --payment-secret "$payment" \
    --max-conns-per-addr -1 --max-inflight-per-addr -1 --rate-per-addr -1 --max-streams-per-addr -1 \
    --max-streams "$streams" --max-conns $((streams * 3 / 2)) >"$work/serve-$i.log" 2>&1 &
  pids+=($!)
  targets+=("http://127.0.0.1:$port")
done
for t in "${targets[@]}"; do
  for _ in $(seq 1 150); do curl -fsS -o /dev/null "$t/readyz" 2>/dev/null && break; sleep 0.2; done
  curl -fsS -o /dev/null "$t/readyz" || { echo "no answer from $t" >&2; tail -20 "$work"/serve-*.log >&2; exit 1; }
done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
target_list=$(IFS=,; echo "${targets[*]}")
"$work/seckill" bench --target "$target_list" --auth-secret "$secret" --admin-token "$admin" \
  --waiting-room --buyers "$buyers" --prequeue $((buyers / 5)) --units 100 --admit-rate 500 \
  --arrival 5s --hold 10s --streams $((streams * 9 / 10)) --payment-secret "$payment" "$@"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
