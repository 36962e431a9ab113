#!/usr/bin/env bash
# commands.sh: the Redis commands a rush costs on two commits, side by side in one run
# (docs/BENCHMARKS.md "Issue 31: commands per buy script and the Redis path's tail").
#
#   bench/commands.sh BASE [HEAD] [ROUNDS]
#
# For each commit, alternating, against a private redis-server (port SECKILL_CMD_PORT, default
# 6391): first redisinv's TestBuyCommands (HEAD's file, copied into BASE's tree when it has
# none): 20 000 buys (SECKILL_BENCH_COMMANDS_BUYERS) of a 100-unit sale through the engine,
# grouped and one per call, without and with the buy limits; then, with SECKILL_CMD_RUSH=1, a
# fresh MariaDB database (seckill_cmd_<ref>), `seckill serve --engine redis` on it, CONFIG
# RESETSTAT, a `seckill bench` rush (HEAD's client; SECKILL_CMD_BENCH, default "--buyers 20000
# --units 100") and INFO commandstats; then, with SECKILL_CMD_CALIBRATE=1, on the same server,
# `seckill bench --calibrate --rounds SECKILL_CMD_CAL_ROUNDS (2) --duration 4s` (the hold and
# sold-out floods against a bare handler, with their p50/p99) and the Redis time of the script
# calls it made (INFO commandstats: usec per call of the buys' EVALSHA and of the local
# answers' view reads, EVALSHA_RO). Prints the calls of every command (inside scripts
# included), the script calls (EVALSHA/EVAL) and the commands per script call. Loopback only.
set -euo pipefail

base=${1:?usage: bench/commands.sh BASE [HEAD] [ROUNDS]}
head=${2:-HEAD}
rounds=${3:-1}
port=${SECKILL_CMD_PORT:-6391}
http=${SECKILL_CMD_HTTP:-127.0.0.1:18091}
benchargs=${SECKILL_CMD_BENCH:---buyers 20000 --units 100}
secret=commands-auth-secret-0123456789abcdef-0123456789
admin=commands-admin-token-0123456789abcdef-0123456789
pay=commands-webhook-secret-0123456789abcdef-0123456789
mysql_url=${SECKILL_COMPARE_MYSQL:-mysql://root@127.0.0.1:3306}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init commands

# build REF: REF's server and redisinv's test binary, with HEAD's TestBuyCommands when REF has none
# (and the redistest.CommandStats it reads, when REF's redistest has none).
build() {
  [ -f "$work/$1/redisinv/commands_bench_test.go" ] || cp "$repo/redisinv/commands_bench_test.go" "$work/$1/redisinv/"
  if [ ! -f "$work/$1/internal/testkit/redistest/commandstats.go" ]; then
    mkdir -p "$work/$1/internal/testkit/redistest"
    cp "$repo/internal/testkit/redistest/commandstats.go" "$work/$1/internal/testkit/redistest/"
  fi
  (cd "$work/$1" && go build -o "$work/seckill-$1" ./cmd/seckill && go test -c -o "$work/redisinv-$1.test" ./redisinv/)
}
bench_checkout "$base" "$head" build

for i in $(seq 1 "$rounds"); do
  for ref in base head; do
    echo "== round $i, $ref (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    bench_redis "$port" "$work/redis.log" --bind 127.0.0.1
    (cd "$work/$ref/redisinv" && SECKILL_BENCH_COMMANDS_REDIS="redis://127.0.0.1:$port/0" "$work/redisinv-$ref.test" \
      -test.run '^TestBuyCommands$' -test.v -test.count 1) | grep -vE '^(=== RUN|--- PASS|PASS|ok)' | sed "s/^/  $ref /"
    if [ "${SECKILL_CMD_RUSH:-0}" != 1 ] && [ "${SECKILL_CMD_CALIBRATE:-0}" != 1 ]; then
      bench_stop "$redis_pid"
      continue
    fi
    db=seckill_cmd_$ref
    mysql -uroot -h127.0.0.1 -e "drop database if exists $db; create database $db"
    SECKILL_AUTH_SECRET=$secret SECKILL_ADMIN_TOKEN=$admin "$work/seckill-$ref" serve --addr "$http" --engine redis \
      --redis-url "redis://127.0.0.1:$port/0" --db "$mysql_url/$db" --gateway webhook --payment-secret "$pay" \
      >"$work/serve-$ref.log" 2>&1 &
    pids+=($!)
    spid=$!
    bench_wait_up "http://$http"
    if [ "${SECKILL_CMD_RUSH:-0}" = 1 ]; then
    redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
    # shellcheck disable=SC2086
    "$work/seckill-head" bench --target "http://$http" --auth-secret "$secret" --admin-token "$admin" \
      --payment-secret "$pay" $benchargs >"$work/bench-$ref-$i.txt" 2>&1 || { tail -20 "$work/bench-$ref-$i.txt"; exit 1; }
    grep -E "verdict|PASS|FAIL|buyers|elapsed" "$work/bench-$ref-$i.txt" | head -5 | sed "s/^/  /"
    redis-cli -p "$port" INFO commandstats | tr -d '\r' | grep '^cmdstat_' |
      sed -E 's/^cmdstat_([^:]*):calls=([0-9]+).*/\1 \2/' | sort -k2 -nr >"$work/stats-$ref-$i.txt"
    awk -v ref="$ref" '
      { calls[$1] = $2; total += $2 }
      $1 ~ /^(evalsha|eval|evalsha_ro|eval_ro)$/ { scripts += $2 }
      END {
        printf "  %s: %d commands, %d script calls, %.2f commands per script call\n", ref, total, scripts, total / (scripts ? scripts : 1)
        for (c in calls) printf "    %-18s %9d  %6.2f per script call\n", c, calls[c], calls[c] / (scripts ? scripts : 1)
      }' "$work/stats-$ref-$i.txt" | sort -k2 -nr
    fi
    if [ "${SECKILL_CMD_CALIBRATE:-0}" = 1 ]; then
      redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
      "$work/seckill-head" bench --calibrate --target "http://$http" --auth-secret "$secret" --admin-token "$admin" \
        --rounds "${SECKILL_CMD_CAL_ROUNDS:-2}" --duration 4s 2>&1 | grep -E "^(path|hold|sold)" | sed "s/^/  $ref calibrate: /"
      redis-cli -p "$port" INFO commandstats | tr -d '\r' | grep -E '^cmdstat_(evalsha|evalsha_ro|hgetall|type):' |
        sed -E 's/^cmdstat_([^:]*):calls=([0-9]+),usec=([0-9]+),usec_per_call=([0-9.]+).*/\1 \2 calls, \3 µs, \4 µs per call/' |
        sed "s/^/  $ref calibrate redis: /"
    fi
    bench_stop "$spid"
    bench_stop "$redis_pid"
  done
done
