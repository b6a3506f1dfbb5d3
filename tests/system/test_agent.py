"""ovrd's agent driven through ovrctl only, with real traffic.

Host A is a namespace where ovrd owns two veths to two workload namespaces, both in
network red (10.1.0.0/24 and 10.2.0.0/24, routed by ovr's virtual gateway). The second
workload also answers for 10.9.0.5, which ovr reaches only once a route says so: the
test adds, changes and deletes that route through the API while pinging, checks that the
unrelated traffic keeps flowing, then restarts ovrd and finds the route kept.
"""

import contextlib
import json
import os
import signal
import stat
import subprocess
import time

import pytest

from conftest import ROOT
from system.netns import Lab, sh

VM1_MAC, VM2_MAC = "02:00:00:00:01:05", "02:00:00:00:02:05"

CONFIG = f"""
interfaces:
  - {{ name: vm1, network: red, peer_mac: "{VM1_MAC}", peer_addresses: [10.1.0.5] }}
  - {{ name: vm2, network: red, peer_mac: "{VM2_MAC}", peer_addresses: [10.2.0.5] }}
networks:
  - {{ name: red, vni: 100, gateways: [10.1.0.1/24, 10.2.0.1/24] }}
"""


def binaries():
    subprocess.run(["cargo", "build", "-q", "-p", "ovrd", "-p", "ovr-cli"], cwd=ROOT, check=True)
    return ROOT / "target" / "debug" / "ovrd", ROOT / "target" / "debug" / "ovrctl"


class Host:
    """One ovrd in a namespace, with its own socket and state file (started by PID,
    stopped by that PID only)."""

    def __init__(self, ovrd, ovrctl, ns, tmp, *args):
        self.ovrd, self.ovrctl, self.ns, self.tmp = ovrd, ovrctl, ns, tmp
        self.args = [str(a) for a in args]
        self.socket, self.state = tmp / "ovrd.sock", tmp / "state.json"
        self.config = tmp / "host.yaml"
        self.config.write_text(CONFIG)
        self.proc = None

    def start(self):
        self.log = self.tmp / f"ovrd-{time.monotonic_ns()}.log"
        out = open(self.log, "w")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, str(self.ovrd), "--config", str(self.config),
             "--api-socket", str(self.socket), "--state", str(self.state), *self.args],
            stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while "forwarding" not in self.log.read_text():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.time() < deadline, "ovrd did not start"
            time.sleep(0.05)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def ctl(self, *args, check=True):
        r = subprocess.run([str(self.ovrctl), "--socket", str(self.socket), *args],
                           capture_output=True, text=True, timeout=30)
        if check:
            assert r.returncode == 0, f"ovrctl {' '.join(args)}: {r.stdout}{r.stderr}"
        return r

    def json(self, *args):
        return json.loads(self.ctl("--json", *args).stdout)


def two_vms(lab):
    """Namespace `a` (the host) with two workloads on veths: vm1 10.1.0.5/24 and vm2
    10.2.0.5/24, each routed through its gateway (.1); returns the three namespaces."""
    a, vm1, vm2 = lab.ns("a"), lab.ns("vm1"), lab.ns("vm2")
    lab.veth(a, "vm1", vm1, "eth0", None, VM1_MAC)
    lab.veth(a, "vm2", vm2, "eth0", None, VM2_MAC)
    for ns, net in ((vm1, "10.1.0"), (vm2, "10.2.0")):
        sh("ip", "addr", "add", f"{net}.5/24", "dev", "eth0", ns=ns)
        sh("ip", "route", "add", "default", "via", f"{net}.1", ns=ns)
        # ovr forwards what it receives as it is: checksums must be complete.
        sh("ethtool", "-K", "eth0", "tx", "off", ns=ns)
    return a, vm1, vm2


@contextlib.contextmanager
def started_host(tmp_path, tag, prepare=lambda vm1, vm2: None):
    """A running ovrd (`Host`) between two VM namespaces of a lab of its own (`tag`);
    stopped and the lab removed afterwards. `prepare` runs on the VMs before the start."""
    ovrd, ovrctl = binaries()
    lab = Lab(tag)
    h = None
    try:
        a, vm1, vm2 = two_vms(lab)
        prepare(vm1, vm2)
        h = Host(ovrd, ovrctl, a, tmp_path)
        h.vm1, h.vm2 = vm1, vm2
        h.start()
        yield h
    finally:
        if h is not None:
            h.stop()
        lab.close()


@pytest.fixture
def host(tmp_path):
    extra = lambda vm1, vm2: sh("ip", "addr", "add", "10.9.0.5/32", "dev", "eth0", ns=vm2)  # noqa: E731
    with started_host(tmp_path, "ag", extra) as h:
        yield h


def ping(ns, dst, count=3):
    r = sh("ping", "-c", str(count), "-i", "0.2", "-W", "1", dst, ns=ns, check=False)
    return r.returncode == 0, r.stdout + r.stderr


def test_routes_change_live_through_ovrctl_and_survive_a_restart(host):
    h = host
    assert stat.S_IMODE(os.stat(h.socket).st_mode) == 0o600
    ok, out = ping(h.vm1, "10.2.0.5")
    assert ok, out
    ok, _ = ping(h.vm1, "10.9.0.5", count=2)
    assert not ok, "10.9.0.5 answered before any route to it"

    h.ctl("routes", "add", "network=red", "prefix=10.9.0.0/24", "nexthop=vm2")
    assert [r["nexthop"] for r in h.json("routes")] == ["vm2"]
    ok, out = ping(h.vm1, "10.9.0.5")
    assert ok, out

    # Change it to a next hop that drops: 10.9.0.5 goes dark, 10.2.0.5 stays reachable.
    h.ctl("nexthops", "add", "name=sink", "kind=drop")
    ids = h.json("ids")["nexthops"]
    h.ctl("routes", "set", "network=red", "prefix=10.9.0.0/24", "nexthop=sink")
    ok, _ = ping(h.vm1, "10.9.0.5", count=2)
    assert not ok
    ok, out = ping(h.vm1, "10.2.0.5")
    assert ok, out
    assert h.json("ids")["nexthops"] == ids

    # In use: refused, naming the route.
    r = h.ctl("nexthops", "del", "sink", check=False)
    assert r.returncode != 0 and "10.9.0.0/24" in r.stderr, r.stderr
    h.ctl("routes", "set", "network=red", "prefix=10.9.0.0/24", "nexthop=vm2")
    h.ctl("nexthops", "del", "sink")
    ok, out = ping(h.vm1, "10.9.0.5")
    assert ok, out

    # Flows and counters come from the worker.
    flows = h.json("flows", "--addr", "10.9.0.5")
    assert flows["matched"] >= 1, flows
    assert any(f["packets"] > 0 and f["action"] == "forward" for f in flows["flows"]), flows
    counters = h.json("counters")
    vm1 = next(i for i in counters["interfaces"] if i["name"] == "vm1")
    assert vm1["rx_packets"] > 0, counters
    # The pings with no route, then into the drop next hop, were counted.
    drops = h.json("dropstats")
    assert drops.get("no_route", 0) > 0 and drops.get("nexthop_drop", 0) > 0, drops

    # A restart with the same configuration file resumes with the API's route.
    h.stop()
    h.start()
    assert [r["prefix"] for r in h.json("routes")] == ["10.9.0.0/24"]
    ok, out = ping(h.vm1, "10.9.0.5")
    assert ok, out

    h.ctl("routes", "del", "red", "10.9.0.0/24")
    ok, _ = ping(h.vm1, "10.9.0.5", count=2)
    assert not ok


def test_ovrctl_errors_are_clear(host, tmp_path):
    h = host
    r = subprocess.run([str(h.ovrctl), "--socket", str(tmp_path / "none.sock"), "routes"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and "ovrd is not running" in r.stderr, r.stderr
    r = h.ctl("routes", "show", "red", "10.77.0.0/24", check=False)
    assert r.returncode != 0 and "not found" in r.stderr, r.stderr
    r = h.ctl("routes", "add", "network=red", "prefix=10.77.0.1/24", "nexthop=vm2", check=False)
    assert r.returncode != 0 and "field: prefix" in r.stderr, r.stderr
    assert h.json("routes") == []
