#!/usr/bin/env bash
# Batch ingest, stowage vs DuckDB, back to back on this machine (SPEC §6: events/s of
# POST /v1/batch as NDJSON, 500 events per request, durable acks, as a ratio of DuckDB
# converting the same NDJSON to Parquet locally; target >= 0.5).
#
# Usage, from anywhere (this script builds nothing):
#   cargo build --release
#   scripts/test   # once, or any other way to get target/py with DuckDB (see README)
#   benches/compare_batch.sh
#
# Environment (all optional):
#   EVENTS=200000      events in the NDJSON file DuckDB converts
#   DURATION=10s       length of the stowage run
#   BATCH=500          events per request
#   CONNECTIONS=8      concurrent keep-alive connections of `stowage bench ingest`
#   BENCH_THREADS=1    threads of `stowage bench ingest`
#   GZIP=0             1: send the batches gzipped (costs the load generator CPU)
#   PYTHON=target/py/bin/python   a Python with the duckdb package
#   STOWAGE_BIN=target/release/stowage
#   KEEP=1             keep the temporary directory (file, Parquet output, server log)
#
# Steps: (1) `stowage bench gen --events N` writes N generated Segment `track` messages (the
# ones `bench ingest` sends) as NDJSON. (2) DuckDB (default threads = all cores) runs
# `COPY (FROM read_json('events.ndjson')) TO 'out.parquet' (FORMAT parquet)`; events/s = N / the
# wall time of that statement. (3) `stowage serve --demo` in a fresh data dir (default config:
# durable acks), then `stowage bench ingest --mode ndjson --batch-size 500` for DURATION:
# acknowledged events/s. (4) The ratio stowage / DuckDB.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-200000}
DURATION=${DURATION:-10s}
BATCH=${BATCH:-500}
CONNECTIONS=${CONNECTIONS:-8}
BENCH_THREADS=${BENCH_THREADS:-1}
PYTHON=${PYTHON:-target/py/bin/python}
STOWAGE_BIN=${STOWAGE_BIN:-target/release/stowage}

[ -x "$STOWAGE_BIN" ] || { echo "compare_batch: $STOWAGE_BIN not found; run cargo build --release" >&2; exit 1; }
"$PYTHON" -c 'import duckdb' 2>/dev/null || {
    echo "compare_batch: $PYTHON cannot import duckdb (scripts/test makes target/py with it)" >&2
    exit 1
}

TMP=$(mktemp -d)
SRV_PID=
cleanup() {
    [ -z "$SRV_PID" ] || kill "$SRV_PID" 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then echo "compare_batch: kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

echo "== stowage bench gen --events $EVENTS" >&2
"$STOWAGE_BIN" bench gen --events "$EVENTS" --out "$TMP/events.ndjson"

echo "== DuckDB: NDJSON -> Parquet" >&2
"$PYTHON" - "$TMP" "$EVENTS" >"$TMP/duckdb.json" <<'EOF'
import json, os, sys, time
import duckdb
tmp, n = sys.argv[1], int(sys.argv[2])
con = duckdb.connect()
src, dst = os.path.join(tmp, "events.ndjson"), os.path.join(tmp, "out.parquet")
t0 = time.perf_counter()
con.execute(f"COPY (FROM read_json('{src}')) TO '{dst}' (FORMAT parquet)")
secs = time.perf_counter() - t0
rows = con.execute(f"SELECT count(*) FROM read_parquet('{dst}')").fetchone()[0]
assert rows == n, (rows, n)
threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
print(json.dumps({"events": n, "seconds": round(secs, 3), "events_per_s": round(n / secs, 1),
                  "threads": threads, "duckdb": duckdb.__version__,
                  "ndjson_mib": round(os.path.getsize(src) / 2**20, 1)}))
EOF
echo "   $(json "$TMP/duckdb.json" "f\"{d['events']:,} events in {d['seconds']} s = {d['events_per_s']:,.0f} events/s\"")" >&2

echo "== stowage serve --demo (durable acks, default config)" >&2
DATA="$TMP/data"
"$STOWAGE_BIN" serve --demo --data-dir "$DATA" --listen 127.0.0.1:0 >"$TMP/stowage.log" 2>&1 &
SRV_PID=$!
for _ in $(seq 600); do
    if [ -s "$DATA/demo.json" ]; then
        URL=$(json "$DATA/demo.json" "d['base_url']")
        curl -fsS -o /dev/null "$URL/readyz" 2>/dev/null && break
    fi
    kill -0 "$SRV_PID" 2>/dev/null || { cat "$TMP/stowage.log" >&2; exit 1; }
    sleep 0.1
done
curl -fsS -o /dev/null "$URL/readyz" || { echo "stowage never became ready" >&2; exit 1; }
TOKEN=$(json "$DATA/demo.json" "d['events_token']")
GZ=()
[ "${GZIP:-0}" = 1 ] && GZ=(--gzip)
echo "   stowage bench ingest --mode ndjson --batch-size $BATCH -c$CONNECTIONS -d$DURATION ${GZ[*]}" >&2
if ! "$STOWAGE_BIN" bench ingest --url "$URL" --token "$TOKEN" --mode ndjson --batch-size "$BATCH" \
    -c "$CONNECTIONS" --threads "$BENCH_THREADS" -d "$DURATION" "${GZ[@]}" --json >"$TMP/stowage.json"; then
    echo "compare_batch: no batch was accepted (does this build have POST /v1/batch?):" >&2
    cat "$TMP/stowage.json" >&2
    exit 1
fi
HWM_KIB=$(awk '/^VmHWM:/ {print $2}' "/proc/$SRV_PID/status")
kill -TERM "$SRV_PID"
wait "$SRV_PID" || echo "compare_batch: stowage exited with $?" >&2
SRV_PID=

python3 - "$TMP" "$HWM_KIB" <<'EOF'
import json, os, sys
tmp, hwm = sys.argv[1], int(sys.argv[2])
d = json.load(open(os.path.join(tmp, "duckdb.json")))
s = json.load(open(os.path.join(tmp, "stowage.json")))
print(f"batch ingest (NDJSON, {s['batch_size']} events/request{', gzip' if s['gzip'] else ''}, "
      f"durable acks), {os.cpu_count()} cores")
print(f"DuckDB {d['duckdb']} ({d['threads']} threads): {d['events']:,} events "
      f"({d['ndjson_mib']} MiB NDJSON) -> Parquet in {d['seconds']:.3f} s = {d['events_per_s']:,.0f} events/s")
lat = s["latency_ms"]
print(f"stowage, {s['connections']} connections, {s['duration_s']:.1f} s: {s['events']:,} events acknowledged "
      f"= {s['events_per_s']:,.0f} events/s ({s['ok_per_s']:,.1f} req/s; p50 {lat['p50']:.1f} ms, "
      f"p99 {lat['p99']:.1f} ms; statuses {s['status']}, transport errors {s['transport_errors']})")
print(f"ratio stowage / DuckDB: {s['events_per_s'] / d['events_per_s']:.2f}  (target >= 0.5)")
print(f"stowage peak RSS (VmHWM): {hwm / 1024:.1f} MiB")
EOF
