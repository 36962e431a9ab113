#!/bin/bash
# usage: deadlock-rush.sh <seckill binary> <postgres|mysql> <label>
# Three Redis-engine instances (ports 18091-18093) on a private Redis (port 16390) and a fresh
# database seckill_dl_<label> (PostgreSQL at 127.0.0.1:5432 as postgres, or MariaDB/MySQL at
# 127.0.0.1:3306 as root), one 3 000-buyer `seckill bench` rush; prints the server's deadlock
# counter before and after (PostgreSQL: pg_stat_database.deadlocks of that database, read
# after the instances stopped; MySQL: the global Innodb_deadlocks). Output in /tmp/dl-rush-<label>.
# docs/BENCHMARKS.md, "PostgreSQL and MariaDB deadlocks in a rush".
set -u
BIN=$1 KIND=$2 LABEL=$3
OUT=/tmp/dl-rush-$LABEL
mkdir -p $OUT
DBNAME=seckill_dl_$LABEL
if [ $KIND = postgres ]; then
  psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $DBNAME WITH (FORCE)" -c "CREATE DATABASE $DBNAME"
  DB=postgres://postgres@127.0.0.1:5432/$DBNAME
  count() { psql -h 127.0.0.1 -U postgres -Atc "SELECT deadlocks FROM pg_stat_database WHERE datname='$DBNAME'"; }
else
  mysql -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS $DBNAME; CREATE DATABASE $DBNAME"
  DB=mysql://root@127.0.0.1:3306/$DBNAME
  count() { mysql -h127.0.0.1 -uroot -Nse "SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'" | cut -f2; }
fi
redis-server --port 16390 --save '' --appendonly no --daemonize no > $OUT/redis.log 2>&1 &
RPID=$!
sleep 0.5
export SECKILL_AUTH_SECRET=dl-auth-secret-0123456789abcdef0123456789 SECKILL_ADMIN_TOKEN=dl-admin-token-0123456789abcdef0123456789ab SECKILL_PAYMENT_SECRET=dl-payment-secret-0123456789abcdef012345678
PIDS=""
for i in 1 2 3; do
  $BIN serve --engine redis --redis-url redis://127.0.0.1:16390/0 --db $DB --addr 127.0.0.1:1809$i > $OUT/serve$i.log 2>&1 &
  PIDS="$PIDS $!"
  sleep 1 # the first migrates
done
for i in 1 2 3; do
  for t in $(seq 60); do curl -fs http://127.0.0.1:1809$i/healthz >/dev/null && break; sleep 0.5; done
done
BEFORE=$(count)
$BIN bench --target http://127.0.0.1:18091,http://127.0.0.1:18092,http://127.0.0.1:18093 --units 100 --buyers 3000 \
  --report $OUT/report.md > $OUT/bench.txt 2>&1
echo "bench exit $?" >> $OUT/bench.txt
for p in $PIDS; do kill $p; done
for p in $PIDS; do wait $p; done
kill $RPID; wait $RPID
sleep 3
AFTER=$(count)
echo "$LABEL $KIND deadlocks before=$BEFORE after=$AFTER" | tee $OUT/deadlocks.txt
grep -c "deadlock" $OUT/serve*.log | tee -a $OUT/deadlocks.txt
grep -h "unavailable\|conflict" $OUT/serve*.log | head -5 >> $OUT/deadlocks.txt
