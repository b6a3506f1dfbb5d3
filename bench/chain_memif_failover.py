#!/usr/bin/env python3
"""Failover from a network function on memif when it dies: a 10 ms ping from a (red) to
b (blue) through the transparent function `pmd` of tests/system/test_chains_memif.py,
whose instances are testpmd on two memif ports (pmd-1) and a Linux bridge (pmd-2). The
ping is pinned to testpmd (the bridge's link is down when it starts, up 1 s later);
after 2 s testpmd is killed (SIGKILL), and the ping runs on to 5 s. Prints, per trial,
the longest time between two replies less the interval (`ping -D`'s timestamps) and the
replies lost.

    sudo python3 bench/chain_memif_failover.py [TRIALS]

Needs target/debug/ovrd and ovrctl (cargo build -p ovrd -p ovr-cli); namespaces
ovrmc<pid>-…, testpmd on CPU 1, everything stopped by PID and removed after each trial."""

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from system.netns import sh  # noqa: E402
from system.test_chains import B_IP  # noqa: E402
from system.test_chains_memif import MemifChainLab, MemifTopology  # noqa: E402

INTERVAL = 0.01


def trial():
    with tempfile.TemporaryDirectory(prefix="ovrmc-") as tmp:
        lab = MemifChainLab()
        t = MemifTopology(lab, Path(tmp))
        try:
            t.build_memif(["pmd"], True)
            sh("ip", "link", "set", "left", "down", ns=t.fw[2])
            t.wait_health("pmd-2", False)
            pmd = t.start_pmd()
            ping = subprocess.Popen(
                ["ip", "netns", "exec", t.a, "ping", "-D", "-n", "-i", str(INTERVAL), "-w", "5",
                 B_IP], stdout=subprocess.PIPE, text=True)
            time.sleep(1)
            sh("ip", "link", "set", "left", "up", ns=t.fw[2])
            t.wait_health("pmd-2", True)
            time.sleep(1)
            on = [f["nexthop_name"] for f in t.json("flows")["flows"]
                  if f["network"] == "red" and f["protocol"] == 1]
            killed = time.time()
            pmd.kill()
            left = t.wait_health("pmd-1", False)
            out, _ = ping.communicate(timeout=30)
        finally:
            for p in t.pmds:
                p.kill()
            t.close()
            lab.close()
    stamps = [float(m) for m in re.findall(r"^\[(\d+\.\d+)\] \d+ bytes from", out, re.M)]
    sent = int(re.search(r"(\d+) packets transmitted", out).group(1))
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return {"pinned to": on, "unhealthy in the API after ms": round((left - killed) * 1000),
            "outage ms": round((max(gaps) - INTERVAL) * 1000), "sent": sent,
            "lost": sent - len(stamps)}


def main():
    for n in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
        print(n + 1, trial(), flush=True)


if __name__ == "__main__":
    main()
