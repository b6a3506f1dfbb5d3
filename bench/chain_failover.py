#!/usr/bin/env python3
"""Service chain failover in the lab: a 10 ms ping from h1-t1-w1 to the `ext` workload
on h2 through the firewall (`ovrctl lab up --service-chain`, docs/chains.md); after 2 s
the namespace of the instance the session is pinned to is removed, and the ping runs on
for 5 s more. Prints, per trial, the instance removed, the longest run of lost replies
(ms: the longest time between two replies, from `ping -D`'s timestamps, less the
interval) and the replies lost in all (from the echo sequence numbers).

    sudo python3 bench/chain_failover.py [TRIALS] [--hosts 3 --instance-hosts 2,3]

The arguments after TRIALS go to `lab up` (default: 2 hosts, instances on h1 and h2).
Needs target/debug/ovrctl and ovrd (cargo build -p ovr-cli -p ovrd), or the ovrctl that
$OVRCTL names (with its ovrd beside it: to compare two builds). One lab per trial, prefix
$PREFIX<pid> (default ovrfo), always taken down."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OVRCTL = Path(os.environ.get("OVRCTL", ROOT / "target" / "debug" / "ovrctl"))
PREFIX = os.environ.get("PREFIX", "ovrfo")
INTERVAL = 0.01


def sh(*args, ns=None, check=True, timeout=120):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=timeout)


def counted(ns):
    rules = json.loads(sh("nft", "-j", "list", "chain", "inet", "fw", "forward", ns=ns).stdout)
    for item in rules["nftables"]:
        rule = item.get("rule")
        if rule and rule.get("comment") == "lab":
            return next(e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
    return 0


def trial(prefix, up_args):
    lab = [OVRCTL, "lab", "--prefix", prefix, "--dir", f"/run/{prefix}-lab"]
    hosts = "2"
    if "--hosts" in up_args:
        hosts = up_args[up_args.index("--hosts") + 1]
    up_args = [a for i, a in enumerate(up_args)
               if a != "--hosts" and (i == 0 or up_args[i - 1] != "--hosts")]
    sh(*lab, "up", "--hosts", hosts, "--tenants", "1", "--service-chain", *up_args)
    try:
        status = json.loads(sh(*lab, "status", "--json").stdout)
        dst = next(w["address"] for w in status["workloads"]
                   if w["network"] == "ext" and w["host"] == "h2")
        src = f"{prefix}-h1-t1-w1"
        end = time.monotonic() + 15
        while sh("ping", "-c", "1", "-W", "0.3", dst, ns=src, check=False).returncode != 0:
            if time.monotonic() > end:
                raise SystemExit(f"{dst} not reached")
        services = status["services"]
        p = subprocess.Popen(["ip", "netns", "exec", src, "ping", "-D", "-n", "-i", str(INTERVAL),
                              "-w", "7", dst], stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)
        before = {s["name"]: counted(s["namespace"]) for s in services}
        time.sleep(0.5)
        used = next(s for s in services if counted(s["namespace"]) > before[s["name"]])
        sh("ip", "netns", "del", used["namespace"])
        out, _ = p.communicate(timeout=20)
    finally:
        sh(*lab, "down", check=False)
    replies = sorted((int(w.split("=")[1]), float(line.split("]")[0].lstrip("[")))
                     for line in out.splitlines() if line.startswith("[")
                     for w in line.split() if w.startswith("icmp_seq="))
    times = sorted(t for _, t in replies)
    gap = max((b - a for a, b in zip(times, times[1:])), default=0) - INTERVAL
    sent = replies[-1][0] if replies else 0
    return used["name"], max(gap, 0) * 1000, sent - len(replies), len(replies)


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    up_args = sys.argv[2:]
    for n in range(trials):
        name, gap_ms, lost, got = trial(f"{PREFIX}{os.getpid() % 1000}", up_args)
        print(f"trial {n + 1}: removed {name}: longest loss {gap_ms:.0f} ms, "
              f"{lost} replies lost, {got} received", flush=True)


if __name__ == "__main__":
    main()
