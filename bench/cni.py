#!/usr/bin/env python3
"""ovr-cni: ADD latency, ADD → reached from another host, and ADD/DEL churn that must leak
nothing (issue 22's goals).

In a two-host lab (`ovrctl lab up --hosts 2 --tenants 1`, a cluster on one etcd member),
the plugin is run as a runtime runs it (the spec's environment, the configuration on
stdin) with `"ipam": {"type": "ovr"}` in network `t1`:
1. ROUNDS times: a fresh namespace gets an interface through h2's ovrd (ADD, timed from
   the plugin's start to its exit); then h1-t1-w1 pings the new address every 2 ms
   until the first reply: the time from ADD's return to that reply is "reached"; then DEL
   (timed).
2. churn: CYCLES ADD/DEL cycles, PARALLEL at a time (half through each host): every
   round's addresses are distinct, every verb succeeds, and afterwards the cluster's keys,
   both hosts' interfaces and their bridge entries are what they were before.

Goals: ADD p50 ≤ 50 ms; reached p99 ≤ 200 ms; churn leaks nothing, no address twice.

    python3 bench/cni.py --rounds 50 --cycles 200 --parallel 20
"""

import argparse
import json
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "target" / "release"


def run(*args, check=True, timeout=600, **kw):
    return subprocess.run([str(a) for a in args], check=check, capture_output=True,
                          text=True, timeout=timeout, **kw)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def ms(xs):
    return {"n": len(xs), "p50": round(statistics.median(xs) * 1000, 1),
            "p99": round(pct(xs, 99) * 1000, 1), "max": round(max(xs) * 1000, 1)}


class Bench:
    def __init__(self, prefix, status):
        self.prefix, self.st = prefix, status
        self.sockets = {h["name"]: h["socket"] for h in status["hosts"]}
        self.ctl = ["etcdctl", "--endpoints", status["etcd"][0]]

    def conf(self, host):
        return json.dumps({"cniVersion": "1.0.0", "name": "t1-net", "type": "ovr-cni",
                           "network": "t1", "socket": self.sockets[host],
                           "ipam": {"type": "ovr"}})

    def cni(self, verb, host, cid, ns):
        env = {"CNI_COMMAND": verb, "CNI_CONTAINERID": cid,
               "CNI_NETNS": f"/var/run/netns/{ns}", "CNI_IFNAME": "eth0", "CNI_ARGS": "",
               "CNI_PATH": "/usr/lib/cni", "PATH": "/usr/bin:/bin"}
        t0 = time.monotonic()
        r = run(RELEASE / "ovr-cni", input=self.conf(host), env=env, check=False, timeout=60)
        took = time.monotonic() - t0
        if r.returncode != 0:
            raise SystemExit(f"{verb} {cid} on {host}: {r.returncode} {r.stdout} {r.stderr}")
        return took, json.loads(r.stdout) if r.stdout.strip() else None

    def netns(self, k):
        ns = f"{self.prefix}-c{k}"
        run("ip", "netns", "add", ns)
        return ns

    def snapshot(self):
        keys = run(*self.ctl, "get", "--prefix", "--keys-only", "/ovr/").stdout.split()
        # Host records and reports carry a changing lease/revision, not what ADD makes.
        keys = sorted(k for k in keys if not k.startswith(("/ovr/v1/hosts/", "/ovr/status/")))
        links = {h: sorted(l["ifname"] for l in json.loads(run(
            "ip", "-n", f"{self.prefix}-{h}", "-j", "link").stdout)) for h in self.sockets}
        bridge = {h: sorted(json.dumps(b, sort_keys=True) for b in json.loads(run(
            RELEASE / "ovrctl", "--socket", s, "--json", "bridge").stdout))
            for h, s in self.sockets.items()}
        return {"keys": keys, "links": links, "bridge": bridge}


def latency(b, rounds):
    src = next(w for w in b.st["workloads"] if w["name"] == "h1-t1-w1")["namespace"]
    add, reached, dele = [], [], []
    for k in range(rounds):
        ns = b.netns(k)
        try:
            took, r = b.cni("ADD", "h2", f"lat{k}", ns)
            done = time.monotonic()
            add.append(took)
            addr = r["ips"][0]["address"].split("/")[0]
            # Echo every 2 ms until the first reply (or 3 s): exits 0 at the first reply.
            p = run("ip", "netns", "exec", src, "ping", "-n", "-q", "-c", "1", "-i", "0.002",
                    "-w", "3", addr, check=False)
            if p.returncode != 0:
                raise SystemExit(f"round {k}: {addr} not reached within 3 s")
            reached.append(time.monotonic() - done)
            dele.append(b.cni("DEL", "h2", f"lat{k}", ns)[0])
        finally:
            run("ip", "netns", "del", ns, check=False)
    return {"add_ms": ms(add), "reached_from_other_host_ms": ms(reached), "del_ms": ms(dele)}


def churn(b, cycles, parallel):
    before = b.snapshot()
    rounds, twice = cycles // parallel, 0
    with ThreadPoolExecutor(parallel) as ex:
        for r in range(rounds):
            jobs = [(f"churn{r}-{j}", ("h1", "h2")[j % 2], b.netns(f"{r}-{j}"))
                    for j in range(parallel)]
            try:
                adds = list(ex.map(lambda j: b.cni("ADD", j[1], j[0], j[2])[1], jobs))
                addrs = [a["ips"][0]["address"] for a in adds]
                twice += len(addrs) - len(set(addrs))
            finally:
                list(ex.map(lambda j: b.cni("DEL", j[1], j[0], j[2]), jobs))
                for _, _, ns in jobs:
                    run("ip", "netns", "del", ns, check=False)
    # Give the hosts a moment to withdraw the last round's endpoints.
    deadline = time.monotonic() + 5
    while (after := b.snapshot()) != before and time.monotonic() < deadline:
        time.sleep(0.1)
    leaked = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    return {"cycles": rounds * parallel, "parallel": parallel, "addresses_given_twice": twice,
            "leaked": leaked}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--cycles", type=int, default=200)
    p.add_argument("--parallel", type=int, default=20)
    p.add_argument("--prefix", default="ovrbcni")
    a = p.parse_args()
    run("cargo", "build", "--release", "-q", "-p", "ovrd", "-p", "ovr-cli", "-p", "ovr-cni",
        timeout=3600)
    lab = [RELEASE / "ovrctl", "lab", "--prefix", a.prefix, "--dir", f"/run/{a.prefix}-lab"]
    run(*lab, "down", check=False)
    run(*lab, "up", "--hosts", "2", "--tenants", "1")
    try:
        b = Bench(a.prefix, json.loads(run(*lab, "status", "--json").stdout))
        out = latency(b, a.rounds)
        out["churn"] = churn(b, a.cycles, a.parallel)
        print(json.dumps(out, indent=1))
        ok = (out["churn"]["addresses_given_twice"] == 0 and not out["churn"]["leaked"])
        raise SystemExit(0 if ok else 1)
    finally:
        run(*lab, "down", check=False)


if __name__ == "__main__":
    main()
