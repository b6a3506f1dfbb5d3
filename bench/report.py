"""The summary of a benchmark suite run (bench/suite.py): medians over rounds, the
goals of issue 6 with their gaps, and the markdown table, from its trials.jsonl."""

import json
import statistics

SYSTEMS = ("direct", "kernel", "ovs", "ovr", "ovr-afp", "ovr-auto", "ovr-xdp", "ovr-tc")
LABELS = {
    "direct": "direct veth (no forwarder)",
    "kernel": "kernel bridge + vxlan",
    "ovs": "OVS userspace (netdev)",
    "ovr": "ovr (AF_XDP)",
    "ovr-afp": "ovr (AF_PACKET)",
    "ovr-auto": "ovr (default: auto)",
    "ovr-xdp": "ovr (XDP fast path)",
    "ovr-tc": "ovr (TC fast path)",
}
LOSS_OK = 0.001  # RFC 2544 style: loss under 0.1% passes


def flows_label(flows):
    """A flow count as the tables and plots show it: 1, 1K, 256K."""
    n = int(flows)
    return f"{n // 1000}K" if n >= 1000 else str(n)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(out_dir, meta):
    recs = [json.loads(line) for line in open(out_dir / "trials.jsonl")]
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in recs)]
    S = {s: {"mrr": {}, "tput": {}, "latency": {}, "tcp": [], "cpu": {}} for s in systems}
    for r in recs:
        d = S[r["system"]]
        if r["kind"] == "point_mrr":
            d["mrr"].setdefault(f'{r["size"]}/{r["flows"]}', []).append(r["rx_pps"])
        elif r["kind"] == "point_tput":
            d["tput"].setdefault(f'{r["size"]}/{r["flows"]}', []).append(r["tput_pps"])
        elif r["kind"] == "point_latency":
            d["latency"].setdefault(str(int(r["rate"])), []).append(r)
        elif r["kind"] == "point_tcp":
            d["tcp"].append(r["gbit"])
    summary = {"meta": meta, "systems": {}}
    for s in systems:
        d = S[s]
        lat = {}
        for rate, rs in d["latency"].items():
            hist = {}
            for r in rs:
                for up, c in r["lat_hist"]:
                    hist[up] = hist.get(up, 0) + c
            pkts = sum(r["received"] for r in rs)
            lat[rate] = {
                "p50_us": median([r["lat_ns"]["p50"] / 1e3 for r in rs]),
                "p99_us": median([r["lat_ns"]["p99"] / 1e3 for r in rs]),
                "p999_us": median([r["lat_ns"]["p999"] / 1e3 for r in rs]),
                "loss": median([r["loss"] for r in rs]),
                "hist": sorted([int(k), v] for k, v in hist.items()),
                "cpu_s_per_mpkt": {k: median([r["cpu"][k] / (r["offered"] / 1e6) for r in rs])
                                   for k in ("total_s", "fwd_proc_s", "softirq_s", "tools_s")},
                "rounds": len(rs), "packets": pkts,
            }
        summary["systems"][s] = {
            "label": LABELS[s],
            "mrr_mpps": {k: median(v) / 1e6 for k, v in d["mrr"].items()},
            "tput_mpps": {k: median(v) / 1e6 for k, v in d["tput"].items()},
            "mrr_all_mpps": {k: [x / 1e6 for x in v] for k, v in d["mrr"].items()},
            "tput_all_mpps": {k: [x / 1e6 for x in v] for k, v in d["tput"].items()},
            "latency": lat,
            "tcp_gbit": median(d["tcp"]),
            "tcp_all_gbit": d["tcp"],
        }
    summary["meta"]["common_rate"] = common_rate(summary)
    # rounds.json: everything, per-round values and latency histograms (what the plots
    # are drawn from; bulky, kept out of git); summary.json: the medians RESULTS.md quotes.
    (out_dir / "rounds.json").write_text(json.dumps(summary, indent=1))
    (out_dir / "summary.json").write_text(json.dumps(medians(summary), indent=1))
    (out_dir / "table.md").write_text(table(summary))
    return summary


def medians(summary):
    """The summary without its per-round values and histograms."""
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if "_all_" not in k and k != "hist"}
        return v
    return {"meta": summary["meta"], "systems": strip(summary["systems"])}


def fmt(x, p=3):
    return "–" if x is None else f"{x:.{p}f}"


def table(summary):
    sy = summary["systems"]
    names = list(sy)
    keys = []
    for s in names:
        for k in list(sy[s]["mrr_mpps"]) + list(sy[s]["tput_mpps"]):
            if k not in keys:
                keys.append(k)

    def order(k):
        size, flows = k.split("/")
        return (int(flows), 9999 if size == "imix" else int(size))
    keys.sort(key=order)
    L = []
    m = summary["meta"]
    L.append(f"Run {m['date']}, {m['rounds']} round(s), {m['trial_seconds']} s per trial, "
             f"mode {m['mode']}; medians over rounds.\n")
    L.append("Throughput (Mpps, highest offered rate with < 0.1% loss) / maximum receive rate "
             "(Mpps, unpaced generator, any loss):\n")
    L.append("| frame (B) | flows | " + " | ".join(sy[s]["label"] for s in names) + " |")
    L.append("|---|---|" + "---|" * len(names))
    for k in keys:
        size, flows = k.split("/")
        cells = [f'{fmt(sy[s]["tput_mpps"].get(k))} / {fmt(sy[s]["mrr_mpps"].get(k))}'
                 for s in names]
        L.append(f"| {size} | {flows_label(flows)} | " + " | ".join(cells) + " |")
    rates = sorted({r for s in names for r in sy[s]["latency"]}, key=int)
    if rates:
        L.append("\nOne-way latency (µs, generator to sink, 64 B, 1K flows) and CPU per million "
                 "packets at a fixed offered rate:\n")
        L.append("| offered rate | system | p50 | p99 | p99.9 | loss | CPU s/Mpkt total | "
                 "forwarder (process) | softirq | generator + sink | incremental vs direct |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for rate in rates:
            base = sy.get("direct", {}).get("latency", {}).get(rate, {}).get("cpu_s_per_mpkt", {})
            for s in names:
                x = sy[s]["latency"].get(rate)
                if not x:
                    continue
                c = x["cpu_s_per_mpkt"]
                inc = (c["total_s"] - base["total_s"]) if base and s != "direct" else None
                L.append(f"| {int(rate) / 1e3:g} kpps | {sy[s]['label']} | {fmt(x['p50_us'], 0)} | "
                         f"{fmt(x['p99_us'], 0)} | {fmt(x['p999_us'], 0)} | "
                         f"{x['loss'] * 100:.2f}% | {fmt(c['total_s'], 2)} | "
                         f"{fmt(c['fwd_proc_s'], 2)} | {fmt(c['softirq_s'], 2)} | "
                         f"{fmt(c['tools_s'], 2)} | {fmt(inc, 2)} |")
    if any(sy[s]["tcp_gbit"] is not None for s in names):
        L.append("\nTCP (iperf3, one stream, Gbit/s): " + ", ".join(
            f"{sy[s]['label']} {fmt(sy[s]['tcp_gbit'], 2)}" for s in names
            if sy[s]["tcp_gbit"] is not None))
    L.append("\n" + goals(summary))
    return "\n".join(L) + "\n"


def common_rate(summary):
    """The highest fixed rate at which every system lost < 0.1% (else the lowest)."""
    sy = summary["systems"]
    rates = sorted({r for s in sy for r in sy[s]["latency"]}, key=int)
    ok = [r for r in rates
          if all(r in sy[s]["latency"] and sy[s]["latency"][r]["loss"] < LOSS_OK for s in sy)]
    return (ok or rates or [None])[-1 if ok else 0]


def goals(summary):
    sy = summary["systems"]
    L = ["| goal | measured | verdict |", "|---|---|---|"]
    # Each ovr variant measured that the goals are about: AF_XDP, and with the fast
    # path at XDP or TC.
    for v in ("ovr", "ovr-xdp", "ovr-tc"):
        if v in sy:
            goal_rows(summary, v, L)
    # Issue 4's TCP goal: what a user gets without choosing (ovrd's default), and with
    # the fast path made for it (TC).
    k = sy.get("kernel", {}).get("tcp_gbit")
    for v in ("ovr-auto", "ovr-tc"):
        o = sy.get(v, {}).get("tcp_gbit")
        if o and k:
            L.append(f"| {v}: TCP ≥ ½ the kernel's (issue 4) | {o:.2f} vs {k:.2f} Gbit/s "
                     f"({o / k:.3f}x) | {'met' if o >= k / 2 else 'NOT met'} |")
    return "\n".join(L)


def goal_rows(summary, v, L):
    sy = summary["systems"]

    def get(s, what, k):
        return sy.get(s, {}).get(what, {}).get(k)

    def ratio(a, b):
        return a / b if a and b else None
    for base, want in (("kernel", 3), ("ovs", 10)):
        o, b = get(v, "tput_mpps", "64/256000"), get(base, "tput_mpps", "64/256000")
        r = ratio(o, b)
        mo, mb = get(v, "mrr_mpps", "64/256000"), get(base, "mrr_mpps", "64/256000")
        L.append(f"| {v}: ≥ {want}x {base}'s 64 B rate at 256K flows | throughput {fmt(o)} vs "
                 f"{fmt(b)} Mpps ({fmt(r, 2)}x); max receive rate {fmt(mo)} vs {fmt(mb)} "
                 f"({fmt(ratio(mo, mb), 2)}x) | {'met' if r and r >= want else 'NOT met'} |")
    o, d = get(v, "mrr_mpps", "64/256000"), get("direct", "mrr_mpps", "64/256000")
    r = ratio(o, d)
    L.append(f"| {v}: ≥ 80% of the direct-veth ceiling (64 B, 256K flows) | {fmt(o)} vs {fmt(d)} Mpps "
             f"max receive rate ({fmt(r and r * 100, 0)}%) | {'met' if r and r >= 0.8 else 'NOT met'} |")
    rate = common_rate(summary)
    if rate:
        lo, lk, ld = (sy.get(s, {}).get("latency", {}).get(rate) for s in (v, "kernel", "direct"))
        if lo and lk and ld:
            io = lo["cpu_s_per_mpkt"]["total_s"] - ld["cpu_s_per_mpkt"]["total_s"]
            ik = lk["cpu_s_per_mpkt"]["total_s"] - ld["cpu_s_per_mpkt"]["total_s"]
            ok = ik > 0 and io <= ik / 2
            L.append(f"| {v}: incremental CPU ≤ ½ the kernel's ({int(rate) / 1e3:g} kpps) | ovr "
                     f"{io:.2f} vs kernel {ik:.2f} CPU s per Mpkt | {'met' if ok else 'NOT met'} |")
            ok = lo["p99_us"] <= lk["p99_us"]
            L.append(f"| {v}: p99 latency under load ≤ the kernel's ({int(rate) / 1e3:g} kpps) | ovr "
                     f"{lo['p99_us']:.0f} vs kernel {lk['p99_us']:.0f} µs | "
                     f"{'met' if ok else 'NOT met'} |")
    a, b = get(v, "tput_mpps", "64/1000"), get(v, "tput_mpps", "64/256000")
    if a and b:
        drop = 1 - b / a
        L.append(f"| {v}: ≤ 20% drop from 1K to 256K flows | ovr throughput {fmt(a)} → {fmt(b)} Mpps "
                 f"({-drop * 100:+.0f}%) | {'met' if drop <= 0.2 else 'NOT met'} |")

