"""EVPN routes from FRR into ovr's tables, end to end at a small size: 2,000 static MACs
added to the kernel bridge of a router running FRR (zebra + bgpd, `advertise-all-vni`)
become 2,000 type 2 routes at ovr's gobgpd, and ovrd installs every one (checked
through ovrd's API, entry by entry: MAC, VTEP, VNI) while ovr's workload keeps pinging
the router's through the tunnel; the MACs deleted, every route is withdrawn and ovrd
removes them all. The same path as `bench/evpn_e2e.py --source frr` at 100,000 routes
(topology: tests/system/evpn_frr.py)."""

import os
from functools import partial

import pytest

from system import netns
from system.evpn_frr import KW_MAC, VTEP, FrrLab, mac
from system.evpn_router import VNI

N = 2000

# ovr's gobgpd takes most of it (GoBGP 3.10 checks MAC mobility per route received).
until = partial(netns.until, timeout=60.0, every=0.2)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = FrrLab(f"ovrf{os.getpid() % 1000}", tmp_path_factory.mktemp("evpn-frr"))
    try:
        lab.wait_ready()
        yield lab
    finally:
        lab.close()


def macs(lab):
    return lab.installed()["installed"]["macs"]


def test_macs_on_frrs_bridge_are_installed_in_ovr_and_withdrawn(lab):
    nh_name = f"evpn:{VTEP}:{VNI}"
    received = lab.received()
    ping = lab.ping(interval=0.02)
    lab.finish(lab.macs(0, N, add=True))
    until("every MAC installed", lambda: macs(lab) == N + 1)
    assert lab.received() == received + N

    c = lab.ovrd.get("/api/v1/config")
    bridge = {b["mac"]: b for b in lab.ovrd.get("/api/v1/bgp/learnt")["bridge"]}
    assert all(b["installed"] for b in bridge.values())
    nexthops = {n["name"]: n for n in c["nexthops"]}
    tunnels = {t["name"]: t for t in c["tunnels"]}
    assert sorted(bridge) == sorted([mac(i) for i in range(N)] + [KW_MAC])
    for m, b in bridge.items():
        assert (b["network"], b["nexthop"]) == ("red", nh_name), b
    nh = nexthops[nh_name]
    assert (nh["kind"], nh["vni"]) == ("tunnel", VNI), nh
    assert tunnels[nh["tunnel"]]["remote"] == VTEP, tunnels
    # As ovr's gobgpd has them from FRR: a sample, field by field.
    routes = {r["mac"]: r for r in lab.ovrd.get("/api/v1/bgp/routes")
              if r["direction"] == "in" and r["type"] == "mac"}
    for i in range(0, N, 97):
        r = routes[mac(i)]
        assert (r["next_hop"], r["label"], r["encap"], r["route_targets"]) == \
            (VTEP, VNI, "vxlan", [f"65000:{VNI}"]), r

    lab.finish(lab.macs(0, N, add=False))
    until("every MAC withdrawn", lambda: macs(lab) == 1)
    assert lab.received() == received
    bridge = [b["mac"] for b in lab.ovrd.get("/api/v1/bgp/learnt")["bridge"]]
    assert bridge == [KW_MAC], bridge
    # Forwarding went on meanwhile: the router's workload stayed reachable.
    sent, got = lab.delivered(ping)
    assert sent > 20 and got >= 0.95 * sent, (sent, got)
