#!/usr/bin/env python3
"""Headless forwarding: what established flows see while ovrd is gone and restarted.

In a two-host lab (`ovrctl lab up --offload=HOOK`), per round:
1. an iperf3 TCP stream h1-t1-w1 → h2-t1-w1 and a ping every 20 ms run; after BEFORE
   seconds h1's ovrd is killed with SIGKILL; DOWN seconds later `ovrctl lab restart h1`
   starts it again (it adopts the pinned fast path); the stream goes on AFTER seconds.
   Reported: TCP throughput before, while ovrd is down, after; the ping's loss across the
   kill and the restart; how long `lab restart` took.
2. with a new ping every 20 ms, `ovrctl lab restart h1` with ovrd running (SIGTERM, then
   start: an upgrade): the ping's loss.

Goals (issue 20): TCP while ovrd is down ≥ 90% of before; ping at 20 ms loses ≤ 1 packet
across a restart.

    cargo build --release
    python3 bench/restart.py --hooks tc,xdp --rounds 3

At XDP, workloads send complete frames (`--no-workload-offloads`): a TCP segment whose
checksum a workload left to the NIC goes through user space there (docs/io.md), so with
ovrd down it would not be forwarded at all. `--xdp-offloads` measures that case too.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
W2 = "10.1.0.21"


def sh(*args, ns=None, check=True, timeout=120):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True)


def popen(ns, *args):
    return subprocess.Popen(["ip", "netns", "exec", ns] + [str(a) for a in args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Lab:
    def __init__(self, ctl, prefix, args):
        self.ctl_path, self.prefix, self.args = ctl, prefix, args
        self.dir = f"/run/{prefix}-lab"

    def ctl(self, *args, check=True):
        return sh(self.ctl_path, "lab", "--prefix", self.prefix, "--dir", self.dir, *args,
                  check=check)

    def __enter__(self):
        self.ctl("down", check=False)
        # Static, as the results here were measured (a cluster lab restarts too, and
        # test_headless covers that).
        self.ctl("up", "--static", "--hosts", "2", "--tenants", "1", *self.args)
        return self

    def __exit__(self, *exc):
        self.ctl("down", check=False)

    def ns(self, name):
        return f"{self.prefix}-{name}"

    def pid(self, host):
        with open(f"{self.dir}/state.json") as f:
            return next(h["ovrd_pid"] for h in json.load(f)["hosts"] if h["name"] == host)


def ping_loss(out):
    """(sent, received) from ping's summary."""
    for line in out.splitlines():
        if "packets transmitted" in line:
            parts = line.split(",")
            return int(parts[0].split()[0]), int(parts[1].split()[0])
    return 0, 0


# Samples the receiving workload's eth0 byte counter every 50 ms: (wall time, bytes).
SAMPLER = r"""
import sys, time
end = time.time() + float(sys.argv[1])
while time.time() < end:
    with open("/sys/class/net/eth0/statistics/rx_bytes") as f:
        print(time.time(), f.read().strip(), flush=True)
    time.sleep(0.05)
"""


def gbps(samples, lo, hi):
    """Throughput (Gbit/s) received between wall times lo and hi (the samples nearest)."""
    inside = [(t, b) for t, b in samples if lo <= t <= hi]
    if len(inside) < 2:
        return float("nan")
    (t0, b0), (t1, b1) = inside[0], inside[-1]
    return (b1 - b0) * 8 / (t1 - t0) / 1e9


def settle_neighbours(w1, w2):
    """Waits until each workload has confirmed the other's address: ARP goes through user
    space, and a neighbour still in its first probe (5 s after it was learnt from the
    peer's request) fails while ovrd is down (docs/io.md, "Restarts")."""
    deadline = time.time() + 15
    while time.time() < deadline:
        if all("REACHABLE" in sh("ip", "neigh", "show", ip, ns=ns).stdout
               for ns, ip in ((w1, W2), (w2, "10.1.0.11"))):
            return
        time.sleep(0.1)


def round_(lab, before, down, after):
    w1, w2 = lab.ns("h1-t1-w1"), lab.ns("h2-t1-w1")
    server = popen(w2, "iperf3", "-s", "-1")
    time.sleep(0.5)
    total = before + down + after + 9  # up to 6 s for the neighbours
    t0 = time.time()
    sampler = popen(w2, "python3", "-c", SAMPLER, total + 2)
    client = popen(w1, "iperf3", "-c", W2, "-t", total, "-i", "1", "--json")
    ping = popen(w1, "ping", "-i", "0.02", "-w", int(total), W2)
    time.sleep(before)
    settle_neighbours(w1, w2)
    killed = time.time()
    os.kill(lab.pid("h1"), signal.SIGKILL)
    time.sleep(down)
    restart_at = time.time()
    lab.ctl("restart", "h1")
    restarted = time.time()
    client.communicate(timeout=total + 60)
    server.wait(timeout=30)
    pout, _ = ping.communicate(timeout=total + 60)
    samples = [tuple(map(float, line.split()))
               for line in sampler.communicate(timeout=60)[0].splitlines()]
    sent, got = ping_loss(pout)
    # An upgrade: lab restart with ovrd running.
    ping = popen(w1, "ping", "-i", "0.02", "-w", "6", W2)
    time.sleep(2)
    t = time.time()
    lab.ctl("restart", "h1")
    graceful = time.time() - t
    gout, _ = ping.communicate(timeout=60)
    gsent, ggot = ping_loss(gout)
    return {
        "before_gbps": gbps(samples, t0 + 1, killed),
        "down_gbps": gbps(samples, killed + 0.1, restart_at),
        "after_gbps": gbps(samples, restarted + 0.5, t0 + total),
        "ping_kill_restart": [sent, got],
        "restart_s": restarted - restart_at,
        "ping_graceful_restart": [gsent, ggot],
        "graceful_restart_s": graceful,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hooks", default="tc,xdp")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", type=float, default=4)
    ap.add_argument("--down", type=float, default=4)
    ap.add_argument("--after", type=float, default=3)
    ap.add_argument("--prefix", default="ovrhb")
    ap.add_argument("--debug", action="store_true", help="debug build (default: release)")
    ap.add_argument("--xdp-offloads", action="store_true",
                    help="at XDP, also with workload tx offloads on")
    ap.add_argument("--out", help="write the rounds as JSON here")
    a = ap.parse_args()
    ctl = ROOT / "target" / ("debug" if a.debug else "release") / "ovrctl"
    configs = []
    for hook in a.hooks.split(","):
        extra = ("--no-workload-offloads",) if hook == "xdp" else ()
        configs.append((hook, (f"--offload={hook}", *extra)))
        if hook == "xdp" and a.xdp_offloads:
            configs.append(("xdp+offloads", ("--offload=xdp",)))
    results = {}
    for name, args in configs:
        rounds = []
        for r in range(a.rounds):
            with Lab(ctl, a.prefix, args) as lab:
                x = round_(lab, a.before, a.down, a.after)
            rounds.append(x)
            print(f"{name} round {r + 1}: {json.dumps(x)}", file=sys.stderr, flush=True)
        results[name] = rounds
    print(f"\n| system | TCP before | while ovrd is down | ratio | after restart | "
          f"ping lost: kill -9 + restart | `lab restart` took | ping lost: restart (SIGTERM) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rounds in results.items():
        med = lambda k: statistics.median(x[k] for x in rounds)  # noqa: E731
        lost = lambda k: "/".join(str(x[k][0] - x[k][1]) for x in rounds)  # noqa: E731
        print(f"| {name} | {med('before_gbps'):.2f} | {med('down_gbps'):.2f} | "
              f"{med('down_gbps') / med('before_gbps'):.2f} | {med('after_gbps'):.2f} | "
              f"{lost('ping_kill_restart')} | {med('restart_s'):.2f} s | "
              f"{lost('ping_graceful_restart')} |")
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
