#!/usr/bin/env python3
"""Fresh-read latency and cost (issue 30), run by `MODE=fresh benches/scaleout_bench.sh N`.

Against a running cluster (nginx at --lb, N nodes sharing a PostgreSQL catalog and an S3
bucket, flush.interval 1h so nothing flushes by itself), for each team (a token, a data key and
a `tracks` element, from --teams JSON):

* phase `committed`: --reads rounds; each round sends --batch events per team through nginx
  (`/v1/batch`) and then downloads every team's element through nginx without `fresh`;
* phase `fresh`: the same with `"fresh": true`.

The rounds of both phases interleave (committed, fresh, committed, …) so drift on the shared
machine hits both alike. Reported per phase: p50/p99/max of the download's wall time (curl-like,
http.client, whole JSON body read), and per download the flushes (sum of the nodes'
`stowage_flushes_total`), the S3 PUTs (moto's request log) and the catalog transactions
(PostgreSQL `xact_commit`) that happened during the phase. Rows returned are checked: a fresh
read holds every event sent so far; a committed read holds at most that.
"""
import argparse
import http.client
import json
import shlex
import socket
import statistics
import subprocess
import time
import urllib.parse


def post(url, body, headers):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    t = time.perf_counter()
    c.connect()
    # Headers and body go out as two writes: without TCP_NODELAY the body waits for the
    # peer's delayed ACK (40 ms), which would be all either read measures.
    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.request("POST", u.path, body=body, headers={"Content-Type": "application/json", **headers})
    r = c.getresponse()
    data = r.read()
    took = time.perf_counter() - t
    c.close()
    return r.status, data, took


def counters(args):
    flushes = 0.0
    for port in args.metrics:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        for line in c.getresponse().read().decode().splitlines():
            if line.startswith("stowage_flushes_total"):
                flushes += float(line.split()[-1])
        c.close()
    xact = int(subprocess.run(shlex.split(args.psql) + ["SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"],
                              capture_output=True, text=True, check=True).stdout.strip())
    with open(args.moto_log, errors="replace") as f:
        puts = sum(1 for line in f if '"PUT /' in line)
    return {"flushes": flushes, "xact": xact, "puts": puts}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lb", required=True)
    ap.add_argument("--teams", required=True, help="JSON [{token, key, canvas, element}]")
    ap.add_argument("--metrics", type=int, nargs="+", required=True)
    ap.add_argument("--psql", required=True, help="the psql command line to run a query with (the query is appended)")
    ap.add_argument("--moto-log", required=True)
    ap.add_argument("--reads", type=int, default=50)
    ap.add_argument("--batch", type=int, default=20)
    args = ap.parse_args()
    teams = json.loads(args.teams)
    sent = [0] * len(teams)
    lat = {"committed": [], "fresh": []}
    cost = {"committed": {"flushes": 0, "xact": 0, "puts": 0}, "fresh": {"flushes": 0, "xact": 0, "puts": 0}}
    n = 0
    for r in range(args.reads):
        for phase in ("committed", "fresh"):
            for i, t in enumerate(teams):
                batch = [{"type": "track", "event": "tick", "messageId": f"{i}-{n + k}", "userId": "u"}
                         for k in range(args.batch)]
                n += args.batch
                status, _, _ = post(args.lb + "/v1/batch", json.dumps({"batch": batch}), {"X-Auth-Token": t["token"]})
                assert status == 200, status
                sent[i] += args.batch
            before = counters(args)
            for i, t in enumerate(teams):
                body = json.dumps({"canvasId": t["canvas"], "elementId": t["element"], "fresh": phase == "fresh"})
                status, data, took = post(args.lb + "/data/table", body, {"x-api-key": t["key"]})
                assert status == 200, (status, data[:300])
                rows = json.loads(data)["rows"]
                if phase == "fresh":
                    assert rows == sent[i], f"fresh read of team {i}: {rows} rows, {sent[i]} sent"
                else:
                    assert rows <= sent[i]
                lat[phase].append(took)
            after = counters(args)
            for k in cost[phase]:
                cost[phase][k] += after[k] - before[k]
    reads = args.reads * len(teams)
    print(f"| read | p50 ms | p90 ms | p99 ms | max ms | flushes per read | S3 PUTs per read | catalog transactions per read |")
    print("|---|---|---|---|---|---|---|---|")
    for phase in ("committed", "fresh"):
        xs = sorted(lat[phase])
        p = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))] * 1000  # noqa: E731
        c = cost[phase]
        print(f"| {phase} | {statistics.median(xs) * 1000:.1f} | {p(0.9):.1f} | {p(0.99):.1f} | {xs[-1] * 1000:.1f} | "
              f"{c['flushes'] / reads:.2f} | {c['puts'] / reads:.2f} | {c['xact'] / reads:.1f} |")
    print(f"({reads} downloads per phase, {len(teams)} teams, {args.batch} events per team before each round)")


if __name__ == "__main__":
    main()
