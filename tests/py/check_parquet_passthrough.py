"""Independent check of a Parquet passthrough download against the decode path's download of the
same table. Usage: check_parquet_passthrough.py PASSTHROUGH.parquet ENCODED.parquet

pyarrow, DuckDB and (when installed) polars read both files; each reader must see the same
column names, the same types and the same rows in the same order, value for value. Prints one
JSON line describing the passthrough file's row groups (rows, whether each has page indexes,
the compression of its chunks) for the Rust test to check which were copied."""
import json
import sys

import duckdb
import pyarrow.parquet as pq

copied_path, encoded_path = sys.argv[1], sys.argv[2]

a, b = pq.read_table(copied_path), pq.read_table(encoded_path)
assert a.schema.equals(b.schema, check_metadata=False), f"pyarrow schemas differ:\n{a.schema}\n{b.schema}"
ra, rb = a.to_pylist(), b.to_pylist()
assert len(ra) == len(rb), f"pyarrow: {len(ra)} rows vs {len(rb)}"
for i, (x, y) in enumerate(zip(ra, rb)):
    assert x == y, f"pyarrow: row {i} differs:\n  passthrough {x}\n  encoded     {y}"

con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")
da = con.sql(f"SELECT * FROM read_parquet('{copied_path}')")
db = con.sql(f"SELECT * FROM read_parquet('{encoded_path}')")
assert da.columns == db.columns and [str(t) for t in da.types] == [str(t) for t in db.types], \
    f"DuckDB schemas differ: {da.columns} {da.types} vs {db.columns} {db.types}"
assert da.fetchall() == db.fetchall(), "DuckDB reads different rows"

try:
    import polars as pl
except ImportError:
    pl = None
if pl is not None:
    pa_, pb_ = pl.read_parquet(copied_path), pl.read_parquet(encoded_path)
    assert pa_.schema == pb_.schema, f"polars schemas differ: {pa_.schema} vs {pb_.schema}"
    assert pa_.equals(pb_, null_equal=True), "polars reads different rows"

meta = pq.ParquetFile(copied_path).metadata
groups = []
for g in range(meta.num_row_groups):
    rg = meta.row_group(g)
    cols = [rg.column(c) for c in range(rg.num_columns)]
    groups.append({
        "rows": rg.num_rows,
        "column_index": all(c.has_column_index for c in cols),
        "offset_index": all(c.has_offset_index for c in cols),
        "stats": all(c.is_stats_set for c in cols),
    })
print(json.dumps({"rows": len(ra), "columns": a.column_names, "polars": pl is not None,
                  "row_groups": groups}))
