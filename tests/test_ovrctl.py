"""ovrctl as scripts use it, without ovrd: --json on every verb that runs here, failures
under --json as one JSON object on stderr with the same exit status as without, usage
errors (clap's and those checked by hand) with status 2, and an API socket path that is
not a socket said to be so (not "ovrd is not running").

`lab status --json` on a real lab is checked in tests/system/test_lab.py."""

import json
import socket
import subprocess

import pytest
from conftest import ROOT

OVRCTL = ROOT / "target" / "debug" / "ovrctl"
CONFIG = ROOT / "crates" / "config" / "examples" / "two-networks.yaml"


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli"], check=True, cwd=ROOT)


def ovrctl(*args):
    return subprocess.run([str(OVRCTL), *map(str, args)], capture_output=True, text=True, timeout=120)


def failure(r):
    """The JSON failure on stderr: {"error": ..., "code": ...} and nothing on stdout."""
    assert r.stdout == "", r.stdout
    v = json.loads(r.stderr)
    assert set(v) == {"error", "code"} and isinstance(v["error"], str) and v["error"], v
    assert v["code"] == r.returncode, (v, r.returncode)
    return v


@pytest.fixture
def pcap(tmp_path):
    from scapy.all import IP, UDP, Ether, conf, wrpcap
    conf.verb = 0
    p = tmp_path / "in.pcap"
    wrpcap(str(p), [Ether(src="02:00:00:00:01:05", dst="02:00:00:00:00:01") /
                    IP(src="10.1.0.5", dst="10.2.0.9") / UDP(sport=1, dport=2)])
    return p


def test_local_verbs_print_json(pcap, tmp_path):
    for args in (["decode", pcap], ["lpm-demo", "--prefixes", "1000", "--lookups", "1000"],
                 ["lab", "--prefix", "ovrlnone", "status"], ["lab", "--prefix", "ovrlnone", "down"],
                 ["replay", "--config", CONFIG, "--pcap", f"vm1={pcap}", "--out", tmp_path / "out"],
                 ["bench", "engine", "--scenario", "vxlan-decap", "--flows", "4", "--seconds", "0.05", "--nodes"]):
        for where in ("before", "after"):  # --json before the verb and after it
            argv = ["--json", *args] if where == "before" else [*args, "--json"]
            r = ovrctl(*argv)
            assert r.returncode == 0, (argv, r.stderr)
            lines = r.stdout.strip().splitlines()
            try:
                json.loads(r.stdout)
            except json.JSONDecodeError:
                for line in lines:  # bench engine: one object per line
                    json.loads(line)


def test_bench_engine_spreads_flows_over_many_vteps_and_networks():
    """The scale options build the tunnels, networks, bridge entries and routes, and every
    flow is forwarded: through all of them, since flows spread over every VTEP."""
    r = ovrctl("bench", "engine", "--scenario", "vxlan-l2-encap", "--flows", "2048",
               "--vteps", "64", "--networks", "8", "--seconds", "0.05", "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert (v["vteps"], v["networks"], v["flows"]) == (64, 8, 2048)
    assert v["forwarded"] == v["packets"] > 0 and v["dropped"] == 0, v
    assert v["tables_mib"] is not None and v["tables_mib"] >= 0
    bad = ovrctl("bench", "engine", "--scenario", "l2-local", "--vteps", "4", "--json")
    assert bad.returncode == 1 and "vxlan-l2-encap" in json.loads(bad.stderr)["error"]


def test_lab_status_json_without_a_lab():
    v = json.loads(ovrctl("--json", "lab", "--prefix", "ovrlnone", "status").stdout)
    assert v["up"] is False and v["hosts"] == [] and v["workloads"] == [] and v["prefix"] == "ovrlnone"


def test_failures_under_json_are_json_with_the_same_status(tmp_path):
    cases = [
        # (arguments, exit status)
        (["--socket", tmp_path / "none.sock", "counters"], 3),
        (["decode", tmp_path / "missing.pcap"], 1),
        (["lab", "--prefix", "ovrlnone", "exec", "h1", "--", "true"], 1),
        (["nosuchverb"], 2),
        (["routes", "show", "red"], 2),
        (["routes", "add", "novalue"], 2),
        (["policies", "set", "red", "not json"], 2),
        (["lab", "--prefix", "BAD", "status"], 2),
        (["lab", "--prefix", "ovrl", "up", "--hosts", "10"], 2),
        (["lab", "--prefix", "ovrl", "up", "--kernel-host", "--encap", "mpls-gre"], 2),
        (["lab", "exec", "h1"], 2),
        (["bench", "engine", "--scenario", "nope"], 2),
        (["bench", "engine", "--seconds=nan"], 2),
        (["bench", "engine", "--seconds=-1"], 2),
        (["bench", "gen", "--iface", "lo", "--src-mac", "02:00:00:00:00:01", "--dst-mac", "02:00:00:00:00:02",
          "--src", "10.0.0.1", "--dst", "10.0.0.2", "--seconds=-1"], 2),
        (["bench", "sink", "--iface", "lo", "--idle=inf"], 2),
        (["replay", "--config", CONFIG, "--pcap", "vm1", "--out", tmp_path], 2),
    ]
    for args, status in cases:
        plain = ovrctl(*args)
        assert plain.returncode == status, (args, plain.returncode, plain.stderr)
        assert not plain.stderr.lstrip().startswith("{"), (args, plain.stderr)
        v = failure(ovrctl("--json", *args) if args[0] != "replay" else ovrctl(*args, "--json"))
        assert v["code"] == status, (args, v)


def test_usage_errors_checked_by_hand_say_what_is_wrong():
    assert "routes are named by NETWORK PREFIX" in ovrctl("routes", "del", "red").stderr
    assert "give field=value" in ovrctl("routes", "add", "novalue").stderr
    assert "--kernel-host needs --encap vxlan" in ovrctl("lab", "--prefix", "ovrl", "up", "--kernel-host",
                                                         "--encap", "mpls-gre").stderr


def test_a_socket_path_that_is_not_a_socket_is_said_to_be_so(tmp_path):
    f = tmp_path / "ovrd.sock"
    f.write_text("")
    for path, what in [(f, "a regular file"), (tmp_path, "a directory")]:
        r = ovrctl("--socket", path, "counters")
        assert r.returncode == 1, r.stderr
        assert f"{path} is not a socket (it is {what})" in r.stderr
        assert "not running" not in r.stderr
        v = failure(ovrctl("--socket", path, "--json", "counters"))
        assert v["code"] == 1 and "is not a socket" in v["error"]
    # A socket nobody listens on any more is still "not running" (3).
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "stale.sock"))
    s.close()
    r = ovrctl("--socket", tmp_path / "stale.sock", "counters")
    assert r.returncode == 3 and "ovrd is not running" in r.stderr


def test_a_reader_that_goes_away_ends_ovrctl_quietly():
    """`ovrctl ... | head -1`: the closed pipe ends ovrctl as it would a C tool (SIGPIPE),
    without a panic's message and backtrace on stderr."""
    p = subprocess.Popen([str(OVRCTL), "lpm-demo", "--prefixes", "1000", "--lookups", "1000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader leaves before the first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == -13, err  # killed by SIGPIPE
    assert "panicked" not in err and err == "", err
