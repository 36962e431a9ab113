#!/usr/bin/env bash
# compare.sh: the buy path of two commits, side by side in one run (docs/BENCHMARKS.md).
#
#   bench/compare.sh BASE [HEAD] [ROUNDS]
#
# For each commit, alternating (BASE, HEAD, BASE, HEAD … so that a noisy hour of the shared
# machine lands on both): the memory engine's buy benchmark on one core, then the HTTP buy
# path of `seckill serve` against a bare net/http handler (`seckill bench --calibrate`), on
# the embedded default (memory engine, SQLite) and, when redis-server and MariaDB are here,
# on the Redis engine (a private redis-server on :6390, a fresh MariaDB database). The load
# comes from HEAD's `seckill bench` in every case, so both servers meet the same client; on the
# Redis engine it also floods the bare handler with one Redis script call per buy (+redis).
# Only loopback is used. Prints each measurement as it comes and a summary at the end.
set -euo pipefail

base=${1:?usage: bench/compare.sh BASE [HEAD] [ROUNDS]}
head=${2:-HEAD}
rounds=${3:-2}
secret=compare-auth-secret-0123456789abcdef-0123456789
admin=compare-admin-token-0123456789abcdef-0123456789
mysql_url=${SECKILL_COMPARE_MYSQL:-mysql://root@127.0.0.1:3306}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init compare

# build REF: REF's server and the memory engine's test binary.
build() {
  (cd "$work/$1" && go build -o "$work/seckill-$1" ./cmd/seckill && go test -c -o "$work/memory-$1.test" ./memory/)
}
bench_checkout "$base" "$head" build

# payment_flags REF: the webhook gateway's flags as REF's serve takes them (before the
# gateways, a commit had only --payment-secret).
payment_flags() {
  if "$work/seckill-$1" serve -h 2>&1 | grep -q -- '-gateway'; then
    echo --gateway webhook --payment-secret compare-webhook-secret-0123456789abcdef-0123456789
  else
    echo --payment-secret compare-webhook-secret-0123456789abcdef-0123456789
  fi
}

# calibrate REF NAME ARGS…: serve REF's binary with ARGS, flood it with HEAD's client.
calibrate() {
  local ref=$1 name=$2
  shift 2
  SECKILL_AUTH_SECRET=$secret SECKILL_ADMIN_TOKEN=$admin "$work/seckill-$ref" serve --addr 127.0.0.1:18080 "$@" \
    >"$work/serve-$ref-$name.log" 2>&1 &
  pids+=($!)
  local pid=$!
  bench_wait_up http://127.0.0.1:18080
  # On the Redis engine, the rounds also flood the bare handler with one script call per buy on
  # the same redis-server (--calibrate-redis, when HEAD's client has it).
  local more=()
  if [ "$name" = redis ] && "$work/seckill-head" bench -h 2>&1 | grep -q -- '-calibrate-redis'; then
    more=(--calibrate-redis redis://127.0.0.1:6390/0)
  fi
  "$work/seckill-head" bench --calibrate --target http://127.0.0.1:18080 --auth-secret "$secret" \
    --admin-token "$admin" --rounds 3 --duration 4s "${more[@]}" 2>&1 | tee -a "$work/calibrate-$ref-$name.txt" |
    grep -E "^(hold|sold)" | sed "s/^/  $ref $name: /"
  bench_stop "$pid"
}

redis_ok=false
if command -v redis-server >/dev/null && mysql -uroot -h127.0.0.1 -e 'select 1' >/dev/null 2>&1; then
  redis_ok=true
fi

for i in $(seq 1 "$rounds"); do
  for ref in base head; do
    echo "== round $i, $ref"
    (cd "$work/$ref/memory" && taskset -c 0 "$work/memory-$ref.test" -test.run '^$' -test.bench '^BenchmarkBuy$' \
      -test.cpu 1 -test.benchmem -test.count 3) | grep -E '^BenchmarkBuy' | sed "s/^/  $ref memory: /" |
      tee -a "$work/memory-$ref.txt"
    rm -f "$work/embedded.db"*
    calibrate $ref embedded --db "sqlite://$work/embedded.db" $(payment_flags $ref)
    if $redis_ok; then
      bench_redis 6390 "$work/redis.log" --bind 127.0.0.1
      mysql -uroot -h127.0.0.1 -e 'drop database if exists seckill_compare; create database seckill_compare'
      calibrate $ref redis --engine redis --redis-url redis://127.0.0.1:6390/0 --db "$mysql_url/seckill_compare" \
        $(payment_flags $ref)
      bench_stop "$redis_pid"
    fi
  done
done

echo "== summary (ns/op, B/op of BenchmarkBuy -cpu 1; calibrate lines as printed)"
for ref in base head; do
  echo "-- $ref"
  cat "$work/memory-$ref.txt" | awk '{print "  " $0}'
  for name in embedded redis; do
    [ -f "$work/calibrate-$ref-$name.txt" ] && grep -E "^(hold|sold).*median" "$work/calibrate-$ref-$name.txt" | sed "s/^/  $name: /"
  done
done
