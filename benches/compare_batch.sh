#!/usr/bin/env bash
# Batch ingest, stowage vs DuckDB, back to back on this machine (SPEC §6: events/s of
# POST /v1/batch as NDJSON, 500 events per request, durable acks, as a ratio of DuckDB
# converting the same NDJSON to Parquet locally; target >= 0.5).
#
# Usage, from anywhere (this script builds only the floor's benches/bare_axum, ~1 minute once):
#   cargo build --release
#   scripts/test   # once, or any other way to get target/py with DuckDB (see README)
#   benches/compare_batch.sh
#
# Environment (all optional):
#   EVENTS=1000000     events in the NDJSON file DuckDB converts, per mix. DuckDB's start-up
#                      (reading, sampling the schema, starting its threads) is a fixed cost: at
#                      100,000 events it was up to half of a narrow run and raised stowage's
#                      ratio 2x (narrow 0.46 against 0.24 at 400,000 and 0.18-0.20 at 1,000,000;
#                      BENCHMARKS.md, thirteenth session). A million lets DuckDB run at its
#                      steady rate, as stowage does over its 10 s.
#   DUCKDB_RUNS=3      DuckDB conversions of that file; the median is the baseline (at 100,000
#                      events one run of the narrow mix took ~0.13 s and varied 473k–822k
#                      events/s; at a million, 0.80–1.04 s)
#   MIXES="shop wide narrow sdk strings"   the event mixes (`stowage bench gen --mix`), each
#                      measured on its own: DuckDB, then a fresh stowage
#   DURATION=10s       length of the stowage run
#   BATCH=500          events per request
#   CONNECTIONS=8      concurrent keep-alive connections of the load generator
#   BENCH_THREADS=1    threads of `stowage bench ingest`
#   LOADGEN=bench      bench: `stowage bench ingest`; wrk: `wrk -t1 -c$CONNECTIONS` with
#                      benches/wrk_batch.lua (`apt-get install -y wrk`), which sends the mix's
#                      NDJSON file, 64 bodies round robin, every messageId made fresh
#   NDJSON=            an NDJSON file of Segment messages of your own (an SDK's, a tracking
#                      plan's) measured as one more mix named by its file: DuckDB converts it
#                      repeated to EVENTS lines, and stowage gets it through wrk (LOADGEN=wrk is
#                      implied for it; `stowage bench ingest` only sends generated mixes).
#                      MIXES="" measures that file alone
#   FLOOR=1            also, per mix, the floor of a server that stores nothing: the bare axum
#                      handler (benches/bare_axum, built here if missing) parsing every line with
#                      serde_json and answering after an fdatasync'd log write of the body
#                      (`--wal`, its log under TMPDIR, which must be a disk), under wrk with the
#                      mix's bodies whatever LOADGEN is (needs wrk), closed loop. It shows how
#                      much of DuckDB's rate HTTP, a parse and a durable write alone leave.
#                      0 skips it; with RATE it is skipped (its closed-loop CPU would not compare)
#   STORED=0           1: also, per mix, the stored floor: the floor, whose NDJSON batches are
#                      also decoded into Arrow columns (arrow-json, one schema inferred from the
#                      first batch) and written as Parquet, one table, ZSTD(3), a file every
#                      100,000 rows (`bare_axum --wal --store`, built here with its feature
#                      `store`, ~6 minutes once). It shows what keeping the events at all, and
#                      nothing of SPEC §4 (ids, dedup, names, two tables, a catalog), leaves.
#                      Its "stored" column counts the rows it wrote (a file's worth may still
#                      have been waiting when it stopped)
#   GZIP=0             1: send the batches gzipped (costs the load generator CPU)
#   RATE=              requests/s on a fixed schedule (open loop) instead of as fast as answered:
#                      for an A/B of two builds (SERVER_BIN) at the same load, where CPU µs/ev
#                      and peak RSS compare like for like — a closed-loop peak grows with the
#                      rate a build reaches. The ratio column then only reflects RATE.
#   PYTHON=target/py/bin/python   a Python with the duckdb package
#   STOWAGE_BIN=target/release/stowage   the load generator (and the server, unless SERVER_BIN)
#   SERVER_BIN=$STOWAGE_BIN   the server measured (A/B: an older build under the same load)
#   KEEP=1             keep the temporary directory (file, Parquet output, server log)
#
# Steps, per mix: (1) `stowage bench gen --mix M --events N` writes N generated messages as NDJSON
# (the ones `bench ingest --mix M` sends); for NDJSON, the file repeated to N lines. (2) DuckDB (default threads = all cores) runs
# `COPY (FROM read_json('events.ndjson')) TO 'out.parquet' (FORMAT parquet)` DUCKDB_RUNS times;
# events/s = N / the median wall time of that statement. (2b) With FLOOR=1, `bare_axum --wal`
# under wrk for DURATION (the same bodies). (3) A fresh `stowage serve --demo`
# (default config: durable acks), then `stowage bench ingest --mix M --mode ndjson --batch-size 500` for DURATION: acknowledged
# events/s, the server's CPU time over the run (/proc/PID/stat) — an event's, and as a share of
# all cores ("CPU %") —, its peak RSS (VmHWM), and the share of requests that waited for room
# in the team's budget ("waits", stowage_admission_waits_total): a mix whose server is below
# ~90 % CPU with many waits is bound by memory, one near 100 % by CPU.
# (4) One table: the ratio stowage / DuckDB per mix.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-1000000}
MIXES=${MIXES-shop wide narrow sdk strings}
LOADGEN=${LOADGEN:-bench}
NDJSON=${NDJSON:-}
DURATION=${DURATION:-10s}
BATCH=${BATCH:-500}
CONNECTIONS=${CONNECTIONS:-8}
BENCH_THREADS=${BENCH_THREADS:-1}
PYTHON=${PYTHON:-target/py/bin/python}
STOWAGE_BIN=${STOWAGE_BIN:-target/release/stowage}
FLOOR=${FLOOR:-1}
BASELINE_BIN=${BASELINE_BIN:-benches/bare_axum/target/release/bare_axum}
STORED=${STORED:-0}
STORED_BIN=benches/bare_axum/target/store/release/bare_axum
SERVER_BIN=${SERVER_BIN:-$STOWAGE_BIN}

if [ -n "$NDJSON" ]; then
    [ -s "$NDJSON" ] || { echo "compare_batch: NDJSON=$NDJSON is not a file with messages" >&2; exit 1; }
    NDJSON=$(realpath "$NDJSON")
fi
if [ "$LOADGEN" = wrk ] || [ -n "$NDJSON" ]; then
    command -v wrk >/dev/null || { echo "compare_batch: wrk not installed (apt-get install -y wrk)" >&2; exit 1; }
fi
if [ "$FLOOR" = 1 ] && ! command -v wrk >/dev/null; then
    echo "compare_batch: no wrk, so no floor (FLOOR=0)" >&2
    FLOOR=0
fi
if [ "$STORED" = 1 ] && ! command -v wrk >/dev/null; then
    echo "compare_batch: no wrk, so no stored floor (STORED=0)" >&2
    STORED=0
fi
[ -z "${RATE:-}" ] || { FLOOR=0; STORED=0; }
if [ "$FLOOR" = 1 ] && [ "$(stat -f -c %T "${TMPDIR:-/tmp}")" = tmpfs ]; then
    echo "compare_batch: ${TMPDIR:-/tmp} is tmpfs, where an fdatasync costs nothing: the floor's log" \
        "would not be durable (set TMPDIR to a directory on a disk, or FLOOR=0)" >&2
fi
if [ "$FLOOR" = 1 ] && [ "$BASELINE_BIN" = benches/bare_axum/target/release/bare_axum ]; then
    cargo build --release --quiet --manifest-path benches/bare_axum/Cargo.toml
fi
if [ "$STORED" = 1 ]; then
    cargo build --release --quiet --features store --target-dir benches/bare_axum/target/store \
        --manifest-path benches/bare_axum/Cargo.toml
fi
[ -x "$STOWAGE_BIN" ] || { echo "compare_batch: $STOWAGE_BIN not found; run cargo build --release" >&2; exit 1; }
"$PYTHON" -c 'import duckdb' 2>/dev/null || {
    echo "compare_batch: $PYTHON cannot import duckdb (scripts/test makes target/py with it)" >&2
    exit 1
}

TMP=$(mktemp -d)
SRV_PID=
BASE_PID=
cleanup() {
    [ -z "$SRV_PID" ] || kill "$SRV_PID" 2>/dev/null || true
    [ -z "$BASE_PID" ] || kill "$BASE_PID" 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then echo "compare_batch: kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
# run_wrk URL TOKEN OUT: wrk_batch.lua with $TMP/events.ndjson against URL; a summary as
# `stowage bench ingest --json` writes it into OUT.
run_wrk() {
    echo "   wrk -t1 -c$CONNECTIONS -d$DURATION -s benches/wrk_batch.lua (WRK_BATCH=$BATCH)" >&2
    STOWAGE_TOKEN=$2 WRK_EVENTS="$TMP/events.ndjson" WRK_BATCH=$BATCH \
        wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --timeout 30s -s benches/wrk_batch.lua "$1" >"$3.wrk.txt" 2>&1 || true
    python3 - "$3.wrk.txt" "$CONNECTIONS" >"$3" <<'EOF'
import json, sys
line = next((l for l in open(sys.argv[1]) if l.startswith("WRK_JSON ")), None)
if line is None:
    sys.exit("compare_batch: wrk printed no result:\n" + open(sys.argv[1]).read())
w = json.loads(line[len("WRK_JSON "):])
if w["ok"] == 0:
    sys.exit("compare_batch: no batch was accepted:\n" + open(sys.argv[1]).read())
print(json.dumps({"events_per_s": w["events_per_s"], "events": round(w["ok"] * w["per_request"]),
                  "requests": w["requests"], "ok": w["ok"], "batch_size": round(w["per_request"]),
                  "latency_ms": {"p50": w["p50_ms"], "p99": w["p99_ms"]},
                  "status": {"non_2xx": w["non_2xx"], "socket_errors": w["socket_errors"]},
                  "connections": int(sys.argv[2]), "gzip": False, "duration_s": w["duration_s"]}))
EOF
}

# run_floor MIX KIND BIN [ARGS…]: the bare handler BIN --wal (a log under $TMP) [ARGS…] under the
# mix's wrk load; results in $TMP/MIX.KIND.json, $TMP/MIX.KIND.cpu (its CPU seconds) and
# $TMP/MIX.KIND.hwm (its peak RSS, KiB).
run_floor() {
    local mix=$1 kind=$2 bin=$3
    shift 3
    local log="$TMP/$kind-$mix.log"
    "$bin" --listen 127.0.0.1:0 --wal "$TMP/floor-wal" "$@" >"$log" 2>&1 &
    BASE_PID=$!
    for _ in $(seq 600); do
        grep -q '^listening on ' "$log" 2>/dev/null && break
        kill -0 "$BASE_PID" 2>/dev/null || { cat "$log" >&2; exit 1; }
        sleep 0.1
    done
    local floor_url
    floor_url="http://$(sed -n 's/^listening on //p' "$log")"
    [ "$floor_url" != "http://" ] || { echo "compare_batch: the $kind never listened:" >&2; cat "$log" >&2; exit 1; }
    local floor_before
    floor_before=$(awk '{print $14 + $15}' "/proc/$BASE_PID/stat")
    run_wrk "$floor_url" unused "$TMP/$mix.$kind.json"
    echo "$(( $(awk '{print $14 + $15}' "/proc/$BASE_PID/stat") - floor_before )) $(getconf CLK_TCK)" |
        awk '{print $1 / $2}' >"$TMP/$mix.$kind.cpu"
    awk '/^VmHWM:/ {print $2}' "/proc/$BASE_PID/status" >"$TMP/$mix.$kind.hwm"
    kill "$BASE_PID" 2>/dev/null || true
    wait "$BASE_PID" 2>/dev/null || true
    BASE_PID=
    rm -rf "$TMP/floor-wal"
}

# run_mix MIX [FILE]: DuckDB on MIX's NDJSON (generated, or FILE repeated to EVENTS lines), then
# a fresh stowage under the load generator; results in $TMP/MIX.duckdb.json,
# $TMP/MIX.stowage.json, $TMP/MIX.hwm, $TMP/MIX.cpu.
run_mix() {
    local mix=$1 file=${2:-} loadgen=$LOADGEN
    if [ -n "$file" ]; then
        loadgen=wrk
        echo "== $mix: $file, repeated to $EVENTS lines" >&2
        python3 - "$file" "$EVENTS" "$TMP/events.ndjson" <<'EOF'
import itertools, sys
lines = [l for l in open(sys.argv[1], encoding="utf-8").read().splitlines() if l.strip()]
with open(sys.argv[3], "w", encoding="utf-8") as out:
    for line in itertools.islice(itertools.cycle(lines), int(sys.argv[2])):
        out.write(line + "\n")
EOF
    else
        echo "== $mix: stowage bench gen --mix $mix --events $EVENTS" >&2
        "$STOWAGE_BIN" bench gen --mix "$mix" --events "$EVENTS" --out "$TMP/events.ndjson"
    fi
    echo "== $mix: DuckDB: NDJSON -> Parquet" >&2
    "$PYTHON" - "$TMP" "$EVENTS" >"$TMP/$mix.duckdb.json" <<'EOF'
import json, os, sys, time
import duckdb
tmp, n = sys.argv[1], int(sys.argv[2])
con = duckdb.connect()
src, dst = os.path.join(tmp, "events.ndjson"), os.path.join(tmp, "out.parquet")
runs = []
for _ in range(int(os.environ.get("DUCKDB_RUNS", "3"))):
    t0 = time.perf_counter()
    con.execute(f"COPY (FROM read_json('{src}')) TO '{dst}' (FORMAT parquet)")
    runs.append(time.perf_counter() - t0)
    rows = con.execute(f"SELECT count(*) FROM read_parquet('{dst}')").fetchone()[0]
    assert rows == n, (rows, n)
secs = sorted(runs)[len(runs) // 2]
threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
print(json.dumps({"events": n, "seconds": round(secs, 3), "events_per_s": round(n / secs, 1),
                  "runs_s": [round(r, 3) for r in runs],
                  "threads": threads, "duckdb": duckdb.__version__,
                  "ndjson_mib": round(os.path.getsize(src) / 2**20, 1)}))
EOF
    echo "   $(json "$TMP/$mix.duckdb.json" "f\"{d['events']:,} events in {d['seconds']} s (median of {d['runs_s']}) = {d['events_per_s']:,.0f} events/s\"")" >&2
    rm -f "$TMP/out.parquet"

    # Wide events do not fit 500 to a request under the default 512 KiB body limit (nor under
    # Segment's own 500 KB): such mixes send as many as fit in 480 KiB, as an SDK would.
    local per_request
    per_request=$(python3 -c "import os; n=$EVENTS; b=os.path.getsize('$TMP/events.ndjson'); print(max(1, min($BATCH, int(480 * 1024 / (b / n)))))")
    if [ "$FLOOR" = 1 ]; then
        echo "== $mix: the floor: bare axum, serde_json a line, an fdatasync'd log (--wal)" >&2
        run_floor "$mix" floor "$BASELINE_BIN"
    fi
    if [ "$STORED" = 1 ]; then
        echo "== $mix: the stored floor: the floor, and the rows as Parquet (--wal --store)" >&2
        run_floor "$mix" stored "$STORED_BIN" --store "$TMP/floor-store"
        # What it wrote: every acknowledged row but the last file's worth still waiting.
        "$PYTHON" - "$TMP/floor-store" >"$TMP/$mix.stored.rows" <<'EOF'
import glob, sys
import duckdb
files = glob.glob(sys.argv[1] + "/*.parquet")
print(duckdb.connect().execute(f"SELECT count(*) FROM read_parquet({files!r})").fetchone()[0] if files else 0)
EOF
        rm -rf "$TMP/floor-store"
    fi
    echo "== $mix: stowage serve --demo (durable acks, default config)" >&2
    local data="$TMP/data-$mix"
    # Metrics on a port of its own (read after the run: admission waits).
    STOWAGE_SERVER__METRICS_LISTEN=127.0.0.1:0 "$SERVER_BIN" serve --demo --data-dir "$data" \
        --listen 127.0.0.1:0 >"$TMP/stowage-$mix.log" 2>&1 &
    SRV_PID=$!
    for _ in $(seq 600); do
        if [ -s "$data/demo.json" ]; then
            URL=$(json "$data/demo.json" "d['base_url']")
            curl -fsS -o /dev/null "$URL/readyz" 2>/dev/null && break
        fi
        kill -0 "$SRV_PID" 2>/dev/null || { cat "$TMP/stowage-$mix.log" >&2; exit 1; }
        sleep 0.1
    done
    curl -fsS -o /dev/null "$URL/readyz" || { echo "stowage never became ready" >&2; exit 1; }
    TOKEN=$(json "$data/demo.json" "d['events_token']")
    EXTRA=()
    [ "${GZIP:-0}" = 1 ] && EXTRA=(--gzip)
    [ -n "${RATE:-}" ] && EXTRA+=(--rate "$RATE")
    local before
    before=$(awk '{print $14 + $15}' "/proc/$SRV_PID/stat")
    if [ "$loadgen" = wrk ]; then
        run_wrk "$URL" "$TOKEN" "$TMP/$mix.stowage.json"
    else
        echo "   stowage bench ingest --mix $mix --mode ndjson --batch-size $per_request -c$CONNECTIONS -d$DURATION ${EXTRA[*]}" >&2
        if ! "$STOWAGE_BIN" bench ingest --url "$URL" --token "$TOKEN" --mix "$mix" --mode ndjson \
            --batch-size "$per_request" -c "$CONNECTIONS" --threads "$BENCH_THREADS" -d "$DURATION" "${EXTRA[@]}" \
            --json >"$TMP/$mix.stowage.json"; then
            echo "compare_batch: no batch was accepted:" >&2
            cat "$TMP/$mix.stowage.json" >&2
            exit 1
        fi
    fi
    echo "$(( $(awk '{print $14 + $15}' "/proc/$SRV_PID/stat") - before )) $(getconf CLK_TCK)" |
        awk '{print $1 / $2}' >"$TMP/$mix.cpu"
    awk '/^VmHWM:/ {print $2}' "/proc/$SRV_PID/status" >"$TMP/$mix.hwm"
    local metrics
    # The address the server logged (text logs; none found with log.format json: no waits).
    metrics=$(sed 's/\x1b\[[0-9;]*m//g' "$TMP/stowage-$mix.log" | grep -o 'metrics=[0-9.:]*' |
        head -1 | cut -d= -f2 || true)
    local scraped
    scraped=
    [ -n "$metrics" ] && scraped=$(curl -fsS "http://$metrics/metrics" 2>/dev/null || true)
    : >"$TMP/$mix.waits"
    # The counter appears with the first wait: scraped without it, none waited.
    [ -n "$scraped" ] && echo "$scraped" |
        awk '$1 == "stowage_admission_waits_total" {n = $2} END {print n + 0}' >"$TMP/$mix.waits"
    kill -TERM "$SRV_PID"
    wait "$SRV_PID" || echo "compare_batch: stowage exited with $?" >&2
    SRV_PID=
    rm -rf "$data"
}

for mix in $MIXES; do
    run_mix "$mix"
done
ALL=$MIXES
if [ -n "$NDJSON" ]; then
    OWN=$(basename "$NDJSON" .ndjson | tr -c 'A-Za-z0-9_\n-' '_')
    run_mix "$OWN" "$NDJSON"
    ALL="$ALL $OWN"
fi

python3 - "$TMP" "$ALL" "$LOADGEN" "$NDJSON" <<'EOF'
import json, os, sys
tmp, mixes, loadgen, own = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4]
print(f"batch ingest (NDJSON, durable acks, default config) vs DuckDB NDJSON -> Parquet, "
      f"{os.cpu_count()} cores; a fresh server per mix")
fmt = "{:<10} {:>10} {:>9} {:>12} {:>13} {:>6} {:>13} {:>10} {:>6} {:>6} {:>8}"
floor_of = lambda mix: os.path.exists(os.path.join(tmp, f"{mix}.floor.json"))
floors = any(floor_of(mix) for mix in mixes)
if floors:
    fmt += " {:>11} {:>6} {:>12}"
stored_of = lambda mix: os.path.exists(os.path.join(tmp, f"{mix}.stored.json"))
storeds = any(stored_of(mix) for mix in mixes)
if storeds:
    fmt += " {:>12} {:>6} {:>12} {:>8} {:>10}"
print(fmt.format("mix", "NDJSON MiB", "ev/req", "DuckDB ev/s", "stowage ev/s", "ratio", "p50/p99 ms",
                 "CPU µs/ev", "CPU %", "waits", "RSS MiB", *(("floor ev/s", "ratio", "CPU µs/ev") if floors else ()),
                 *(("stored ev/s", "ratio", "CPU µs/ev", "RSS MiB", "stored") if storeds else ())))
for mix in mixes:
    d = json.load(open(os.path.join(tmp, f"{mix}.duckdb.json")))
    s = json.load(open(os.path.join(tmp, f"{mix}.stowage.json")))
    hwm = int(open(os.path.join(tmp, f"{mix}.hwm")).read())
    cpu = float(open(os.path.join(tmp, f"{mix}.cpu")).read())
    lat = s["latency_ms"]
    # The share of the machine the server used over the run, and of its requests, those that
    # waited for room (ingest.admission_wait): how far the rate was bound by CPU or by memory.
    busy = cpu / max(s["duration_s"], 1e-9) / os.cpu_count() * 100
    waits = open(os.path.join(tmp, f"{mix}.waits")).read().strip()
    waited = f"{float(waits) / max(s['requests'], 1) * 100:.0f}%" if waits else "-"
    bad = s["requests"] - s["ok"]
    floor = ()
    if floors:
        floor = ("-", "-", "-")
        if floor_of(mix):
            f = json.load(open(os.path.join(tmp, f"{mix}.floor.json")))
            fcpu = float(open(os.path.join(tmp, f"{mix}.floor.cpu")).read())
            floor = (f"{f['events_per_s']:,.0f}", f"{f['events_per_s'] / d['events_per_s']:.2f}",
                     f"{fcpu / max(f['events'], 1) * 1e6:.1f}")
    stored = ()
    if storeds:
        stored = ("-",) * 5
        if stored_of(mix):
            f = json.load(open(os.path.join(tmp, f"{mix}.stored.json")))
            scpu = float(open(os.path.join(tmp, f"{mix}.stored.cpu")).read())
            shwm = int(open(os.path.join(tmp, f"{mix}.stored.hwm")).read())
            rows = int(open(os.path.join(tmp, f"{mix}.stored.rows")).read())
            stored = (f"{f['events_per_s']:,.0f}", f"{f['events_per_s'] / d['events_per_s']:.2f}",
                      f"{scpu / max(f['events'], 1) * 1e6:.1f}", f"{shwm / 1024:.0f}",
                      f"{rows / max(f['events'], 1) * 100:.0f}%")
    print(fmt.format(mix, d["ndjson_mib"], s["batch_size"], f"{d['events_per_s']:,.0f}", f"{s['events_per_s']:,.0f}",
                     f"{s['events_per_s'] / d['events_per_s']:.2f}", f"{lat['p50']:.1f}/{lat['p99']:.1f}",
                     f"{cpu / max(s['events'], 1) * 1e6:.1f}", f"{busy:.0f}", waited, f"{hwm / 1024:.0f}",
                     *floor, *stored)
          + (f"  ({bad} requests not 2xx: {s['status']})" if bad else ""))
print(f"DuckDB {d['duckdb']} ({d['threads']} threads); load generator {loadgen}"
      f"{' (wrk for ' + os.path.basename(own) + ')' if own else ''}, {s['connections']} connections"
      f"{', gzip' if s['gzip'] else ''}, {s['duration_s']:.1f} s per mix")
if floors:
    print("floor: benches/bare_axum --wal under the same wrk load — HTTP, serde_json a line and an "
          "fdatasync'd log write of each body, nothing stored; its ratio to DuckDB is what those "
          "alone leave")
if storeds:
    print("stored floor: benches/bare_axum --wal --store — the floor, and each batch decoded by arrow-json "
          "(one schema) and written as Parquet (one table, ZSTD 3, a file every 100,000 rows); "
          "'stored' = rows written / events acknowledged")
EOF
