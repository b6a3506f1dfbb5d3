#!/usr/bin/env python3
"""New-flow flood: do established flows of other workloads and networks keep their
throughput, their flow entries and every packet while one workload sets up new flows as
fast as it can?

The two-host lab (`ovrctl lab up --tenants 2 --workloads 2`, release build), with the
flow quotas a user sets in each host's configuration (`flows: network_quota, setup_rate`;
docs/dataplane.md, "Flows"): written into the lab's host files, each ovrd restarted (a
changed file wins over the state file, docs/agent.md).

    established  t1: iperf3, one TCP stream, h1-t1-w1 -> h2-t1-w1 (unpaced, or
                     paced at --tcp-rate: below what the two CPUs carry, so that the
                     ratio tells whether ovr lets the flood slow it, not how much CPU
                     the generator takes from everything else)
                 t2: UDP at --udp-rate, one flow, h1-t2-w1 -> h2-t2-w1, counted by a
                     sink (lost = sent - received, exact)
    flood        t2: h1-t2-w2 -> h2-t2-w2, `ovrctl bench gen --flows F --rate 0`
                     (AF_XDP; sources 10.2.0.1.. and ports: every packet a new flow
                     while F exceeds what it sends), counted by a sink on h2-t2-w2

Conditions, per round in turn (A B C, then C B A, ...): `quiet` (no flood), `flood` (the
new-flow flood), `steady` (the same generator, unpaced, over --steady-flows established
flows: what the flood costs the machine's CPUs before any flow is set up; on these 2
vCPUs a generator running flat out takes one). The established flows start, then (after
1 s) the flood runs for --seconds; TCP is measured over the iperf3 intervals wholly inside
the flood's sending time (the same span without a flood). Around the flood, the
established flows' entries are listed on both hosts through the API (before it, half-way
through it, right after it): evicted or re-created flows show as missing or with new
ids. After each trial the flood's flows are deleted through the API so that every trial
starts from the same table.

With --police P, the flood's workload interface (h1's t2w2) is given a policer of P
packets/s through the API (GET and PUT back its interface) before the trials.

Reports per condition: medians of TCP Gbit/s and the ratio to `quiet` (goal: flood ≥ 90%
of quiet), UDP lost, the new-flow rate the generator reached (offered and sent per
second) and what each ovrd did with it (flows created, refused by cause, drops by reason).

    bash bench/flood.sh [--rounds 2] [--seconds 5] [--offload xdp|tc] [--out DIR]

Everything is named with --prefix, recorded in /run/PREFIX/state.json (the suite's
bookkeeping) and removed on exit, on failure and on Ctrl-C; `--cleanup` removes what a
killed run left.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from churn import Api  # noqa: E402
from soak import API_ERRORS, on_stop_signals  # noqa: E402
from suite import PORT, Cleanup, Ovr, claim, log, start_time, stop_pid, versions  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
FLOOD_SRC = "10.2.0.1"  # the flood's first source address (outside the workloads' /24)


def call(sock, method, path, timeout=10):
    """One request on its own connection; the error as a string if it fails."""
    api = Api(sock, timeout=timeout)
    try:
        return api.call(method, path), None
    except API_ERRORS as e:  # recorded
        return None, str(e)
    finally:
        api.close()


def set_flow_quotas(made, lab, settings):
    """As an operator would: the `flows` section into each host's configuration file,
    then that host's ovrd restarted with the same arguments."""
    state_path = pathlib.Path(f"/run/ovr-lab-{lab.p}/state.json")
    for name, h in lab.hosts.items():
        cfg = pathlib.Path(h["config"])
        cfg.write_text(cfg.read_text() + "flows:\n"
                       + "".join(f"  {k}: {v}\n" for k, v in settings.items()))
        pid = h["ovrd_pid"]
        argv = [os.fsdecode(x) for x in
                pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]
        stop_pid(pid, start_time(pid), f"ovrd {name}")
        logf = pathlib.Path(h["log"])
        offset = logf.stat().st_size
        p = made.spawn(["ip", "netns", "exec", h["namespace"], *argv], f"ovrd {name}",
                       stdin=subprocess.DEVNULL, stdout=open(logf, "a"),
                       stderr=subprocess.STDOUT)
        state = json.loads(state_path.read_text())
        for sh_ in state["hosts"]:
            if sh_["name"] == name:
                sh_["ovrd_pid"] = p.pid
        state_path.write_text(json.dumps(state, indent=2))
        t = time.time()
        while b"forwarding" not in logf.read_bytes()[offset:]:
            if p.poll() is not None or time.time() - t > 20:
                raise RuntimeError(f"ovrd {name} did not restart: "
                                   f"{logf.read_bytes()[offset:][-2000:].decode(errors='replace')}")
            time.sleep(0.1)
    lab.read_state()


def police(lab, host, iface, pps):
    """As an operator would: the interface's policer set through the API (GET, PUT back)."""
    api = Api(lab.hosts[host]["socket"], timeout=10)
    try:
        path = f"/api/v1/interfaces/{iface}"
        obj = api.call("GET", path)
        obj["police"] = {"packets_per_second": pps}
        api.call("PUT", path, json.dumps(obj))
    finally:
        api.close()


def established(lab):
    """The established flows' entries on each host: {host: {key: id}} (None: no answer)."""
    out = {}
    for name, h in lab.hosts.items():
        got = {}
        for net, q in (("t1", "network=t1&port=5201"), ("t2", "network=t2&addr=10.1.0.11")):
            d, err = call(h["socket"], "GET", f"/api/v1/flows?{q}", timeout=5)
            if err:
                got = None
                break
            for f in d["flows"]:
                got[f"{net} " + " ".join(str(f.get(k)) for k in
                                         ("src", "dst", "protocol", "src_port",
                                          "dst_port"))] = f.get("id")
        out[name] = got
    return out


def counters(lab):
    out = {}
    for name, h in lab.hosts.items():
        c, err = call(h["socket"], "GET", "/api/v1/counters", timeout=10)
        out[name] = {"flows": c["flows"], "drops": c["drops"],
                     "rx": {i["name"]: i["rx_packets"] for i in c["interfaces"]}} if c else {"error": err}
    return out


def delta(a, b):
    """b - a for the counters of `counters`."""
    out = {}
    for name in b:
        if "error" in a.get(name, {"error": 1}) or "error" in b[name]:
            out[name] = None
            continue
        out[name] = {
            "flows": {k: v - a[name]["flows"].get(k, 0) for k, v in b[name]["flows"].items()},
            "drops": {k: v - a[name]["drops"].get(k, 0) for k, v in b[name]["drops"].items()
                      if v - a[name]["drops"].get(k, 0)},
            "rx": {k: v - a[name]["rx"].get(k, 0) for k, v in b[name]["rx"].items()},
        }
    return out


def sink(made, a, w, seconds, what):
    p = made.spawn(["ip", "netns", "exec", w["namespace"], a.ovrctl, "bench", "sink", "--iface",
                    "eth0", "--port", str(PORT), "--seconds", str(seconds), "--idle", "1.5",
                    "--driver", "af-xdp"], what, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True)
    p.stderr.readline()
    return p


def gen(made, a, src, dst, flows, rate, seconds, what, src_ip=None, count=0):
    return made.spawn(["ip", "netns", "exec", src["namespace"], a.ovrctl, "bench", "gen",
                       "--iface", "eth0", "--src-mac", src["mac"], "--dst-mac", dst["mac"],
                       "--src", src_ip or src["address"], "--dst", dst["address"], "--port",
                       str(PORT), "--flows", str(flows), "--size", "60", "--seconds",
                       str(seconds), "--rate", str(rate), "--count", str(count),
                       "--driver", "af-xdp"], what, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)


def finish(made, p, timeout):
    out, err = p.communicate(timeout=timeout)
    made.forget(p.pid)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(p.args[3:5])}: {err.strip()[-500:]}")
    return json.loads(out)


def trial(a, made, lab, cond):
    wl, T = lab.wl, a.seconds
    tcp_src, tcp_dst = wl["h1-t1-w1"], wl["h2-t1-w1"]
    udp_src, udp_dst = wl["h1-t2-w1"], wl["h2-t2-w1"]
    fl_src, fl_dst = wl["h1-t2-w2"], wl["h2-t2-w2"]
    span = T + 6  # the established traffic's length: the flood's setup and T inside it
    c0 = counters(lab)
    udp_sink = sink(made, a, udp_dst, span + 6, "udp sink")
    fl_sink = sink(made, a, fl_dst, span + 6, "flood sink") if cond != "quiet" else None
    srv = made.spawn(["ip", "netns", "exec", tcp_dst["namespace"], "iperf3", "-s", "-1"],
                     "iperf3 -s", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    t_tcp = time.time()
    tcp = made.spawn(["ip", "netns", "exec", tcp_src["namespace"], "iperf3", "-c",
                      tcp_dst["address"], "-t", str(span), "-i", "1", "-J",
                      *(["-b", a.tcp_rate] if a.tcp_rate else [])], "iperf3 -c",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    count = int(a.udp_rate * span)
    udp = gen(made, a, udp_src, udp_dst, 1, a.udp_rate, span + 2, "udp generator", count=count)
    time.sleep(1.0)
    before = established(lab)
    flood, mid, window = None, None, (2.0, 2.0 + T)
    if cond != "quiet":
        flows = a.flows if cond == "flood" else a.steady_flows
        t_f = time.time()
        flood = gen(made, a, fl_src, fl_dst, flows, 0, T, "flood generator", src_ip=FLOOD_SRC)
        time.sleep(min(T / 2 + 1.0, T))
        mid = established(lab)
        g = finish(made, flood, T + 120)
        t_end = time.time()
        # The generator's sending time (it first builds its frames' headers).
        window = (t_end - g["seconds"] - t_tcp, t_end - t_tcp)
        flood = g
        log(f"    flood ran {g['seconds']:.1f} s, {t_end - t_f - g['seconds']:.1f} s to start")
    after = established(lab)
    tcp_out, _ = tcp.communicate(timeout=span + 60)
    made.forget(tcp.pid)
    stop_pid(srv.pid, start_time(srv.pid), "iperf3 -s")
    made.forget(srv.pid)
    u = finish(made, udp, span + 60)
    us = finish(made, udp_sink, span + 60)
    fs = finish(made, fl_sink, span + 60) if fl_sink else None
    c1 = counters(lab)
    # TCP over the intervals wholly inside the window.
    gbit, retrans, inside = 0.0, None, []
    try:
        j = json.loads(tcp_out)
        for iv in j["intervals"]:
            s = iv["sum"]
            if s["start"] >= window[0] - 0.05 and s["end"] <= window[1] + 0.05:
                inside.append(s["bits_per_second"] / 1e9)
        retrans = j["end"]["sum_sent"].get("retransmits")
        gbit = statistics.mean(inside) if inside else 0.0
    except (ValueError, KeyError) as e:
        log(f"    iperf3: {e}")
    kept = {}
    for h in before:
        b, m, f = before[h], (mid or {}).get(h), after[h]
        kept[h] = {"before": len(b) if b is not None else None,
                   "mid": None if mid is None else (len(m) if m is not None else None),
                   "after": len(f) if f is not None else None,
                   "same_ids": (b is not None and f is not None and bool(b)
                                and all(f.get(k) == v for k, v in b.items()))}
    rec = {"kind": "trial", "condition": cond, "seconds": T, "tcp_gbit": gbit,
           "tcp_intervals": len(inside), "tcp_retransmits": retrans,
           "udp_sent": u["sent"], "udp_received": us["received"],
           "udp_lost": u["sent"] - us["received"], "flood": flood,
           # What h1's ovrd read of the established UDP stream (its interface t2w1): lost
           # before ovrd read it (its receive ring full) if less than sent.
           "udp_read_by_h1": (delta(c0, c1).get("h1") or {}).get("rx", {}).get("t2w1"),
           "flood_received": fs["received"] if fs else None, "window": window,
           "established": kept, "counters": delta(c0, c1), "t": time.time()}
    if flood:
        rec["flood_offered_pps"] = flood["offered_pps"]
        rec["flood_sent_pps"] = flood["sent"] / flood["seconds"] if flood["seconds"] else 0
    cr = {h: (d["flows"]["created"] if d else None) for h, d in rec["counters"].items()}
    log(f"  {cond:6} tcp {gbit:.2f} Gbit/s ({len(inside)} s), udp lost {rec['udp_lost']} "
        f"(h1 read {rec['udp_read_by_h1']} of {u['sent']}), "
        + (f"flood offered {rec['flood_offered_pps'] / 1e3:.0f}K/s sent "
           f"{rec['flood_sent_pps'] / 1e3:.0f}K/s arrived {fs['received'] if fs else 0}, "
           if flood else "")
        + f"flows created {cr}, established kept {kept}")
    return rec


def clear_flows(lab):
    """Every flow, on both hosts (through the API, as an operator would): each trial starts
    from an empty table, and an established flow listed is one of this trial's."""
    removed = {}
    for name, h in lab.hosts.items():
        d, err = call(h["socket"], "DELETE", "/api/v1/flows", timeout=60)
        removed[name] = d["removed"] if d else err
    return removed


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=5.0, help="the flood's length per trial")
    ap.add_argument("--flows", type=int, default=3_000_000,
                    help="the flood's distinct flows (42 bytes of the generator's memory each)")
    ap.add_argument("--steady-flows", type=int, default=64)
    ap.add_argument("--conditions", default="quiet,flood,steady")
    ap.add_argument("--udp-rate", type=int, default=20_000)
    ap.add_argument("--tcp-rate", default=None,
                    help="pace the established TCP stream (iperf3 -b, e.g. 2G); default unpaced")
    ap.add_argument("--network-quota", type=int, default=200_000,
                    help="flows.network_quota in every host's configuration (0: none)")
    ap.add_argument("--setup-rate", type=int, default=200_000,
                    help="flows.setup_rate: new flows per second per interface (0: no limit)")
    ap.add_argument("--police", type=int, default=0,
                    help="a policer on the flood's workload interface (h1's t2w2) at this "
                         "many packets/s (0: none)")
    ap.add_argument("--offload", choices=("xdp", "tc"), default=None)
    ap.add_argument("--ovrd-arg", action="append", default=[])
    ap.add_argument("--prefix", default="ovrfl", help="prefix of everything made (<= 8 chars)")
    ap.add_argument("--out", default=None, help="directory for trials.jsonl and summary.json")
    ap.add_argument("--ovrctl", default=str(ROOT / "target" / "release" / "ovrctl"))
    ap.add_argument("--cleanup", action="store_true")
    a = ap.parse_args()
    made = claim("flood", a)
    if made is None:
        return 0
    out_dir = pathlib.Path(a.out or ROOT / "bench" / "runs" / f"flood-{time.strftime('%Y%m%d-%H%M%S')}")
    out_dir.mkdir(parents=True, exist_ok=True)
    conds = [c for c in a.conditions.split(",") if c]

    on_stop_signals()
    made.save()
    recs = []
    settings = {"network_quota": a.network_quota, "setup_rate": a.setup_rate}
    if not a.network_quota:
        del settings["network_quota"]
    try:
        name = {None: "ovr-auto", "xdp": "ovr-xdp", "tc": "ovr-tc"}[a.offload]
        lab = Ovr(made, f"{a.prefix}-l", a.ovrctl, name, a.ovrd_arg, tenants=2, workloads=2)
        log(f"flood: lab {lab.p} ({name}), flows settings {settings}")
        lab.up()
        set_flow_quotas(made, lab, settings)
        if a.police:
            police(lab, "h1", "t2w2", a.police)
            log(f"flood: h1's t2w2 policed at {a.police} packets/s")
        clear_flows(lab)
        with open(out_dir / "trials.jsonl", "w") as out:
            for rnd in range(a.rounds):
                order = conds if rnd % 2 == 0 else conds[::-1]
                for cond in order:
                    rec = trial(a, made, lab, cond)
                    rec["round"] = rnd
                    rec["cleared"] = clear_flows(lab)
                    time.sleep(1.0)
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    recs.append(rec)
    except (KeyboardInterrupt, Cleanup) as e:
        log(f"flood: interrupted ({e or 'Ctrl-C'}): tearing down")
        return 130
    finally:
        made.teardown(a.ovrctl)
    s = summarize(a, recs, settings)
    (out_dir / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
    print(json.dumps(s))
    log(f"flood: summary in {out_dir / 'summary.json'}, trials in {out_dir / 'trials.jsonl'}")
    return 0


def summarize(a, recs, settings):
    by = {}
    for r in recs:
        by.setdefault(r["condition"], []).append(r)
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    s = {"kind": "flood_summary", "date": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv,
         "flows_settings": settings, "police_pps": a.police or None,
         "versions": versions(a.ovrctl), "conditions": {}}
    for cond, rs in by.items():
        c = {"trials": len(rs), "tcp_gbit": [round(r["tcp_gbit"], 3) for r in rs],
             "tcp_gbit_median": med([r["tcp_gbit"] for r in rs]),
             "udp_lost": [r["udp_lost"] for r in rs],
             "udp_unread_by_h1": [r["udp_sent"] - r["udp_read_by_h1"] for r in rs
                                  if r["udp_read_by_h1"] is not None],
             "established_kept": all(v["same_ids"] for r in rs for v in r["established"].values()),
             "established": [r["established"] for r in rs]}
        if cond != "quiet":
            c["flood_offered_pps_median"] = med([r["flood_offered_pps"] for r in rs])
            c["flood_sent_pps_median"] = med([r["flood_sent_pps"] for r in rs])
            c["flood_received"] = [r["flood_received"] for r in rs]
        for h in ("h1", "h2"):
            ds = [r["counters"].get(h) for r in rs if r["counters"].get(h)]
            if ds:
                c[f"{h}_created_per_s_median"] = med([d["flows"]["created"] / r["seconds"]
                                                      for d, r in zip(ds, rs)])
                c[f"{h}_refused"] = [{k: d["flows"][k] for k in d["flows"] if k.startswith("refused")}
                                     for d in ds]
                c[f"{h}_drops"] = [d["drops"] for d in ds]
        s["conditions"][cond] = c
    q = s["conditions"].get("quiet", {}).get("tcp_gbit_median")
    for cond, c in s["conditions"].items():
        c["tcp_vs_quiet"] = c["tcp_gbit_median"] / q if q else None
    f = s["conditions"].get("flood")
    s["goal_tcp_90pct"] = bool(f and f["tcp_vs_quiet"] and f["tcp_vs_quiet"] >= 0.9)
    s["established_never_dropped"] = all(r["udp_lost"] == 0 for r in recs)
    s["established_kept"] = all(c["established_kept"] for c in s["conditions"].values())
    return s


if __name__ == "__main__":
    sys.exit(main())
