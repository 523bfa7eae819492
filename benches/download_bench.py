"""Download benchmarks for BENCHMARKS.md, all in one run on one machine:

1. A table of N events-shaped rows (default 5M) imported into stowage; download rows/s over HTTP
   (curl to /dev/null) for json, ndjson, csv, arrow and gzip'd json, against DuckDB's
   COPY (FROM read_parquet(...)) TO ... (FORMAT json) on the same Parquet file.
2. The server's peak RSS (VmHWM) while downloading tables of two sizes.
3. A table of many small files: download time before and after compaction.

Usage: cargo build --release && python3 benches/download_bench.py [--rows 5000000] [--small-files 10000]
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

BIN = Path(__file__).resolve().parent.parent / "target/release/stowage"


def events_table(n):
    import pyarrow.compute as pc
    i = pa.array(range(n), pa.int64())
    ts = pc.add(pa.scalar(1_700_000_000_000_000, pa.int64()), pc.multiply(i, pa.scalar(1000, pa.int64())))
    ts = ts.cast(pa.timestamp("us", tz="UTC"))
    return pa.table({
        "id": pc.cast(i, pa.string()),
        "event": pa.array(["purchased_an_item"] * n),
        "event_text": pa.array(["Purchased an Item"] * n),
        "timestamp": ts,
        "received_at": ts,
        "user_id": pc.binary_join_element_wise("u", pc.cast(pc.bit_wise_and(i, pa.scalar(1023, pa.int64())), pa.string()), ""),
        "revenue": pc.divide(pc.cast(pc.bit_wise_and(i, pa.scalar(4095, pa.int64())), pa.float64()), pa.scalar(7.0)),
        "shipping_method": pc.if_else(pc.equal(pc.bit_wise_and(i, pa.scalar(1, pa.int64())), 0), "Premium", "Standard"),
        "qty": pc.bit_wise_and(i, pa.scalar(15, pa.int64())),
    })


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def admin(data, *args):
    out = subprocess.run([BIN, "admin", "--json", "--data-dir", data, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


class Server:
    def __init__(self, data, env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        e = dict(os.environ, STOWAGE_LOG__LEVEL="warn", **(env or {}))
        self.proc = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", data], env=e)
        for _ in range(600):
            try:
                if subprocess.run(["curl", "-sf", f"{self.url}/readyz"], capture_output=True).returncode == 0:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def hwm_mib(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


def curl_download(url, key, canvas, element, fmt=None, gzip=False):
    body = {"canvasId": canvas, "elementId": element}
    if fmt:
        body["format"] = fmt
    cmd = ["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download} %{http_code}", "-X", "POST", f"{url}/data/table",
           "-H", f"x-api-key: {key}", "-d", json.dumps(body)]
    if gzip:
        cmd += ["-H", "Accept-Encoding: gzip"]
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
    secs = time.perf_counter() - t
    assert out[1] == "200", out
    return secs, int(out[0])


def setup(data):
    admin(data, "team", "create", "--name", "bench")
    admin(data, "user", "create", "--team", "bench", "--email", "owner@bench.example", "--name", "owner", "--role", "owner")
    key = admin(data, "key", "create", "--team", "bench", "--user", "owner")["key"]
    canvas = admin(data, "canvas", "create", "--team", "bench", "--name", "c")["id"]
    return key, canvas


def small_files_table(data, files, row=lambda n: f"{n},row {n}", header="n,label"):
    """A team in `data` with table `many` of `files` imports of ten CSV rows each (`row` of the
    row's number, under `header`), written by a server started with compaction off, which is
    returned running: (server, key, canvas, element)."""
    key, canvas = setup(str(data))
    admin(str(data), "events", "enable", "--team", "bench")
    token = admin(str(data), "token", "create", "--team", "bench", "--user", "owner")["token"]
    element = admin(str(data), "element", "create", "--canvas", canvas, "--table", "many")["id"]
    srv = Server(str(data), {"STOWAGE_COMPACTION__ENABLED": "false"})
    for f in range(files):
        csv = header + "\n" + "".join(row(f * 10 + i) + "\n" for i in range(10))
        subprocess.run(["curl", "-sf", "-o", "/dev/null", "-X", "POST", f"{srv.url}/v1/import?table=many",
                        "-H", f"X-Auth-Token: {token}", "-H", "Content-Type: text/csv", "--data-binary", csv], check=True)
    return srv, key, canvas, element


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--small-rows", type=int, default=1_000_000, help="second table size for the RSS comparison")
    ap.add_argument("--small-files", type=int, default=10_000, help="0 skips the compaction part")
    a = ap.parse_args()
    assert BIN.exists(), "cargo build --release first"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # 1 + 2: big table, formats, DuckDB baseline, RSS at two sizes.
        for n in [a.small_rows, a.rows]:
            data = tmp / f"d{n}"
            key, canvas = setup(str(data))
            src = tmp / f"events{n}.parquet"
            pq.write_table(events_table(n), src, compression="zstd", row_group_size=100_000)
            t = time.perf_counter()
            admin(str(data), "table", "import", "--team", "bench", "--table", "events", str(src))
            import_s = time.perf_counter() - t
            element = admin(str(data), "element", "create", "--canvas", canvas, "--table", "events")["id"]
            srv = Server(str(data), {"STOWAGE_COMPACTION__ENABLED": "false"})
            base_rss = srv.hwm_mib()
            row = {"rows": n, "import_s": round(import_s, 2), "idle_rss_mib": round(base_rss, 1)}
            fmts = [("json", None, False)] if n != a.rows else [("json", None, False), ("ndjson", "ndjson", False),
                                                                  ("csv", "csv", False), ("arrow", "arrow", False),
                                                                  ("parquet", "parquet", False), ("json+gzip", None, True)]
            for label, fmt, gz in fmts:
                secs, size = curl_download(srv.url, key, canvas, element, fmt, gz)
                row[label] = {"s": round(secs, 2), "rows_per_s": round(n / secs), "mib": round(size / 2**20, 1)}
                if label == "json":
                    row["peak_rss_json_mib"] = round(srv.hwm_mib(), 1)
            row["peak_rss_mib"] = round(srv.hwm_mib(), 1)
            srv.stop()
            if n == a.rows:
                con = duckdb.connect()
                con.execute("SET threads TO 2")
                out = tmp / "duck.json"
                t = time.perf_counter()
                con.execute(f"COPY (FROM read_parquet('{src}')) TO '{out}' (FORMAT json)")
                secs = time.perf_counter() - t
                row["duckdb_copy_json"] = {"s": round(secs, 2), "rows_per_s": round(n / secs), "mib": round(out.stat().st_size / 2**20, 1)}
                row["ratio_json_vs_duckdb"] = round(row["json"]["rows_per_s"] / row["duckdb_copy_json"]["rows_per_s"], 2)
                out.unlink()
            results[f"table_{n}"] = row
            print(json.dumps(row), flush=True)

        # 3: many small files, before and after compaction.
        if a.small_files == 0:
            return
        data = tmp / "small"
        srv, key, canvas, element = small_files_table(data, a.small_files)
        before, _ = curl_download(srv.url, key, canvas, element)
        srv.stop()
        srv = Server(str(data), {"STOWAGE_COMPACTION__INTERVAL": "1s", "STOWAGE_COMPACTION__MIN_FILES": "2"})
        db = data / "catalog.sqlite"
        t = time.perf_counter()
        while True:
            live = int(subprocess.run(["sqlite3", str(db), "SELECT count(*) FROM data_files WHERE table_name='many' AND retired_at IS NULL"],
                                      capture_output=True, text=True).stdout.strip() or 0)
            if live <= 2:
                break
            time.sleep(0.5)
        compact_s = time.perf_counter() - t
        after, _ = curl_download(srv.url, key, canvas, element)
        srv.stop()
        row = {"files_before": a.small_files, "files_after": live, "rows": a.small_files * 10, "download_before_s": round(before, 3),
               "download_after_s": round(after, 3), "speedup": round(before / after, 1), "compaction_s": round(compact_s, 1)}
        results["small_files"] = row
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
