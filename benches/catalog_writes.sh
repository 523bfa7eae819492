#!/usr/bin/env bash
# Catalog write throughput on PostgreSQL (issue 31, BENCHMARKS.md "Catalog writes"): flushes/s
# and write transactions/s with 1, 4 and 16 concurrent flushers of different teams, each on its
# own catalog handle (one node each), against a throwaway PostgreSQL with the default durability
# (fsync and synchronous_commit on, unlike the tests' cluster).
#
#   benches/catalog_writes.sh            # STOWAGE_BENCH_SECS per point (default 5)
#
# Needs initdb/pg_ctl (Debian: /usr/lib/postgresql/*/bin). Runs the ignored test
# `catalog_write_throughput` of tests/catalog_writes.rs in release mode, niced.
set -euo pipefail
cd "$(dirname "$0")/.."
PGBIN=$(dirname "$(realpath "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")
W=$(mktemp -d /tmp/stowage-catalog-bench.XXXXXX)
chmod 755 "$W"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }
cleanup() {
  as_pg "$PGBIN/pg_ctl" -D "$W/pg/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT
PGPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
install -d "$W/pg"
[ "$(id -u)" = 0 ] && chown nobody "$W/pg"
as_pg "$PGBIN/initdb" -D "$W/pg/data" -U postgres --auth=trust >/dev/null
as_pg nice -n 19 "$PGBIN/pg_ctl" -D "$W/pg/data" -l "$W/pg/log" -w \
  -o "-p $PGPORT -k $W/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
"$PGBIN/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -c 'CREATE DATABASE bench' postgres
echo "PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), fsync on, synchronous_commit on; $(nproc) cores"
STOWAGE_BENCH_PG_URL="postgres://postgres@127.0.0.1:$PGPORT/bench" \
  nice -n 19 cargo test --release --test it -- --ignored --nocapture catalog_writes::catalog_write_throughput
