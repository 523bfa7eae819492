#!/usr/bin/env bash
# Single-event ingest, stowage vs a bare axum handler, back to back on this machine (SPEC §6:
# requests/s of POST /v1/event with durable acks as a ratio of a bare axum handler that parses
# the same JSON and answers 200; target >= 0.75).
#
# Usage, from anywhere (this script builds the baseline, ~1 minute the first time, not stowage):
#   cargo build --release
#   benches/compare_ingest.sh
#
# Environment (all optional):
#   DURATION=10s       length of each load run
#   CONNECTIONS=64     concurrent keep-alive connections (wrk -c, stowage bench -c)
#   BENCH_THREADS=1    threads of `stowage bench ingest` (wrk runs with -t1)
#   RUNS=3             wrk runs, each a bare baseline then a fresh stowage
#   FLOOR=1            also, in each wrk run, the durable floor: the same bare handler answering
#                      only after its body is fsync'd to a log (`bare_axum --wal`, one writer
#                      thread, group commit, a pre-zeroed file) — what any design with fsync'd
#                      acks and nothing else to do reaches on this machine. 0 skips it
#   STOWAGE_BIN=target/release/stowage
#   BASELINE_BIN=benches/bare_axum/target/release/bare_axum   (a crate of its own: as an
#                      example of the main package it rebuilt every dependency, ~20 minutes)
#   KEEP=1             keep the temporary directory (server logs, data dir, raw results)
# Needs python3 (to read JSON) and wrk (`apt-get install -y wrk`; without it the wrk row is
# skipped).
#
# Steps: (0) `stowage bench gen` writes 1,024 messages for wrk to send (benches/wrk_event.lua
# gives each a fresh messageId). (1) RUNS times: the bare baseline on 127.0.0.1:0 under wrk,
# stopped, then a fresh `stowage serve --demo` in its own data dir (token from DIR/demo.json,
# wait for /readyz) under the same wrk (with FLOOR=1, between the two, `bare_axum --wal`); each server's CPU time over its wrk run (/proc/PID/stat)
# gives the CPU per request. (2) `stowage bench ingest` closed loop against a fresh baseline and
# a fresh stowage, then `stowage bench ingest --rate` at 80 % of the rate stowage reached, for the
# p99 under sustained load. Each server's peak RSS (VmHWM) is read before it is stopped with
# SIGTERM. (3) Print the table. Servers run one at a time, sharing the machine with the load
# generator, so compare the ratios of one run, not absolute numbers across runs.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
BENCH_THREADS=${BENCH_THREADS:-1}
STOWAGE_BIN=${STOWAGE_BIN:-target/release/stowage}
BASELINE_BIN=${BASELINE_BIN:-benches/bare_axum/target/release/bare_axum}
if [ "$BASELINE_BIN" = benches/bare_axum/target/release/bare_axum ]; then
    cargo build --release --quiet --manifest-path benches/bare_axum/Cargo.toml
fi
RUNS=${RUNS:-3}
FLOOR=${FLOOR:-1}
if [ "$FLOOR" = 1 ] && [ "$(stat -f -c %T "${TMPDIR:-/tmp}")" = tmpfs ]; then
    echo "compare_ingest: ${TMPDIR:-/tmp} is tmpfs, where an fdatasync costs nothing: the floor's log" \
        "would not be durable (set TMPDIR to a directory on a disk, or FLOOR=0)" >&2
fi

for bin in "$STOWAGE_BIN" "$BASELINE_BIN"; do
    if [ ! -x "$bin" ]; then
        echo "compare_ingest: $bin not found; build first:" >&2
        echo "  cargo build --release" >&2
        exit 1
    fi
done
HAVE_WRK=1
command -v wrk >/dev/null || {
    HAVE_WRK=0
    echo "compare_ingest: wrk not installed (apt-get install -y wrk); skipping the wrk row" >&2
}

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ "${KEEP:-0}" = 1 ]; then echo "compare_ingest: kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

# json FILE EXPR: evaluate a Python expression over the JSON object `d` in FILE.
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# The messages wrk sends: the generator's own, so both load generators send the same shapes.
"$STOWAGE_BIN" bench gen --events 1024 --out "$TMP/events.ndjson"

# run_wrk URL TOKEN OUT: wrk against URL/v1/event; its WRK_JSON line into OUT.
run_wrk() {
    STOWAGE_TOKEN=$2 WRK_EVENTS="$TMP/events.ndjson" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" -s benches/wrk_event.lua "$1" \
        >"$3.txt"
    sed -n 's/^WRK_JSON //p' "$3.txt" >"$3"
    [ -s "$3" ] || { echo "compare_ingest: wrk printed no result:" >&2; cat "$3.txt" >&2; exit 1; }
}

# run_bench URL TOKEN OUT [ARGS…]: stowage bench ingest, its JSON summary into OUT.
run_bench() {
    local url=$1 token=$2 out=$3
    shift 3
    "$STOWAGE_BIN" bench ingest --url "$url" --token "$token" --mode single \
        -c "$CONNECTIONS" --threads "$BENCH_THREADS" -d "$DURATION" --json "$@" >"$out" || {
        echo "compare_ingest: stowage bench ingest failed against $url:" >&2
        cat "$out" >&2
        exit 1
    }
}

# cpu_ticks PID: user + system CPU of PID so far, in clock ticks (/proc/PID/stat fields 14, 15).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# start_baseline: the bare axum handler on a free port; sets BASE_URL, BASE_PID.
BASELINES=0
# start_baseline [ARGS…]: ARGS go to the baseline (`--wal DIR`: the durable floor).
start_baseline() {
    # A log of its own per start: the previous one's "listening on" must never be read.
    BASELINES=$((BASELINES + 1))
    local log="$TMP/baseline_$BASELINES.log"
    "$BASELINE_BIN" --listen 127.0.0.1:0 "$@" >"$log" 2>&1 &
    BASE_PID=$!
    PIDS+=("$BASE_PID")
    BASE_URL=
    # With --wal it zeroes and syncs its 512 MiB log before it listens.
    for _ in $(seq 600); do
        grep -q '^listening on ' "$log" 2>/dev/null && break
        kill -0 "$BASE_PID" 2>/dev/null || break
        sleep 0.1
    done
    BASE_URL="http://$(sed -n 's/^listening on //p' "$log")"
    [ "$BASE_URL" != "http://" ] || { cat "$log" >&2; exit 1; }
}

# start_stowage NAME: `stowage serve --demo` in the fresh data dir $TMP/NAME; sets URL, TOKEN,
# SRV_PID. Every measurement gets a fresh server, so no run inherits another's data, flushes or
# memory (a server's rate drifts as it fills).
start_stowage() {
    local data="$TMP/$1"
    "$STOWAGE_BIN" serve --demo --data-dir "$data" --listen 127.0.0.1:0 >"$TMP/$1.log" 2>&1 &
    SRV_PID=$!
    PIDS+=("$SRV_PID")
    URL=
    for _ in $(seq 600); do
        if [ -s "$data/demo.json" ]; then
            URL=$(json "$data/demo.json" "d['base_url']")
            curl -fsS -o /dev/null "$URL/readyz" 2>/dev/null && break
        fi
        kill -0 "$SRV_PID" 2>/dev/null || { cat "$TMP/$1.log" >&2; exit 1; }
        sleep 0.1
    done
    curl -fsS -o /dev/null "$URL/readyz" || { echo "stowage never became ready" >&2; exit 1; }
    TOKEN=$(json "$data/demo.json" "d['events_token']")
}

# stop_stowage NAME: record the server's peak RSS (VmHWM, KiB) in $TMP/NAME.hwm, then SIGTERM.
stop_stowage() {
    awk '/^VmHWM:/ {print $2}' "/proc/$SRV_PID/status" >"$TMP/$1.hwm"
    kill -TERM "$SRV_PID"
    wait "$SRV_PID" || echo "compare_ingest: stowage exited with $?" >&2
}

# measure PID NAME CMD…: runs CMD, and writes the CPU seconds PID used meanwhile to NAME.cpu.
measure() {
    local pid=$1 name=$2
    shift 2
    local before
    before=$(cpu_ticks "$pid")
    "$@"
    echo "$(( $(cpu_ticks "$pid") - before )) $TICK" | awk '{print $1 / $2}' >"$TMP/$name.cpu"
}

# Each run: the baseline under wrk, then a fresh stowage under wrk — so every ratio has its own
# baseline, taken a few seconds before it.
for run in $(seq "$RUNS"); do
    if [ $HAVE_WRK = 1 ]; then
        echo "== run $run: bare axum, wrk -t1 -c$CONNECTIONS -d$DURATION" >&2
        start_baseline
        measure "$BASE_PID" "wrk_base_$run" run_wrk "$BASE_URL" unused "$TMP/wrk_base_$run.json"
        kill "$BASE_PID"; wait "$BASE_PID" 2>/dev/null || true
        if [ "$FLOOR" = 1 ]; then
            echo "== run $run: bare axum + fsync'd log (--wal), wrk -t1 -c$CONNECTIONS -d$DURATION" >&2
            start_baseline --wal "$TMP/floor_wal_$run"
            measure "$BASE_PID" "wrk_floor_$run" run_wrk "$BASE_URL" unused "$TMP/wrk_floor_$run.json"
            kill "$BASE_PID"; wait "$BASE_PID" 2>/dev/null || true
            rm -rf "$TMP/floor_wal_$run"
        fi
        echo "== run $run: stowage serve --demo (durable acks), wrk -t1 -c$CONNECTIONS -d$DURATION" >&2
        start_stowage "s_wrk_$run"
        measure "$SRV_PID" "wrk_stowage_$run" run_wrk "$URL" "$TOKEN" "$TMP/wrk_stowage_$run.json"
        stop_stowage "s_wrk_$run"
    fi
done

echo "== bare axum, stowage bench ingest -c$CONNECTIONS -d$DURATION" >&2
start_baseline
run_bench "$BASE_URL" unused "$TMP/bench_base.json"
kill "$BASE_PID"; wait "$BASE_PID" 2>/dev/null || true
echo "== stowage, stowage bench ingest -c$CONNECTIONS -d$DURATION" >&2
start_stowage s_bench
run_bench "$URL" "$TOKEN" "$TMP/bench_stowage.json"
stop_stowage s_bench
MAX=$(json "$TMP/bench_stowage.json" "d['ok_per_s']")
RATE=$(python3 -c "print(round(0.8 * $MAX, 1))")
echo "   stowage bench ingest --rate $RATE (80 % of $MAX req/s)" >&2
start_stowage s_rate
run_bench "$URL" "$TOKEN" "$TMP/bench_rate.json" --rate "$RATE"
stop_stowage s_rate
HWM_KIB=$(sort -n "$TMP"/s_*.hwm | tail -1)

python3 - "$TMP" "$HAVE_WRK" "$HWM_KIB" "$CONNECTIONS" "$DURATION" "$BENCH_THREADS" "$RUNS" <<'EOF'
import json, os, sys
tmp, have_wrk, hwm_kib, conns, duration, threads, runs = sys.argv[1:]
load = lambda name: json.load(open(os.path.join(tmp, name)))
cpu = lambda name: float(open(os.path.join(tmp, name + ".cpu")).read())
rows = []
if have_wrk == "1":
    for run in range(1, int(runs) + 1):
        b, s = load(f"wrk_base_{run}.json"), load(f"wrk_stowage_{run}.json")
        rows.append((f"wrk -t1 -c{conns} (run {run})", b["requests_per_s"], s["requests_per_s"],
                     (b["p50_ms"], b["p99_ms"]), (s["p50_ms"], s["p99_ms"]),
                     b["non_2xx"] + b["socket_errors"], s["non_2xx"] + s["socket_errors"]))
        bc, sc = cpu(f"wrk_base_{run}"), cpu(f"wrk_stowage_{run}")
        floor = ""
        if os.path.exists(os.path.join(tmp, f"wrk_floor_{run}.json")):
            f, fc = load(f"wrk_floor_{run}.json"), cpu(f"wrk_floor_{run}")
            rows.append((f"  durable floor (run {run})", b["requests_per_s"], f["requests_per_s"],
                         (b["p50_ms"], b["p99_ms"]), (f["p50_ms"], f["p99_ms"]),
                         b["non_2xx"] + b["socket_errors"], f["non_2xx"] + f["socket_errors"]))
            floor = f", durable floor {fc / f['requests'] * 1e6:.1f} µs"
        print(f"run {run}: server CPU per request: bare {bc / b['requests'] * 1e6:.1f} µs "
              f"({bc:.2f} s for {b['requests']:,}), stowage {sc / s['requests'] * 1e6:.1f} µs "
              f"({sc:.2f} s for {s['requests']:,}){floor}")
b, s = load("bench_base.json"), load("bench_stowage.json")
bad = lambda d: d["requests"] - d["ok"]
rows.append((f"stowage bench -c{conns} -t{threads}", b["ok_per_s"], s["ok_per_s"],
             (b["latency_ms"]["p50"], b["latency_ms"]["p99"]),
             (s["latency_ms"]["p50"], s["latency_ms"]["p99"]), bad(b), bad(s)))
print(f"single-event ingest (POST /v1/event, durable acks), {conns} connections, {duration} per run, "
      f"{os.cpu_count()} cores shared by server and load generator")
head = ("load generator", "baseline req/s", "stowage req/s", "ratio", "baseline p50/p99 ms",
        "stowage p50/p99 ms", "non-2xx/errors b/s")
fmt = "{:<26} {:>15} {:>14} {:>6}  {:>20}  {:>20}  {:>18}"
print(fmt.format(*head))
for name, br, sr, bl, sl, be, se in rows:
    print(fmt.format(name, f"{br:,.0f}", f"{sr:,.0f}", f"{sr / br:.2f}",
                     f"{bl[0]:.2f} / {bl[1]:.2f}", f"{sl[0]:.2f} / {sl[1]:.2f}", f"{be} / {se}"))
if any(name.startswith("  durable floor") for name, *_ in rows):
    print("(durable floor rows: `bare_axum --wal` in the stowage column — the bare handler whose "
          "answer waits for an fdatasync'd log write, and nothing else)")
r = load("bench_rate.json")
lat = r["latency_ms"]
print(f"stowage p99 at 80 % of the closed-loop max ({r['target_rate']:,.0f} req/s open loop, "
      f"{r['ok_per_s']:,.0f} req/s answered 2xx): p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms, "
      f"p99.9 {lat['p999']:.2f} ms, {r['late']} sends late")
print(f"stowage peak RSS (VmHWM), the largest of the three servers: {int(hwm_kib) / 1024:.1f} MiB")
EOF
