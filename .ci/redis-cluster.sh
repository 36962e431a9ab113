#!/usr/bin/env bash
# Starts a 3-node Redis Cluster on 127.0.0.1 ports 7001-7003 (masters only, no persistence),
# unless one already answers there, and waits until it is healthy. Used by .ci/run; safe to
# run by hand. Data lives in /tmp/seckill-redis-cluster.
set -euo pipefail
ports=(7001 7002 7003)
dir=/tmp/seckill-redis-cluster
if redis-cli -p "${ports[0]}" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
  echo "redis cluster already up on ${ports[*]}"
  exit 0
fi
mkdir -p "$dir"
for p in "${ports[@]}"; do
  if ! redis-cli -p "$p" ping >/dev/null 2>&1; then
    rm -f "$dir/nodes-$p.conf"
    redis-server --port "$p" --bind 127.0.0.1 --daemonize yes --cluster-enabled yes \
      --cluster-config-file "$dir/nodes-$p.conf" --cluster-node-timeout 5000 \
      --save "" --appendonly no --dir "$dir" --logfile "$dir/redis-$p.log"
  fi
done
for p in "${ports[@]}"; do
  for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
if ! redis-cli -p "${ports[0]}" cluster info | grep -q 'cluster_slots_assigned:16384'; then
  redis-cli --cluster create 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003 --cluster-replicas 0 --cluster-yes >/dev/null
fi
for _ in $(seq 100); do
  if redis-cli -p "${ports[0]}" cluster info | grep -q 'cluster_state:ok'; then
    echo "redis cluster up on ${ports[*]}"
    exit 0
  fi
  sleep 0.1
done
echo "redis cluster did not become healthy" >&2
redis-cli -p "${ports[0]}" cluster info >&2 || true
exit 1
