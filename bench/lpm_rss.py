#!/usr/bin/env python3
"""Where route churn's resident memory goes: one ovrd (its RATE_CONFIG, bench/churn.py),
route churn as the soak drives it (per round --batch /24s created from where the last
round stopped and the batch --keep routes older deleted), and every --every rounds
ovrd's VmRSS and the resident size of its largest anonymous mappings (the IPv4 FIB's
first level, 64 MiB per table copy, is one each) read from /proc/PID/smaps.

--recycle N takes the /24s from the first N only (the same prefixes again and again)
instead of ever-new ones: what the same number of updates costs when they do not
reach new parts of the address space.

    python3 bench/lpm_rss.py --ovrd target/release/ovrd --prefix P [--rounds N]

It runs ovrd in a namespace named P-rss and its files in /tmp/P-rss, both removed at
the end; it prints one JSON line per sample.
"""

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from churn import RATE_CONFIG, Api, route_batches  # noqa: E402
from system.procfs import rss_kib  # noqa: E402


def mappings(pid, min_kib=32 * 1024):
    """(size KiB, Rss KiB) of each mapping of at least min_kib."""
    out, size = [], None
    for line in pathlib.Path(f"/proc/{pid}/smaps").read_text().splitlines():
        f = line.split()
        if f[0] == "Size:":
            size = int(f[1])
        elif f[0] == "Rss:" and size is not None and size >= min_kib:
            out.append((size, int(f[1])))
    return sorted(out, reverse=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ovrd", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--keep", type=int, default=2000)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--recycle", type=int, default=0)
    a = ap.parse_args()
    if a.recycle and (a.recycle % a.batch or a.recycle <= a.keep):
        ap.error("--recycle must be a multiple of --batch and more than --keep")
    ns, d = f"{a.prefix}-rss", pathlib.Path(f"/tmp/{a.prefix}-rss")
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.yaml").write_text(RATE_CONFIG)
    sock = d / "ovrd.sock"
    sock.unlink(missing_ok=True)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    p = None
    try:
        p = subprocess.Popen(["ip", "netns", "exec", ns, a.ovrd, "--config", str(d / "config.yaml"),
                              "--state", str(d / "state.json"), "--api-socket", str(sock)],
                             stdout=open(d / "ovrd.log", "w"), stderr=subprocess.STDOUT)
        while not sock.exists():
            if p.poll() is not None:
                raise RuntimeError((d / "ovrd.log").read_text()[-2000:])
            time.sleep(0.05)
        api = Api(sock)
        first, updates = 0, 0

        def at(n):
            return n % a.recycle if a.recycle else n

        for r in range(a.rounds + 1):
            if r % a.every == 0:
                print(json.dumps({"round": r, "updates": updates, "vmrss_kib": rss_kib(p.pid),
                                  "large_mappings_kib": mappings(p.pid)}), flush=True)
            if r == a.rounds:
                break
            add = route_batches("create", a.batch, a.batch, "nh-a", first=at(first))[0]
            api.call("POST", "/api/v1/batch", add)
            old = first - a.keep
            if old >= 0:
                api.call("POST", "/api/v1/batch",
                         route_batches("delete", a.batch, a.batch, None, first=at(old))[0])
            updates += 2 * a.batch
            first += a.batch
    finally:
        if p is not None:
            p.terminate()
            p.wait(timeout=20)
        subprocess.run(["ip", "netns", "del", ns], check=False)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
