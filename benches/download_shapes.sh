#!/usr/bin/env bash
# Download benchmark over table shapes written by DuckDB and pyarrow with their defaults
# (issue 11 part 4). Runs benches/download_shapes.py with the project's Python venv; every
# argument is passed through. See the docstring of download_shapes.py for what it measures.
#
#   benches/download_shapes.sh --rows 200000 --repeat 1                          # smoke test, ~1 min
#   benches/download_shapes.sh --sizes 1000000,5000000 --repeat 3 --out results.json  # ~45-60 min
#
# Env: PY (default target/py/bin/python, created with duckdb/pyarrow/numpy when missing),
#      STOWAGE_BIN (default target/release/stowage; build it first: cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/py_env.sh
echo "free space: $(df -h --output=avail "${TMPDIR:-/tmp}" | tail -1 | tr -d ' ') on ${TMPDIR:-/tmp}," \
     "$(df -h --output=avail /dev/shm | tail -1 | tr -d ' ') on /dev/shm" >&2
exec "$PY" benches/download_shapes.py --bin "$BIN" "$@"
