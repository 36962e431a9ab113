#!/usr/bin/env bash
# A flash-sale day (issue 29): the cost of many sales at once, for one or two seckills side by
# side in one run (docs/BENCHMARKS.md "A flash-sale day: many sales at once").
#
#   bench/many-sales/run.sh BASE [HEAD]
#
# BASE and HEAD are each a seckill binary (a path to an executable) or a git revision, which is
# built in a temporary worktree. For each count of sales (SALES, default "100 1000 10000") and
# each seckill, alternating, on a fresh private 3-node Redis Cluster (masters only, ports
# CLUSTER_PORT0..+2, FLUSHALLed and removed by this script only) and a fresh MariaDB database:
# three `serve --engine redis` instances; SELLING (default 100) of the sales sell now, the rest
# are upcoming or over, all listed. Then it measures, in this order:
#   - idle: Redis commands/s summed over the nodes (total_commands_processed, over IDLE seconds
#     after SETTLE seconds, nobody buying), Redis connections per instance (established TCP
#     connections of its process to the nodes, ss), RSS per instance (VmRSS), and the keys and
#     used memory of Redis (DBSIZE and used_memory summed over the nodes);
#   - hold → database: HOLDS holds at HOLD_RATE/s in the selling sales, each timed from its 201
#     to its row in the reservations table (polled every 5 ms), p50 / p99;
#   - the list: GET /api/v1/sales?limit=50 anonymously, cached (the same page again) and cold
#     (right after the list changed), p50 / p99, with the answer's size and how many sales it
#     held (a seckill that ignores limit answers every listed sale); 200 cached requests and 20
#     cold ones, each measure cut at LIST_BUDGET (default 30s; at least 3 requests);
#   - FLUSHALL of every node while buyers buy at HOLD_RATE/s: seconds until a touched sale
#     answers a buy again, until every selling sale does (each probed once a second), and the
#     holds answered before the flush that never reached the database.
# The Go program bench/many-sales (this tree's) makes the API calls. LOGS=dir keeps the
# instances' logs (serve-REF-SALES-I.log) and the nodes'. Prints a line per
# measure as it comes and the table at the end. Only loopback; needs redis-server, redis-cli,
# mysql, ss.
set -euo pipefail

base=${1:?usage: bench/many-sales/run.sh BASE [HEAD]   (each a seckill binary or a git revision)}
head=${2:-}
SALES=${SALES:-"100 1000 10000"}
SELLING=${SELLING:-100}
SETTLE=${SETTLE:-10}
IDLE=${IDLE:-30}
HOLDS=${HOLDS:-500}
HOLD_RATE=${HOLD_RATE:-50}
LIST_BUDGET=${LIST_BUDGET:-30s}
CLUSTER_PORT0=${CLUSTER_PORT0:-17201}
PORT0=${PORT0:-18401}
MYSQL_HOST=${MYSQL_HOST:-127.0.0.1}
MYSQL_PORT=${MYSQL_PORT:-3306}
MYSQL_USER=${MYSQL_USER:-root}
LOGS=${LOGS:-} # a directory to keep the instances' and nodes' logs in

repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/seckill-many.XXXXXX)
pids=()
dbs=()
worktrees=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ -n "$LOGS" ]; then mkdir -p "$LOGS" && cp "$work"/*.log "$LOGS"/ 2>/dev/null || true; fi
	for d in "${dbs[@]}"; do mysql -h"$MYSQL_HOST" -P"$MYSQL_PORT" -u"$MYSQL_USER" -e "DROP DATABASE IF EXISTS $d" 2>/dev/null || true; done
	for w in "${worktrees[@]}"; do git -C "$repo" worktree remove --force "$w" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

# binary NAME SPEC: the seckill to run as NAME, SPEC an executable or a git revision.
binary() {
	if [ -x "$2" ] && [ -f "$2" ]; then
		cp "$2" "$work/seckill-$1"
		echo "$1 = $2"
	else
		git -C "$repo" worktree add -q --detach "$work/src-$1" "$2"
		worktrees+=("$work/src-$1")
		(cd "$work/src-$1" && go build -o "$work/seckill-$1" ./cmd/seckill)
		echo "$1 = $2 ($(git -C "$repo" rev-parse --short "$2"))"
	fi
}
refs=(base)
binary base "$base"
if [ -n "$head" ]; then
	refs+=(head)
	binary head "$head"
fi
(cd "$repo" && go build -o "$work/many-sales" ./bench/many-sales)

ports=($CLUSTER_PORT0 $((CLUSTER_PORT0 + 1)) $((CLUSTER_PORT0 + 2)))
NODES=$(IFS=,; echo "${ports[*]/#/127.0.0.1:}")
for p in "${ports[@]}"; do
	redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file "$work/nodes-$p.conf" \
		--save "" --appendonly no --dir "$work" >"$work/redis-$p.log" 2>&1 &
	pids+=($!)
done
for p in "${ports[@]}"; do
	for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null
for p in "${ports[@]}"; do
	for _ in $(seq 100); do redis-cli -p "$p" cluster info | grep -q cluster_state:ok && break; sleep 0.1; done
done
echo "private cluster $NODES; $(nproc) cores; $(uptime)"

export SECKILL_ADMIN_TOKEN=many-sales-admin-token-0123456789abcdef
export SECKILL_AUTH_SECRET=many-sales-auth-secret-0123456789abcdef
export SECKILL_PAYMENT_SECRET=many-sales-payment-secret-0123456789abcdef

# commands: total_commands_processed summed over the nodes.
commands() {
	for p in "${ports[@]}"; do redis-cli -p "$p" INFO stats | tr -d '\r' | awk -F: '/^total_commands_processed:/ { print $2 }'; done |
		awk '{ s += $1 } END { print s }'
}

# conns PID: the process's established TCP connections to the cluster's nodes.
conns() {
	ss -tnpH state established "( dport = :${ports[0]} or dport = :${ports[1]} or dport = :${ports[2]} )" 2>/dev/null |
		grep -c "pid=$1," || true
}

# redis_keys and redis_mb: keys and used memory (MB) summed over the nodes.
redis_keys() {
	for p in "${ports[@]}"; do redis-cli -p "$p" DBSIZE; done | awk '{ s += $1 } END { print s + 0 }'
}
redis_mb() {
	for p in "${ports[@]}"; do redis-cli -p "$p" INFO memory | tr -d '\r' | awk -F: '/^used_memory:/ { print $2 }'; done |
		awk '{ s += $1 } END { printf "%.1f", s / 1048576 }'
}
rss_mb() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

results=()
for n in $SALES; do
	for ref in "${refs[@]}"; do
		echo "== $n sales, $ref"
		for p in "${ports[@]}"; do redis-cli -p "$p" FLUSHALL >/dev/null; done
		db=seckill_many_${ref}_${n}_$$
		dbs+=("$db")
		mysql -h"$MYSQL_HOST" -P"$MYSQL_PORT" -u"$MYSQL_USER" -e "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
		targets=()
		spids=()
		for i in 0 1 2; do
			port=$((PORT0 + i))
			SECKILL_ENGINE=redis SECKILL_REDIS_URL=redis://$NODES SECKILL_DB=mysql://$MYSQL_USER@$MYSQL_HOST:$MYSQL_PORT/$db \
				"$work/seckill-$ref" serve --addr 127.0.0.1:$port >"$work/serve-$ref-$n-$i.log" 2>&1 &
			pids+=($!)
			spids+=($!)
			targets+=("http://127.0.0.1:$port")
		done
		for t in "${targets[@]}"; do
			for _ in $(seq 300); do curl -fs "$t/readyz" >/dev/null && break; sleep 0.1; done
		done
		T=$(IFS=,; echo "${targets[*]}")
		line="sales=$n ref=$ref"
		line+=" $("$work/many-sales" create -targets "$T" -sales "$n" -selling "$SELLING")"
		echo "  $line"
		sleep "$SETTLE"
		c0=$(commands)
		sleep "$IDLE"
		c1=$(commands)
		idle="idle_cmds_s=$(((c1 - c0) / IDLE))"
		cs=() rs=()
		for p in "${spids[@]}"; do cs+=("$(conns "$p")"); rs+=("$(rss_mb "$p")"); done
		idle+=" conns=$(IFS=/; echo "${cs[*]}") rss_mb=$(IFS=/; echo "${rs[*]}") redis_keys=$(redis_keys) redis_mb=$(redis_mb)"
		echo "  $idle"
		line+=" $idle"
		dsn="$MYSQL_USER@tcp($MYSQL_HOST:$MYSQL_PORT)/$db"
		m=$("$work/many-sales" holds -targets "$T" -selling "$SELLING" -count "$HOLDS" -rate "$HOLD_RATE" -dsn "$dsn" || echo "holds=error")
		echo "  $m"
		line+=" $m"
		m=$("$work/many-sales" list -targets "$T" -sales "$n" -n 200 -budget "$LIST_BUDGET" || echo "list=error")
		echo "  $m"
		line+=" $m"
		m=$("$work/many-sales" flush -targets "$T" -selling "$SELLING" -rate "$HOLD_RATE" -dsn "$dsn" -nodes "$NODES" || echo "flush=error")
		echo "  $m"
		line+=" $m"
		errors=0
		for i in 0 1 2; do errors=$((errors + $(grep -c 'level=ERROR' "$work/serve-$ref-$n-$i.log" || true))); done
		line+=" error_log_lines=$errors"
		results+=("$line")
		for p in "${spids[@]}"; do kill "$p" 2>/dev/null || true; done
		for p in "${spids[@]}"; do wait "$p" 2>/dev/null || true; done
		mysql -h"$MYSQL_HOST" -P"$MYSQL_PORT" -u"$MYSQL_USER" -e "DROP DATABASE IF EXISTS $db"
	done
done

echo "== summary"
for r in "${results[@]}"; do echo "$r"; done | python3 -c '
import sys
cols = [("sales", "sales"), ("ref", "ref"), ("create_s", "create s"), ("idle_cmds_s", "idle cmds/s"), ("conns", "conns/inst"),
        ("rss_mb", "RSS MB/inst"), ("redis_keys", "Redis keys"), ("redis_mb", "Redis MB"), ("hold_db_p50_ms", "hold→db p50"), ("hold_db_p99_ms", "hold→db p99"),
        ("list_bytes", "list bytes"), ("list_sales", "sales in page"), ("list_cached_n", "pages asked (cached)"), ("list_cached_p99_ms", "list p99 cached"),
        ("list_cold_p99_ms", "list p99 cold"), ("touched_s", "touched back s"), ("every_s", "every hot back s"),
        ("back", "back"), ("lost", "holds lost"), ("lost_oldest_ms", "oldest lost ms"), ("error_log_lines", "ERROR lines")]
rows = [dict(kv.split("=", 1) for kv in line.split() if "=" in kv) for line in sys.stdin]
print("| " + " | ".join(h for _, h in cols) + " |")
print("|" + "---|" * len(cols))
for r in rows:
    print("| " + " | ".join(r.get(k, "?") for k, _ in cols) + " |")
'
