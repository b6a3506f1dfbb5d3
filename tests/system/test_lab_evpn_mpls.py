"""The lab over BGP EVPN with an MPLS network (`ovrctl lab up --evpn --encap mpls-udp`,
and `mpls-gre`): two ovr hosts and the FRR route reflector, etcd carrying only the intent.
Each host advertises its network with the encapsulation community (13: MPLS in UDP, 11:
MPLS in GRE) and the labels it allocated for it (the cluster's first pair, 100000 for
bridged frames, 100001 for routed packets, as the second label of its MAC/IP routes); the
other installs next hops over MPLS with those labels from BGP alone, and the workloads
ping. On the underlay, scapy reads the frames: MPLS in UDP to port 6635 (or in GRE,
protocol 0x8847) under label 100000 with the bottom of stack set, the workloads' Ethernet
frame inside. The kernel here has neither MPLS nor GRE: only ovr hosts take part."""

import os
import subprocess
from functools import partial

import pytest
from scapy.all import GRE, IP, UDP, Ether, ICMP
from scapy.contrib.mpls import MPLS

from conftest import ROOT
from system import netns
from system.capture import Capture
from system.overlay_lab import OverlayLab, sh

# BGP converges in seconds, not milliseconds.
until = partial(netns.until, timeout=40.0, every=0.3)

L2, L3 = 100000, 100001
TUNNEL_TYPE = {"mpls_udp": 13, "mpls_gre": 11}


@pytest.fixture(scope="module", params=["mpls_udp", "mpls_gre"])
def lab(request):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    encap = request.param
    tag = "u" if encap == "mpls_udp" else "g"
    with OverlayLab(f"ovrm{os.getpid() % 10000}{tag}", "--evpn", "--encap", encap.replace("_", "-")) as lab:
        lab.encap = encap
        yield lab


def workloads(lab):
    return {w["name"]: w for w in lab.status()["workloads"]}


def test_mpls_routes_carry_their_encapsulation_and_labels_and_are_installed(lab):
    w = workloads(lab)
    suffix = lab.encap
    for h, other in (("h1", 2), ("h2", 1)):
        mac = w[f"h{other}-t1-w1"]["mac"]
        nexthop = f"evpn:192.0.2.{other}:{suffix}:{L2}"
        until(f"{h} bridges h{other}-t1-w1 over {suffix} from BGP", lambda: any(
            b["mac"] == mac and b["nexthop"] == nexthop and b["installed"]
            for b in lab.json(h, "bgp", "learnt")["bridge"]))
        c = lab.json(h, "config")
        hops = {n["name"]: n for n in c["nexthops"]}
        assert (hops[nexthop]["encap"], hops[nexthop]["label"]) == (suffix, L2), hops[nexthop]
        assert hops[nexthop]["tunnel"] == f"evpn:192.0.2.{other}", hops[nexthop]
        # Its address is routed with the other label.
        routed = f"evpn:192.0.2.{other}:{suffix}:{L3}"
        until(f"{h}'s host route to h{other}-t1-w1", lambda: any(
            r["prefix"] == f"10.1.0.{other}1/32" and r["nexthop"] == routed and r["installed"]
            for r in lab.json(h, "bgp", "learnt")["routes"]))
        hops = {n["name"]: n for n in lab.json(h, "config")["nexthops"]}
        assert (hops[routed]["encap"], hops[routed]["label"]) == (suffix, L3), hops[routed]
        assert nexthop in c["networks"][0]["flood"], c["networks"]
        # The routes as BGP carries them: in from the other host (through the
        # reflector), out from this one, each with the encapsulation and labels.
        routes = lab.json(h, "bgp", "routes")
        for direction, vtep in (("in", f"192.0.2.{other}"), ("out", h.replace("h", "192.0.2."))):
            mine = [r for r in routes if r["direction"] == direction and r["next_hop"] == vtep]
            kinds = sorted(r["type"] for r in mine)
            assert kinds == ["imet", "mac", "mac-ip", "prefix"], mine
            for r in mine:
                assert r["tunnel_type"] == TUNNEL_TYPE[suffix], r
                if r["type"] == "imet":
                    assert r["pmsi"]["label"] == L2, r
                elif r["type"] == "mac":
                    assert (r["label"], r.get("routed_label")) == (L2, None), r
                elif r["type"] == "mac-ip":
                    assert (r["label"], r["routed_label"]) == (L2, L3), r
                else:
                    assert r["label"] == L3, r
        assert not [r for r in routes if "refused" in r], routes
        installed = lab.json(h, "bgp", "installed")
        assert installed["source"] == "evpn" and not installed["unresolved"], installed
        assert not {"wrong_encap", "no_routed_label"} & set(installed["skipped"]), installed
        assert not {"bad_label", "unknown_encap"} & set(installed["refused"]), installed
        assert installed["installed"]["macs"] >= 1 and installed["installed"]["hosts"] >= 1, installed


def test_workloads_ping_over_mpls_and_the_underlay_carries_the_label(lab, tmp_path):
    sniff = Capture(lab.ns("underlay"), "br0", tmp_path / "underlay.pcap")
    try:
        ping = lambda src, dst: sh("ping", "-c", "3", "-i", "0.2", "-W", "2", dst,
                                   ns=lab.ns(src), check=False)
        r = until("h1-t1-w1 reaches h2-t1-w1", lambda: (lambda p: p if p.returncode == 0 else None)(
            ping("h1-t1-w1", "10.1.0.21")))
        r = ping("h2-t1-w1", "10.1.0.11")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        captured = sniff.packets()
    seen = []
    for p in captured:
        if IP not in p:
            continue
        if lab.encap == "mpls_udp":
            if UDP not in p or p[UDP].dport != 6635:
                continue
            inner = bytes(p[UDP].payload)
        else:
            if GRE not in p or p[GRE].proto != 0x8847:
                continue
            inner = bytes(p[GRE].payload)
        m = MPLS(inner)
        e = Ether(bytes(m.payload))
        if ICMP in e:
            seen.append((p[IP].src, p[IP].dst, m.label, m.s, e[IP].src, e[IP].dst, e[ICMP].type))
    # Echo requests h1 -> h2 and replies h2 -> h1, each under the label its receiver
    # advertised for bridged frames, bottom of stack, the workloads' frame inside.
    assert ("192.0.2.1", "192.0.2.2", L2, 1, "10.1.0.11", "10.1.0.21", 8) in seen, seen
    assert ("192.0.2.2", "192.0.2.1", L2, 1, "10.1.0.21", "10.1.0.11", 0) in seen, seen
    assert ("192.0.2.2", "192.0.2.1", L2, 1, "10.1.0.21", "10.1.0.11", 8) in seen, seen
    assert all(s[2] == L2 and s[3] == 1 for s in seen), seen
