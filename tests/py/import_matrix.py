"""Compatibility matrix for Parquet import (SPEC 3.2): files written by pyarrow, pandas, polars
and DuckDB with their defaults, plus every codec and every type, are imported into a running
stowage and downloaded; each download must equal the writer's own reading of the file, value
for value (timestamps as UTC microseconds; decimals up to precision 15 as float64, wider ones as
their exact digits; uint64 beyond int64 as digits).

usage: import_matrix.py BASE_URL TOKEN KEY CANVAS STOWAGE_BIN DATA_DIR WORK_DIR
"""

import datetime
import decimal
import json
import os
import subprocess
import sys
import urllib.request

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

BASE, TOKEN, KEY, CANVAS, BIN, DATA, WORK = sys.argv[1:8]
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}


def http(path, body, headers):
    req = urllib.request.Request(BASE + path, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def expected_column(col):
    """The writer's own reading of one column, in the warehouse's terms."""
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_timestamp(t):
        raw = col.cast(pa.int64()).to_pylist()
        per = UNIT_US[t.unit]
        return [None if v is None else (v // 1000 if per is None else v * per) for v in raw]
    if pa.types.is_date(t):
        days = col.cast(pa.date32()).cast(pa.int32()).to_pylist()
        return [None if d is None else d * 86_400_000_000 for d in days]
    vals = col.to_pylist()
    if pa.types.is_decimal(t):
        if t.precision <= 15:
            return [None if v is None else float(v) for v in vals]
        return [None if v is None else str(v) for v in vals]
    if pa.types.is_uint64(t) and any(v is not None and v >= 2**63 for v in vals):
        return [None if v is None else str(v) for v in vals]
    if pa.types.is_floating(t):
        # JSON downloads write NaN and infinities as null (SPEC 3.1).
        return [None if v is None or v != v or v in (float("inf"), float("-inf")) else float(v)
                for v in vals]
    return vals


def downloaded(doc):
    types = {m["name"]: m["type"] for m in doc["meta"]}
    out = {n: [] for n in types}
    for row in doc["data"]:
        for n, ty in types.items():
            v = row[n]
            if ty == "timestamp" and v is not None:
                dt = datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
                d = dt - EPOCH
                v = (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
            out[n].append(v)
    return out


def check(label, path):
    table = "m_" + label
    with open(path, "rb") as f:
        status, body = http(
            f"/v1/import?table={table}&format=parquet",
            f.read(),
            {"X-Auth-Token": TOKEN, "Content-Type": "application/octet-stream"},
        )
    if status != 200:
        return [f"{label}: import answered {status}: {body.decode()[:300]}"]
    el = json.loads(
        subprocess.run(
            [BIN, "admin", "element", "create", "--canvas", CANVAS, "--table", table,
             "--data-dir", DATA, "--json"],
            check=True, capture_output=True,
        ).stdout
    )["id"]
    status, body = http(
        "/data/table",
        json.dumps({"canvasId": CANVAS, "elementId": el}).encode(),
        {"x-api-key": KEY, "Content-Type": "application/json"},
    )
    if status != 200:
        return [f"{label}: download answered {status}"]
    got = downloaded(json.loads(body))
    want_table = pq.read_table(path)
    problems = []
    for name in want_table.column_names:
        col = name.lower()  # every name in this matrix is already snake_case
        want = expected_column(want_table.column(name))
        have = got.get(col)
        if have != want:
            problems.append(f"{label}.{name} ({want_table.schema.field(name).type}): "
                            f"want {want[:4]}, got {None if have is None else have[:4]}")
    return problems


def typed_table():
    n = [0, 1, None]
    return pa.table({
        "i8": pa.array([-128, 127, None], pa.int8()),
        "i32": pa.array([-(2**31), 2**31 - 1, None], pa.int32()),
        "i64": pa.array([-(2**63), 2**63 - 1, None], pa.int64()),
        "u8": pa.array([0, 255, None], pa.uint8()),
        "u32": pa.array([0, 2**32 - 1, None], pa.uint32()),
        "u64_small": pa.array([0, 2**63 - 1, None], pa.uint64()),
        "u64_big": pa.array([1, 2**64 - 1, None], pa.uint64()),
        "f32": pa.array([0.1, -1.5, None], pa.float32()),
        "f64": pa.array([91343.24026397243, 1e300, None], pa.float64()),
        "dec_narrow": pa.array([decimal.Decimal("1234.56"), decimal.Decimal("-0.01"), None],
                               pa.decimal128(10, 2)),
        "dec_wide": pa.array([decimal.Decimal("12345678901234567.8901"), decimal.Decimal("-1.0000"),
                              None], pa.decimal128(21, 4)),
        "d32": pa.array([datetime.date(2024, 2, 29), datetime.date(1969, 12, 31), None], pa.date32()),
        "ts_s": pa.array([0, 1_700_000_000, None], pa.timestamp("s")),
        "ts_ms_ny": pa.array([1_700_000_000_123, -1, None], pa.timestamp("ms", tz="America/New_York")),
        "ts_us_utc": pa.array([1_700_000_000_123_456, 0, None], pa.timestamp("us", tz="UTC")),
        "ts_ns": pa.array([1_700_000_000_123_456_789, -1, None], pa.timestamp("ns")),
        "ts_ns_off": pa.array([5_000, 1_700_000_000_000_000_001, None], pa.timestamp("ns", tz="+05:30")),
        "s": pa.array(["a \"q\"\nline", "ünï ✓", None]),
        "ls": pa.array(["x", "", None], pa.large_string()),
        "dict": pa.array(["red", "blue", None]).dictionary_encode(),
        "b": pa.array([True, False, None]),
        "nothing": pa.array([None, None, None], pa.null()),
        "n": pa.array(n, pa.int64()),
    })


def main():
    os.makedirs(WORK, exist_ok=True)
    files = []
    t = typed_table()
    # pyarrow: defaults (snappy), then every codec.
    p = os.path.join(WORK, "pyarrow_default.parquet")
    pq.write_table(t, p)
    files.append(("pyarrow_default", p))
    for codec in ["none", "snappy", "gzip", "lz4", "brotli", "zstd"]:
        p = os.path.join(WORK, f"pyarrow_{codec}.parquet")
        pq.write_table(t, p, compression=codec)
        files.append((f"pyarrow_{codec}", p))
    p = os.path.join(WORK, "pyarrow_v1_plain_small_groups.parquet")
    pq.write_table(t, p, data_page_version="1.0", use_dictionary=False, row_group_size=1, data_page_size=64)
    files.append(("pyarrow_v1_plain", p))
    # pandas defaults: naive datetime64[ns], object strings, category, nullable ints.
    df = pd.DataFrame({
        "when": pd.to_datetime(["2024-01-02 03:04:05.123456789", "1999-12-31 00:00:00", None], format="mixed"),
        "name": ["a", None, "c"],
        "cat": pd.Categorical(["x", "y", "x"]),
        "qty": pd.array([1, None, 3], dtype="Int64"),
        "price": [1.5, float("nan"), 2.25],
        "ok": [True, False, True],
    })
    p = os.path.join(WORK, "pandas_default.parquet")
    df.to_parquet(p)
    files.append(("pandas_default", p))
    # DuckDB defaults: naive TIMESTAMP, DATE, DECIMAL(18,3), TIMESTAMPTZ, UBIGINT, HUGEINT-free.
    p = os.path.join(WORK, "duckdb_default.parquet")
    duckdb.sql(f"""COPY (SELECT * FROM (VALUES
        (1, 'one', TIMESTAMP '2024-05-06 07:08:09.123456', DATE '2024-05-06', 12.345::DECIMAL(18,3),
         1.5::DOUBLE, true, TIMESTAMPTZ '2024-05-06 07:08:09+02', 18446744073709551615::UBIGINT,
         3.25::DECIMAL(9,2), 7::SMALLINT),
        (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL))
        t(id, label, ts, d, amount, score, flag, tstz, big, small_dec, small_int))
        TO '{p}' (FORMAT parquet)""")
    files.append(("duckdb_default", p))
    try:
        import polars as pl
        p = os.path.join(WORK, "polars_default.parquet")
        pl.DataFrame({
            "when": [datetime.datetime(2024, 1, 2, 3, 4, 5, 6), None],
            "name": ["a", None],
            "cat": pl.Series(["x", "y"], dtype=pl.Categorical),
            "v": [1.5, None],
            "n": [1, 2],
        }).write_parquet(p)
        files.append(("polars_default", p))
    except ImportError:
        print("polars not installed; skipped")
    problems = []
    for label, path in files:
        problems += check(label, path)
    for p in problems:
        print(p)
    print(f"{len(files)} files checked, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
