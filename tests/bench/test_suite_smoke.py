"""The benchmark harness (bench/suite.py) on one tiny point against the direct veth pair
and the kernel's bridge + vxlan: it must build both topologies, measure real traffic,
write sane results, and leave nothing behind, also when it is stopped halfway."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT

OVRCTL = ROOT / "target" / "debug" / "ovrctl"
SUITE = ROOT / "bench" / "suite.py"

def namespaces(prefix):
    """Namespaces named with the run's prefix (other test runs may share the machine and
    make or remove their own meanwhile)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines()
            if line.strip() and line.startswith(prefix + "-")}


@pytest.fixture
def prefix():
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    p = f"ovbt{os.getpid() % 1000}"
    assert not namespaces(p), "namespaces with this run's prefix exist already"
    try:
        yield p
    finally:
        subprocess.run([sys.executable, str(SUITE), "--prefix", p, "--ovrctl", str(OVRCTL),
                        "--cleanup"], capture_output=True, timeout=120)
        assert not namespaces(p), "the suite left namespaces behind"
        assert not pathlib.Path(f"/run/{p}").exists()


def tiny(prefix, out):
    return [sys.executable, str(SUITE), "--quick", "--systems", "direct,kernel",
            "--sizes", "64", "--skip", "flows,tcp", "--search-steps", "1",
            "--trial-seconds", "0.5", "--latency-rates", "5000", "--latency-seconds", "0.5",
            "--prefix", prefix, "--out", str(out), "--ovrctl", str(OVRCTL)]


def test_quick_point_against_direct_and_kernel(prefix, tmp_path):
    r = subprocess.run(tiny(prefix, tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not namespaces(prefix), "the run did not remove what it made"
    assert not pathlib.Path(f"/run/{prefix}").exists()

    trials = [json.loads(line) for line in (tmp_path / "trials.jsonl").read_text().splitlines()]
    measured = [t for t in trials if t["kind"] in ("mrr", "search", "latency")]
    assert {t["system"] for t in measured} == {"direct", "kernel"}
    for t in measured:
        assert t["offered"] > 0 and 0 < t["received"] <= t["offered"], t
        assert 0 <= t["loss"] < 1
        lat = t["lat_ns"]
        assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"], lat
        assert sum(c for _, c in t["lat_hist"]) == t["received"]
        assert t["cpu"]["total_s"] >= 0

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["meta"]["mode"] == "quick" and summary["meta"]["versions"]["kernel"]
    for name in ("direct", "kernel"):
        s = summary["systems"][name]
        assert s["mrr_mpps"]["64/1000"] > 0.001, s
        assert s["tput_mpps"]["64/1000"] >= 0
        lat = s["latency"]["5000"]
        assert lat["loss"] < 0.5 and 0 < lat["p50_us"] <= lat["p99_us"], lat
    # The generator's ceiling: nothing forwards faster than a bare veth pair (within noise).
    d, k = summary["systems"]["direct"], summary["systems"]["kernel"]
    assert k["mrr_mpps"]["64/1000"] < 1.5 * d["mrr_mpps"]["64/1000"]
    table = (tmp_path / "table.md").read_text()
    assert "direct veth" in table and "kernel bridge + vxlan" in table


def test_stopped_halfway_leaves_nothing(prefix, tmp_path):
    cmd = tiny(prefix, tmp_path)
    cmd[cmd.index("--latency-seconds") + 1] = "30"
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait until a latency trial is under way: the topologies are up, a sink is running.
    t = time.time()
    while time.time() - t < 120:
        trials = (tmp_path / "trials.jsonl")
        if trials.exists() and '"point_tput"' in trials.read_text():
            break
        time.sleep(0.2)
    time.sleep(2)
    up = namespaces(prefix)
    assert len(up) >= 5, f"the topologies were not up when the suite was stopped: {up}"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err[-2000:]
    assert "tearing down" in err
    assert not namespaces(prefix)
    assert not pathlib.Path(f"/run/{prefix}").exists()
    # Nothing it started runs on: no generator, sink or daemon in its namespaces.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"{prefix}-" not in ps
