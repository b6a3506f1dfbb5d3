"""The churn harness (bench/churn.py) at a tiny size with the debug build: it must drive a
real ovrd through its API, measure real traffic through a real lab while routes churn,
write sane results, and leave nothing behind."""

import json
import os
import pathlib
import subprocess
import sys

from conftest import ROOT

OVRCTL = ROOT / "target" / "debug" / "ovrctl"
CHURN = ROOT / "bench" / "churn.py"


def namespaces(prefix):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines()
            if line.strip() and line.startswith(prefix + "-")}


def test_quick_churn_run(tmp_path):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    p = f"ovcs{os.getpid() % 1000}"
    assert not namespaces(p)
    cmd = [sys.executable, str(CHURN), "--quick", "--prefix", p, "--ovrctl", str(OVRCTL),
           "--out", str(tmp_path), "--points", "300:1,2000:500", "--rates", "5000",
           "--rounds", "2"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
    finally:
        subprocess.run([*cmd, "--cleanup"], capture_output=True, timeout=120)
    assert not namespaces(p), "the run left namespaces behind"
    assert not pathlib.Path(f"/run/{p}").exists()

    recs = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    rates = [x for x in recs if x["kind"] == "rate"]
    assert [(x["n"], x["batch"]) for x in rates] == [(300, 1), (2000, 500)]
    for x in rates:
        for phase in ("create", "replace", "delete"):
            c = x[phase]
            # Every route made exactly one table change, each request the incremental way.
            assert c["table_changes"] == x["n"], (phase, c)
            assert c["incremental_requests"] == c["requests"] == x["n"] // x["batch"]
            assert c["routes_per_s"] > 0 and c["server_s"]["save"] > 0
        assert x["whole_ms"] > 0 and x["state_bytes"] > 0
    fwd = [x for x in recs if x["kind"] == "forward"]
    assert {x["churn"] for x in fwd} == {False, True}
    for x in fwd:
        assert x["sent"] > 0 and 0 < x["received"] <= x["sent"], x
        assert x["updates"] > 0 if x["churn"] else x["updates"] == 0
    summary = [x for x in recs if x["kind"] == "forward_summary"]
    assert len(summary) == 1 and summary[0]["quiet_mpps"] > 0
