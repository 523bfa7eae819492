#!/usr/bin/env python3
"""A fresh read's memory (issue 30): the server's peak RSS while downloading a team's full
buffer fresh, against downloading the same rows once committed.

Run: target/py/bin/python benches/fresh_memory.py [--events 12000] [--max-bytes 32MiB] [--bin target/release/stowage]

One team, `flush.interval` 1 h and `flush.max_bytes` (default 32 MiB, the server's default) so
nothing flushes while --events events (the `stowage bench gen` shop mix, sent through `/v1/batch` in batches of 500) fill the
buffer. Then, on that server: RSS before, and the peak (VmHWM, reset by writing
/proc/<pid>/clear_refs) during a fresh JSON download of `tracks`. The server is stopped
(SIGTERM commits the buffer) and started again on the same data dir, and the committed rows are
downloaded the same way (after a 1-row warm-up, like the fresh case had the buffer warm).
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from download_shapes import Server, Stowage  # noqa: E402


def post(port, path, body, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", path, body=body, headers={"Content-Type": "application/json", **headers})
    r = c.getresponse()
    n = 0
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        n += len(chunk)
    c.close()
    return r.status, n


def reset_peak(srv):
    with open(f"/proc/{srv.proc.pid}/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS


def download(srv, st, element, fresh):
    body = json.dumps({"canvasId": st.canvas, "elementId": element, "fresh": fresh, "limit": 1})
    assert post(srv.port, "/data/table", body, {"x-api-key": st.key})[0] == 200
    before = srv.status_kib("VmRSS") / 1024
    reset_peak(srv)
    body = json.dumps({"canvasId": st.canvas, "elementId": element, "fresh": fresh})
    status, size = post(srv.port, "/data/table", body, {"x-api-key": st.key})
    assert status == 200, status
    return {"rss_before_mib": before, "peak_mib": srv.status_kib("VmHWM") / 1024, "bytes": size}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/stowage")
    ap.add_argument("--events", type=int, default=12000)
    ap.add_argument("--max-bytes", default="32MiB", help="flush.max_bytes (the default: a full buffer)")
    args = ap.parse_args()
    os.environ.update(STOWAGE_FLUSH__INTERVAL="1h", STOWAGE_FLUSH__MAX_BYTES=args.max_bytes,
                      STOWAGE_INGEST__TEAM_BUDGET="512MiB")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        st = Stowage(args.bin, data)
        st.setup()
        users = json.loads(st.admin("user", "list", "--team", st.team).stdout)
        owner = (users if isinstance(users, list) else users["users"])[0]["id"]
        st.admin("events", "enable", "--team", st.team)
        token = json.loads(st.admin("token", "create", "--team", st.team, "--user", owner).stdout)["token"]
        element = st.element("tracks")
        gen = subprocess.run([args.bin, "bench", "gen", "--events", str(args.events)], capture_output=True,
                             text=True, check=True).stdout.splitlines()
        log = Path(tmp) / "server.log"
        srv = Server(args.bin, data, log)
        try:
            for i in range(0, len(gen), 500):
                batch = [dict(json.loads(line), type="track") for line in gen[i:i + 500]]
                status, _ = post(srv.port, "/v1/batch", json.dumps({"batch": batch}), {"X-Auth-Token": token})
                assert status == 200, status
            files = list((data / "warehouse").rglob("*.parquet")) if (data / "warehouse").exists() else []
            assert not files, "nothing may flush while the buffer fills"
            fresh = download(srv, st, element, True)
        finally:
            srv.stop()
        srv = Server(args.bin, data, log)
        try:
            committed = download(srv, st, element, False)
        finally:
            srv.stop()
    print(f"{args.events} events buffered; tracks as JSON ({fresh['bytes'] / 2**20:.0f} MiB)")
    print("| read | RSS before MiB | peak during MiB | growth MiB |")
    print("|---|---:|---:|---:|")
    for name, r in (("fresh (buffered rows)", fresh), ("committed (same rows)", committed)):
        print(f"| {name} | {r['rss_before_mib']:.0f} | {r['peak_mib']:.0f} | {r['peak_mib'] - r['rss_before_mib']:.0f} |")


if __name__ == "__main__":
    main()
