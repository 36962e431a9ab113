#!/usr/bin/env bash
# Segmented stock on a Redis Cluster: one large sale bought through three `seckill serve
# --engine redis` instances by `seckill bench`, once per segment count, side by side in one
# run. For each count it records the crowd's buys/s and, per cluster node, the deltas of
# INFO commandstats (script calls, script time) and INFO cpu (docs/BENCHMARKS.md
# "Segmented stock on the Redis Cluster").
#
# Usage (from the repository root; every setting has a default):
#   DB=mysql://root@127.0.0.1:3306 UNITS=100000 BUYERS=200000 SEGMENTS="1 3 6" MIX=cancel=100 \
#   bench/segments/run.sh
#
# By default it starts a private 3-node Redis Cluster (masters only, ports CLUSTER_PORT0..+2,
# removed at the end), so that the per-node figures count this run alone. NODES=h:p,h:p,h:p
# uses a cluster that is already running instead (the CI's is 127.0.0.1:7001-7003): its
# figures then include whatever else uses that cluster meanwhile.
#
# DB is a MySQL/MariaDB server (a fresh database is created on it per run and dropped after).
# MIX is the crowd's mix (seckill bench --mix): the default, every buyer cancels its hold,
# keeps the run on the engine (path, buy, cancel: no payment transaction in the database) so
# that the crowd measures the buy path, the units come back, and every buyer gets a hold.
# The Redis figures are deltas over the whole bench run of each count, so anything else that
# uses the cluster at the same time is counted too: run it on a quiet cluster.
set -euo pipefail

NODES=${NODES:-}
private=$([ -z "$NODES" ] && echo 1 || true)
CLUSTER_PORT0=${CLUSTER_PORT0:-17101}
DB=${DB:-mysql://root@127.0.0.1:3306}
UNITS=${UNITS:-100000}
BUYERS=${BUYERS:-200000}
SEGMENTS=${SEGMENTS:-"1 3 6"}
MIX=${MIX:-cancel=100}
CONCURRENCY=${CONCURRENCY:-256}
PORT0=${PORT0:-18301}

work=$(mktemp -d)
pids=()
dbname=seckill_segbench_$(date +%s)
sales=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	if [ -z "$private" ] && [ ${#sales[@]} -gt 0 ]; then # a shared cluster: delete the run's sales
		for n in ${NODES//,/ }; do
			for s in "${sales[@]}"; do
				redis-cli -h "${n%:*}" -p "${n#*:}" --scan --pattern "seckill:{sale:$s*" |
					xargs -r -n 1 redis-cli -h "${n%:*}" -p "${n#*:}" unlink >/dev/null || true
			done
		done
	fi
	wait 2>/dev/null || true
	mysql -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS $dbname" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/seckill" ./cmd/seckill
if [ -z "$NODES" ]; then
	ports=($CLUSTER_PORT0 $((CLUSTER_PORT0 + 1)) $((CLUSTER_PORT0 + 2)))
	for p in "${ports[@]}"; do
		redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file "$work/nodes-$p.conf" \
			--save "" --appendonly no --dir "$work" >"$work/redis-$p.log" 2>&1 &
		pids+=($!)
	done
	for p in "${ports[@]}"; do
		for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
	done
	redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null
	for _ in $(seq 100); do redis-cli -p "${ports[0]}" cluster info | grep -q cluster_state:ok && break; sleep 0.1; done
	NODES=$(IFS=,; echo "${ports[*]/#/127.0.0.1:}")
fi
echo "cluster $NODES; $(uptime)"
mysql -h127.0.0.1 -uroot -e "CREATE DATABASE $dbname"
export SECKILL_ADMIN_TOKEN=segbench-admin-token-0123456789abcdef
export SECKILL_AUTH_SECRET=segbench-auth-secret-0123456789abcdef
export SECKILL_PAYMENT_SECRET=segbench-payment-secret-0123456789abcdef
export SECKILL_REDIS_URL=redis://$NODES SECKILL_DB=$DB/$dbname SECKILL_ENGINE=redis
targets=()
for i in 0 1 2; do
	port=$((PORT0 + i))
	"$work/seckill" serve --addr 127.0.0.1:$port >"$work/serve$i.log" 2>&1 &
	pids+=($!)
	targets+=("http://127.0.0.1:$port")
done
for t in "${targets[@]}"; do
	for _ in $(seq 300); do curl -fs "$t/readyz" >/dev/null && break; sleep 0.1; done
done

# snapshot prints, per node: calls and usec of the script commands (EVALSHA, EVALSHA_RO, EVAL,
# EVAL_RO) summed, and used_cpu_sys + used_cpu_user in seconds.
snapshot() {
	for n in ${NODES//,/ }; do
		host=${n%:*} port=${n#*:}
		redis-cli -h "$host" -p "$port" INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v node="$n" '
			/^cmdstat_(evalsha|evalsha_ro|eval|eval_ro):/ { calls += $3; usec += $5 }
			END { printf "%s %d %d", node, calls, usec }'
		redis-cli -h "$host" -p "$port" INFO cpu | tr -d '\r' | awk -F: '
			/^used_cpu_(sys|user):/ { cpu += $2 } END { printf " %.3f\n", cpu }'
	done
}

printf '%-9s %8s %9s %8s | %-16s %9s %10s %7s %8s\n' segments "buys/s" "crowd s" verdict node "script calls" "script ms" share "cpu s"
for n in $SEGMENTS; do
	before=$(snapshot)
	sale=segbench-$n-$(date +%s)
	sales+=("$sale")
	"$work/seckill" bench --target "$(IFS=,; echo "${targets[*]}")" --sale "$sale" --segments "$n" \
		--units "$UNITS" --buyers "$BUYERS" --concurrency "$CONCURRENCY" --mix "$MIX" --hold 60s \
		--deadline 30m --json >"$work/bench-$n.json" 2>"$work/bench-$n.err" || true
	after=$(snapshot)
	read -r held elapsed verdict < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["counts"]["held"], r["elapsed_ms"] / 1000, "ok" if r["verdict"]["ok"] else "FAILED:" + ";".join(r["verdict"]["violations"] + r["verdict"]["unverified"]).replace(" ", "_"))
' "$work/bench-$n.json")
	paste <(echo "$before") <(echo "$after") | awk -v seg="$n" -v held="$held" -v el="$elapsed" -v verdict="$verdict" '
		{ node[NR] = $1; calls[NR] = $6 - $2; usec[NR] = $7 - $3; cpu[NR] = $8 - $4; total += $7 - $3; if ($8 - $4 > top) top = $8 - $4 }
		END {
			for (i = 1; i <= NR; i++) {
				lead = (i == 1) ? sprintf("%-9s %8.0f %9.1f %8s", seg, held / el, el, verdict) : sprintf("%-9s %8s %9s %8s", "", "", "", "")
				printf "%s | %-16s %9d %10.0f %6.1f%% %8.2f\n", lead, node[i], calls[i], usec[i] / 1000, total ? 100 * usec[i] / total : 0, cpu[i]
			}
			printf "%-9s script µs per buy: %.1f; busiest node: %.0f µs CPU per buy, so its core is full at %.0f buys/s\n", "", total / held, 1e6 * top / held, held / top
		}'
done
