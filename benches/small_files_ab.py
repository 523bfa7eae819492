"""Two builds reading the same table of many small files, one after the other, alternated: the
time of a JSON download (best of three per server start, after one to warm the catalog and the
page cache), four starts of each. The table is written once by BASE_BIN: FILES imports of ten
CSV rows and five columns, compaction off.

Usage, with a Python that has pyarrow and duckdb (download_bench imports them; the test
command's venv has both): target/py/bin/python benches/small_files_ab.py BASE_BIN NEW_BIN [FILES]
"""
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import download_bench as d  # noqa: E402

BASE, NEW = sys.argv[1], sys.argv[2]
FILES = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
tmp = Path(tempfile.mkdtemp())
data = tmp / "small"
d.BIN = Path(BASE)
t = time.perf_counter()
srv, key, canvas, element = d.small_files_table(
    data, FILES, row=lambda n: f"{n},row {n},{n % 10 * 1.5},{n % 10 % 3},w{n % 10}", header="n,label,x,y,z")
print("imported", FILES, round(time.perf_counter() - t, 1), "s", flush=True)
srv.stop()
srv = None
try:
    res = {"base": [], "new": []}
    for r in range(4):
        for name, b in (("base", BASE), ("new", NEW)) if r % 2 == 0 else (("new", NEW), ("base", BASE)):
            d.BIN = Path(b)
            srv = d.Server(str(data), {"STOWAGE_COMPACTION__ENABLED": "false"})
            d.curl_download(srv.url, key, canvas, element)  # warm the catalog and page cache
            s = min(d.curl_download(srv.url, key, canvas, element)[0] for _ in range(3))
            res[name].append(s)
            srv.stop()
        print(r, {k: round(v[-1], 3) for k, v in res.items()}, flush=True)
    print("base", [round(x, 3) for x in res["base"]], "new", [round(x, 3) for x in res["new"]])
    print("new/base mean", round(sum(n / b for n, b in zip(res["new"], res["base"])) / len(res["new"]), 3))
finally:
    if srv and srv.proc.poll() is None:
        srv.stop()
    shutil.rmtree(tmp)
