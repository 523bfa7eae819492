#!/usr/bin/env bash
# Scale-out figures (issue 12, BENCHMARKS.md "Scale-out"): ingest events/s through nginx with N
# nodes on one PostgreSQL catalog and one S3 bucket (moto), and per flush the catalog
# transactions (PostgreSQL's xact_commit) and S3 requests (moto's request log).
#
#   benches/scaleout_bench.sh 1 && benches/scaleout_bench.sh 3
#   MODE=fresh FLUSH_INTERVAL=1h benches/scaleout_bench.sh 3   # fresh-read latency and cost
#                                                             # (benches/fresh_reads.py)
#
# Runs the README "Three nodes on one machine" recipe in a temp dir on free ports, then one wrk
# per team token (-t1 -c16, WRK_SECONDS, default 10) at the same time through nginx; STOWAGE_BIN
# (default target/release/stowage). Needs initdb/pg_ctl (Debian: /usr/lib/postgresql/*/bin),
# nginx, wrk, and moto in target/py (scripts/test makes it). Prints one line per measure.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1}
TEAMS=${TEAMS:-3}
SECS=${WRK_SECONDS:-10}
BIN=$(realpath "${STOWAGE_BIN:-target/release/stowage}")
PY=$(realpath target/py/bin/python)
PGBIN=$(dirname "$(realpath "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")
W=$(mktemp -d /tmp/stowage-scaleout.XXXXXX)
chmod 755 "$W"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS=()
METRICS=()
NODE_PIDS=()
cleanup() {
  # Nodes first (a stopping node commits its buffers, so the store must still be there).
  for p in "${NODE_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${NODE_PIDS[@]}"; do timeout 30 tail --pid="$p" -f /dev/null 2>/dev/null || kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  nginx -p "$W/lb" -c "$W/lb/nginx.conf" -s stop 2>/dev/null || true
  runuser -u nobody -- "$PGBIN/pg_ctl" -D "$W/pg/data" -m fast stop >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT

# PostgreSQL (as nobody: initdb refuses root).
PGPORT=$(port)
install -d -o nobody "$W/pg"
runuser -u nobody -- "$PGBIN/initdb" -D "$W/pg/data" -U stowage --auth=trust >/dev/null
runuser -u nobody -- "$PGBIN/pg_ctl" -D "$W/pg/data" -l "$W/pg/log" -w \
  -o "-p $PGPORT -k $W/pg -c listen_addresses=127.0.0.1" start >/dev/null
"$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U stowage stowage
psql_() { "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U stowage -d stowage -tAc "$1"; }

# S3 (moto), its request log counted below.
S3PORT=$(port)
"$PY" -m moto.server -p "$S3PORT" > "$W/moto.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$S3PORT/" && break; sleep 0.1; done
curl -s -X PUT "http://127.0.0.1:$S3PORT/stowage" > /dev/null

export STOWAGE_CATALOG__URL="postgres://stowage@127.0.0.1:$PGPORT/stowage" \
  STOWAGE_STORAGE__URL=s3://stowage/warehouse \
  STOWAGE_STORAGE__S3_ENDPOINT="http://127.0.0.1:$S3PORT" STOWAGE_STORAGE__S3_ALLOW_HTTP=true \
  STOWAGE_STORAGE__S3_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
  STOWAGE_SERVER__TRUSTED_PROXIES=127.0.0.1 STOWAGE_LOG__LEVEL=warn \
  STOWAGE_FLUSH__INTERVAL=${FLUSH_INTERVAL:-1s} STOWAGE_COMPACTION__ENABLED=${STOWAGE_COMPACTION__ENABLED:-false}

# N nodes and nginx (config/nginx-scaleout.conf with this run's ports).
mkdir -p "$W/lb/logs"
LB=$(port)
UP=""
for i in $(seq "$N"); do
  p=$(port)
  mp=$(port)
  STOWAGE_NODE__ID=node-$i STOWAGE_SERVER__NODE_HEADER=true STOWAGE_SERVER__METRICS_LISTEN="127.0.0.1:$mp" \
    "$BIN" serve --listen "127.0.0.1:$p" --data-dir "$W/node-$i" > "$W/node-$i.log" 2>&1 &
  NODE_PIDS+=($!)
  NODES+=("$p")
  METRICS+=("$mp")
  UP+="        server 127.0.0.1:$p max_fails=1 fail_timeout=5s;\n"
done
for p in "${NODES[@]}"; do
  for _ in $(seq 200); do curl -sf -o /dev/null "http://127.0.0.1:$p/readyz" && break; sleep 0.1; done
done
awk -v up="$UP" -v lb="$LB" '
  /server 127.0.0.1:8081/ { printf "%s", up; next }
  /server 127.0.0.1:808[23]/ { next }
  /listen 127.0.0.1:8080;/ { print "        listen 127.0.0.1:" lb ";"; next }
  { print }' config/nginx-scaleout.conf | sed 's/\\n/\n/g' > "$W/lb/nginx.conf"
nginx -p "$W/lb" -c "$W/lb/nginx.conf"

# Teams, one token each; which node each token lands on.
TOKENS=()
for t in $(seq "$TEAMS"); do
  team=$("$BIN" admin --json --data-dir "$W/admin" team create --name "t$t" | jq -r .id)
  owner=$("$BIN" admin --json --data-dir "$W/admin" user create --team "$team" \
    --email "o$t@example.com" --name o --role owner | jq -r .id)
  "$BIN" admin --data-dir "$W/admin" events enable --team "$team" > /dev/null
  TOKENS+=("$("$BIN" admin --json --data-dir "$W/admin" token create --team "$team" --user "$owner" | jq -r .token)")
done
if [ "${MODE:-ingest}" = fresh ]; then
  teams="["
  for t in $(seq "$TEAMS"); do
    owner=$("$BIN" admin --json --data-dir "$W/admin" user list --team "t$t" | jq -r '.[0].id // .users[0].id')
    key=$("$BIN" admin --json --data-dir "$W/admin" key create --team "t$t" --user "$owner" | jq -r .key)
    canvas=$("$BIN" admin --json --data-dir "$W/admin" canvas create --team "t$t" --name c | jq -r .id)
    element=$("$BIN" admin --json --data-dir "$W/admin" element create --canvas "$canvas" --table tracks | jq -r .id)
    [ "$t" -gt 1 ] && teams+=","
    teams+="{\"token\":\"${TOKENS[$((t - 1))]}\",\"key\":\"$key\",\"canvas\":\"$canvas\",\"element\":\"$element\"}"
  done
  teams+="]"
  "$PY" benches/fresh_reads.py --lb "http://127.0.0.1:$LB" --teams "$teams" --metrics "${METRICS[@]}" \
    --psql "$PGBIN/psql -h 127.0.0.1 -p $PGPORT -U stowage -d stowage -tAc" \
    --moto-log "$W/moto.log" --reads "${READS:-50}"
  echo "nodes=$N teams=$TEAMS cpu: $(uptime)"
  exit 0
fi
homes=""
for tok in "${TOKENS[@]}"; do
  h=$(curl -s -D - -o /dev/null "http://127.0.0.1:$LB/v1/event" -H "X-Auth-Token: $tok" \
      -H 'Content-Type: application/json' -d '{"event":"warm"}' | tr -d '\r' | awk 'tolower($1)=="x-stowage-node:"{print $2}')
  homes+="$h "
done

"$BIN" bench gen --events 1024 --out "$W/events.ndjson" > /dev/null
sleep 2
x0=$(psql_ "SELECT xact_commit FROM pg_stat_database WHERE datname = 'stowage'")
s0=$(grep -c '"[A-Z]* /' "$W/moto.log" || true)
for tok in "${TOKENS[@]}"; do
  STOWAGE_TOKEN=$tok WRK_EVENTS="$W/events.ndjson" wrk -t1 -c16 -d"${SECS}s" \
    -s benches/wrk_event.lua "http://127.0.0.1:$LB" > "$W/wrk-$tok.out" 2>&1 &
done
wait_wrk() { while pgrep -x wrk > /dev/null; do sleep 0.2; done; }
wait_wrk
sleep 3  # the last flushes (flush.interval)
x1=$(psql_ "SELECT xact_commit FROM pg_stat_database WHERE datname = 'stowage'")
s1=$(grep -c '"[A-Z]* /' "$W/moto.log" || true)
reqs=0
for f in "$W"/wrk-*.out; do
  r=$(grep -o 'WRK_JSON.*' "$f" | sed 's/WRK_JSON //' | jq -r '.requests')
  reqs=$((reqs + r))
done
flushes=0
for p in "${METRICS[@]}"; do
  f=$(curl -s "http://127.0.0.1:$p/metrics" | awk '/^stowage_flushes_total/ {s+=$2} END {print s+0}')
  flushes=$(python3 -c "print(int($flushes + $f))")
done
puts=$(grep -c '"PUT /stowage/' "$W/moto.log" || true)
echo "nodes=$N teams=$TEAMS tokens_on=[$homes] seconds=$SECS"
echo "events_acknowledged=$reqs events_per_s=$(python3 -c "print(round($reqs / $SECS))")"
echo "flushes=$flushes catalog_commits=$((x1 - x0)) per_flush=$(python3 -c "print(round(($x1 - $x0) / max($flushes, 1), 2))")"
echo "s3_requests=$((s1 - s0)) per_flush=$(python3 -c "print(round(($s1 - $s0) / max($flushes, 1), 2))") s3_puts_total=$puts"
echo "cpu: $(uptime)"
