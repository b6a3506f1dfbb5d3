"""Explicit route targets against FRR (docs/bgp.md, "Route targets"): the kernel host's
VNI 100 imports and exports 65000:4242 only (`route-target import|export` under `vni
100`, which replace FRR's automatic 65000:100), and ovr's network `red` says the same
(`route_targets: {import: ["65000:4242"], export: ["65000:4242"]}`). With the automatic
route targets the two would not take each other's routes; with these, FRR installs ovr's
workload in the kernel's fdb, ovr installs the kernel host's, and traffic crosses."""

import json
import os
from functools import partial

import pytest

from system import netns
from system.netns import sh
from system.test_evpn import BGPD_CONF, KW_MAC, W1_MAC, config, fdb, kernel_and_ovr

until = partial(netns.until, timeout=20.0, every=0.2)

RT = "65000:4242"
FRR_CONF = BGPD_CONF.replace("  advertise-all-vni\n", f"""  advertise-all-vni
  vni 100
   route-target import {RT}
   route-target export {RT}
  exit-vni
""")


@pytest.fixture(scope="module")
def evpn(tmp_path_factory):
    yield from kernel_and_ovr(
        tmp_path_factory.mktemp("evpn-rt"), f"ovrrt{os.getpid() % 10000}", FRR_CONF,
        f', route_targets: {{ import: ["{RT}"], export: ["{RT}"] }}')


def test_both_sides_take_each_others_routes_by_the_configured_route_target(evpn):
    assert f"route-target import {RT}" in FRR_CONF
    ovrd, frr = evpn["ovrd"], evpn["frr"]
    # FRR's VNI has only the configured route targets.
    vni = json.loads(frr.vtysh("show bgp l2vpn evpn vni 100 json") or "{}")
    assert vni.get("importRts") == [RT] and vni.get("exportRts") == [RT], vni
    # FRR imports ovr's routes by 65000:4242: w1's MAC towards h1's VTEP, from BGP.
    line = until("w1's MAC towards h1 in the kernel host's fdb", lambda: next(
        (ln for ln in fdb(evpn["k"]).splitlines()
         if ln.startswith(W1_MAC) and "dst 192.0.2.1 " in ln + " "), None), timeout=30)
    assert "extern_learn" in line, fdb(evpn["k"])
    # ovr imports FRR's: the kernel workload's MAC towards the kernel host.
    sh("ping", "-c", "1", "-W", "1", "10.1.0.99", ns=evpn["kw"], check=False)
    until("kw's MAC installed from FRR's type 2", lambda: any(
        b["mac"] == KW_MAC and b["nexthop"] == "evpn:192.0.2.9:100" and b["installed"]
        for b in ovrd.get("/api/v1/bgp/learnt")["bridge"]))
    # Every route either way carries 65000:4242, and ovr's none of the automatic one.
    routes = ovrd.get("/api/v1/bgp/routes")
    out = [r for r in routes if r["direction"] == "out"]
    learnt = [r for r in routes if r["direction"] == "in"]
    assert out and learnt, routes
    assert all(r["route_targets"] == [RT] for r in out), out
    assert all(RT in r["route_targets"] for r in learnt), learnt
    assert not [r for r in routes if "refused" in r], routes
    v = ovrd.get("/api/v1/bgp/installed")
    assert v["installed"]["macs"] >= 1 and not v["skipped"], v
    # Traffic both ways.
    r = sh("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.1.0.50", ns=evpn["w1"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    r = sh("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.1.0.11", ns=evpn["kw"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
