#!/usr/bin/env bash
# The p99 of batch acknowledgements at 80 % of the maximum (issue 28), per event mix: a fresh
# `serve --demo` under `stowage bench ingest --mode ndjson` closed loop (as fast as answered) for
# DURATION, then another fresh one at 80 % of the request rate it reached, open loop (`--rate`:
# sends on a fixed schedule; a late send is timed from its due time, so a server that falls
# behind shows in the p99 rather than slowing the load).
#
# Usage, from anywhere (builds nothing):
#   cargo build --release
#   benches/batch_p99_at_80.sh                 # MIXES="shop:500 wide:331 narrow:500 sdk:458 strings:316"
#
# Environment (all optional):
#   MIXES="mix:events-a-request ..."   wide, sdk and strings send fewer than 500 to stay under the
#                      512 KiB body limit
#   CONNECTIONS=16     connections of the load generator
#   DURATION=10s       each run
#   SHARE=0.8          the open-loop rate as a share of the closed-loop one
#   STOWAGE_BIN=target/release/stowage   the server and the load generator
# Prints a line per mix: the closed-loop rate and p99, then the open-loop rate, p50/p99/p99.9,
# late sends and the statuses seen.
set -euo pipefail
cd "$(dirname "$0")/.."

MIXES=${MIXES:-"shop:500 wide:331 narrow:500 sdk:458 strings:316"}
CONNECTIONS=${CONNECTIONS:-16}
DURATION=${DURATION:-10s}
SHARE=${SHARE:-0.8}
STOWAGE_BIN=${STOWAGE_BIN:-target/release/stowage}
[ -x "$STOWAGE_BIN" ] || { echo "batch_p99_at_80: build first (cargo build --release)" >&2; exit 1; }

TMP=$(mktemp -d)
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# run MIX BATCH OUT [bench args...]: a fresh demo server under one load run, its report in OUT
run() {
    local mix=$1 batch=$2 out=$3 dir
    shift 3
    dir=$(mktemp -d "$TMP/run.XXXX")
    "$STOWAGE_BIN" serve --demo --data-dir "$dir/data" --listen 127.0.0.1:0 >"$dir/log" 2>&1 &
    PID=$!
    local url=
    for _ in $(seq 600); do
        if [ -s "$dir/data/demo.json" ]; then
            url=$(json "$dir/data/demo.json" "d['base_url']")
            curl -fsS -o /dev/null "$url/readyz" 2>/dev/null && break
        fi
        kill -0 "$PID" 2>/dev/null || { cat "$dir/log" >&2; exit 1; }
        sleep 0.1
    done
    "$STOWAGE_BIN" bench ingest --url "$url" --token "$(json "$dir/data/demo.json" "d['events_token']")" \
        --mix "$mix" --mode ndjson --batch-size "$batch" -c "$CONNECTIONS" -d "$DURATION" --json "$@" \
        >"$out"
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=
}

for entry in $MIXES; do
    mix=${entry%%:*} batch=${entry#*:}
    run "$mix" "$batch" "$TMP/closed.json"
    rate=$(json "$TMP/closed.json" "round($SHARE * d['requests_per_s'], 1)")
    run "$mix" "$batch" "$TMP/open.json" --rate "$rate"
    python3 - "$mix" "$batch" "$rate" "$TMP/closed.json" "$TMP/open.json" <<'PY'
import json, sys
mix, batch, rate = sys.argv[1:4]
c, o = (json.load(open(p)) for p in sys.argv[4:6])
lat = o["latency_ms"]
print(f"{mix} ({batch} a request): closed loop {c['events_per_s']:,.0f} ev/s, p99 {c['latency_ms']['p99']:.1f} ms;"
      f" open loop at {rate} req/s: {o['events_per_s']:,.0f} ev/s,"
      f" p50/p99/p99.9 {lat['p50']:.1f}/{lat['p99']:.1f}/{lat['p999']:.1f} ms,"
      f" late {o.get('late', 0)}, statuses {o['status']}")
PY
done
