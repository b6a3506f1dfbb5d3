#!/usr/bin/env python3
"""Route churn: how fast ovrd takes route updates through its API, and what a sustained
stream of them costs forwarding.

rate     One ovrd (release build, in namespace PREFIX-rate, its state file on disk in
         /run/PREFIX) and a client on its Unix socket. For each N (routes) and B (batch
         size): create N /24 routes, replace each (another next hop), delete each, in
         batches of B through POST /api/v1/batch. Reports routes per second end to end
         (the request bodies are encoded before the clock starts: the client's JSON is
         not ovrd's cost), request latency, where ovrd spent the time (each answer's
         spent_us: model, translate, diff, commit, save), ovrd's resident memory, and the
         cost of one change that takes the whole way (a next hop replaced) at N routes.
forward  The suite's two-host ovr lab (bench/suite.py, `ovrctl lab`), generator on
         h1-t1-w1, sink on h2-t1-w1. Per offered rate (fixed, and unpaced): trials
         without churn and with churn, interleaved (A B B A ...), medians. Churn, on h1's
         API, for the whole trial: batches of unrelated routes created and deleted, and the
         route the traffic uses (it is sent to the gateway MAC: routed) pointed back and
         forth between two equivalent next hops. Each trial counts frames lost (the
         generator's count against the sink's, which also reports the sequence range).
         --client-nice N runs the churn client's thread at nice N.

    bash bench/churn.sh [--quick] [rate|forward|all] [--prefix P] [--out DIR]

Everything is named with --prefix, recorded in /run/PREFIX/state.json (the suite's
bookkeeping) and removed on exit, on failure and on Ctrl-C; `--cleanup` removes what a
killed run left.
"""

import argparse
import http.client
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from suite import PORT, Ovr, claim, log, sh, start_time, stop_pid  # noqa: E402
from system.procfs import rss_kib  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent

RATE_CONFIG = """
networks:
  - { name: red, vni: 100 }
nexthops:
  - { name: nh-a, kind: drop }
  - { name: nh-b, kind: drop }
"""


class Api(http.client.HTTPConnection):
    """HTTP/1.1 with keep-alive over ovrd's Unix socket."""

    def __init__(self, path, timeout=600):
        super().__init__("ovrd", timeout=timeout)
        self.unix = str(path)

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix)
        self.sock = s

    def call(self, method, path, body=None):
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.request(method, path, body=body, headers=headers)
        r = self.getresponse()
        data = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:300]!r}")
        return json.loads(data) if data else None


def prefix_of(n):
    """The n-th /24, from 1.0.0.0 up (distinct for n < 2^24 - 2^16)."""
    v = n + (1 << 16)
    return f"{v >> 16}.{(v >> 8) & 255}.{v & 255}.0/24"


def route_batches(kind, n, b, nexthop, network="red", first=0):
    """Encoded request bodies: n routes (from `first`) in batches of b."""
    out = []
    for start in range(first, first + n, b):
        changes = []
        for i in range(start, min(start + b, first + n)):
            p = prefix_of(i)
            if kind == "delete":
                changes.append({"delete": {"route": {"network": network, "prefix": p}}})
            else:
                changes.append({kind: {"route": {"network": network, "prefix": p,
                                                 "nexthop": nexthop}}})
        out.append(json.dumps({"changes": changes}).encode())
    return out


def ovrd_bin(a):
    return str(pathlib.Path(a.ovrctl).with_name("ovrd"))


def start_ovrd(a, made, ns, tag):
    d = made.dir / tag
    d.mkdir(parents=True, exist_ok=True)
    for f in ("state.json", "ovrd.sock"):
        (d / f).unlink(missing_ok=True)
    (d / "config.yaml").write_text(RATE_CONFIG)
    sock = d / "ovrd.sock"
    p = made.spawn(["ip", "netns", "exec", ns, ovrd_bin(a), "--config", str(d / "config.yaml"),
                    "--state", str(d / "state.json"), "--api-socket", str(sock)],
                   f"ovrd {tag}", stdout=open(d / "ovrd.log", "w"), stderr=subprocess.STDOUT)
    t = time.time()
    while not sock.exists():
        if p.poll() is not None or time.time() - t > 20:
            raise RuntimeError(f"ovrd did not start: {(d / 'ovrd.log').read_text()[-2000:]}")
        time.sleep(0.05)
    return p, sock


def phase(api, bodies, n):
    spent = {k: 0 for k in ("model", "translate", "diff", "commit", "save")}
    lat, incremental, changes = [], 0, 0
    t0 = time.perf_counter()
    for body in bodies:
        t = time.perf_counter()
        r = api.call("POST", "/api/v1/batch", body)
        lat.append(time.perf_counter() - t)
        for k in spent:
            spent[k] += r["spent_us"][k]
        incremental += bool(r["incremental"])
        changes += r["table_changes"]
    wall = time.perf_counter() - t0
    lat.sort()
    return {"routes": n, "requests": len(bodies), "seconds": wall, "routes_per_s": n / wall,
            "table_changes": changes, "incremental_requests": incremental,
            "lat_ms_p50": 1e3 * lat[len(lat) // 2],
            "lat_ms_p99": 1e3 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
            "server_s": {k: v / 1e6 for k, v in spent.items()},
            "http_and_rest_s": wall - sum(spent.values()) / 1e6}


def rate(a, made, out):
    ns = made.ns(f"{a.prefix}-rate")
    for n, b in a.points:
        if b == 1 and n > a.max_single:
            continue
        p, sock = start_ovrd(a, made, ns, f"n{n}-b{b}")
        try:
            api = Api(sock)
            rec = {"kind": "rate", "n": n, "batch": b}
            for kind, nh in (("create", "nh-a"), ("replace", "nh-b"), ("delete", None)):
                bodies = route_batches(kind, n, b, nh)
                rec[kind] = phase(api, bodies, n)
                if kind == "replace":
                    rec["rss_mib"] = (rss_kib(p.pid) or 0) / 1024
                    # What a change that takes the whole way costs with N routes (and what
                    # every change cost before entries were translated alone).
                    body = json.dumps({"changes": [{"replace": {"nexthop": {
                        "name": "nh-b", "kind": "drop"}}}]}).encode()
                    rec["whole_ms"] = statistics.median(
                        phase(api, [body], 1)["seconds"] * 1e3 for _ in range(3))
                    rec["state_bytes"] = (made.dir / f"n{n}-b{b}" / "state.json").stat().st_size
                c = rec[kind]
                log(f"  N={n:>7} B={b:>5} {kind:7} {c['routes_per_s'] / 1e3:8.1f}K routes/s "
                    f"p50 {c['lat_ms_p50']:.2f} ms  server: "
                    + " ".join(f"{k} {v:.2f}s" for k, v in c["server_s"].items())
                    + f"  rest {c['http_and_rest_s']:.2f}s")
            log(f"  N={n:>7} B={b:>5} rss {rec['rss_mib']:.0f} MiB, a whole-way change "
                f"{rec['whole_ms']:.1f} ms, state file {rec['state_bytes'] / 1e6:.1f} MB")
            out.write(json.dumps(rec) + "\n")
            out.flush()
        finally:
            stop_pid(p.pid, start_time(p.pid), "ovrd")
            made.forget(p.pid)


ROUTER_MAC = "00:00:5e:00:01:00"  # the networks' default gateway MAC
IN_USE = "10.1.0.21/32"  # h1's route to the sink, added by `forward`


class Churn(threading.Thread):
    """Updates on a host's API until stopped: per round, a batch of unrelated routes
    created and one deleted (so the FIB holds about `keep` of them), and the route in use
    pointed at the other of two equivalent next hops. `first`: where the unrelated routes
    start (carried from one trial to the next). `pause`: seconds between rounds (0: as
    fast as the API answers); `route`: the route in use, in network t1."""

    def __init__(self, sock, batch, keep, first, nexthops, nice=0, pause=0.0, route=None):
        super().__init__(daemon=True)
        self.api, self.batch, self.keep, self.nexthops = Api(sock), batch, keep, nexthops
        self.nice, self.pause, self.route = nice, pause, route or IN_USE
        self.stop, self.updates, self.rounds, self.next = threading.Event(), 0, 0, first
        self.error = None

    def bodies(self):
        first = self.next
        self.next += self.batch
        add = route_batches("create", self.batch, self.batch, "h2-t1", "t1", first)[0]
        old = first - self.keep
        rm = route_batches("delete", self.batch, self.batch, None, "t1", old)[0] if old >= 0 else None
        return add, rm

    def run(self):
        # Linux keeps a nice value per thread: this one alone yields to the generator.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        try:
            while not self.stop.is_set():
                add, rm = self.bodies()
                self.api.call("POST", "/api/v1/batch", add)
                self.updates += self.batch
                if rm:
                    self.api.call("POST", "/api/v1/batch", rm)
                    self.updates += self.batch
                nh = self.nexthops[self.rounds % 2]
                self.api.call("PUT", f"/api/v1/routes/t1/{self.route}", json.dumps(
                    {"network": "t1", "prefix": self.route, "nexthop": nh}).encode())
                self.updates += 1
                self.rounds += 1
                if self.pause:
                    self.stop.wait(self.pause)
        except Exception as e:  # reported by the trial
            self.error = e


def prepare_churn(sock, route):
    """What Churn needs on a lab host: an equivalent of the next hop to h2 in t1 (same
    tunnel, same VNI), and `route` (traffic sent to the gateway MAC is routed) through it."""
    api = Api(sock)
    nh = api.call("GET", "/api/v1/nexthops/h2-t1")
    api.call("POST", "/api/v1/nexthops", json.dumps({**nh, "name": "h2-t1-alt"}).encode())
    api.call("POST", "/api/v1/routes", json.dumps(
        {"network": "t1", "prefix": route, "nexthop": "h2-t1"}).encode())
    api.close()


def trial(a, made, s, rate_pps, seconds, churn):
    """One trial (the suite's, with a count so that loss is exact) with or without churn."""
    count = int(rate_pps * seconds) if rate_pps else 0
    sink = made.spawn(["ip", "netns", "exec", s.dst, a.ovrctl, "bench", "sink", "--iface", "eth0",
                       "--port", str(PORT), "--seconds", str(seconds + 6), "--idle", "1.0",
                       "--driver", "af-xdp"],
                      "sink", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sink.stderr.readline()
    c = None
    if churn:
        c = Churn(s.h1_sock, a.churn_batch, a.churn_keep, s.churn_next, ["h2-t1-alt", "h2-t1"],
                  a.client_nice)
        c.start()
        time.sleep(0.3)
    gen = made.spawn(["ip", "netns", "exec", s.src, a.ovrctl, "bench", "gen", "--iface", "eth0",
                      "--src-mac", s.src_mac, "--dst-mac", ROUTER_MAC, "--src", s.src_ip,
                      "--dst", s.dst_ip, "--port", str(PORT), "--flows", "1", "--size", "60",
                      "--seconds", str(seconds), "--rate", str(int(rate_pps)),
                      "--count", str(count), "--driver", "af-xdp"],
                     "generator", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    g_out, g_err = gen.communicate(timeout=seconds + 60)
    gen_s = time.time() - t0
    made.forget(gen.pid)
    updates = 0
    if c:
        c.stop.set()
        c.join(timeout=30)
        updates = c.updates
        s.churn_next = c.next
        if c.error:
            raise RuntimeError(f"churn failed: {c.error}")
    k_out, _ = sink.communicate(timeout=seconds + 30)
    made.forget(sink.pid)
    if gen.returncode != 0:
        raise RuntimeError(f"generator: {g_err.strip()}")
    g, k = json.loads(g_out), json.loads(k_out)
    sent = g["offered"]
    rec = {"kind": "forward", "churn": churn, "target_pps": rate_pps, "sent": sent,
           "received": k["received"], "lost": sent - k["received"],
           "seq_first": k["seq_first"], "seq_last": k["seq_last"],
           "rx_mpps": k["received"] / g["seconds"] / 1e6, "offered_mpps": g["offered_pps"] / 1e6,
           "updates": updates, "updates_per_s": updates / gen_s}
    log(f"  {'churn' if churn else 'quiet':5} target={rate_pps / 1e3:.0f}k "
        f"offered={rec['offered_mpps']:.3f} rx={rec['rx_mpps']:.3f} Mpps lost={rec['lost']} "
        f"updates/s={rec['updates_per_s']:.0f}")
    return rec


def forward(a, made, out):
    s = Ovr(made, f"{a.prefix}-f", a.ovrctl, "ovr-auto")
    s.up()
    s.h1_sock = s.hosts["h1"]["socket"]
    prepare_churn(s.h1_sock, IN_USE)
    s.churn_next = 0
    results = {}
    rates = [r for r in a.rates]
    for rnd in range(a.rounds):
        for rate_pps in rates:
            order = (False, True) if rnd % 2 == 0 else (True, False)
            for churn in order:
                rec = trial(a, made, s, rate_pps, a.seconds, churn)
                rec["round"] = rnd
                out.write(json.dumps(rec) + "\n")
                out.flush()
                results.setdefault((rate_pps, churn), []).append(rec)
    for rate_pps in rates:
        q = [r["rx_mpps"] for r in results[(rate_pps, False)]]
        c = [r["rx_mpps"] for r in results[(rate_pps, True)]]
        summary = {"kind": "forward_summary", "target_pps": rate_pps,
                   "quiet_mpps": statistics.median(q), "churn_mpps": statistics.median(c),
                   "ratio": statistics.median(c) / statistics.median(q) if statistics.median(q) else 0,
                   "lost_quiet": [r["lost"] for r in results[(rate_pps, False)]],
                   "lost_churn": [r["lost"] for r in results[(rate_pps, True)]],
                   "updates_per_s": statistics.median(
                       r["updates_per_s"] for r in results[(rate_pps, True)])}
        out.write(json.dumps(summary) + "\n")
        log(f"  target={rate_pps / 1e3:.0f}k: quiet {summary['quiet_mpps']:.3f} churn "
            f"{summary['churn_mpps']:.3f} Mpps (x{summary['ratio']:.3f}), lost quiet "
            f"{summary['lost_quiet']} churn {summary['lost_churn']}, "
            f"{summary['updates_per_s']:.0f} updates/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="all", choices=["rate", "forward", "all"])
    ap.add_argument("--prefix", default="ovrch", help="prefix of everything made (<= 8 chars)")
    ap.add_argument("--out", default=None, help="directory for results.jsonl")
    ap.add_argument("--ovrctl", default=str(ROOT / "target" / "release" / "ovrctl"))
    ap.add_argument("--quick", action="store_true", help="small N, short trials (smoke)")
    ap.add_argument("--points", default=None,
                    help="N:B,N:B,... (default: 10K..1M routes x batches 1..10K)")
    ap.add_argument("--max-single", type=int, default=10_000,
                    help="largest N measured with batches of 1 (each is fsynced)")
    ap.add_argument("--rates", default="100000,0", help="offered pps per trial; 0: unpaced")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--churn-batch", type=int, default=1000)
    ap.add_argument("--churn-keep", type=int, default=20_000)
    ap.add_argument("--client-nice", type=int, default=0,
                    help="nice value of the churn client's thread (it stands in for a "
                         "controller on another machine; here it shares the CPUs)")
    ap.add_argument("--cleanup", action="store_true")
    a = ap.parse_args()
    if a.points is None:
        a.points = ("1000:1,2000:100,2000:1000" if a.quick else
                    "10000:1,10000:100,10000:1000,10000:10000,100000:100,100000:1000,"
                    "100000:10000,1000000:1000,1000000:10000")
    a.points = [tuple(int(x) for x in p.split(":")) for p in a.points.split(",")]
    a.rates = [int(r) for r in a.rates.split(",")]
    if a.quick:
        a.rounds, a.seconds, a.churn_batch, a.churn_keep = 2, 1.0, 100, 1000
    made = claim("churn", a)
    if made is None:
        return
    out_dir = pathlib.Path(a.out or ROOT / "bench" / "runs" / f"churn-{time.strftime('%Y%m%d-%H%M%S')}")
    out_dir.mkdir(parents=True, exist_ok=True)
    out = open(out_dir / "results.jsonl", "a")

    def on_signal(sig, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        out.write(json.dumps({"kind": "run", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                              "argv": sys.argv, "cpus": os.cpu_count(),
                              "points": a.points, "rates": a.rates}) + "\n")
        if a.what in ("rate", "all"):
            log("churn: update rate")
            rate(a, made, out)
        if a.what in ("forward", "all"):
            log("churn: forwarding under churn")
            forward(a, made, out)
    finally:
        made.teardown(a.ovrctl)
    log(f"churn: results in {out_dir / 'results.jsonl'}")


if __name__ == "__main__":
    main()
