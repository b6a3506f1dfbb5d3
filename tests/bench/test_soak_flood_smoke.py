"""The soak (bench/soak.py) and the new-flow flood (bench/flood.py) at a tiny size with the
debug build: each must drive a real lab with real traffic, write a sane summary, and
leave nothing behind."""

import json
import os
import pathlib
import subprocess
import sys

from conftest import ROOT

OVRCTL = ROOT / "target" / "debug" / "ovrctl"


def namespaces(prefix):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines()
            if line.strip() and line.startswith(prefix + "-")}


def run(program, prefix, args, timeout=240):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    assert not namespaces(prefix)
    cmd = [sys.executable, str(ROOT / "bench" / program), "--prefix", prefix,
           "--ovrctl", str(OVRCTL), *args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    finally:
        subprocess.run([*cmd, "--cleanup"], capture_output=True, timeout=120)
    assert not namespaces(prefix), "the run left namespaces behind"
    assert not pathlib.Path(f"/run/{prefix}").exists()
    return r


def test_short_soak(tmp_path):
    r = run("soak.py", f"ovss{os.getpid() % 1000}",
            ["--minutes", "0.3", "--warmup", "6", "--sample-every", "3", "--tcp-rate", "20M",
             "--udp-rate", "2000", "--udp-flows", "200", "--udp-cycle", "3",
             "--churn-batch", "20", "--churn-keep", "100", "--out", str(tmp_path)])
    s = json.loads((tmp_path / "summary.json").read_text())
    assert r.returncode == (0 if s["pass"] else 1), r.stderr[-3000:]
    assert set(s["criteria"]) == {"rss", "drops", "logs", "traffic", "api"}
    for h in ("h1", "h2"):
        assert s["hosts"][h]["rss_mib_end"] > 0 and "rss_growth_pct" in s["hosts"][h]
        assert s["hosts"][h]["samples"] >= 5
    t = s["traffic"]
    assert t["tcp"]["bytes"] > 0 and t["ping"]["received"] > 0
    assert t["udp"]["cycles"] >= 1 and t["udp"]["received"] > 0
    assert t["churn"]["updates"] > 0 and t["api"]["polls"] > 0
    samples = (tmp_path / "samples.jsonl").read_text().splitlines()
    assert {json.loads(x)["host"] for x in samples} == {"h1", "h2"}


def test_short_flood(tmp_path):
    r = run("flood.py", f"ovsf{os.getpid() % 1000}",
            ["--rounds", "1", "--seconds", "1", "--flows", "20000", "--udp-rate", "2000",
             "--conditions", "quiet,flood", "--network-quota", "5000", "--setup-rate", "2000",
             "--out", str(tmp_path)])
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["flows_settings"] == {"network_quota": 5000, "setup_rate": 2000}
    q, f = s["conditions"]["quiet"], s["conditions"]["flood"]
    assert q["tcp_gbit_median"] > 0 and f["flood_sent_pps_median"] > 0
    # The flood met the configured limits: some flows set up, the rest refused.
    assert f["h1_created_per_s_median"] > 0
    assert sum(f["h1_drops"][0].get(k, 0) for k in ("flow_setup_limited", "flow_table_full")) > 0
    # The established flows were listed before and after the flood on both hosts.
    for e in f["established"]:
        for h in ("h1", "h2"):
            assert e[h]["before"] and e[h]["after"]
