"""The lab over BGP EVPN (`ovrctl lab up --evpn`): a gobgpd beside each host's ovrd and
an FRR bgpd route reflector in a namespace of its own; etcd carries only the intent. The
hosts learn each other through BGP alone: each installs a tunnel named for the other's
VTEP (`evpn:ADDR`, not the cluster's `to-HOST`) with the MAC its ARP resolved, and the
workloads ping each other. `lab status --json` shows the reflector and the speakers.
With `--kernel-host` a host running the kernel's VXLAN and FRR joins over the reflector."""

import json
import os
import subprocess
from functools import partial

import pytest

from conftest import ROOT
from system import netns
from system.overlay_lab import OverlayLab, sh

# BGP converges in seconds, not milliseconds.
until = partial(netns.until, timeout=40.0, every=0.3)


@pytest.fixture(scope="module")
def lab():
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    with OverlayLab(f"ovrev{os.getpid() % 10000}l", "--evpn") as lab:
        yield lab


def status(lab):
    return json.loads(lab.ctl("status", "--json").stdout)


def test_the_hosts_learn_each_other_through_the_reflector_and_their_workloads_ping(lab):
    v = status(lab)
    bgp = v["bgp"]
    assert bgp["reflector"]["running"] and bgp["reflector"]["address"] == "192.0.2.240", bgp
    assert [(x["host"], x["running"]) for x in bgp["speakers"]] == [("h1", True), ("h2", True)]
    for h, other in (("h1", 2), ("h2", 1)):
        def tunnel():
            c = lab.json(h, "config")
            return [t for t in c.get("tunnels") or [] if t["remote"] == f"192.0.2.{other}"]
        t = until(f"{h}'s tunnel to h{other} from BGP", tunnel)
        assert t[0]["name"] == f"evpn:192.0.2.{other}", t
        assert t[0]["remote_mac"] == f"02:00:00:00:00:0{other}", t
        installed = lab.json(h, "bgp", "installed")
        assert installed["source"] == "evpn" and not installed["unresolved"], installed
        n = lab.json(h, "bgp", "neighbors")
        assert [(x["address"], x["state"]) for x in n] == [("192.0.2.240", "established")], n
    # The reflector has both sessions up.
    rr = sh("vtysh", "--vty_socket", bgp["reflector"]["vty_socket_dir"], "-c",
            "show bgp l2vpn evpn summary json", ns=bgp["reflector"]["namespace"]).stdout
    peers = json.loads(rr)["peers"]
    assert {p: x["state"] for p, x in peers.items()} == \
        {"192.0.2.101": "Established", "192.0.2.102": "Established"}, peers
    def ping(src, dst):
        return sh("ping", "-c", "1", "-W", "1", dst, ns=lab.ns(src), check=False).returncode == 0
    until("h1-t1-w1 reaches h2-t1-w1", lambda: ping("h1-t1-w1", "10.1.0.21"))
    assert ping("h2-t1-w1", "10.1.0.11")


def test_a_kernel_host_with_frr_learns_ovrs_workloads_and_traffic_crosses_both_ways():
    """`up --evpn --kernel-host`: the kernel host (bridge + VXLAN device without learning,
    FRR with advertise-all-vni) is a client of the reflector. Before any traffic its
    bridge holds h1-t1-w1's MAC towards h1's VTEP, installed by FRR from BGP; then its
    workload and the ovr hosts' ping each other both ways."""
    with OverlayLab(f"ovrev{os.getpid() % 10000}k", "--evpn", "--kernel-host") as lab:
        v = status(lab)
        assert v["bgp"]["kernel_host"]["running"], v["bgp"]
        w = {x["name"]: x for x in v["workloads"]}
        k = lab.ns("h3")
        def fdb():
            return sh("bridge", "fdb", "show", "dev", "vxlan101", ns=k).stdout
        line = until("h1-t1-w1's MAC in the kernel host's fdb", lambda: next(
            (ln for ln in fdb().splitlines()
             if ln.startswith(w["h1-t1-w1"]["mac"]) and "dst 192.0.2.1 " in ln + " "), None))
        assert "extern_learn" in line, fdb()
        def ping(src, dst):
            return sh("ping", "-c", "1", "-W", "1", dst, ns=lab.ns(src),
                      check=False).returncode == 0
        kw = w["h3-t1-w1"]["address"]
        until("the kernel workload reaches h1-t1-w1", lambda: ping("h3-t1-w1", "10.1.0.11"))
        until("h1-t1-w1 reaches the kernel workload", lambda: ping("h1-t1-w1", kw))
        until("h2-t1-w1 reaches the kernel workload", lambda: ping("h2-t1-w1", kw))
        assert ping("h3-t1-w1", "10.1.0.21")
        # ovr learnt the kernel host's VTEP and workload through BGP.
        installed = lab.json("h1", "bgp", "installed")
        assert any(x["vtep"] == "192.0.2.3" and x["state"] == "resolved"
                   for x in installed["vteps"]), installed
        until("the kernel workload's MAC at h1 from FRR's type 2", lambda: any(
            b["mac"] == w["h3-t1-w1"]["mac"] and b["nexthop"] == "evpn:192.0.2.3:101"
            and b["installed"] for b in lab.json("h1", "bgp", "learnt")["bridge"]), timeout=20)
