"""EVPN routes from a datacenter router into ovr's tables, end to end and at a small size:
2,000 type 2 routes (1,000 MACs, each alone and with its address, over 4 VTEPs) and a
type 3 per VTEP are injected into the router's gobgpd through GoBGP's gRPC API, reach
ovr's gobgpd over BGP, and ovrd installs every one (checked through ovrd's API, entry by
entry: MAC, address, VTEP, VNI); withdrawn the same way, all of it goes. The same path
as bench/evpn_e2e.py at 100,000 routes (topology: tests/system/evpn_router.py)."""

import os
import subprocess
from functools import partial

import pytest

from conftest import ROOT
from system import netns
from system.evpn_router import VNI, VTEPS, RouterLab, ids, route

N = 2000

until = partial(netns.until, timeout=45.0, every=0.2)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-bgp", "--example", "evpn_inject"],
                   cwd=ROOT, check=True)
    lab = RouterLab(f"ovre4t{os.getpid() % 1000}", tmp_path_factory.mktemp("evpn-router"),
                    None, ROOT / "target" / "debug" / "examples" / "evpn_inject")
    try:
        lab.peer()
        lab.wait_established()
        yield lab
    finally:
        lab.close()


def counts(lab):
    return lab.installed()["installed"]


def test_routes_injected_at_the_router_are_installed_in_ovr_and_withdrawn(lab):
    lab.finish(lab.inject(N))
    until("every route installed", lambda: counts(lab) == {
        "tunnels": len(VTEPS), "flood": len(VTEPS), "macs": N // 2, "hosts": N // 2,
        "prefixes": 0})
    v = lab.installed()
    assert v["routes_learnt"] == N + len(VTEPS), v
    assert not v["unresolved"] and not v["refused"], v
    # Each path the watch brought is timed from its event's receipt to installed.
    lat = v["install_latency"]
    assert lat["paths"] >= N + len(VTEPS), lat
    assert 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"], lat

    c = lab.ovrd.get("/api/v1/config")
    tunnels = {t["name"]: t for t in c["tunnels"]}
    nexthops = {n["name"]: n for n in c["nexthops"]}
    learnt = lab.ovrd.get("/api/v1/bgp/learnt")
    bridge = {b["mac"]: b for b in learnt["bridge"]}
    hosts = {r["prefix"]: r for r in learnt["routes"]}
    assert all(x["installed"] for x in learnt["bridge"] + learnt["routes"]), learnt
    assert not c.get("bridge") and not c.get("routes"), "learnt, not configured"
    assert sorted(t["remote"] for t in tunnels.values()) == VTEPS, tunnels
    assert sorted(c["networks"][0]["flood"]) == sorted(f"evpn:{v}:{VNI}" for v in VTEPS)
    for i in ids(N):
        want = route(i)
        nh_name = f"evpn:{want['vtep']}:{VNI}"
        b = bridge[want["mac"]]
        assert (b["network"], b["nexthop"]) == ("red", nh_name), (i, b)
        nh = nexthops[nh_name]
        assert (nh["kind"], nh["vni"]) == ("tunnel", VNI), nh
        assert tunnels[nh["tunnel"]]["remote"] == want["vtep"], (nh, tunnels)
        if want["ip"]:
            r = hosts[want["ip"] + "/32"]
            assert (r["network"], r["nexthop"]) == ("red", nh_name), (i, r)
    assert len(bridge) == N // 2 and len(hosts) == N // 2

    # As ovrd's gobgpd has them: a sample, field by field.
    routes_in = [r for r in lab.ovrd.get("/api/v1/bgp/routes") if r["direction"] == "in"]
    assert len(routes_in) == N + len(VTEPS), len(routes_in)
    assert sorted(r["originator"] for r in routes_in if r["type"] == "imet") == VTEPS
    learnt = {(r["mac"], r["ip"]): r for r in routes_in if r["type"] != "imet"}
    for i in ids(N)[::97]:
        want = route(i)
        r = learnt[(want["mac"], want["ip"])]
        kind = "mac-ip" if want["ip"] else "mac"
        assert (r["type"], r["next_hop"], r["label"], r["encap"], r["route_targets"]) == \
            (kind, want["vtep"], VNI, "vxlan", [f"65000:{VNI}"]), r

    lab.finish(lab.inject(N, withdraw=True))
    until("every route withdrawn", lambda: counts(lab) == {
        "tunnels": 0, "flood": 0, "macs": 0, "hosts": 0, "prefixes": 0})
    c = lab.ovrd.get("/api/v1/config")
    assert not c.get("bridge") and not c.get("routes") and not c.get("tunnels"), c
    assert lab.ovrd.get("/api/v1/bgp/learnt") == {"bridge": [], "routes": []}
    assert not c["networks"][0]["flood"], c["networks"]
    assert not [r for r in lab.ovrd.get("/api/v1/bgp/routes") if r["direction"] == "in"]
    assert lab.installed()["install_latency"]["paths"] >= 2 * (N + len(VTEPS))
