# 100 concurrent sign-ins (unknown emails) from one client address against `stowage serve --demo`;
# prints the server's RSS before and its peak (VmHWM) after, and the statuses. Usage:
#   python3 benches/signin_one_address.py target/debug/stowage [old]
# (`old`: a build from before server.metrics_listen existed, which would refuse the key.)
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading

bin_ = sys.argv[1]
old = sys.argv[2:] == ["old"]
d = tempfile.mkdtemp()
env = dict(os.environ, STOWAGE_LOG__FORMAT="json")
if not old:
    env["STOWAGE_SERVER__METRICS_LISTEN"] = "127.0.0.1:0"
p = subprocess.Popen([bin_, "serve", "--demo", "--listen", "127.0.0.1:0", "--data-dir", d], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
for line in p.stderr:
    if "stowage listening" in line:
        break
demo = json.load(open(os.path.join(d, "demo.json")))
host, port = demo["base_url"][7:].split(":")
def rss(field):
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith(field): return int(l.split()[1]) // 1024
before = rss("VmRSS:")
codes = []
def one(i):
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    c.request("POST", "/api/v1/session", json.dumps({"email": f"nobody{i}@x.example", "password": "guess guess"}), {"Content-Type": "application/json"})
    codes.append(c.getresponse().status)
ts = [threading.Thread(target=one, args=(i,)) for i in range(100)]
[t.start() for t in ts]; [t.join() for t in ts]
print(f"100 concurrent sign-ins from one address: RSS before {before} MiB, peak {rss('VmHWM:')} MiB; answers", {c: codes.count(c) for c in sorted(set(codes))})
p.kill(); p.wait()
