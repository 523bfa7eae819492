"""DuckDB as the oracle for SQL elements: runs each query over the same Parquet files the
service read (the live files of each table, by the catalog's snapshot) and compares its rows
with the service's JSON download, as multisets, value by value.

stdin: {"tables": {"name": ["/abs/file.parquet", ...]},
        "cases": [{"sql": "...", "ours": {"meta": [...], "data": [...]}}]}
stdout: {"checked": n, "failures": [{"sql": ..., "why": ...}]}
"""
import datetime as dt
import json
import sys

import duckdb


def micros_of(v):
    if isinstance(v, str):
        s = v.replace("Z", "+00:00")
        v = dt.datetime.fromisoformat(s)
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        delta = v - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(v, dt.date):
        return micros_of(dt.datetime(v.year, v.month, v.day))
    raise TypeError(f"not a timestamp: {v!r}")


def norm(v, ty):
    if v is None:
        return None
    if ty == "timestamp":
        return ("ts", micros_of(v))
    if ty == "int64":
        return ("i", int(v))
    if ty == "float64":
        f = float(v)
        return ("f", float(f"{f:.9g}"))
    if ty == "boolean":
        return ("b", bool(v))
    if isinstance(v, (dt.datetime,)):
        return ("s", v.isoformat())
    if isinstance(v, dt.date):
        return ("s", v.isoformat())
    if isinstance(v, float) and v.is_integer():
        return ("s", str(int(v)))
    return ("s", str(v))


def main():
    spec = json.load(sys.stdin)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, files in spec["tables"].items():
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(
            f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet([{listed}], '
            "union_by_name = true, hive_partitioning = false)"
        )
    failures = []
    for case in spec["cases"]:
        sql, ours = case["sql"], case["ours"]
        types = [m["type"] for m in ours["meta"]]
        names = [m["name"] for m in ours["meta"]]
        try:
            theirs = con.execute(sql).fetchall()
        except Exception as e:  # noqa: BLE001 - reported, not raised
            failures.append({"sql": sql, "why": f"duckdb failed: {e}"})
            continue
        if theirs and len(theirs[0]) != len(types):
            failures.append({"sql": sql, "why": f"duckdb has {len(theirs[0])} columns, ours {len(types)}"})
            continue
        a = sorted((tuple(norm(r[n], t) for n, t in zip(names, types)) for r in ours["data"]), key=repr)
        b = sorted((tuple(norm(v, t) for v, t in zip(r, types)) for r in theirs), key=repr)
        if a != b:
            only_a = [r for r in a if r not in b][:3]
            only_b = [r for r in b if r not in a][:3]
            failures.append({
                "sql": sql,
                "why": f"{len(a)} rows vs duckdb {len(b)}; only ours: {only_a}; only duckdb: {only_b}",
            })
    print(json.dumps({"checked": len(spec["cases"]), "failures": failures}))


if __name__ == "__main__":
    main()
