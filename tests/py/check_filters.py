"""DuckDB evaluates each download filter on the warehouse's own Parquet files; the ids it finds
must be exactly the ids stowage returned. Usage: check_filters.py GLOB CASES.json where CASES is
[{"filter": {"column", "op", "value"?}, "type": "int64|...", "ids": [...]}]."""
import json
import sys

import duckdb

glob, cases = sys.argv[1], json.load(open(sys.argv[2]))
con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")


def literal(v, ty):
    if ty == "timestamp":
        return f"TIMESTAMPTZ '{v}'"
    if ty == "string":
        return "'" + str(v).replace("'", "''") + "'"
    if ty == "boolean":
        return "TRUE" if v else "FALSE"
    return repr(v)


SQL = {"eq": "=", "ne": "<>", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}
for case in cases:
    f, ty = case["filter"], case["type"]
    col = '"' + f["column"] + '"'
    if f["op"] == "is_null":
        cond = f"{col} IS NULL"
    elif f["op"] == "not_null":
        cond = f"{col} IS NOT NULL"
    elif f["op"] == "in":
        cond = f"{col} IN ({', '.join(literal(v, ty) for v in f['value'])})"
    else:
        cond = f"{col} {SQL[f['op']]} {literal(f['value'], ty)}"
    rows = con.sql(f"SELECT id FROM read_parquet('{glob}', union_by_name=true, hive_partitioning=false) WHERE {cond}").fetchall()
    duck = sorted(r[0] for r in rows)
    ours = sorted(case["ids"])
    assert duck == ours, f"{f}: duckdb {len(duck)} rows {duck[:5]}..., stowage {len(ours)} rows {ours[:5]}..."
    print(f"{f['op']:>8} {f['column']:<10} {len(ours):>4} rows agree")
print("all filters agree")
