#!/usr/bin/env python3
"""One agent joining a large simulated cluster, and following it under steady churn.

In a one-host lab (`ovrctl lab up --hosts 1 --tenants 1`, a cluster on one etcd member),
`crates/cluster/examples/load.rs` writes HOSTS host records, NETWORKS networks and
ENDPOINTS endpoints spread evenly over them; network 0 is the lab's t1, so 1/NETWORKS of
the endpoints are in h1's own network (h1 installs a tunnel, a next hop, a bridge entry
and a host route for each), the rest are in networks h1 has no port in. Then h1's ovrd is
restarted (`lab restart h1`): it joins with everything already written.

Reported:
- full sync: from the restart until h1's applied revision reaches the one the load ended
  at (GET /api/v1/cluster), and ovrd's RSS before the load and after the sync;
- steady: RATE endpoint changes a second for SECONDS (addresses moving), and the rate h1
  applied them at (changes / time until it applied the last one) and its lag at the end.

Goals (issue 21): full sync ≤ 5 s, RSS ≤ 200 MB, ≥ 10,000 endpoint changes/s applied.

    cargo build --release
    python3 bench/cluster_scale.py --hosts 1000 --networks 100 --endpoints 100000 \\
        --rate 10000 --seconds 10
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "target" / "release"
sys.path.insert(0, str(ROOT / "tests"))
from system.procfs import rss_kib  # noqa: E402


def run(*args, check=True, timeout=600):
    return subprocess.run([str(a) for a in args], check=check, capture_output=True,
                          text=True, timeout=timeout)


class Lab:
    def __init__(self, prefix, flows):
        self.prefix, self.dir, self.flows = prefix, f"/run/{prefix}-lab", flows

    def ctl(self, *args, check=True):
        return run(RELEASE / "ovrctl", "lab", "--prefix", self.prefix, "--dir", self.dir,
                   *args, check=check)

    def __enter__(self):
        self.ctl("down", check=False)
        self.ctl("up", "--hosts", "1", "--tenants", "1", *self.flows)
        self.status = json.loads(self.ctl("status", "--json").stdout)
        return self

    def __exit__(self, *exc):
        self.ctl("down", check=False)

    def host(self):
        return json.loads(self.ctl("status", "--json").stdout)["hosts"][0]

    def cluster(self):
        r = run("curl", "-s", "--max-time", "2", "--unix-socket", self.host()["socket"],
                "http://ovrd/api/v1/cluster", check=False)
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError:
            return {}


def rss_mb(pid):
    return (rss_kib(pid) or 0) / 1024


def wait_applied(lab, revision, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lab.cluster().get("applied_revision", 0) >= revision:
            return time.monotonic()
        time.sleep(0.02)
    raise SystemExit(f"h1 did not apply revision {revision} within {timeout} s: "
                     f"{lab.cluster()}")


def load(etcd, a, *extra):
    r = run(RELEASE / "examples" / "load", "--etcd", etcd, "--hosts", a.hosts, "--networks",
            a.networks, "--endpoints", a.endpoints, "--local", "t1", *extra)
    return [json.loads(line) for line in r.stdout.splitlines()]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--networks", type=int, default=100)
    p.add_argument("--endpoints", type=int, default=100_000)
    p.add_argument("--rate", type=int, default=10_000)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--prefix", default="ovrbs")
    a = p.parse_args()
    run("cargo", "build", "--release", "-q", "-p", "ovrd", "-p", "ovr-cli", timeout=1800)
    run("cargo", "build", "--release", "-q", "-p", "ovr-cluster", "--example", "load",
        timeout=1800)
    with Lab(a.prefix, []) as lab:
        etcd = lab.status["etcd"][0]
        before = rss_mb(lab.host()["ovrd_pid"])
        initial = load(etcd, a)[0]
        t = time.monotonic()
        lab.ctl("restart", "h1")
        synced = wait_applied(lab, initial["revision"]) - t
        host = lab.host()
        after = rss_mb(host["ovrd_pid"])
        installed = {k: len(json.loads(run("curl", "-s", "--unix-socket", host["socket"],
                                           f"http://ovrd/api/v1/{k}").stdout))
                     for k in ("tunnels", "bridge", "routes")}
        t = time.monotonic()
        steady = load(etcd, a, "--steady-only", "--rate", a.rate, "--seconds", a.seconds)[-1]
        written = time.monotonic()
        done = wait_applied(lab, steady["revision"])
        out = {
            "keys": initial["keys"], "load_seconds": initial["seconds"],
            "sync_seconds": round(synced, 3),
            "rss_mb_before_load": round(before, 1), "rss_mb_after_sync": round(after, 1),
            "installed": installed,
            "steady_changes": steady["changes"], "steady_written_per_s": steady["rate"],
            "steady_applied_per_s": round(steady["changes"] / (done - t)),
            "lag_after_writer_s": round(done - written, 3),
            "rss_mb_after_steady": round(rss_mb(host["ovrd_pid"]), 1),
            "status": {k: v for k, v in lab.cluster().items() if k != "rejected"},
        }
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
