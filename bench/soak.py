#!/usr/bin/env python3
"""Soak: the two-host lab (`ovrctl lab`, release build, one tenant, two workloads per
host) under mixed traffic, route churn and API polling for --minutes (default 60), with
each ovrd's memory, drop reasons and log watched throughout.

    h1-t1-w1 -> h2-t1-w1   iperf3, one TCP stream at --tcp-rate (0: unpaced), for the
                           whole run; ping every 0.2 s beside it (bridged)
    h1-t1-w2 -> h2-t1-w2   UDP at --udp-rate over --udp-flows short-lived flows: every
                           cycle (--udp-cycle s on, 5 s off) a new source address, so that
                           each cycle's flows are new and the last ones age out (60 s idle);
                           sent to the gateway MAC, so routed through 10.1.0.22/32, the
                           route the churn flips; counted by a sink (lost = sent - received)
    h1's API               route churn (bench/churn.py's Churn): per round a batch of
                           --churn-batch unrelated routes created and one deleted (about
                           --churn-keep kept), and 10.1.0.22/32 pointed at the other of two
                           equivalent next hops; --churn-pause s between rounds
    both APIs              GET /counters, /flows and /interfaces every second

Every --sample-every s (default 10) it records, per ovrd: VmRSS, every counter (drops by
reason, flows, interfaces) and the new WARN/ERROR lines of its log, into OUT/samples.jsonl
(raw data, not kept in git). At the end it prints and writes OUT/summary.json and exits
non-zero if a criterion fails:

    rss      every ovrd's VmRSS at the end at most 5% (--rss-limit) above its VmRSS at the
             end of the warm-up (--warmup s: 10% of the run, at least 2 min, at most half)
    drops    no drop reason other than EXPECTED_DROPS counted during the run
    logs     no WARN or ERROR line in any ovrd's log
    traffic  TCP, UDP and ping all moved traffic to the end; the churn never failed
    api      every poll answered 2xx (how slow the slowest was is reported)

    bash bench/soak.sh [--minutes N] [--offload xdp|tc] [--prefix P] [--out DIR]

Everything is named with --prefix, recorded in /run/PREFIX/state.json (the suite's
bookkeeping) and removed on exit, on failure and on Ctrl-C; `--cleanup` removes what a
killed run left.
"""

import argparse
import http.client
import json
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from churn import ROUTER_MAC, Api, Churn, prepare_churn  # noqa: E402
from suite import PORT, Cleanup, Ovr, claim, log, start_time, stop_pid, versions  # noqa: E402
from system.procfs import cpu_seconds, rss_kib  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Drop reasons that this traffic legitimately causes; any other fails the run.
#   (none so far: the churn flips the route in use between two equivalent next hops, so
#   it must not drop anything; flows that age are not drops)
EXPECTED_DROPS = set()
LOG_LINE = re.compile(r"^\S+\s+(WARN|ERROR)\s")
ROUTE = "10.1.0.22/32"  # the route the UDP stream takes and the churn flips
# What a failed API request raises. Not Exception: the signal handler's Cleanup (SIGTERM)
# is one, and the main thread must not swallow it.
API_ERRORS = (OSError, RuntimeError, ValueError, http.client.HTTPException)


def on_stop_signals():
    """SIGTERM and SIGHUP raise Cleanup in the main thread (which then tears down)."""
    def on_signal(sig, _frame):
        raise Cleanup(f"signal {sig}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)


class Watch:
    """One lab host's ovrd: its memory, counters and log."""

    def __init__(self, host):
        self.name, self.pid = host["name"], host["ovrd_pid"]
        self.sock, self.log = host["socket"], pathlib.Path(host["log"])
        self.offset = 0
        self.lines = []  # WARN/ERROR lines seen

    def new_log_lines(self):
        with open(self.log, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        # Only whole lines; a line still being written is read next time.
        end = data.rfind(b"\n") + 1
        self.offset += end
        bad = [line for line in data[:end].decode(errors="replace").splitlines()
               if LOG_LINE.match(line)]
        self.lines += bad
        return bad

    def counters(self):
        api = Api(self.sock, timeout=10)
        try:
            return api.call("GET", "/api/v1/counters")
        finally:
            api.close()

    def sample(self):
        rec = {"host": self.name, "rss_kib": rss_kib(self.pid), "cpu_s": cpu_seconds(self.pid),
               "log": self.new_log_lines()}
        try:
            rec["counters"] = self.counters()
        except API_ERRORS as e:  # recorded; the summary reports it
            rec["counters_error"] = str(e)
        return rec


class Poller(threading.Thread):
    """GET /counters, /flows and /interfaces on every host once a second."""

    PATHS = ("/api/v1/counters", "/api/v1/flows", "/api/v1/interfaces")

    def __init__(self, socks):
        super().__init__(daemon=True)
        self.socks, self.stop = socks, threading.Event()
        self.polls, self.errors, self.max_ms, self.last_error = 0, 0, 0.0, None
        self.ms = []  # every poll's time

    def run(self):
        apis = {s: None for s in self.socks}
        while not self.stop.wait(1.0):
            for s in self.socks:
                for path in self.PATHS:
                    t = time.perf_counter()
                    try:
                        apis[s] = apis[s] or Api(s, timeout=10)
                        apis[s].call("GET", path)
                    except Exception as e:  # noqa: BLE001
                        self.errors += 1
                        self.last_error = f"{path}: {e}"
                        apis[s].close()
                        apis[s] = None
                    self.polls += 1
                    self.ms.append((time.perf_counter() - t) * 1e3)
                    self.max_ms = max(self.max_ms, self.ms[-1])


class Udp(threading.Thread):
    """Cycles of short-lived UDP flows from h1-t1-w2 to h2-t1-w2, counted by a sink."""

    def __init__(self, a, made, lab):
        super().__init__(daemon=True)
        self.a, self.made, self.lab = a, made, lab
        self.stop = threading.Event()
        self.cycles = self.sent = self.received = self.flows = 0
        self.lost = []  # per cycle
        self.error = None

    def cycle(self, k):
        a, wl = self.a, self.lab.wl
        src, dst = wl["h1-t1-w2"], wl["h2-t1-w2"]
        secs = a.udp_cycle
        sink = self.made.spawn(["ip", "netns", "exec", dst["namespace"], a.ovrctl, "bench", "sink",
                                "--iface", "eth0", "--port", str(PORT), "--seconds",
                                str(secs + 6), "--idle", "1.0", "--driver", "af-xdp"],
                               "udp sink", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        sink.stderr.readline()
        # A new source address per cycle (10.1.0.100-199 in turn): new flows every cycle.
        gen = self.made.spawn(["ip", "netns", "exec", src["namespace"], a.ovrctl, "bench", "gen",
                               "--iface", "eth0", "--src-mac", src["mac"], "--dst-mac", ROUTER_MAC,
                               "--src", f"10.1.0.{100 + k % 100}", "--dst", dst["address"],
                               "--port", str(PORT), "--flows", str(a.udp_flows), "--size", "60",
                               "--seconds", str(secs), "--rate", str(a.udp_rate),
                               "--driver", "af-packet"],
                              "udp generator", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        g_out, g_err = gen.communicate(timeout=secs + 60)
        self.made.forget(gen.pid)
        k_out, _ = sink.communicate(timeout=secs + 30)
        self.made.forget(sink.pid)
        if gen.returncode != 0:
            raise RuntimeError(f"generator: {g_err.strip()}")
        g, r = json.loads(g_out), json.loads(k_out)
        self.cycles += 1
        self.sent += g["sent"]
        self.received += r["received"]
        self.flows += min(a.udp_flows, g["sent"])
        self.lost.append(g["sent"] - r["received"])

    def run(self):
        k = 0
        try:
            while not self.stop.is_set():
                self.cycle(k)
                k += 1
                self.stop.wait(5.0)
        except Exception as e:  # noqa: BLE001 (reported by the summary)
            if not self.stop.is_set():
                self.error = str(e)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else 0.0


def iperf_result(path):
    try:
        end = json.loads(pathlib.Path(path).read_text())["end"]
        return {"bytes": end["sum_received"]["bytes"],
                "gbit": end["sum_received"]["bits_per_second"] / 1e9,
                "seconds": end["sum_received"]["seconds"],
                "retransmits": end["sum_sent"].get("retransmits")}
    except (OSError, ValueError, KeyError) as e:
        return {"bytes": 0, "gbit": 0.0, "error": f"iperf3: {e}"}


def ping_result(path):
    try:
        text = pathlib.Path(path).read_text()
    except OSError:
        text = ""
    m = re.search(r"(\d+) packets transmitted, (\d+) received", text)
    return {"sent": int(m[1]), "received": int(m[2])} if m else {"sent": 0, "received": 0}


def flat_counters(c):
    """The counters that a summary compares: drops by reason, flows."""
    return {"drops": dict(c.get("drops", {})), "flows": dict(c.get("flows", {})),
            "fast_path": dict(c.get("fast_path", {}))}


def summarize(a, samples, watches, start, lab_info, parts):
    """The verdicts from the samples (per host: first sample after the warm-up, last)."""
    out = {"kind": "soak_summary", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "argv": sys.argv, "minutes": a.minutes, "offload": a.offload,
           "warmup_s": a.warmup, "rss_limit_pct": a.rss_limit, "expected_drops": sorted(EXPECTED_DROPS),
           "versions": lab_info, "hosts": {}, "criteria": {}}
    rss_ok, drops_ok = True, True
    for w in watches:
        mine = [s for s in samples if s["host"] == w.name and s.get("rss_kib")]
        warm = next((s for s in mine if s["t"] >= a.warmup), mine[-1] if mine else None)
        first, last = (mine[0], mine[-1]) if mine else (None, None)
        h = {"samples": len(mine)}
        if warm and last:
            growth = 100.0 * (last["rss_kib"] - warm["rss_kib"]) / warm["rss_kib"]
            h.update(rss_mib_first=first["rss_kib"] / 1024, rss_mib_warm=warm["rss_kib"] / 1024,
                     warm_at_s=round(warm["t"]), rss_mib_end=last["rss_kib"] / 1024,
                     rss_mib_max=max(s["rss_kib"] for s in mine) / 1024,
                     rss_growth_pct=round(growth, 2))
            rss_ok &= growth <= a.rss_limit
        else:
            rss_ok = False
        counted = [s for s in samples if s["host"] == w.name and "counters" in s]
        if counted:
            # What the run dropped: from the first sample (the lab set up, before the
            # traffic) to the last. The lab's own start (the host kernels' IPv6
            # multicast on the underlay before ovrd listened) is in the first.
            c, c0 = flat_counters(counted[-1]["counters"]), flat_counters(counted[0]["counters"])
            h["drops_at_start"] = c0["drops"]
            h["drops"] = {k: v - c0["drops"].get(k, 0) for k, v in c["drops"].items()
                          if v - c0["drops"].get(k, 0)}
            h["flows"] = c["flows"]
            h["fast_path"] = c["fast_path"]
            # ovrd's CPU (user + system, every thread) from the first sample to the last.
            cpu = [s["cpu_s"] for s in counted if s.get("cpu_s") is not None]
            if cpu:
                h["cpu_s"] = round(cpu[-1] - cpu[0], 1)
            h["unexpected_drops"] = {k: v for k, v in h["drops"].items()
                                     if k not in EXPECTED_DROPS}
            drops_ok &= not h["unexpected_drops"]
            h["counter_errors"] = sum(1 for s in samples if s["host"] == w.name
                                      and "counters_error" in s)
        else:
            drops_ok = False
        h["log_lines"] = w.lines
        out["hosts"][w.name] = h
    out["traffic"] = parts
    tr = parts
    traffic_ok = (tr["tcp"].get("bytes", 0) > 0 and "error" not in tr["tcp"]
                  and tr["ping"]["received"] > 0.95 * max(tr["ping"]["sent"], 1)
                  and tr["udp"]["received"] > 0 and not tr["udp"]["error"]
                  and not tr["churn"]["error"] and tr["churn"]["updates"] > 0)
    out["criteria"] = {
        "rss": rss_ok, "drops": drops_ok,
        "logs": not any(w.lines for w in watches),
        "traffic": traffic_ok, "api": parts["api"]["errors"] == 0,
    }
    out["pass"] = all(out["criteria"].values())
    out["seconds"] = round(time.time() - start)
    return out


def report(s):
    log(f"soak: {s['minutes']} min, offload {s['offload'] or 'off'}: "
        f"{'PASS' if s['pass'] else 'FAIL'} ({', '.join(k for k, v in s['criteria'].items() if not v) or 'all criteria met'})")
    for name, h in s["hosts"].items():
        if "rss_mib_end" in h:
            log(f"  {name}: RSS {h['rss_mib_first']:.1f} MiB at start, {h['rss_mib_warm']:.1f} "
                f"after warm-up ({h['warm_at_s']} s), {h['rss_mib_end']:.1f} at the end "
                f"({h['rss_growth_pct']:+.2f}%), max {h['rss_mib_max']:.1f}")
        log(f"  {name}: drops during the run {h.get('drops')} (at start {h.get('drops_at_start')}); unexpected {h.get('unexpected_drops')}; "
            f"flows {h.get('flows')}")
        fp = h.get("fast_path") or {}
        log(f"  {name}: ovrd CPU {h.get('cpu_s')} s; fast path rechecks {fp.get('rechecks')} "
            f"(kept {fp.get('rechecked_kept')}, removed {fp.get('rechecked_removed')}, "
            f"skipped {fp.get('recheck_skipped')})")
        for line in h["log_lines"][:10]:
            log(f"  {name} log: {line}")
    t = s["traffic"]
    log(f"  tcp {t['tcp'].get('gbit', 0):.2f} Gbit/s, {t['tcp'].get('bytes', 0) / 1e9:.1f} GB, "
        f"{t['tcp'].get('retransmits')} retransmits {t['tcp'].get('error', '')}")
    log(f"  udp {t['udp']['cycles']} cycles, {t['udp']['flows']} flows, sent {t['udp']['sent']}, "
        f"received {t['udp']['received']}, lost per cycle max {max(t['udp']['lost'] or [0])} "
        f"{t['udp']['error'] or ''}")
    log(f"  ping {t['ping']['received']}/{t['ping']['sent']}; churn {t['churn']['updates']} updates "
        f"in {t['churn']['rounds']} rounds {t['churn']['error'] or ''}; api {t['api']['polls']} "
        f"polls, {t['api']['errors']} errors, p50 {t['api']['p50_ms']:.0f} ms, p99 "
        f"{t['api']['p99_ms']:.0f} ms, slowest {t['api']['max_ms']:.0f} ms, "
        f"{t['api']['over_1s']} over 1 s "
        f"{t['api']['last_error'] or ''}")


def run(a, made, out_dir):
    seconds = max(1, int(round(a.minutes * 60)))
    name = {None: "ovr-auto", "xdp": "ovr-xdp", "tc": "ovr-tc"}[a.offload]
    lab = Ovr(made, f"{a.prefix}-s", a.ovrctl, name, a.ovrd_arg, tenants=1, workloads=2)
    log(f"soak: lab {lab.p} ({name}), {a.minutes} min")
    lab.up()
    watches = [Watch(h) for h in lab.hosts.values()]
    prepare_churn(lab.hosts["h1"]["socket"], ROUTE)
    src, dst = lab.wl["h1-t1-w1"], lab.wl["h2-t1-w1"]
    srv = made.spawn(["ip", "netns", "exec", dst["namespace"], "iperf3", "-s"], "iperf3 -s",
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    tcp_json, ping_out = out_dir / "iperf3.json", out_dir / "ping.txt"
    tcp = made.spawn(["ip", "netns", "exec", src["namespace"], "iperf3", "-c", dst["address"],
                      "-t", str(seconds), "-b", a.tcp_rate, "-i", "10", "-J"], "iperf3 -c",
                     stdout=open(tcp_json, "w"), stderr=subprocess.STDOUT)
    ping = made.spawn(["ip", "netns", "exec", src["namespace"], "ping", "-q", "-i", "0.2",
                       "-w", str(seconds), dst["address"]], "ping",
                      stdout=open(ping_out, "w"), stderr=subprocess.STDOUT)
    udp = Udp(a, made, lab)
    churn = Churn(lab.hosts["h1"]["socket"], a.churn_batch, a.churn_keep, 0,
                  ["h2-t1-alt", "h2-t1"], pause=a.churn_pause, route=ROUTE)
    poller = Poller([w.sock for w in watches])
    for t in (udp, churn, poller):
        t.start()
    samples = []
    start = time.time()
    with open(out_dir / "samples.jsonl", "w") as f:
        def sample():
            t = time.time() - start
            for w in watches:
                rec = {"t": round(t, 1), **w.sample()}
                samples.append(rec)
                f.write(json.dumps(rec) + "\n")
                for line in rec["log"]:
                    log(f"  {w.name} log: {line}")
            f.flush()
            h = {s["host"]: s for s in samples[-len(watches):]}
            log(f"  {t:6.0f} s  " + "  ".join(
                f"{n} rss {(s.get('rss_kib') or 0) / 1024:.1f} MiB drops "
                f"{sum((s.get('counters') or {}).get('drops', {}).values())}"
                for n, s in h.items()))
        sample()
        while time.time() - start < seconds:
            time.sleep(min(a.sample_every, max(0.0, seconds - (time.time() - start))))
            sample()
        for t in (udp, churn, poller):
            t.stop.set()
        churn.join(timeout=30)
        poller.join(timeout=30)
        udp.join(timeout=a.udp_cycle + 60)
        for p, what in ((tcp, "iperf3 -c"), (ping, "ping")):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop_pid(p.pid, start_time(p.pid), what)
            made.forget(p.pid)
        sample()  # after the traffic stopped: what it left
    stop_pid(srv.pid, start_time(srv.pid), "iperf3 -s")
    made.forget(srv.pid)
    parts = {
        "tcp": iperf_result(tcp_json),
        "ping": ping_result(ping_out),
        "udp": {"cycles": udp.cycles, "flows": udp.flows, "sent": udp.sent,
                "received": udp.received, "lost": udp.lost, "error": udp.error},
        "churn": {"updates": churn.updates, "rounds": churn.rounds,
                  "error": str(churn.error) if churn.error else None},
        "api": {"polls": poller.polls, "errors": poller.errors, "max_ms": round(poller.max_ms, 1),
                "p50_ms": round(pct(poller.ms, 0.5), 1), "p99_ms": round(pct(poller.ms, 0.99), 1),
                "over_1s": sum(1 for x in poller.ms if x > 1000), "last_error": poller.last_error},
    }
    return summarize(a, samples, watches, start, versions(a.ovrctl), parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--offload", choices=("xdp", "tc"), default=None,
                    help="every ovrd with its fast path (ovrctl lab up --offload=...)")
    ap.add_argument("--ovrd-arg", action="append", default=[],
                    help="an argument for every ovrd (repeat)")
    ap.add_argument("--prefix", default="ovrsk", help="prefix of everything made (<= 8 chars)")
    ap.add_argument("--out", default=None, help="directory for summary.json and samples.jsonl")
    ap.add_argument("--ovrctl", default=str(ROOT / "target" / "release" / "ovrctl"))
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds before the reference RSS (default 10%% of the run, at least "
                         "120 s, at most half the run)")
    ap.add_argument("--rss-limit", type=float, default=5.0, help="allowed growth, %%")
    ap.add_argument("--sample-every", type=float, default=10.0)
    ap.add_argument("--tcp-rate", default="500M", help="iperf3 -b (0: unpaced)")
    ap.add_argument("--udp-rate", type=int, default=20_000, help="pps")
    ap.add_argument("--udp-flows", type=int, default=5000, help="flows per cycle")
    ap.add_argument("--udp-cycle", type=float, default=10.0, help="seconds per cycle")
    ap.add_argument("--churn-batch", type=int, default=100)
    ap.add_argument("--churn-keep", type=int, default=2000)
    ap.add_argument("--churn-pause", type=float, default=0.5)
    ap.add_argument("--cleanup", action="store_true")
    a = ap.parse_args()
    if a.warmup is None:
        # Flows idle out after 60 s: the table's population (and the memory it touches)
        # settles after about 70 s of this traffic. 10% of the run, at least 2 minutes,
        # at most half of it.
        a.warmup = min(max(120.0, a.minutes * 6), a.minutes * 30)
    made = claim("soak", a)
    if made is None:
        return 0
    out_dir = pathlib.Path(a.out or ROOT / "bench" / "runs" / f"soak-{time.strftime('%Y%m%d-%H%M%S')}")
    out_dir.mkdir(parents=True, exist_ok=True)

    on_stop_signals()
    made.save()
    try:
        s = run(a, made, out_dir)
    except (KeyboardInterrupt, Cleanup) as e:
        log(f"soak: interrupted ({e or 'Ctrl-C'}): tearing down")
        return 130
    finally:
        made.teardown(a.ovrctl)
    (out_dir / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
    report(s)
    print(json.dumps({k: s[k] for k in ("pass", "criteria", "hosts", "traffic")}))
    log(f"soak: summary in {out_dir / 'summary.json'}, samples in {out_dir / 'samples.jsonl'}")
    return 0 if s["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
