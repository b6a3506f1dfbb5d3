#!/usr/bin/env python3
"""EVPN routes end to end (issue 23): N type 2 routes (and a type 3 per VTEP) injected
into a datacenter router's gobgpd through GoBGP's gRPC API (AddPathStream), advertised
over BGP to ovr's gobgpd, learnt by ovrd through its WatchEvent stream and installed in
its tables; then withdrawn the same way. The topology and daemons are
tests/system/evpn_router.py's (release binaries here).

Reported per phase (install, withdraw):
- wall time from the first route injected (the injector's clock) until ovrd's
  `GET /api/v1/bgp/installed` shows all N/2 MACs and N/2 host routes installed (install)
  or none left (withdraw), polled every 50 ms; and until ovr's gobgpd had received them
  all (its neighbor's route count), to see who is behind whom;
- routes per second end to end;
- CPU seconds of each process over the phase (/proc/PID/stat before and after; the
  injector's from wait4): ovrd, ovr's gobgpd, the router's gobgpd, the injector; and
  ovrd's share of the total. Goal (issue 23): ovr is not the bottleneck, ≤ 10% of the
  total. With `--source frr` also ovrd's resident memory at the phase's end.

    cargo build --release -p ovrd
    cargo build --release -p ovr-bgp --example evpn_inject
    sudo python3 bench/evpn_e2e.py --routes 100000 [--rounds 3] [--json]

`--mode paced --per-second R`: latency rather than rate: the routes injected one a
message at R a second, each route's time from its message to installed in ovrd (polled),
and ovrd's own part of it (its `install_latency`). Goal (issue 23): p99 ≤ 20 ms.

    sudo python3 bench/evpn_e2e.py --mode paced --routes 2000 --per-second 200 [--preload M]

`--preload M`: M other routes installed first (not measured): a larger table, which
ovrd's periodic listing of its gobgpd (a safety net) takes longer to list.

`--source frr`: the routes come from FRR instead (tests/system/evpn_frr.py): N static
MACs added to the kernel bridge of a router running FRR (zebra + bgpd,
`advertise-all-vni`) in one `bridge -batch`, announced by zebra to bgpd and by bgpd to
ovr's gobgpd as N type 2 routes (MAC only, one VTEP); withdrawn by deleting them in one
batch. Meanwhile ovr's workload pings the router's workload every 10 ms through the
tunnel ("forwarding": replies / requests, goal ≥ 95%). CPU of ovrd, ovr's gobgpd, zebra,
bgpd and the `bridge` batch; and how long ovrd finished after its gobgpd had received
every route, as a share of the end-to-end time (what ovrd adds to the total).

    cargo build --release -p ovrd
    sudo python3 bench/evpn_e2e.py --source frr --routes 100000 [--rounds 3] [--json]
"""

import argparse
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from system.evpn_router import VTEPS, RouterLab  # noqa: E402
from system.procfs import cpu_seconds, rss_kib  # noqa: E402
from system.evpn_frr import FrrLab  # noqa: E402

RELEASE = ROOT / "target" / "release"


def done(lab, n, withdraw):
    i = lab.installed()["installed"]
    if withdraw:
        return i["macs"] == 0 and i["hosts"] == 0 and i["tunnels"] == 0
    return i["macs"] == n // 2 and i["hosts"] == n // 2 and i["flood"] == len(VTEPS)


def phase(lab, n, name, withdraw, start, timeout):
    """`start()` begins the phase (returns the injector's Popen, or None); timed until
    ovrd has installed all (or none) of it."""
    want_received = 0 if withdraw else n + len(VTEPS)
    pids = lab.pids()
    before = {k: cpu_seconds(p) for k, p in pids.items()}
    t0 = time.time()
    inj = start()
    bgp_done = ovr_done = up = None
    while ovr_done is None or bgp_done is None:
        now = time.time()
        assert now - t0 < timeout, f"not done within {timeout} s: {lab.installed()}"
        nb = lab.ovrd.get("/api/v1/bgp/neighbors")
        est = [x for x in nb if x["state"] == "established"]
        if up is None and est:
            up = now
        if bgp_done is None and (sum(x["received"] for x in est) == want_received
                                 if est or not withdraw else True):
            bgp_done = now
        if ovr_done is None and done(lab, n, withdraw):
            ovr_done = now
        time.sleep(0.05)
    after = {k: cpu_seconds(p) for k, p in pids.items()}
    cpu = {k: after[k] - before[k] for k in pids}
    if inj is not None:
        out, cpu["injector"] = lab.finish(inj)
        t0 = out["start"]
    else:
        cpu["injector"] = 0.0
    total = sum(cpu.values())
    return {
        "phase": name, "routes": n, "seconds": ovr_done - t0,
        "routes_per_s": n / (ovr_done - t0),
        "session_up_seconds": None if up is None else up - t0,
        "after_session_up_seconds": None if up is None else ovr_done - up,
        "bgp_received_seconds": bgp_done - t0,
        "cpu_seconds": cpu, "cpu_total": total,
        "ovrd_share": cpu["ovrd"] / total if total else None,
    }


def paced(lab, n, per_second, withdraw, timeout):
    """N type 2 routes injected at the router one message each, `per_second` a second,
    while ovrd's installed MACs and host routes are polled as fast as its API answers:
    each route's latency end to end, from its message sent to the router's gobgpd to the
    first poll that finds it installed (or gone), so at most one poll late; and ovrd's own
    part, its `install_latency` (an event's receipt from its gobgpd to installed;
    cumulative since ovrd started)."""
    def installed():
        i = lab.ovrd.api_get("/api/v1/bgp/installed")["installed"]
        return i["macs"] + i["hosts"]

    start = installed()
    want = start - n if withdraw else start + n
    inj = lab.inject(n, withdraw=withdraw, chunk=1, per_second=per_second)
    polls, t0 = [], time.time()
    while True:
        c = installed()
        polls.append((time.time(), c))
        if c == want:
            break
        assert time.time() - t0 < timeout, f"not done within {timeout} s: {lab.installed()}"
        time.sleep(0.001)
    out, _ = lab.finish(inj)
    sent = out["sent_at"]
    # Message order: install, the 4 VTEPs' type 3 then the type 2 routes; withdraw, the
    # type 2 routes first.
    type2 = sent[len(VTEPS):] if not withdraw else sent[:n]
    lat, j = [], 0
    for k, s in enumerate(type2):
        target = start + k + 1 if not withdraw else start - k - 1
        while j < len(polls) and (polls[j][1] < target if not withdraw else polls[j][1] > target):
            j += 1
        lat.append(polls[j][0] - s)
    lat.sort()
    q = lambda f: 1000 * lat[min(len(lat) - 1, int(f * len(lat)))]  # noqa: E731
    gaps = [b[0] - a[0] for a, b in zip(polls, polls[1:])]
    return {
        "phase": f"paced {'withdraw' if withdraw else 'install'}", "routes": n,
        "per_second": per_second, "e2e_ms": {"p50": q(0.5), "p99": q(0.99),
                                              "max": 1000 * lat[-1]},
        "poll_ms": 1000 * sum(gaps) / len(gaps) if gaps else None,
        "ovrd_install_latency": lab.installed()["install_latency"],
    }


def preload(lab, n, m, timeout):
    """M routes after the first N injected as fast as they go, until ovrd has them all."""
    lab.finish(lab.inject(m, skip=n))
    t0 = time.time()
    while True:
        i = lab.ovrd.api_get("/api/v1/bgp/installed")["installed"]
        if i["macs"] + i["hosts"] >= m:
            return
        assert time.time() - t0 < timeout, f"preload not installed within {timeout} s: {i}"
        time.sleep(0.05)


def load(lab, n):
    """N routes into the router while it has no peer: GoBGP's API alone."""
    before = cpu_seconds(lab.pids()["router_gobgpd"])
    out, inj = lab.finish(lab.inject(n))
    return {"phase": "load", "routes": n, "seconds": out["seconds"],
            "routes_per_s": n / out["seconds"],
            "cpu_seconds": {"router_gobgpd": cpu_seconds(lab.pids()["router_gobgpd"]) - before,
                            "injector": inj}}


def frr_phase(lab, n, name, withdraw, timeout):
    """N MACs added to (or deleted from) the FRR router's bridge; timed until ovrd has
    installed (or removed) them all, a ping crossing the tunnel meanwhile."""
    base = lab.installed()["installed"]["macs"]
    want = base - n if withdraw else base + n
    want_received = lab.received() + (-n if withdraw else n)
    want_table = lab.table_paths() + (-n if withdraw else n)
    pids = lab.pids()
    ping = lab.ping()
    time.sleep(0.5)
    before = {k: cpu_seconds(p) for k, p in pids.items()}
    t0 = time.time()
    batch = lab.macs(0, n, add=not withdraw)
    batch_cpu = fed = bgp_done = table_done = ovr_done = None
    while None in (ovr_done, bgp_done, table_done, batch_cpu):
        now = time.time()
        assert now - t0 < timeout, f"not done within {timeout} s: {lab.installed()}"
        if batch_cpu is None:
            batch_cpu = lab.finish(batch, wait=False)
            fed = now
        if bgp_done is None and lab.received() == want_received:
            bgp_done = now
        # Its table only from then on: each look is a process of GoBGP's CLI.
        if bgp_done is not None and table_done is None and lab.table_paths() == want_table:
            table_done = now
        if ovr_done is None and lab.installed()["installed"]["macs"] == want:
            ovr_done = now
        time.sleep(0.05)
    after = {k: cpu_seconds(p) for k, p in pids.items()}
    rss = rss_kib(pids["ovrd"])
    time.sleep(0.5)
    sent, got = lab.delivered(ping)
    cpu = {k: after[k] - before[k] for k in pids}
    cpu["bridge_batch"] = batch_cpu
    total = sum(cpu.values())
    return {
        "phase": name, "source": "frr", "routes": n, "seconds": ovr_done - t0,
        "routes_per_s": n / (ovr_done - t0), "batch_seconds": fed - t0,
        "bgp_received_seconds": bgp_done - t0,
        # How much later the whole is done because of ovrd: the time from its gobgpd
        # having received every route to ovrd having installed them all.
        "ovrd_behind_seconds": max(0.0, ovr_done - bgp_done),
        "ovrd_behind_share": max(0.0, ovr_done - bgp_done) / (ovr_done - t0),
        # The same from gobgpd's table having them all (its best paths chosen, what its
        # watch stream sends): the part of the lag that is the stream and ovrd.
        "bgp_table_seconds": table_done - t0,
        "ovrd_after_table_seconds": max(0.0, ovr_done - table_done),
        "forwarding": got / sent if sent else None, "pings": [sent, got],
        "cpu_seconds": cpu, "cpu_total": total,
        "ovrd_share": cpu["ovrd"] / total if total else None,
        # ovrd's resident memory when done (all installed, or none left).
        "ovrd_rss_mib": rss / 1024 if rss else None,
    }


def show(r):
    if r["phase"].startswith("paced"):
        e, o = r["e2e_ms"], r["ovrd_install_latency"]
        return (f"{r['phase']:>15} N={r['routes']} at {r['per_second']:.0f}/s: end to end "
                f"p50 {e['p50']:.1f} ms, p99 {e['p99']:.1f} ms, max {e['max']:.1f} ms (polled "
                f"every {r['poll_ms']:.1f} ms); ovrd, receipt to installed (since start, "
                f"{o['paths']} paths): p50 {o['p50_ms']:.2f} ms, p99 {o['p99_ms']:.2f} ms, "
                f"max {o['max_ms']:.2f} ms")
    c = r["cpu_seconds"]
    if r.get("source") == "frr":
        return (f"{r['phase']:>8} N={r['routes']}: {r['seconds']:.2f} s end to end "
                f"({r['routes_per_s']:.0f} routes/s; bridge batch done at "
                f"{r['batch_seconds']:.2f} s, ovr's gobgpd had them at "
                f"{r['bgp_received_seconds']:.2f} s and in its table at "
                f"{r['bgp_table_seconds']:.2f} s, ovrd {r['ovrd_behind_seconds']:.2f} s after "
                f"the first, {r['ovrd_after_table_seconds']:.2f} s after the second: "
                f"{100 * r['ovrd_behind_share']:.1f}% of the time); forwarding {100 * r['forwarding']:.1f}% "
                f"({r['pings'][1]}/{r['pings'][0]}); CPU s: ovrd {c['ovrd']:.2f}, ovr gobgpd "
                f"{c['ovr_gobgpd']:.2f}, zebra {c['zebra']:.2f}, bgpd {c['bgpd']:.2f}, "
                f"bridge {c['bridge_batch']:.2f}; ovrd's share {100 * r['ovrd_share']:.1f}%"
                + (f"; ovrd's RSS {r['ovrd_rss_mib']:.0f} MiB" if r["ovrd_rss_mib"] else ""))
    if r["phase"] == "load":
        return (f"    load N={r['routes']}: {r['seconds']:.2f} s into the router's gobgpd, no "
                f"peer ({r['routes_per_s']:.0f} routes/s); CPU s: router gobgpd "
                f"{c['router_gobgpd']:.2f}, injector {c['injector']:.2f}")
    up = "" if r["session_up_seconds"] is None or r["session_up_seconds"] < 0 else \
        (f"session up at {r['session_up_seconds']:.2f} s, installed "
         f"{r['after_session_up_seconds']:.2f} s after, ")
    return (f"{r['phase']:>8} N={r['routes']}: {r['seconds']:.2f} s end to end "
            f"({r['routes_per_s']:.0f} routes/s; {up}"
            f"ovr's gobgpd had them at {r['bgp_received_seconds']:.2f} s); CPU s: "
            f"ovrd {c['ovrd']:.2f}, ovr gobgpd {c['ovr_gobgpd']:.2f}, router gobgpd "
            f"{c['router_gobgpd']:.2f}, injector {c['injector']:.2f}; ovrd's share "
            f"{100 * r['ovrd_share']:.1f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--routes", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--source", choices=("gobgp", "frr"), default="gobgp")
    p.add_argument("--mode", choices=("table", "stream", "paced"), default="table",
                   help="gobgp source: the router's table loaded before the session, or "
                   "injected while it is up (as fast as it goes, or --per-second)")
    p.add_argument("--per-second", type=float, default=200,
                   help="paced mode: routes injected a second, one message each")
    p.add_argument("--preload", type=int, default=0,
                   help="paced mode: this many other routes installed before")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--prefix", default="ovre4b")
    p.add_argument("--json", action="store_true")
    p.add_argument("--ovrd", default=str(RELEASE / "ovrd"),
                   help="the ovrd binary (to compare two builds side by side)")
    a = p.parse_args()
    n = a.routes
    # Stopped from outside: still stop the daemons and remove the namespaces.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if a.source == "frr":
        return frr_main(a)
    assert n % 2 == 0, "--routes: an even number (a MAC route and a MAC/IP route each)"
    with tempfile.TemporaryDirectory(prefix=f"{a.prefix}-") as d:
        lab = RouterLab(a.prefix, Path(d), Path(a.ovrd),
                        RELEASE / "examples" / "evpn_inject")
        out = lambda r: print(json.dumps(r) if a.json else show(r), flush=True)  # noqa: E731
        try:
            if a.mode == "table":
                out(load(lab, n))
                for _ in range(a.rounds):
                    out(phase(lab, n, "install", False, lambda: lab.peer(), a.timeout))
                    out(phase(lab, n, "withdraw", True, lambda: lab.unpeer(), a.timeout))
            elif a.mode == "paced":
                lab.peer()
                lab.wait_established()
                if a.preload:
                    preload(lab, n, a.preload, a.timeout)
                for _ in range(a.rounds):
                    out(paced(lab, n, a.per_second, False, a.timeout))
                    out(paced(lab, n, a.per_second, True, a.timeout))
            else:
                lab.peer()
                lab.wait_established()
                for _ in range(a.rounds):
                    out(phase(lab, n, "install", False, lambda: lab.inject(n), a.timeout))
                    out(phase(lab, n, "withdraw", True, lambda: lab.inject(n, withdraw=True),
                              a.timeout))
        finally:
            lab.close()


def frr_main(a):
    out = lambda r: print(json.dumps(r) if a.json else show(r), flush=True)  # noqa: E731
    # FRR's daemons run as user frr: their directory is one of their own (tests' Frr).
    with tempfile.TemporaryDirectory(prefix=f"{a.prefix}-") as d:
        lab = FrrLab(a.prefix, Path(d), Path(a.ovrd))
        try:
            lab.wait_ready()
            for _ in range(a.rounds):
                out(frr_phase(lab, a.routes, "install", False, a.timeout))
                out(frr_phase(lab, a.routes, "withdraw", True, a.timeout))
        finally:
            lab.close()


if __name__ == "__main__":
    main()
