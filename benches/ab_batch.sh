#!/usr/bin/env bash
# Two builds of the server under the same batch load *at the same time*: the ratio of their
# server CPU per accepted event, which a change of a few percent moves and this machine's speed
# does not (it shifts by ±20 % between minutes, so runs one after the other cannot see 7 %).
#
# Usage, from anywhere (builds nothing):
#   ROUNDS=6 benches/ab_batch.sh MIX BASE_BIN NEW_BIN
#
# Each round starts a fresh `serve --demo` of each build (own data directory, own ports), loads
# both with their own `stowage bench ingest --mix MIX --mode ndjson` for DURATION, and reads each
# server's CPU time (/proc/PID/stat) over the run. The order of the two is swapped every round.
# Prints one line a round and the mean of NEW/BASE (below 1: the new build spends less).
#
# Environment (all optional):
#   ROUNDS=6        rounds (pairs)
#   DURATION=8s     load per round
#   BATCH=500       events per request (sdk 458, wide 331, strings 316 fit the body limit)
#   NEW_BATCH=$BATCH   events per request of NEW_BIN's load: with the same build as BASE_BIN
#                   and NEW_BIN, what the size of a request does to the CPU an event
#   CONNECTIONS=8   connections of each load generator
#   MODE=ndjson     `bench ingest --mode`: ndjson, batch, or single (one event a request, to
#                   POST /v1/event; BATCH is then ignored)
#   STOWAGE_BIN=target/release/stowage   the load generator
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -eq 3 ] || { echo "usage: benches/ab_batch.sh MIX BASE_BIN NEW_BIN" >&2; exit 2; }
MIX=$1 BASE=$2 NEW=$3
ROUNDS=${ROUNDS:-6}
DURATION=${DURATION:-8s}
BATCH=${BATCH:-500}
NEW_BATCH=${NEW_BATCH:-$BATCH}
CONNECTIONS=${CONNECTIONS:-8}
# A load generator that fails (a body over the server's limit: see BATCH) ends the run with its
# own words instead of silently.
failed() { # $1: which server (a or b), $2: its batch size
    echo "ab_batch: a load generator failed (batch $2, mix $MIX):" >&2
    tail -5 "$TMP/$1.err" >&2
    exit 1
}
MODE=${MODE:-ndjson}
STOWAGE_BIN=${STOWAGE_BIN:-target/release/stowage}
for b in "$BASE" "$NEW" "$STOWAGE_BIN"; do
    [ -x "$b" ] || { echo "ab_batch: $b is not an executable" >&2; exit 1; }
done

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

# start NAME BIN METRICS_PORT: a demo server; sets PID URL TOKEN
start() {
    local dir=$TMP/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    STOWAGE_SERVER__METRICS_LISTEN=127.0.0.1:$3 "$2" serve --demo --data-dir "$dir/data" \
        --listen 127.0.0.1:0 >"$dir/log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
    for _ in $(seq 600); do
        if [ -s "$dir/data/demo.json" ]; then
            URL=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['base_url'])" "$dir/data/demo.json")
            curl -fsS -o /dev/null "$URL/readyz" 2>/dev/null && break
        fi
        kill -0 "$PID" 2>/dev/null || { cat "$dir/log" >&2; exit 1; }
        sleep 0.1
    done
    TOKEN=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['events_token'])" "$dir/data/demo.json")
}

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

ratios=()
for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then
        first=$BASE second=$NEW batch_a=$BATCH batch_b=$NEW_BATCH
    else
        first=$NEW second=$BASE batch_a=$NEW_BATCH batch_b=$BATCH
    fi
    start a "$first" 9471; PA=$PID UA=$URL TA=$TOKEN
    start b "$second" 9472; PB=$PID UB=$URL TB=$TOKEN
    a0=$(cpu "$PA"); b0=$(cpu "$PB")
    "$STOWAGE_BIN" bench ingest --url "$UA" --token "$TA" --mix "$MIX" --mode "$MODE" \
        --batch-size "$batch_a" -c "$CONNECTIONS" -d "$DURATION" --json >"$TMP/a.json" 2>"$TMP/a.err" &
    LA=$!
    "$STOWAGE_BIN" bench ingest --url "$UB" --token "$TB" --mix "$MIX" --mode "$MODE" \
        --batch-size "$batch_b" -c "$CONNECTIONS" -d "$DURATION" --json >"$TMP/b.json" 2>"$TMP/b.err" ||
        failed b "$batch_b"
    wait "$LA" || failed a "$batch_a"
    a1=$(cpu "$PA"); b1=$(cpu "$PB")
    kill "$PA" "$PB"; wait "$PA" "$PB" 2>/dev/null || true
    PIDS=()
    line=$(python3 - "$TMP/a.json" "$TMP/b.json" "$((a1 - a0))" "$((b1 - b0))" "$((1 - round % 2))" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ticks_a, ticks_b = int(sys.argv[3]), int(sys.argv[4])
if not a["events"] or not b["events"]:
    sys.exit(f"ab_batch: no events accepted (statuses {a['status']} / {b['status']})")
us_a = ticks_a / 100 / a["events"] * 1e6
us_b = ticks_b / 100 / b["events"] * 1e6
new_first = sys.argv[5] == "1"  # even rounds start NEW first (BASE and NEW may be one build)
new_us, base_us = (us_a, us_b) if new_first else (us_b, us_a)
new_evs, base_evs = (a, b) if new_first else (b, a)
print(f"{new_us / base_us:.3f} base {base_us:.2f} us/ev {base_evs['events_per_s']:,.0f} ev/s"
      f" | new {new_us:.2f} us/ev {new_evs['events_per_s']:,.0f} ev/s"
      f" ({'new' if new_first else 'base'} started first)")
PY
)
    echo "round $round: new/base CPU an event $line"
    ratios+=("${line%% *}")
done
python3 -c "import sys,statistics as s;r=[float(x) for x in sys.argv[1:]];print(f'{len(r)} rounds, $MIX: new/base CPU an event mean {s.mean(r):.3f}, min {min(r):.3f}, max {max(r):.3f}')" "${ratios[@]}"
