"""Independent check of stowage downloads: pyarrow and DuckDB read the arrow, parquet, csv and
ndjson downloads of one table and must agree with its JSON download, value for value and type
for type. Usage: check_formats.py DIR (holding table.json, .ndjson, .csv, .arrow, .parquet)."""
import datetime as dt
import json
import math
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

d = Path(sys.argv[1])
doc = json.loads((d / "table.json").read_text())
meta = [(m["name"], m["type"]) for m in doc["meta"]]
names = [n for n, _ in meta]

ARROW = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "boolean": pa.bool_(),
         "timestamp": pa.timestamp("us", tz="UTC")}
DUCK = {"string": "VARCHAR", "int64": "BIGINT", "float64": "DOUBLE", "boolean": "BOOLEAN",
        "timestamp": "TIMESTAMP WITH TIME ZONE"}


def norm(value, ty):
    """A comparable Python value for a JSON cell of warehouse type `ty`."""
    if value is None:
        return None
    if ty == "timestamp":
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return value.astimezone(dt.timezone.utc)
    if ty == "float64":
        f = float(value)
        return None if math.isnan(f) else f
    return value


expected = [tuple(norm(row[n], t) for n, t in meta) for row in doc["data"]]
assert len(expected) == doc["rows"], "rows count matches data"


def check(label, rows, types):
    assert types == [t for _, t in meta], f"{label}: types {types} != {[t for _, t in meta]}"
    got = [tuple(norm(v, t) for v, (_, t) in zip(r, meta)) for r in rows]
    assert len(got) == len(expected), f"{label}: {len(got)} rows, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"{label}: row {i} differs:\n  got      {g}\n  expected {e}"
    print(f"{label}: {len(got)} rows agree")


def from_arrow_table(label, table):
    assert table.column_names == names, f"{label}: columns {table.column_names}"
    types = []
    for field in table.schema:
        match = [k for k, v in ARROW.items() if v == field.type]
        assert match, f"{label}: unexpected type {field.type} for {field.name}"
        types.append(match[0])
    check(label, [tuple(r[n] for n in names) for r in table.to_pylist()], types)


from_arrow_table("arrow (pyarrow)", pa.ipc.open_stream((d / "table.arrow").read_bytes()).read_all())
from_arrow_table("parquet (pyarrow)", pq.read_table(d / "table.parquet"))

con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")
columns = "{" + ", ".join(f"'{n}': '{DUCK[t]}'" for n, t in meta) + "}"
for label, sql in [
    ("parquet (duckdb)", f"SELECT * FROM read_parquet('{d / 'table.parquet'}')"),
    ("csv (duckdb)", f"SELECT * FROM read_csv('{d / 'table.csv'}', header=true, columns={columns})"),
    ("ndjson (duckdb)", f"SELECT * FROM read_json('{d / 'table.ndjson'}', format='newline_delimited', columns={columns})"),
]:
    rel = con.sql(sql)
    duck_types = [str(t) for t in rel.types]
    types = []
    for t in duck_types:
        match = [k for k, v in DUCK.items() if v == t]
        assert match, f"{label}: unexpected DuckDB type {t}"
        types.append(match[0])
    check(label, rel.fetchall(), types)
print("all formats agree")
