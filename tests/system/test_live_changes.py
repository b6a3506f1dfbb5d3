"""Live changes under traffic: a two-host lab (`ovrctl lab --prefix`, its own namespaces),
steady routed traffic with sequence numbers from h1-t1-w1 to h2-t1-w1 (`ovrctl bench
gen`/`sink`), and changes through h1's API meanwhile. Changes that keep the traffic's
path must lose no packet to the change itself; changes that cut it must cut it, counted
under their drop reason."""

import json
import os
import subprocess
import time

import pytest

from conftest import ROOT

OVRCTL = ROOT / "target" / "debug" / "ovrctl"
ROUTER_MAC = "00:00:5e:00:01:00"  # the networks' default gateway MAC: the traffic is routed
RATE = 2000  # packets per second: modest, well below a debug build's ceiling
DST = "10.1.0.21/32"


def ovrctl(*args, check=True, timeout=60):
    r = subprocess.run([str(OVRCTL), *map(str, args)], timeout=timeout, capture_output=True,
                       text=True)
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def namespaces(prefix):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines()
            if line.strip() and line.startswith(prefix + "-")}


class Lab:
    def __init__(self, prefix, state):
        self.prefix = prefix
        s = json.loads(state.read_text())
        h1 = next(h for h in s["hosts"] if h["name"] == "h1")
        self.sock = str(os.path.splitext(h1["config"])[0] + ".sock")
        wl = {w["name"]: w for w in s["workloads"]}
        self.src, self.dst = wl["h1-t1-w1"], wl["h2-t1-w1"]

    def api(self, *args, check=True):
        return ovrctl("--socket", self.sock, *args, check=check)

    def batch(self, tmp, changes):
        f = tmp / "batch.json"
        f.write_text(json.dumps({"changes": changes}))
        return self.api("batch", f)

    def drops(self):
        return json.loads(self.api("--json", "dropstats").stdout or "{}")

    def traffic(self, count, during=None):
        """`count` frames at RATE; `during()` runs while they flow. Returns (sent, sink)."""
        sink = subprocess.Popen(
            ["ip", "netns", "exec", self.dst["namespace"], str(OVRCTL), "bench", "sink",
             "--iface", "eth0", "--port", "9000", "--seconds", str(count / RATE + 8),
             "--idle", "1.5", "--driver", "af-xdp"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sink.stderr.readline()  # listening
        gen = subprocess.Popen(
            ["ip", "netns", "exec", self.src["namespace"], str(OVRCTL), "bench", "gen",
             "--iface", "eth0", "--src-mac", self.src["mac"], "--dst-mac", ROUTER_MAC,
             "--src", self.src["address"], "--dst", self.dst["address"], "--port", "9000",
             "--flows", "1", "--size", "60", "--rate", str(RATE), "--count", str(count),
             "--seconds", str(count / RATE + 5), "--driver", "af-xdp"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            if during:
                during()
        finally:
            g_out, g_err = gen.communicate(timeout=count / RATE + 30)
            k_out, _ = sink.communicate(timeout=count / RATE + 30)
        assert gen.returncode == 0, g_err
        return json.loads(g_out)["offered"], json.loads(k_out)


@pytest.fixture
def lab(tmp_path):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    prefix = f"ovlc{os.getpid() % 1000}"
    assert not namespaces(prefix)
    d = tmp_path / "lab"
    # Static: these changes go through each ovrd's API, which a cluster member refuses.
    r = ovrctl("--json", "lab", "--prefix", prefix, "--dir", d, "up", "--hosts", "2",
               "--tenants", "1", "--static", check=False, timeout=120)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        lab = Lab(prefix, d / "state.json")
        # The route the traffic takes, and an equivalent of its next hop (same tunnel and
        # VNI) reached through a composite that can be pointed at either.
        nh = json.loads(lab.api("--json", "nexthops", "show", "h2-t1").stdout)
        lab.api("nexthops", "add", json.dumps({**nh, "name": "h2-t1-alt"}))
        lab.api("nexthops", "add", "name=via", "kind=ecmp", "members=h2-t1")
        lab.api("routes", "add", "network=t1", f"prefix={DST}", "nexthop=via")
        yield lab
    finally:
        ovrctl("lab", "--prefix", prefix, "--dir", d, "down", check=False, timeout=120)
        assert not namespaces(prefix), "the lab left namespaces behind"


def unrelated(kind, n, first=0):
    out = []
    for i in range(first, first + n):
        p = f"172.{16 + i // 65536}.{(i // 256) % 256}.{i % 256}/32"
        if kind == "delete":
            out.append({"delete": {"route": {"network": "t1", "prefix": p}}})
        else:
            out.append({kind: {"route": {"network": "t1", "prefix": p, "nexthop": "h2-t1"}}})
    return out


def test_changes_that_keep_the_path_lose_no_packet(lab, tmp_path):
    sent, k = lab.traffic(200)
    assert k["received"] == sent == 200, k  # the path works before anything changes

    def changes():
        time.sleep(0.5)
        for _ in range(2):
            # Unrelated routes in bulk, in and out.
            lab.batch(tmp_path, unrelated("create", 5000))
            lab.batch(tmp_path, unrelated("replace", 5000))
            lab.batch(tmp_path, unrelated("delete", 5000))
            # The route in use, replaced by an equivalent one (same next hop, other name).
            lab.api("routes", "set", "network=t1", f"prefix={DST}", "nexthop=h2-t1-alt")
            time.sleep(0.2)
            lab.api("routes", "set", "network=t1", f"prefix={DST}", "nexthop=via")
            # The next hop in use, replaced by an equivalent one (its member swapped for
            # the same tunnel under another name), and back.
            lab.api("nexthops", "set", "name=via", "kind=ecmp", "members=h2-t1-alt")
            time.sleep(0.2)
            lab.api("nexthops", "set", "name=via", "kind=ecmp", "members=h2-t1")
            # A policy that still allows the traffic, then the default again.
            lab.api("policies", "set", "t1", json.dumps(
                [{"action": "allow", "protocol": "udp", "dst_ports": "9000"},
                 {"action": "deny"}]))
            time.sleep(0.2)
            lab.api("policies", "del", "t1")

    sent, k = lab.traffic(8 * RATE, changes)
    # Every frame arrived, each once: the sequence numbers run from 0 to sent - 1.
    assert sent == 8 * RATE
    assert k["received"] == sent, k
    assert (k["seq_first"], k["seq_last"]) == (0, sent - 1), k
    # The changes really were made (and the unrelated routes are gone again).
    routes = json.loads(lab.api("--json", "routes", "list").stdout)
    assert [(r["prefix"], r["nexthop"]) for r in routes] == [(DST, "via")]


def test_changes_that_cut_the_path_cut_it_under_their_drop_reason(lab, tmp_path):
    n = 1000
    sent, k = lab.traffic(n)
    assert k["received"] == sent == n, k

    # A policy that denies the traffic: nothing arrives, h1 counts it as policy_denied.
    lab.api("policies", "set", "t1", json.dumps(
        [{"action": "deny", "protocol": "udp", "dst_ports": "9000"}, {"action": "allow"}]))
    before = lab.drops().get("policy_denied", 0)
    sent, k = lab.traffic(n)
    assert k["received"] == 0, k
    assert lab.drops().get("policy_denied", 0) - before == sent

    # Back to the default: the traffic flows again.
    lab.api("policies", "del", "t1")
    sent, k = lab.traffic(n)
    assert k["received"] == sent, k

    # The route removed: nothing arrives, h1 counts it as no_route.
    lab.api("routes", "del", "t1", DST)
    before = lab.drops().get("no_route", 0)
    sent, k = lab.traffic(n)
    assert k["received"] == 0, k
    assert lab.drops().get("no_route", 0) - before == sent


def test_a_policer_lets_its_rate_through_and_counts_the_rest(lab):
    n = 3 * RATE  # 3 s at 2000/s
    sent, k = lab.traffic(n)
    assert k["received"] == sent == n, k

    iface = json.loads(lab.api("--json", "interfaces", "show", "t1w1").stdout)
    # A policer of no rate is refused at its field, and changes nothing.
    r = lab.api("interfaces", "set", json.dumps({**iface, "police": {"packets_per_second": 0}}),
                check=False)
    assert r.returncode != 0 and "police.packets_per_second" in r.stderr, r.stderr
    assert "police" not in json.loads(lab.api("--json", "interfaces", "show", "t1w1").stdout)

    # 500/s with a burst of 100: about 100 + 3 s x 500 of the 6000 frames pass; every
    # other one is counted as policed on h1 (the sink, behind h2, sees the rest).
    rate, burst = 500, 100
    lab.api("interfaces", "set",
            json.dumps({**iface, "police": {"packets_per_second": rate, "burst": burst}}))
    shown = json.loads(lab.api("--json", "interfaces", "show", "t1w1").stdout)
    assert shown["police"] == {"packets_per_second": rate, "burst": burst}, shown
    before = lab.drops().get("policed", 0)
    sent, k = lab.traffic(n)
    expected = burst + rate * n / RATE
    assert 0.8 * expected <= k["received"] <= 1.2 * expected, (k, expected)
    assert lab.drops().get("policed", 0) - before == sent - k["received"], k

    # The policer removed: everything passes again.
    lab.api("interfaces", "set", json.dumps(iface))
    sent, k = lab.traffic(n)
    assert k["received"] == sent, k
