#!/usr/bin/env python3
"""Convergence: from intent written in etcd to every host of the lab having installed it.

In a three-host lab (`ovrctl lab up --hosts 3 --tenants 1`, a cluster on one etcd member):
1. single ports, ROUNDS times: h3-t1-w1's port is deleted (and waited out), then written
   again at t0 with etcdctl; the time until its own host has the interface and both other
   hosts have its bridge entry (polled through each ovrd's API every ~1 ms), and the time
   the delete took to be withdrawn everywhere. A ping checks the workload is reached after
   each add.
2. a burst: 10,000 endpoints of ten simulated hosts in t1 written at once (transactions of
   128, crates/cluster/examples/load.rs): the time until each real host applied the
   revision the burst ended at, what it installed, and the bytes etcd sent meanwhile per
   event and watching host (its namespace's interfaces' counters).

Goal (issue 21): p99 ≤ 100 ms for a single port add.

    cargo build --release
    python3 bench/cluster_converge.py --rounds 50
"""

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "target" / "release"


def run(*args, check=True, timeout=600):
    return subprocess.run([str(a) for a in args], check=check, capture_output=True,
                          text=True, timeout=timeout)


class Api(http.client.HTTPConnection):
    """ovrd's API on its Unix socket, one connection kept open (polling every ms)."""

    def __init__(self, path):
        super().__init__("ovrd", timeout=5)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)

    def get(self, path):
        self.request("GET", path)
        r = self.getresponse()
        return json.loads(r.read())


def wait(what, f, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f():
            return time.monotonic()
        time.sleep(0.001)
    raise SystemExit(f"not within {timeout} s: {what}")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--burst", type=int, default=10_000)
    p.add_argument("--prefix", default="ovrbc")
    a = p.parse_args()
    run("cargo", "build", "--release", "-q", "-p", "ovrd", "-p", "ovr-cli", timeout=1800)
    run("cargo", "build", "--release", "-q", "-p", "ovr-cluster", "--example", "load",
        timeout=1800)
    lab = [RELEASE / "ovrctl", "lab", "--prefix", a.prefix, "--dir", f"/run/{a.prefix}-lab"]
    run(*lab, "down", check=False)
    run(*lab, "up", "--hosts", "3", "--tenants", "1")
    try:
        st = json.loads(run(*lab, "status", "--json").stdout)
        etcd = st["etcd"][0]
        api = {h["name"]: Api(h["socket"]) for h in st["hosts"]}
        w = next(x for x in st["workloads"] if x["name"] == "h3-t1-w1")
        key = "/ovr/v1/ports/h3/h3-t1-w1"
        ctl = ["etcdctl", "--endpoints", etcd]
        value = run(*ctl, "get", "--print-value-only", key).stdout.strip()
        ifname = json.loads(value)["interface"]

        def installed():
            own = any(i["name"] == ifname for i in api["h3"].get("/api/v1/interfaces"))
            return own and all(any(b["mac"] == w["mac"] for b in api[h].get("/api/v1/bridge"))
                               for h in ("h1", "h2"))

        def withdrawn():
            return not any(any(b["mac"] == w["mac"] for b in api[h].get("/api/v1/bridge"))
                           for h in ("h1", "h2"))

        adds, dels, first_lost = [], [], 0
        src = next(x for x in st["workloads"] if x["name"] == "h1-t1-w1")["namespace"]
        for _ in range(a.rounds):
            t0 = time.monotonic()
            run(*ctl, "del", key)
            dels.append(wait("withdrawn", withdrawn) - t0)
            time.sleep(0.05)
            t0 = time.monotonic()
            run(*ctl, "put", key, value)
            adds.append(wait("installed everywhere", installed) - t0)
            # Reached? (a first echo may be lost while neighbours resolve: two tries)
            pings = [run("ip", "netns", "exec", src, "ping", "-c", "1", "-W", "1", w["address"],
                         check=False).returncode == 0 for _ in range(2)]
            first_lost += not pings[0]
            assert any(pings), "the workload is not reached after its port came back"
        ms = lambda xs: {"p50": round(statistics.median(xs) * 1000, 1),
                         "p99": round(pct(xs, 99) * 1000, 1),
                         "max": round(max(xs) * 1000, 1)}
        out = {"rounds": a.rounds, "port_add_ms": ms(adds), "port_del_ms": ms(dels),
               "first_ping_lost": first_lost}

        def etcd_tx():
            links = json.loads(run("ip", "-n", f"{a.prefix}-etcd1", "-s", "-j", "link").stdout)
            return sum(x["stats64"]["tx"]["bytes"] for x in links if x["ifname"] != "lo")

        tx = etcd_tx()
        t0 = time.monotonic()
        r = run(RELEASE / "examples" / "load", "--etcd", etcd, "--hosts", "10", "--networks",
                "1", "--endpoints", a.burst, "--local", "t1")
        burst = json.loads(r.stdout.splitlines()[0])
        done = {h: wait(f"{h} applies the burst", lambda h=h: api[h].get(
            "/api/v1/cluster")["applied_revision"] >= burst["revision"], timeout=120) - t0
            for h in api}
        # What etcd sent meanwhile is mostly the burst's events, once to each host's watch.
        sent = etcd_tx() - tx
        out["burst"] = {"endpoints": a.burst, "written_s": burst["seconds"],
                        "etcd_sent_bytes_per_event_per_watcher": round(
                            sent / (a.burst * len(api)), 1),
                        "applied_s": {h: round(v, 3) for h, v in done.items()},
                        "bridge_entries": {h: len(api[h].get("/api/v1/bridge")) for h in api}}
        print(json.dumps(out, indent=1))
    finally:
        run(*lab, "down", check=False)


if __name__ == "__main__":
    main()
