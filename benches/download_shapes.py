#!/usr/bin/env python3
"""Download benchmark over table shapes stowage did not design for (issue 11, part 4).

What it measures
----------------
For each *shape* x *writer* x *size*:

* Builds a Parquet file with the writer's **defaults** (no codec, row-group or version option):
  - writer `duckdb`:  `COPY (SELECT … FROM range(N)) TO 'f.parquet'` (snappy, 122,880-row groups);
    data generated in SQL from `hash(range, seed, k)`, so deterministic for a given `--seed`
    and DuckDB version;
  - writer `pyarrow`: `pq.write_table(t, 'f.parquet')` (snappy, 1Mi-row groups, format 2.6, so
    nanosecond timestamps stay nanoseconds); data from numpy `default_rng(seed)`, vectorised.
* Shapes (the generator code below is the definition):
  - `events`:  message id (hex text), user id, nullable anonymous id, event name from a set of 7,
    naive timestamps (DuckDB `TIMESTAMP` = µs; pyarrow `timestamp[ns]` like pandas), revenue and
    quantity as *text* numbers ('39.95', '3'), nullable plan / coupon / page_url / is_mobile;
  - `wide`:    100 columns c000…c099 cycling int64, float64, string, bool (float columns alternate
    short decimals like 12345.678 and full-precision doubles); every 10th column ~10 % nulls;
  - `strings`: id plus title / body / author / note / path built from fragments with double and
    single quotes, backslashes, real newlines, CRLF, tabs, a control character, JSON and HTML
    snippets, accents (é), CJK (日本), Cyrillic, Arabic and emoji (🎉, 👍🏽);
  - `numeric`: id, a (int64), x (full-precision double), y (short double).
* Imports each file into a fresh data dir with `stowage admin table import --team T --table NAME
  FILE` (timed; the CLI's own peak RSS from wait4), creates an unfiltered, unprojected table
  element per table.
* For every format (json, ndjson, csv, arrow, parquet — the request body's `format` field, which
  wins over `Accept`; README "POST /data/table") downloads the whole table with
  `POST /data/table` and discards the bytes, recording wall time, bytes, time to first byte, the
  server's CPU seconds (utime+stime from /proc/<pid>/stat) and the server's peak RSS.
* Baselines in the same run on the same Parquet file: DuckDB `COPY (FROM read_parquet('f')) TO
  'o' (FORMAT json)` and `(FORMAT csv)` on a fresh `duckdb.connect()` with default threads (= all
  cores), timed around the COPY only; the output goes to /dev/shm when it has room (DuckDB cannot
  write every format to /dev/null), else to the temp dir, and is deleted after each run. DuckDB's
  output size is reported. NB DuckDB's `FORMAT json` writes newline-delimited JSON (closer to
  stowage's ndjson than to its json envelope); both are compared against it.
* Repeats each measurement `--repeat` times, interleaved (repeat 1 of every format and baseline,
  then repeat 2, …) so drift on a shared machine hits all of them alike; reports median and min.

Ratios (speed ratios, > 1 means stowage is faster; computed on medians):
  `vs DuckDB`     json, ndjson, arrow, parquet: DuckDB json COPY time / stowage time;
                  csv: DuckDB csv COPY time / stowage csv time;
  `vs json`       stowage json time / this format's time (Parquet target: ≥ 3).
Targets (issue 11): json ≥ 2 × DuckDB json, csv ≥ 2 × DuckDB csv, parquet ≥ 3 × stowage json,
peak RSS flat in table size (use `--sizes 1000000,5000000`).

Method choices
--------------
* Client: `curl -o /dev/null` (default, `--client curl`): a separate C process that discards into
  /dev/null, so it does not share Python's GIL with the RSS sampler, and its CPU (from wait4,
  including its exec) is reported per download (`client CPU`, as % of the wall time). Measured
  against `--client python` (`http.client`, `readinto` a 1 MiB buffer) on 500k-row tables: curl
  was 10–15 % faster in wall time (events json 0.40 vs 0.46 s, numeric json 0.104 vs 0.119 s),
  both using < 15 % of a core for the big responses; `--client python` stays for comparison.
* Peak RSS: a **fresh server per measurement** (a few hundred ms each) and its `VmHWM` read after
  the download, before it is stopped. VmHWM is a process-lifetime high-water mark, so one server
  across formats would report the largest format for all later ones; a restart isolates each
  measurement and catches spikes a sampler would miss. Before the timed download a 1-row request
  (`limit: 1`) warms the catalog and file footers; the RSS then is reported as `idle`. A 20 ms
  `VmRSS` sampler runs as a cross-check (`rss_sampled_mib` in the JSON).
* Compaction is disabled on the server (`STOWAGE_COMPACTION__ENABLED=false`) so nothing runs in
  the background; logging at warn.

Caveats
-------
* The project's machine has 2 cores: curl and the server share them, and DuckDB uses both. A
  download that is CPU-bound in the server is slowed by the client's CPU (shown in the table).
* Other builds on the box skew absolute numbers; compare ratios from one run. DuckDB's COPY and
  stowage's downloads of one table are interleaved for that reason.
* Files are read from the page cache (written just before), both by stowage and by DuckDB.
* DuckDB parallelises a read over row groups: pyarrow's default 1Mi-row groups leave it one
  thread per million rows, so it is much slower on pyarrow-written files than on DuckDB-written
  ones (1M-row wide table: 12.4 s vs 7.4 s for COPY json) and ratios against pyarrow files flatter
  stowage. stowage's import re-chunks every file into its own (100k-row, ZSTD) files, so its
  downloads do not depend on the writer; the DuckDB-written file is the fair baseline.
* Server CPU is read in clock ticks (10 ms): meaningless for downloads shorter than ~0.2 s.
* `idle RSS` is after the 1-row warm-up, which already decodes a row group (160 MiB for `wide`).
  `--warmup none` skips it (idle RSS is then the fresh server's), so the peak RSS of a download
  that decodes nothing (a Parquet passthrough) is its own and not the warm-up's.
* Sizes at 5M rows (extrapolated from 1M): events ~0.2 GB Parquet / 1.5 GB JSON; wide ~2 GB
  Parquet / 7.5 GB JSON; strings ~0.2 GB / 1.5 GB; numeric ~0.1 GB / 0.3 GB. Disk: ~10 GB under
  the temp dir (the files and stowage's copy; each size is deleted when done). The DuckDB output
  goes to /dev/shm (RAM) when it fits. Import of `wide` needs ~0.5 GB of RAM in the CLI.
* Time: `--sizes 1000000,5000000 --repeat 3` takes roughly 45–60 min on an idle 2-core box
  (most of it the `wide` shape: ~15 s per format per download at 5M, DuckDB COPY json 35–60 s).

Commands
--------
    # smoke test (a minute or two)
    benches/download_shapes.sh --rows 200000 --repeat 1
    # the issue's run: 5M rows, RSS at two sizes, 3 repeats, JSON results
    benches/download_shapes.sh --sizes 1000000,5000000 --repeat 3 --out results.json
    # equivalently, without the wrapper
    target/py/bin/python benches/download_shapes.py --sizes 1000000,5000000 --repeat 3 --out results.json
    # a subset
    … --shapes events,strings --writers duckdb --formats json,csv,parquet

Options: --bin (default target/release/stowage), --tmp (parent of the temp dir, default $TMPDIR
or /tmp), --keep (keep the temp dir), --seed, --client curl|python, --duck-dir.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BIN = ROOT / "target/release/stowage"
SHAPES = ["events", "wide", "strings", "numeric"]
WRITERS = ["duckdb", "pyarrow"]
FORMATS = ["json", "ndjson", "csv", "arrow", "parquet"]
CLK_TCK = os.sysconf("SC_CLK_TCK")
MiB = 2**20

EVENT_NAMES = ["Product Viewed", "Products Searched", "Product Added", "Checkout Started",
               "Order Completed", "Signed Up", "Feature Used"]
PLANS = ["free", "pro", "team", "enterprise"]
FRAGMENTS = [
    'He said "hello"', "it's", 'a "quoted" word', "C:\\Users\\né\\file.txt", "line one\nline two",
    "col1\tcol2", "café", "naïve résumé", "日本語のテキスト", "東京", "🎉🚀", "emoji 👍🏽 ok",
    "plain words here", "lorem ipsum dolor sit amet", "comma, separated, values", "semi;colon",
    "back\\slash \\n not a newline", "CRLF\r\nline", '{"json": "inside"}', "<html>&amp;</html>",
    "Ünïcödé", "Привет мир", "مرحبا", "bell\x07char", "x", "trailing space ", '""', "'single'",
]
AUTHORS = ["Zoë", "José Álvarez", "山田太郎", "Олег", "O'Brien", 'The "Boss"', "Ana\\Maria", "Ωmega", "plain"]
PATHS = ["C:\\Program Files\\app\\x.exe", "/usr/local/bin/tool", "\\\\server\\share\\doc.docx",
         "~/Documents/résumé.pdf", "D:\\データ\\file.csv"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Data generation: DuckDB (SQL) and pyarrow (numpy)
# ---------------------------------------------------------------------------------------------

def sql_str(s):
    return "'" + s.replace("'", "''") + "'"


def sql_list(xs):
    return "[" + ", ".join(sql_str(x) for x in xs) + "]"


def duck_select(shape, n, seed):
    k = iter(range(1, 10_000))

    def H():  # a fresh pseudo-random UBIGINT per call site
        return f"hash(range, {seed}, {next(k)})"

    def pick(xs):
        return f"list_element({sql_list(xs)}, ({H()} % {len(xs)} + 1)::INTEGER)"

    if shape == "events":
        cols = [
            f"printf('%016x', {H()}) AS message_id",
            f"'u' || ({H()} % 200000) AS user_id",
            f"CASE WHEN {H()} % 10 < 3 THEN NULL ELSE 'anon-' || ({H()} % 1000000) END AS anonymous_id",
            f"{pick(EVENT_NAMES)} AS event",
            f"TIMESTAMP '2024-01-01 00:00:00' + to_microseconds((range * 6311 + {H()} % 1000000)::BIGINT) AS timestamp",
            f"TIMESTAMP '2024-01-01 00:00:01' + to_microseconds((range * 6311 + {H()} % 3000000)::BIGINT) AS received_at",
            f"CASE WHEN {H()} % 4 = 0 THEN NULL ELSE printf('%d.%02d', {H()} % 500, {H()} % 100) END AS revenue",
            f"({H()} % 5 + 1)::VARCHAR AS quantity",
            f"CASE WHEN {H()} % 3 = 0 THEN NULL ELSE {pick(PLANS)} END AS plan",
            f"CASE WHEN {H()} % 10 < 8 THEN NULL ELSE 'SAVE' || ({H()} % 50) END AS coupon",
            f"CASE WHEN {H()} % 5 = 0 THEN NULL ELSE 'https://example.com/p/' || ({H()} % 5000) END AS page_url",
            f"CASE WHEN {H()} % 7 = 0 THEN NULL ELSE {H()} % 2 = 0 END AS is_mobile",
        ]
    elif shape == "wide":
        cols = []
        for i in range(100):
            t = i % 4
            if t == 0:
                e = f"({H()} % 2000000)::BIGINT - 1000000"
            elif t == 1 and i % 8 == 1:
                e = f"({H()} % 100000000)::DOUBLE / 1000"
            elif t == 1:
                e = f"{H()}::DOUBLE / 18446744073709551616.0 * 1000"
            elif t == 2:
                e = f"'s' || ({H()} % 100000)"
            else:
                e = f"{H()} % 2 = 0"
            if i % 10 == 9:
                e = f"CASE WHEN {H()} % 10 = 0 THEN NULL ELSE {e} END"
            cols.append(f"{e} AS c{i:03d}")
    elif shape == "strings":
        def text(parts):
            return "concat_ws(' ', " + ", ".join(pick(FRAGMENTS) for _ in range(parts)) + ")"
        cols = [
            "range AS id",
            f"{text(3)} AS title",
            f"{text(8)} || ' #' || ({H()} % 100000) AS body",
            f"{pick(AUTHORS)} AS author",
            f"CASE WHEN {H()} % 4 = 0 THEN NULL ELSE {text(2)} END AS note",
            f"{pick(PATHS)} AS path",
        ]
    elif shape == "numeric":
        cols = [
            "range AS id",
            f"({H()} % 2000000)::BIGINT - 1000000 AS a",
            f"{H()}::DOUBLE / 18446744073709551616.0 AS x",
            f"({H()} % 100000000)::DOUBLE / 100 AS y",
        ]
    else:
        raise ValueError(shape)
    return "SELECT " + ",\n  ".join(cols) + f"\nFROM range({n})"


def write_duckdb(shape, n, seed, path):
    import duckdb
    con = duckdb.connect()
    con.execute(f"COPY ({duck_select(shape, n, seed)}) TO {sql_str(str(path))}")  # defaults: snappy
    con.close()


def pa_table(shape, n, seed):
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    rng = np.random.default_rng(seed)

    def ints(lo, hi):
        return rng.integers(lo, hi, n, dtype=np.int64)

    def nullmask(p):
        return rng.random(n) < p

    def with_nulls(arr, p):
        return pc.if_else(pa.array(nullmask(p)), pa.scalar(None, arr.type), arr)

    def pick(xs):
        return pa.array(xs, pa.string()).take(pa.array(ints(0, len(xs))))

    def numtext(prefix, values):
        return pc.binary_join_element_wise(prefix, pc.cast(pa.array(values), pa.string()), "")

    if shape == "events":
        hexd = np.frombuffer(b"0123456789abcdef", np.uint8)
        data = hexd[rng.integers(0, 16, (n, 16), dtype=np.uint8)].tobytes()
        offsets = np.arange(0, 16 * (n + 1), 16, dtype=np.int32)
        message_id = pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))
        base = np.datetime64("2024-01-01T00:00:00", "ns")
        i = np.arange(n, dtype=np.int64)
        ts = base + (i * 6_311_000 + ints(0, 1_000_000_000)).astype("timedelta64[ns]")  # like pandas
        recv = (base + np.timedelta64(1, "s")).astype("datetime64[us]") + (i * 6311 + ints(0, 3_000_000)).astype("timedelta64[us]")
        cents = ints(0, 100)
        revenue = pc.binary_join_element_wise(pc.cast(pa.array(ints(0, 500)), pa.string()),
                                              pc.utf8_lpad(pc.cast(pa.array(cents), pa.string()), 2, "0"), ".")
        return pa.table({
            "message_id": message_id,
            "user_id": numtext("u", ints(0, 200_000)),
            "anonymous_id": with_nulls(numtext("anon-", ints(0, 1_000_000)), 0.3),
            "event": pick(EVENT_NAMES),
            "timestamp": pa.array(ts, pa.timestamp("ns")),
            "received_at": pa.array(recv, pa.timestamp("us")),
            "revenue": with_nulls(revenue, 0.25),
            "quantity": pc.cast(pa.array(ints(1, 6)), pa.string()),
            "plan": with_nulls(pick(PLANS), 1 / 3),
            "coupon": with_nulls(numtext("SAVE", ints(0, 50)), 0.8),
            "page_url": with_nulls(numtext("https://example.com/p/", ints(0, 5000)), 0.2),
            "is_mobile": pa.array(rng.random(n) < 0.5, mask=nullmask(1 / 7)),
        })
    if shape == "wide":
        vocab = pa.array([f"s{j}" for j in range(100_000)], pa.string())
        cols = {}
        for i in range(100):
            t = i % 4
            if t == 0:
                a = pa.array(ints(-1_000_000, 1_000_000))
            elif t == 1 and i % 8 == 1:
                a = pa.array(ints(0, 100_000_000) / 1000)
            elif t == 1:
                a = pa.array(rng.random(n) * 1000)
            elif t == 2:
                a = vocab.take(pa.array(ints(0, len(vocab))))
            else:
                a = pa.array(rng.random(n) < 0.5)
            if i % 10 == 9:
                a = with_nulls(a, 0.1)
            cols[f"c{i:03d}"] = a
        return pa.table(cols)
    if shape == "strings":
        frag = pa.array(FRAGMENTS, pa.string())

        def text(parts):
            return pc.binary_join_element_wise(*[frag.take(pa.array(ints(0, len(FRAGMENTS)))) for _ in range(parts)], " ")
        return pa.table({
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "title": text(3),
            "body": pc.binary_join_element_wise(text(8), numtext("#", ints(0, 100_000)), " "),
            "author": pick(AUTHORS),
            "note": with_nulls(text(2), 0.25),
            "path": pick(PATHS),
        })
    if shape == "numeric":
        return pa.table({
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "a": pa.array(ints(-1_000_000, 1_000_000)),
            "x": pa.array(rng.random(n)),
            "y": pa.array(ints(0, 100_000_000) / 100),
        })
    raise ValueError(shape)


def write_pyarrow(shape, n, seed, path):
    import pyarrow.parquet as pq
    pq.write_table(pa_table(shape, n, seed), path)  # defaults: snappy, 1Mi-row groups


def build_file(writer, shape, n, seed, path):
    t = time.perf_counter()
    (write_duckdb if writer == "duckdb" else write_pyarrow)(shape, n, seed, path)
    secs = time.perf_counter() - t
    import pyarrow.parquet as pq
    md = pq.ParquetFile(path).metadata
    codecs = sorted({md.row_group(0).column(c).compression for c in range(md.num_columns)}) if md.num_row_groups else []
    return {"write_s": secs, "file_bytes": path.stat().st_size, "row_groups": md.num_row_groups,
            "columns": md.num_columns, "rows": md.num_rows, "codec": ",".join(codecs),
            "created_by": md.created_by}


# ---------------------------------------------------------------------------------------------
# stowage: CLI, server, downloads
# ---------------------------------------------------------------------------------------------

class Stowage:
    def __init__(self, binary, data):
        self.bin = str(binary)
        self.data = str(data)

    def admin(self, *args, check=True):
        cmd = [self.bin, "admin", "--json", "--data-dir", self.data, *args]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
        return p

    def setup(self):
        team = json.loads(self.admin("team", "create", "--name", "shapes").stdout)["id"]
        p = self.admin("user", "create", "--team", team, "--email", "owner@shapes.example", "--name", "owner",
                       "--role", "owner", check=False)
        if p.returncode != 0:  # older binaries have no --email
            p = self.admin("user", "create", "--team", team, "--name", "owner", "--role", "owner")
        user = json.loads(p.stdout)["id"]
        key = json.loads(self.admin("key", "create", "--team", team, "--user", user).stdout)["key"]
        canvas = json.loads(self.admin("canvas", "create", "--team", team, "--name", "shapes").stdout)["id"]
        self.team, self.key, self.canvas = team, key, canvas

    def import_file(self, table, path):
        cmd = [self.bin, "admin", "--json", "--data-dir", self.data, "table", "import", "--team", self.team,
               "--table", table, str(path)]
        # Peak RSS: poll the child's VmHWM (per address space, so it starts afresh at exec). wait4's
        # ru_maxrss would not do: Linux carries the forking parent's (this Python's) peak across exec.
        t = time.perf_counter()
        with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
            p = subprocess.Popen(cmd, stdout=fo, stderr=fe)
            hwm = 0
            while True:
                try:
                    with open(f"/proc/{p.pid}/status") as f:
                        for line in f:
                            if line.startswith("VmHWM:"):
                                hwm = max(hwm, int(line.split()[1]))
                except OSError:
                    pass
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                time.sleep(0.02)
            secs = time.perf_counter() - t
            p.returncode = os.waitstatus_to_exitcode(status)
            fo.seek(0)
            fe.seek(0)
            out, err = fo.read().decode(), fe.read().decode()
        res = {"import_s": secs, "import_cpu_s": ru.ru_utime + ru.ru_stime, "import_peak_rss_mib": hwm / 1024,
               "exit": p.returncode}
        if p.returncode == 0:
            res.update(json.loads(out))
        else:
            res["error"] = (err.strip() or out.strip())[:2000]
        return res

    def element(self, table):
        return json.loads(self.admin("element", "create", "--canvas", self.canvas, "--table", table).stdout)["id"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, data, logfile):
        env = dict(os.environ, STOWAGE_LOG__LEVEL="warn", STOWAGE_COMPACTION__ENABLED="false")
        for attempt in range(5):
            self.port = free_port()
            self.log = open(logfile, "ab")
            t = time.perf_counter()
            self.proc = subprocess.Popen([str(binary), "serve", "--data-dir", str(data), "--listen",
                                          f"127.0.0.1:{self.port}"], env=env, stdout=self.log, stderr=self.log)
            if self._wait_ready(60):
                self.start_s = time.perf_counter() - t
                return
            self.stop()
        raise RuntimeError(f"server did not become ready; see {logfile}")

    def _wait_ready(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/readyz")
                ok = c.getresponse().status == 200
                c.close()
                if ok:
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def status_kib(self, field):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def cpu_s(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class RssSampler(threading.Thread):
    def __init__(self, server, interval=0.02):
        super().__init__(daemon=True)
        self.server, self.interval, self.peak_kib, self.stop_ev = server, interval, 0, threading.Event()

    def run(self):
        while not self.stop_ev.is_set():
            try:
                self.peak_kib = max(self.peak_kib, self.server.status_kib("VmRSS"))
            except OSError:
                return
            self.stop_ev.wait(self.interval)

    def finish(self):
        self.stop_ev.set()
        self.join()
        return self.peak_kib / 1024


def body(st, element, fmt, limit=None):
    b = {"canvasId": st.canvas, "elementId": element, "format": fmt}
    if limit:
        b["limit"] = limit
    return json.dumps(b)


def download_curl(port, key, payload):
    cmd = ["curl", "-sS", "-o", "/dev/null", "-X", "POST", f"http://127.0.0.1:{port}/data/table",
           "-H", f"x-api-key: {key}", "-H", "Content-Type: application/json", "--data-binary", payload,
           "-w", "%{http_code} %{size_download} %{time_starttransfer} %{time_total}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    out, err = p.stdout.read().decode(), p.stderr.read().decode()
    p.stdout.close()
    p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    parts = out.split()
    res = {"status": int(parts[0]) if parts else 0, "bytes": int(parts[1]) if len(parts) > 1 else 0,
           "ttfb_s": float(parts[2]) if len(parts) > 2 else None, "s": float(parts[3]) if len(parts) > 3 else None,
           "client_cpu_s": ru.ru_utime + ru.ru_stime}
    if code != 0:
        res["error"] = f"curl exit {code}: {err.strip()}"
    return res


def download_python(port, key, payload):
    buf = bytearray(MiB)
    t0, c0 = time.perf_counter(), time.thread_time()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    res = {}
    try:
        conn.request("POST", "/data/table", body=payload.encode(),
                     headers={"x-api-key": key, "Content-Type": "application/json"})
        r = conn.getresponse()
        res["ttfb_s"] = time.perf_counter() - t0
        res["status"] = r.status
        total = 0
        while True:
            n = r.readinto(buf)
            if not n:
                break
            total += n
        res["bytes"] = total
    except (OSError, http.client.HTTPException) as e:
        res["error"] = f"{type(e).__name__}: {e}"
        res.setdefault("status", 0)
        res.setdefault("bytes", 0)
    finally:
        conn.close()
    res["s"] = time.perf_counter() - t0
    res["client_cpu_s"] = time.thread_time() - c0
    return res


def measure_download(args, st, element, fmt, logfile):
    srv = Server(args.bin, st.data, logfile)
    try:
        dl = download_curl if args.client == "curl" else download_python
        if args.warmup == "json":
            warm = dl(srv.port, st.key, body(st, element, "json", limit=1))
            if warm.get("error") or warm["status"] != 200:
                return {"error": f"warm-up: {warm}", "status": warm.get("status")}
        idle = srv.status_kib("VmRSS") / 1024
        cpu0 = srv.cpu_s()
        sampler = RssSampler(srv)
        sampler.start()
        res = dl(srv.port, st.key, body(st, element, fmt))
        sampled = sampler.finish()
        res["server_cpu_s"] = srv.cpu_s() - cpu0
        res["peak_rss_mib"] = srv.status_kib("VmHWM") / 1024
        res["rss_sampled_mib"] = sampled
        res["idle_rss_mib"] = idle
        res["server_start_s"] = srv.start_s
        if res["status"] != 200 and "error" not in res:
            res["error"] = f"HTTP {res['status']}"
        if srv.proc.poll() is not None:
            res["error"] = f"server exited with {srv.proc.returncode} during the download"
        return res
    finally:
        srv.stop()


def duck_copy(src, out_dir, fmt):
    import duckdb
    out = Path(out_dir) / f"duck-out.{fmt}"
    con = duckdb.connect()  # default threads: all cores
    t = time.perf_counter()
    con.execute(f"COPY (FROM read_parquet({sql_str(str(src))})) TO {sql_str(str(out))} (FORMAT {fmt})")
    secs = time.perf_counter() - t
    con.close()
    size = out.stat().st_size
    out.unlink()
    return {"s": secs, "bytes": size, "status": 200}


# ---------------------------------------------------------------------------------------------
# Orchestration and report
# ---------------------------------------------------------------------------------------------

def summarise(samples):
    ok = [s for s in samples if not s.get("error")]
    r = {"n": len(samples), "ok": len(ok), "samples": samples}
    if samples and not ok:
        r["error"] = samples[0].get("error")
    if not ok:
        return r
    times = [s["s"] for s in ok]
    r["median_s"] = statistics.median(times)
    r["min_s"] = min(times)
    r["bytes"] = ok[0]["bytes"]
    if len({s["bytes"] for s in ok}) > 1:
        r["warning"] = f"byte counts differ between repeats: {sorted({s['bytes'] for s in ok})}"
    for f in ("peak_rss_mib", "rss_sampled_mib", "idle_rss_mib"):
        if f in ok[0]:
            r[f] = max(s[f] for s in ok)
    for f in ("server_cpu_s", "client_cpu_s", "ttfb_s"):
        if ok[0].get(f) is not None:
            r[f] = statistics.median(s[f] for s in ok)
    return r


def duck_out_dir(args, tmp, expected_bytes):
    if args.duck_dir:
        return Path(args.duck_dir)
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free > 1.5 * expected_bytes + 512 * MiB:
        d = Path(tempfile.mkdtemp(prefix="stowage-shapes-duck-", dir=shm))
        return d
    d = tmp / "duck-out"
    d.mkdir(exist_ok=True)
    return d


def run_size(args, n, tmp, results):
    sdir = tmp / f"rows{n}"
    sdir.mkdir()
    st = Stowage(args.bin, sdir / "data")
    st.setup()
    tables = []
    for shape in args.shapes:
        for writer in args.writers:
            name = f"{shape}_{writer}"
            path = sdir / f"{name}.parquet"
            log(f"[{n}] writing {name} with {writer} defaults …")
            entry = {"shape": shape, "writer": writer, "rows": n, "table": name}
            try:
                entry["file"] = build_file(writer, shape, n, args.seed, path)
            except Exception as e:  # noqa: BLE001 - report and go on
                entry["file"] = {"error": f"{type(e).__name__}: {e}"}
                results["tables"].append(entry)
                continue
            log(f"[{n}]   {entry['file']['file_bytes'] / MiB:.1f} MiB, {entry['file']['row_groups']} row groups, "
                f"{entry['file']['codec']}, {entry['file']['write_s']:.1f} s; importing …")
            imp = st.import_file(name, path)
            entry["import"] = imp
            if imp["exit"] != 0:
                log(f"[{n}]   import REFUSED: {imp['error']}")
            else:
                log(f"[{n}]   imported {imp.get('rows')} rows in {imp['import_s']:.1f} s")
                if imp.get("rows") != n:
                    entry["import"]["warning"] = f"imported {imp.get('rows')} rows, expected {n}"
                entry["element"] = st.element(imp.get("table", name))
            results["tables"].append(entry)
            if args.keep:  # what a hand-run download (perf, curl) of the kept tables needs
                (sdir / "tables.json").write_text(json.dumps(
                    {"data": st.data, "key": st.key, "canvas": st.canvas,
                     "elements": {t["table"]: t.get("element") for t in results["tables"] if t.get("rows") == n}},
                    indent=1))
            tables.append((entry, path))

    for entry, path in tables:
        if "element" not in entry:
            continue
        name = entry["table"]
        samples = {f: [] for f in args.formats}
        duck = {"json": [], "csv": []}
        ddir = None
        for r in range(args.repeat):
            for fmt in args.formats:
                log(f"[{n}] {name} {fmt} #{r + 1} …")
                s = measure_download(args, st, entry["element"], fmt, sdir / "server.log")
                if s.get("error"):
                    log(f"[{n}]   ERROR: {s['error']}")
                else:
                    log(f"[{n}]   {s['s']:.2f} s, {s['bytes'] / MiB:.1f} MiB, peak RSS {s['peak_rss_mib']:.1f} MiB")
                samples[fmt].append(s)
            if not args.no_duckdb:
                if ddir is None:
                    expect = max([x["bytes"] for xs in samples.values() for x in xs if x.get("bytes")] + [0]) * 2
                    ddir = duck_out_dir(args, tmp, expect)
                for fmt in ("json", "csv"):
                    log(f"[{n}] {name} duckdb COPY {fmt} #{r + 1} …")
                    try:
                        d = duck_copy(path, ddir, fmt)
                        log(f"[{n}]   {d['s']:.2f} s, {d['bytes'] / MiB:.1f} MiB")
                    except Exception as e:  # noqa: BLE001
                        d = {"error": f"{type(e).__name__}: {e}"}
                        log(f"[{n}]   ERROR: {d['error']}")
                    duck[fmt].append(d)
        if ddir is not None and str(ddir).startswith("/dev/shm/"):
            shutil.rmtree(ddir, ignore_errors=True)
        entry["downloads"] = {f: summarise(v) for f, v in samples.items()}
        entry["duckdb"] = {f: summarise(v) for f, v in duck.items() if v}
        add_ratios(entry)
    if not args.keep:
        shutil.rmtree(sdir, ignore_errors=True)


def add_ratios(entry):
    d, k = entry["downloads"], entry.get("duckdb", {})
    dj, dc = k.get("json", {}).get("median_s"), k.get("csv", {}).get("median_s")
    sj = d.get("json", {}).get("median_s")
    for fmt, m in d.items():
        if "median_s" not in m:
            continue
        base = dc if fmt == "csv" else dj
        if base:
            m["vs_duckdb"] = base / m["median_s"]
        if sj:
            m["vs_json"] = sj / m["median_s"]


def fmt_num(x, spec):
    return "—" if x is None else format(x, spec)


def report(results, args):
    lines = []
    w = lines.append
    w(f"Run {results['started']} · stowage `{results['binary']}` · DuckDB {results['duckdb_version']} · "
      f"pyarrow {results['pyarrow_version']} · client {args.client} · repeat {args.repeat} "
      f"(median, min) · warm-up {args.warmup} · {os.cpu_count()} cores\n")
    w("### Files and imports\n")
    w("| shape | writer | rows | Parquet MiB | row groups | codec | write s | import s | import rows/s | import RSS MiB | result |")
    w("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
    for t in results["tables"]:
        f, i = t.get("file", {}), t.get("import", {})
        if "error" in f:
            w(f"| {t['shape']} | {t['writer']} | {t['rows']:,} | | | | | | | | write failed: {f['error'][:120]} |")
            continue
        res = "ok" if i.get("exit") == 0 else f"**refused**: {i.get('error', '')[:160]}"
        if i.get("warning"):
            res += f" ({i['warning']})"
        rps = t["rows"] / i["import_s"] if i.get("exit") == 0 else None
        w(f"| {t['shape']} | {t['writer']} | {t['rows']:,} | {f['file_bytes'] / MiB:.1f} | {f['row_groups']} | {f['codec']} | "
          f"{f['write_s']:.1f} | {i.get('import_s', 0):.1f} | {fmt_num(rps and rps / 1e6, '.2f')} M | "
          f"{i.get('import_peak_rss_mib', 0):.0f} | {res} |")

    w("\n### Downloads\n")
    w("`vs DuckDB`: DuckDB COPY time / stowage time (csv against DuckDB csv, the rest against DuckDB json); "
      "`vs json`: stowage json time / this format's time. Targets: json ≥ 2, csv ≥ 2, parquet vs json ≥ 3.\n")
    w("| shape | writer | rows | format | median s | min s | MB/s | M rows/s | MiB out | peak RSS MiB | idle RSS MiB | server CPU | client CPU | vs DuckDB | vs json |")
    w("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in results["tables"]:
        if "downloads" not in t:
            continue
        n = t["rows"]
        rows = [(f, m, False) for f, m in t["downloads"].items()] + [(f"DuckDB {f}", m, True) for f, m in t["duckdb"].items()]
        for label, m, is_duck in rows:
            if "median_s" not in m:
                w(f"| {t['shape']} | {t['writer']} | {n:,} | {label} | **error** | | | | | | | | | | {m.get('error', '')[:100]} |")
                continue
            s = m["median_s"]
            cpu = f"{m['server_cpu_s'] / s:.2f} cores" if m.get("server_cpu_s") is not None else "—"
            ccpu = f"{100 * m['client_cpu_s'] / s:.0f} %" if m.get("client_cpu_s") is not None else "—"
            vd = fmt_num(m.get("vs_duckdb"), ".2f") + ("×" if m.get("vs_duckdb") else "")
            vj = fmt_num(m.get("vs_json"), ".2f") + ("×" if m.get("vs_json") else "")
            lab = f"*{label}*" if is_duck else label
            w(f"| {t['shape']} | {t['writer']} | {n:,} | {lab} | {s:.3f} | {m['min_s']:.3f} | {m['bytes'] / s / 1e6:.0f} | "
              f"{n / s / 1e6:.2f} | {m['bytes'] / MiB:.1f} | {fmt_num(m.get('peak_rss_mib'), '.1f')} | {fmt_num(m.get('idle_rss_mib'), '.1f')} | "
              f"{cpu if not is_duck else '—'} | {ccpu if not is_duck else '—'} | {vd if not is_duck else '1.00'} | "
              f"{vj if not is_duck else '—'} |")

    # Worst next to best, per shape (and size), across writers and formats.
    w("\n### Per shape: worst case next to best\n")
    w("| shape | rows | json vs DuckDB json (≥ 2) | csv vs DuckDB csv (≥ 2) | parquet vs stowage json (≥ 3) | slowest format | fastest format | peak RSS MiB |")
    w("|---|---:|---|---|---|---|---|---|")
    keys = sorted({(t["shape"], t["rows"]) for t in results["tables"] if "downloads" in t},
                  key=lambda k: (SHAPES.index(k[0]) if k[0] in SHAPES else 99, k[1]))
    for shape, n in keys:
        ts = [t for t in results["tables"] if t["shape"] == shape and t["rows"] == n and "downloads" in t]

        def span(fmt, key, suffix="×"):
            vals = [(t["downloads"][fmt][key], t["writer"]) for t in ts
                    if fmt in t["downloads"] and t["downloads"][fmt].get(key) is not None]
            if not vals:
                return "—"
            lo, hi = min(vals), max(vals)
            return f"{lo[0]:.2f}{suffix} ({lo[1]}) · {hi[0]:.2f}{suffix} ({hi[1]})"
        per = [(n / m["median_s"], f, t["writer"]) for t in ts for f, m in t["downloads"].items() if m.get("median_s")]
        slow = min(per) if per else None
        fast = max(per) if per else None
        rss = [(m["peak_rss_mib"], f, t["writer"]) for t in ts for f, m in t["downloads"].items() if m.get("peak_rss_mib")]
        w(f"| {shape} | {n:,} | worst {span('json', 'vs_duckdb')} best | worst {span('csv', 'vs_duckdb')} best | "
          f"worst {span('parquet', 'vs_json')} best | "
          + (f"{slow[1]}/{slow[2]} {slow[0] / 1e6:.2f} M rows/s" if slow else "—") + " | "
          + (f"{fast[1]}/{fast[2]} {fast[0] / 1e6:.2f} M rows/s" if fast else "—") + " | "
          + (f"{min(rss)[0]:.0f} ({min(rss)[1]}/{min(rss)[2]}) – {max(rss)[0]:.0f} ({max(rss)[1]}/{max(rss)[2]})" if rss else "—")
          + " |")

    sizes = sorted({t["rows"] for t in results["tables"] if "downloads" in t})
    if len(sizes) > 1:
        w("\n### Peak RSS (MiB) against table size\n")
        w("| shape | writer | format | " + " | ".join(f"{s:,} rows" for s in sizes) + " | growth |")
        w("|---|---|---|" + "---:|" * len(sizes) + "---:|")
        for shape in SHAPES:
            for writer in WRITERS:
                for fmt in FORMATS:
                    vals = []
                    for s in sizes:
                        m = next((t["downloads"].get(fmt, {}) for t in results["tables"]
                                  if t["shape"] == shape and t["writer"] == writer and t["rows"] == s and "downloads" in t), {})
                        vals.append(m.get("peak_rss_mib"))
                    if all(v is None for v in vals):
                        continue
                    g = f"{vals[-1] / vals[0]:.2f}×" if vals[0] and vals[-1] else "—"
                    w(f"| {shape} | {writer} | {fmt} | " + " | ".join(fmt_num(v, ".1f") for v in vals) + f" | {g} |")

    problems = []
    for t in results["tables"]:
        if t.get("import", {}).get("exit", 0) != 0:
            problems.append(f"{t['table']} ({t['rows']:,}): import refused: {t['import'].get('error')}")
        for src in ("downloads", "duckdb"):
            for f, m in t.get(src, {}).items():
                for s in m.get("samples", []):
                    if s.get("error"):
                        problems.append(f"{t['table']} ({t['rows']:,}) {src} {f}: {s['error']}")
                if m.get("warning"):
                    problems.append(f"{t['table']} ({t['rows']:,}) {src} {f}: {m['warning']}")
    if problems:
        w("\n### Problems\n")
        for p in problems:
            w(f"- {p}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--sizes", help="comma-separated row counts (overrides --rows), e.g. 1000000,5000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--writers", default=",".join(WRITERS))
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--client", choices=["curl", "python"], default="curl")
    ap.add_argument("--bin", default=str(DEFAULT_BIN))
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--tmp", default=None, help="parent directory for the temp dir (default $TMPDIR or /tmp)")
    ap.add_argument("--duck-dir", default=None, help="where DuckDB writes its COPY output (default /dev/shm if it fits)")
    ap.add_argument("--no-duckdb", action="store_true", help="skip the DuckDB baselines")
    ap.add_argument("--warmup", choices=["json", "none"], default="json",
                    help="before each timed download: a 1-row JSON download (default) or nothing")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--out", default=None, help="write JSON results here")
    ap.add_argument("--markdown", default=None, help="also write the markdown report here")
    args = ap.parse_args()
    args.shapes = [s for s in args.shapes.split(",") if s]
    args.writers = [s for s in args.writers.split(",") if s]
    args.formats = [s for s in args.formats.split(",") if s]
    for lst, allowed in ((args.shapes, SHAPES), (args.writers, WRITERS), (args.formats, FORMATS)):
        bad = set(lst) - set(allowed)
        if bad:
            ap.error(f"unknown {sorted(bad)}; choose from {allowed}")
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")] if args.sizes else [args.rows]
    args.bin = Path(args.bin).resolve()
    if not args.bin.exists():
        ap.error(f"{args.bin} not found: build it (cargo build --release) or pass --bin")
    if args.client == "curl" and not shutil.which("curl"):
        ap.error("curl not found; install it or use --client python")

    import duckdb
    import pyarrow
    tmp = Path(tempfile.mkdtemp(prefix="stowage-shapes-", dir=args.tmp))
    log(f"temp dir {tmp} ({shutil.disk_usage(tmp).free / 2**30:.0f} GiB free)")
    results = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "binary": str(args.bin),
               "binary_mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(args.bin.stat().st_mtime)),
               "duckdb_version": duckdb.__version__, "pyarrow_version": pyarrow.__version__,
               "cores": os.cpu_count(), "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
               "sizes": sizes, "tables": []}
    t0 = time.perf_counter()
    try:
        for n in sizes:
            run_size(args, n, tmp, results)
    except KeyboardInterrupt:
        log("interrupted; reporting what was measured")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"kept {tmp}")
    results["total_s"] = time.perf_counter() - t0
    md = report(results, args)
    print(md)
    print(f"\n(total {results['total_s'] / 60:.1f} min)")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
        log(f"wrote {args.out}")
    if args.markdown:
        Path(args.markdown).write_text(md + "\n")


if __name__ == "__main__":
    main()
