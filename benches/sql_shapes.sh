#!/usr/bin/env bash
# SQL elements against DuckDB running the same SQL over the same files (issue 29). Runs
# benches/sql_shapes.py with the project's Python venv; every argument is passed through. See the
# docstring of sql_shapes.py for what it measures.
#
#   benches/sql_shapes.sh --rows 200000 --repeat 1        # smoke test, ~1 min
#   benches/sql_shapes.sh --repeat 3 --out sql.json       # 5M rows, BENCHMARKS.md's table
#
# Env: PY (default target/py/bin/python, created with duckdb/pyarrow/numpy when missing),
#      STOWAGE_BIN (default target/release/stowage; build it first: cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/py_env.sh
exec "$PY" benches/sql_shapes.py --bin "$BIN" "$@"
