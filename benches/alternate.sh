#!/usr/bin/env bash
# Builds of the server measured one at a time, alternated: for a change whose effect goes
# through the memory budget or the flushes (how long a request waits for room, how big a flush
# is), which two servers sharing the machine (benches/ab_batch.sh) do not reach — each of those
# runs at half the rate, below its budget. Each run is one server alone under the full load, so
# runs differ with the machine's speed from minute to minute: alternate several rounds and
# compare the means.
#
# Usage, from anywhere (builds nothing; needs wrk):
#   benches/alternate.sh MIX ROUNDS BIN [BIN...]
#
# Each round runs every BIN in turn: a fresh `serve --demo` (default config, durable acks), wrk
# -t1 -c$CONNECTIONS for DURATION with benches/wrk_batch.lua on the mix's NDJSON (`stowage bench
# gen --mix MIX`), then one line: events/s, the server's CPU an event (/proc/PID/stat), peak
# RSS (VmHWM), RSS 3 s after the load, p99, refusals, and from its metrics the requests that
# waited for room (stowage_admission_waits_total), the flushes and their seconds.
#
# Environment (all optional):
#   CONNECTIONS=16   wrk connections
#   DURATION=10s     load per run
#   BATCH=500        events a request (wrk_batch.lua cuts a body at 480 KiB)
#   STOWAGE_BIN=target/release/stowage   generates the mix's NDJSON
#   NDJSON=FILE      send FILE's messages instead (MIX then only names the runs), e.g. the
#                    foreign mix (benches/foreign_mix.py)
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 3 ] || { echo "usage: benches/alternate.sh MIX ROUNDS BIN [BIN...]" >&2; exit 2; }
MIX=$1 ROUNDS=$2
shift 2
CONNECTIONS=${CONNECTIONS:-16}
DURATION=${DURATION:-10s}
BATCH=${BATCH:-500}
STOWAGE_BIN=${STOWAGE_BIN:-target/release/stowage}
command -v wrk >/dev/null || { echo "alternate: needs wrk (apt-get install -y wrk)" >&2; exit 1; }
for b in "$@" "$STOWAGE_BIN"; do
    [ -x "$b" ] || { echo "alternate: $b is not an executable" >&2; exit 1; }
done

TMP=$(mktemp -d)
SRV_PID=
cleanup() {
    [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
if [ -n "${NDJSON:-}" ]; then
    cp "$NDJSON" "$TMP/events.ndjson"
else
    "$STOWAGE_BIN" bench gen --mix "$MIX" --events 100000 --out "$TMP/events.ndjson"
fi

for round in $(seq "$ROUNDS"); do
    for bin in "$@"; do
        data="$TMP/data"
        rm -rf "$data"
        STOWAGE_SERVER__METRICS_LISTEN=127.0.0.1:0 "$bin" serve --demo --data-dir "$data" \
            --listen 127.0.0.1:0 >"$TMP/server.log" 2>&1 &
        SRV_PID=$!
        for _ in $(seq 600); do
            [ -s "$data/demo.json" ] && break
            kill -0 "$SRV_PID" 2>/dev/null || { cat "$TMP/server.log" >&2; exit 1; }
            sleep 0.1
        done
        [ -s "$data/demo.json" ] || { echo "alternate: $bin never wrote demo.json" >&2; exit 1; }
        url=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['base_url'])" "$data/demo.json")
        token=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['events_token'])" "$data/demo.json")
        for _ in $(seq 100); do curl -fsS -o /dev/null "$url/readyz" 2>/dev/null && break; sleep 0.1; done
        curl -fsS -o /dev/null "$url/readyz" || { echo "alternate: $bin never became ready" >&2; exit 1; }
        before=$(awk '{print $14 + $15}' "/proc/$SRV_PID/stat")
        STOWAGE_TOKEN=$token WRK_EVENTS="$TMP/events.ndjson" WRK_BATCH=$BATCH \
            wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --timeout 30s -s benches/wrk_batch.lua "$url" \
            >"$TMP/wrk.txt" 2>&1 || true
        after=$(awk '{print $14 + $15}' "/proc/$SRV_PID/stat")
        hwm=$(awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$SRV_PID/status")
        metrics=$(sed 's/\x1b\[[0-9;]*m//g' "$TMP/server.log" | grep -o 'metrics=[0-9.:]*' |
            head -1 | cut -d= -f2 || true)
        scraped=
        [ -n "$metrics" ] && scraped=$(curl -fsS "http://$metrics/metrics" 2>/dev/null || true)
        sleep 3
        idle=$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$SRV_PID/status")
        kill -TERM "$SRV_PID"
        wait "$SRV_PID" || true
        SRV_PID=
        echo "$scraped" | python3 -c '
import json, sys
wrk, cpu, tck, hwm, idle, name, rnd = sys.argv[1:8]
line = next((l for l in open(wrk) if l.startswith("WRK_JSON ")), None)
if line is None:
    sys.exit("alternate: wrk printed no result:\n" + open(wrk).read())
w = json.loads(line[len("WRK_JSON "):])
m = {}
for l in sys.stdin:
    parts = l.split()
    if len(parts) == 2 and not l.startswith("#"):
        m[parts[0]] = float(parts[1])
events = max(w["ok"] * w["per_request"], 1)
rate, p99, refused, requests = w["events_per_s"], w["p99_ms"], w["non_2xx"], w["requests"]
waited = m.get("stowage_admission_waits_total", 0)
flushes = m.get("stowage_flushes_total", 0)
flush_s = m.get("stowage_flush_seconds_sum", 0)
cpu_us = int(cpu) / int(tck) / events * 1e6
print(f"round {rnd} {name:24.24} {rate:9,.0f} ev/s  CPU {cpu_us:6.2f} µs/ev  peak {hwm} MiB  "
      f"idle {idle} MiB  p99 {p99:.0f} ms  refused {refused}  waited {waited:.0f}/{requests}  "
      f"flushes {flushes:.0f} ({flush_s:.1f} s)")
' "$TMP/wrk.txt" "$((after - before))" "$(getconf CLK_TCK)" "$hwm" "$idle" "$(basename "$bin")" "$round"
    done
done
