#!/usr/bin/env python3
"""TCP through a chain of two functions across hosts, against the same hosts without the
chain, in one lab (`ovrctl lab up --hosts 2 --tenants 1 --service-chain --functions 2`,
docs/chains.md): one iperf3 stream from h1-t1-w1 to the `ext` workload on h2, through
`fw` then `fw2` (each with an instance on h1 and one on h2, namespaces with forwarding and
nftables), alternated with one to h2-t1-w1, in tenant 1 (no chain: h1 → h2 straight).

Each chained run is a new session: its instances are picked by hash, so its path crosses
the underlay once (both instances on h2), or three times (fw on h2, fw2 on h1 or fw on h1,
fw2 on h2, h1 → h2 → h1 → h2 or h1 → h1 → h2 ...). Prints per run the Gbit/s iperf3 saw
(receiver side) and, for a chained run, the instance of each function its packets
crossed (nftables counters: the one that counted most), then the medians.

    sudo python3 bench/chain_iperf.py [ROUNDS] [SECONDS]

Needs target/release/ovrctl and ovrd (cargo build --release -p ovr-cli -p ovrd), or the
ovrctl that $OVRCTL names (with its ovrd beside it). Prefix $PREFIX<pid> (default
ovrci), always taken down."""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OVRCTL = Path(os.environ.get("OVRCTL", ROOT / "target" / "release" / "ovrctl"))
PREFIX = os.environ.get("PREFIX", "ovrci")

# The lab's nftables counter per instance, and a command in a namespace (bench/ is on
# the path when a script here runs).
from chain_failover import counted, sh  # noqa: E402


def iperf(src, dst_ns, dst, seconds):
    """One iperf3 stream src → dst: Gbit/s at the receiver."""
    server = subprocess.Popen(["ip", "netns", "exec", dst_ns, "iperf3", "-s", "-1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        r = sh("iperf3", "-c", dst, "-t", seconds, "-J", ns=src, timeout=int(seconds) + 30)
        return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        server.wait(timeout=10)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    seconds = sys.argv[2] if len(sys.argv) > 2 else "5"
    prefix = f"{PREFIX}{os.getpid() % 1000}"
    lab = [OVRCTL, "lab", "--prefix", prefix, "--dir", f"/run/{prefix}-lab"]
    sh(*lab, "up", "--hosts", "2", "--tenants", "1", "--service-chain", "--functions", "2",
       timeout=600)
    chained, plain = [], []
    by_path = {}
    try:
        status = json.loads(sh(*lab, "status", "--json").stdout)
        ext = next(w for w in status["workloads"] if w["network"] == "ext" and w["host"] == "h2")
        t1 = next(w for w in status["workloads"]
                  if w["network"] != "ext" and w["host"] == "h2")
        src = f"{prefix}-h1-t1-w1"
        for w in (ext, t1):
            end = time.monotonic() + 20
            while sh("ping", "-c", "1", "-W", "0.3", w["address"], ns=src,
                     check=False).returncode != 0:
                if time.monotonic() > end:
                    raise SystemExit(f"{w['address']} not reached")
        services = status["services"]
        print(f"load average before: {os.getloadavg()}", flush=True)
        for n in range(rounds):
            before = {s["name"]: counted(s["namespace"]) for s in services}
            g = iperf(src, ext["namespace"], ext["address"], seconds)
            grew = {s["name"]: counted(s["namespace"]) - before[s["name"]] for s in services}
            path = tuple(max((k for k in grew if k.rsplit("-", 1)[0] == f), key=grew.get)
                         for f in ("fw", "fw2"))
            chained.append(g)
            by_path.setdefault(path, []).append(g)
            print(f"round {n + 1}: chain {g:.2f} Gbit/s via {' -> '.join(path)}", flush=True)
            g = iperf(src, t1["namespace"], t1["address"], seconds)
            plain.append(g)
            print(f"round {n + 1}: plain {g:.2f} Gbit/s", flush=True)
        print(f"load average after: {os.getloadavg()}")
    finally:
        sh(*lab, "down", check=False, timeout=600)
    print(f"median: chain {statistics.median(chained):.2f} Gbit/s, "
          f"plain {statistics.median(plain):.2f} Gbit/s, "
          f"ratio {statistics.median(chained) / statistics.median(plain):.2f}")
    for path, gs in sorted(by_path.items()):
        print(f"  via {' -> '.join(path)}: {len(gs)} runs, median "
              f"{statistics.median(gs):.2f} Gbit/s")


if __name__ == "__main__":
    main()
