# Sourced by the Python benchmark wrappers: sets PY (default target/py/bin/python, a venv made
# with duckdb/pyarrow/numpy when missing) and BIN (STOWAGE_BIN, default target/release/stowage;
# build it first: cargo build --release). Run from the project root.
PY=${PY:-target/py/bin/python}
BIN=${STOWAGE_BIN:-target/release/stowage}
if [ ! -x "$PY" ]; then
  python3 -m venv target/py
  PY=target/py/bin/python
fi
if ! "$PY" -c 'import duckdb, pyarrow, numpy' 2>/dev/null; then
  "$PY" -m pip install -q duckdb pyarrow numpy
fi
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release first (or set STOWAGE_BIN)" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }
