#!/usr/bin/env python3
"""PNG plots of a benchmark suite run: python3 bench/plot.py SUMMARY.json OUT_DIR

mpps_vs_size.png   throughput (< 0.1% loss) and maximum receive rate by frame size, 1K flows
mpps_vs_flows.png  the same at 64 B by flow count
latency.png        one-way latency distribution (CCDF) at each fixed offered rate
cpu_per_mpps.png   CPU seconds per million packets at the highest fixed rate, by component
"""

import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from report import flows_label  # noqa: E402

COLORS = {"direct": "#999999", "kernel": "#1f77b4", "ovs": "#2ca02c", "ovr": "#d62728",
          "ovr-afp": "#ff9896", "ovr-auto": "#8c2d04", "ovr-xdp": "#17becf",
          "ovr-tc": "#9467bd"}
SIZE_ORDER = ["64", "128", "256", "512", "1024", "1518", "imix"]


def subtitle(meta):
    return (f"{meta['date'][:16]} · {meta['mode']} mode, {meta['rounds']} round(s), medians · "
            f"{meta['versions']['cpu']}")


def bars(ax, systems, keys, labels, what_t, what_m):
    """Grouped bars: solid = throughput (< 0.1% loss), light = max receive rate."""
    n = len(systems)
    w = 0.8 / max(n, 1)
    for i, (s, d) in enumerate(systems.items()):
        xs = [j + (i - (n - 1) / 2) * w for j in range(len(keys))]
        m = [d[what_m].get(k) or 0 for k in keys]
        t = [d[what_t].get(k) or 0 for k in keys]
        ax.bar(xs, m, w * 0.95, color=COLORS[s], alpha=0.3, edgecolor=COLORS[s])
        ax.bar(xs, t, w * 0.95, color=COLORS[s], label=d["label"])
        for x, v in zip(xs, m):
            if v:
                ax.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(labels)
    ax.set_ylabel("Mpps")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, title="solid: < 0.1% loss; light: max receive rate",
              title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))


def main():
    summary = json.loads(pathlib.Path(sys.argv[1]).read_text())
    out = pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    meta, systems = summary["meta"], summary["systems"]

    keys = [f"{s}/1000" for s in SIZE_ORDER
            if any(f"{s}/1000" in d["mrr_mpps"] for d in systems.values())]
    if keys:
        fig, ax = plt.subplots(figsize=(12, 5.5))
        bars(ax, systems, keys, [k.split("/")[0] + ("" if "imix" in k else " B") for k in keys],
             "tput_mpps", "mrr_mpps")
        ax.set_xlabel("frame size (with FCS), 1K flows")
        ax.set_title("Mpps by frame size: two hosts, VXLAN underlay, one generator core\n"
                     + subtitle(meta), fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "mpps_vs_size.png", dpi=110)
        plt.close(fig)

    fk = sorted({k for d in systems.values() for k in d["mrr_mpps"] if k.startswith("64/")},
                key=lambda k: int(k.split("/")[1]))
    if fk:
        fig, ax = plt.subplots(figsize=(12, 5.5))
        bars(ax, systems, fk, [flows_label(k.split('/')[1]) for k in fk],
             "tput_mpps", "mrr_mpps")
        ax.set_xlabel("distinct flows (UDP source ports and addresses), 64-byte frames")
        ax.set_title("Mpps by flow count\n" + subtitle(meta), fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "mpps_vs_flows.png", dpi=110)
        plt.close(fig)

    rates = sorted({r for d in systems.values() for r in d["latency"]}, key=int)
    if rates:
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 5), squeeze=False)
        for ax, rate in zip(axes[0], rates):
            for s, d in systems.items():
                x = d["latency"].get(rate)
                if not x or not x["hist"]:
                    continue
                total = sum(c for _, c in x["hist"])
                seen, xs, ys = 0, [], []
                for up, c in x["hist"]:
                    seen += c
                    xs.append(max(up, 1) / 1e3)
                    ys.append(max(1 - seen / total, 0.5 / total))
                ax.step(xs, ys, where="post", color=COLORS[s],
                        label=f"{d['label']}: p50 {x['p50_us']:.0f}, p99 {x['p99_us']:.0f}, "
                              f"p99.9 {x['p999_us']:.0f} µs")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("one-way latency, generator to sink (µs)")
            ax.set_ylabel("fraction of packets slower (CCDF)")
            for p in (0.5, 0.01, 0.001):
                ax.axhline(p, color="k", lw=0.5, alpha=0.3)
            ax.set_title(f"64 B, 1K flows, {int(rate) / 1e3:g} kpps offered", fontsize=10)
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7, loc="lower left")
        fig.suptitle("Latency distribution under load\n" + subtitle(meta), fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "latency.png", dpi=110)
        plt.close(fig)

        rate = meta.get("common_rate") or rates[-1]
        parts = [("fwd_proc_s", "forwarder process (ovrd / ovs-vswitchd)"),
                 ("softirq_s", "softirq (kernel forwarding, veth delivery)"),
                 ("tools_s", "generator + sink processes")]
        names = [s for s in systems if rate in systems[s]["latency"]]
        fig, ax = plt.subplots(figsize=(9, 5.5))
        bottom = [0.0] * len(names)
        for (k, label), col in zip(parts, ("#d62728", "#1f77b4", "#bbbbbb")):
            v = [systems[s]["latency"][rate]["cpu_s_per_mpkt"][k] or 0 for s in names]
            ax.bar(range(len(names)), v, 0.6, bottom=bottom, label=label, color=col)
            bottom = [b + x for b, x in zip(bottom, v)]
        base = systems.get("direct", {}).get("latency", {}).get(rate)
        for i, s in enumerate(names):
            txt = f"{bottom[i]:.2f}"
            if base and s != "direct":
                txt += f"\n(+{bottom[i] - base['cpu_s_per_mpkt']['total_s']:.2f} vs direct)"
            ax.text(i, bottom[i], txt, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([systems[s]["label"] for s in names], fontsize=8)
        ax.set_ylabel("CPU seconds per million packets (= µs per packet)")
        ax.set_ylim(0, max(bottom) * 1.25 if bottom else 1)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"CPU cost per packet at {int(rate) / 1e3:g} kpps offered (64 B, 1K flows)\n"
                     + subtitle(meta), fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "cpu_per_mpps.png", dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()
