#!/usr/bin/env python3
"""Writes ovr's golden scenarios: `make_scenarios.py OUTDIR`.

Each scenario is a directory OUTDIR/<scenario>/ with

* config.yaml          the configuration of host A (the host under test);
* in-<ifname>.pcap     what each interface receives;
* expected-<ifname>.pcap  exactly what each interface must transmit, in order;
* expected.json        the drop counters that must result ({"drops": {reason: n}}, every
                       drop expected, no other allowed) and notes for the test.

Every expected packet is built here by scapy from the contract in docs/dataplane.md,
independently of ovr: nothing is ever copied from ovr's output. Every field scapy would
randomise or take from the clock is fixed (IP id, TTL, ports, sequence numbers,
timestamps), and the pcap files are written by hand, so that running this twice gives the
same bytes.

Conventions the test relies on:

* Each input packet has its own timestamp (1 ms apart, in the order the scenario sends
  them); each expected output packet carries the timestamp of the input that causes it
  (what `ovrctl replay` stamps its output with).
* The outer UDP source port of VXLAN and MPLS-in-UDP is ovr's flow hash: the expected
  packets carry 0 there (and, over IPv6, a UDP checksum of 0); the test masks both sides.
* ECMP scenarios (expected.json "ecmp") carry the first member's outer destination in
  the expected packets; the test checks the real one is a member and masks it.
"""

import json
import pathlib
import struct
import sys
from collections import Counter, defaultdict

import yaml
from scapy.all import (ARP, DNS, DNSQR, GRE, ICMP, IP, TCP, UDP, VXLAN, Dot1Q, Ether, ICMPv6EchoReply,
                       ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr,
                       ICMPv6NDOptSrcLLAddr, IPv6, Padding, Raw, conf)
from scapy.contrib.mpls import MPLS

conf.verb = 0

# --- The topology -------------------------------------------------------------------

RMAC = "00:00:5e:00:01:00"          # the default router (gateway) MAC
BCAST = "ff:ff:ff:ff:ff:ff"
A_MAC, A_IP = "02:00:00:00:00:0a", "192.0.2.1"
B_MAC, B_IP = "02:00:00:00:00:0b", "192.0.2.2"
C_MAC, C_IP = "02:00:00:00:00:0c", "192.0.2.3"

VM1_MAC, VM1_IP, VM1_IP6 = "02:00:00:00:01:05", "10.1.0.5", "fd00:1::5"
VM3_MAC, VM3_IP, VM3_IP6 = "02:00:00:00:01:07", "10.1.0.7", "fd00:1::7"
# A workload behind B, in red.
REM_MAC, REM_IP, REM_IP6 = "02:00:00:00:02:09", "10.1.0.9", "fd00:1::9"
# Routed destinations behind B.
FAR_IP, FAR_IP6 = "10.2.0.9", "fd00:2::9"

GW4, GW6 = "10.1.0.1", "fd00:1::1"

BASE_TIME = 1_700_000_000


# --- Configuration builders ---------------------------------------------------------

A_IP6, B_IP6 = "2001:db8::1", "2001:db8::2"


def underlay(v6=False):
    addrs = [f"{A_IP}/24"] + ([f"{A_IP6}/64"] if v6 else [])
    return {"name": "uplink", "kind": "underlay", "mac": A_MAC, "addresses": addrs}


def workload(name, network, peer_mac, peer_addresses, mac=None, policy=None):
    d = {"name": name, "kind": "workload", "network": network}
    if mac is not None:
        d["mac"] = mac
    if policy is not None:
        d["policy"] = policy
    d["peer_mac"] = peer_mac
    d["peer_addresses"] = list(peer_addresses)
    return d


def network(name, vni, gateways=("10.1.0.1/24", "fd00:1::1/64"), flood=(), policy=None):
    d = {"name": name, "vni": vni, "gateways": list(gateways)}
    if flood:
        d["flood"] = list(flood)
    if policy is not None:
        d["policy"] = policy
    return d


def tunnel(name, remote, remote_mac):
    return {"name": name, "underlay": "uplink", "remote": remote, "remote_mac": remote_mac,
            "local": A_IP}


TUNNEL_B = tunnel("B", B_IP, B_MAC)
TUNNEL_C = tunnel("C", C_IP, C_MAC)


def nh_tunnel(name, tun, encap, **kw):
    d = {"name": name, "kind": "tunnel", "tunnel": tun, "encap": encap}
    d.update(kw)
    return d


def config(interfaces, networks, tunnels=(), nexthops=(), routes=(), bridge=(), labels=(), v6=False):
    c = {"interfaces": [underlay(v6)] + list(interfaces), "networks": list(networks)}
    if tunnels:
        c["tunnels"] = list(tunnels)
    if nexthops:
        c["nexthops"] = list(nexthops)
    if routes:
        c["routes"] = list(routes)
    if bridge:
        c["bridge"] = list(bridge)
    if labels:
        c["labels"] = list(labels)
    return c


def route(net, prefix, nexthop):
    return {"network": net, "prefix": prefix, "nexthop": nexthop}


# --- Packet builders ----------------------------------------------------------------

def ip4(src, dst, ttl=64, ident=1, **kw):
    kw.setdefault("flags", 0)
    kw.setdefault("tos", 0)
    return IP(src=src, dst=dst, ttl=ttl, id=ident, **kw)


def ip6(src, dst, hlim=64, **kw):
    kw.setdefault("tc", 0)
    kw.setdefault("fl", 0)
    return IPv6(src=src, dst=dst, hlim=hlim, **kw)


def udp(sport, dport, payload=b"payload!"):
    return UDP(sport=sport, dport=dport) / Raw(payload)


def tcp(sport, dport, flags="S", seq=1000, ack=0, payload=b""):
    t = TCP(sport=sport, dport=dport, flags=flags, seq=seq, ack=ack, window=8192, options=[],
            urgptr=0)
    return t / Raw(payload) if payload else t


def outer_ip(dst=B_IP, dst_mac=B_MAC, proto=None):
    """Outer Ethernet + IPv4 of what host A sends into a tunnel (the contract's table)."""
    kw = {} if proto is None else {"proto": proto}
    return Ether(src=A_MAC, dst=dst_mac) / IP(src=A_IP, dst=dst, ttl=64, id=0, flags="DF",
                                               tos=0, **kw)


def vxlan_out(inner, vni=100, dst=B_IP, dst_mac=B_MAC):
    # Source port masked to 0 (ovr's flow hash), checksum 0 over IPv4.
    return outer_ip(dst, dst_mac) / UDP(sport=0, dport=4789, chksum=0) / VXLAN(flags=0x08, vni=vni) / inner


def mpls_udp_out(inner, label, dst=B_IP, dst_mac=B_MAC):
    return (outer_ip(dst, dst_mac) / UDP(sport=0, dport=6635, chksum=0)
            / MPLS(label=label, cos=0, s=1, ttl=64) / inner)


def mpls_gre_out(inner, label, dst=B_IP, dst_mac=B_MAC):
    return outer_ip(dst, dst_mac, proto=47) / GRE(proto=0x8847) / MPLS(label=label, cos=0, s=1, ttl=64) / inner


def from_vtep(src=B_IP, src_mac=B_MAC, dst=A_IP, dst_mac=A_MAC, ident=0x100, **kw):
    """Outer Ethernet + IPv4 of what a remote VTEP sends to host A."""
    kw.setdefault("flags", "DF")
    return Ether(src=src_mac, dst=dst_mac) / IP(src=src, dst=dst, ttl=64, id=ident, tos=0, **kw)


def partial_udp_sum(pkt):
    """The UDP checksum field Linux leaves for a device to finish (CHECKSUM_PARTIAL): the
    pseudo-header sum alone, not inverted, computed here from the header's addresses."""
    pkt = Ether(bytes(pkt))
    ip = pkt.payload  # the outer IP header (the inner packet has one too)
    addrs = bytes(ip)[12:20] if ip.version == 4 else bytes(ip)[8:40]
    s = sum(struct.unpack(f"!{len(addrs) // 2}H", addrs)) + 17 + pkt[UDP].len
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def vxlan_in(inner, vni=100, sport=50000, ident=0x100, chksum=0, **kw):
    u = UDP(sport=sport, dport=4789) if chksum is None else UDP(sport=sport, dport=4789, chksum=chksum)
    return from_vtep(ident=ident, **kw) / u / VXLAN(flags=0x08, vni=vni) / inner


def mpls_udp_in(inner, label, sport=50000, ident=0x100, **kw):
    return (from_vtep(ident=ident, **kw) / UDP(sport=sport, dport=6635, chksum=0)
            / MPLS(label=label, cos=0, s=1, ttl=64) / inner)


def mpls_gre_in(inner, label, ident=0x100, **kw):
    return from_vtep(ident=ident, proto=47, **kw) / GRE(proto=0x8847) / MPLS(label=label, cos=0, s=1, ttl=64) / inner


def routed(pkt, new_ttl=None):
    """The IP packet `pkt` (no Ethernet) as routing leaves it: TTL/hop limit down by one
    (recomputing the IPv4 checksum from scratch, which the incremental update must match)."""
    p = pkt.copy()
    if IP in p and not isinstance(p, IPv6):
        p[IP].ttl = p[IP].ttl - 1 if new_ttl is None else new_ttl
        p[IP].chksum = None
    else:
        p[IPv6].hlim = p[IPv6].hlim - 1 if new_ttl is None else new_ttl
    return p


def l3(pkt):
    """A packet as scapy bytes re-dissected from its IP header (checksums fixed)."""
    b = bytes(pkt)
    return IP(b) if b[0] >> 4 == 4 else IPv6(b)


# --- Scenario bookkeeping -----------------------------------------------------------

class Scenario:
    def __init__(self, name, cfg, notes=()):
        self.name = name
        self.cfg = cfg
        self.notes = list(notes)
        self.inputs = defaultdict(list)
        self.expected = defaultdict(list)
        self.drops = Counter()
        self.extra = {}
        self.n = 0

    def send(self, ifname, pkt, out=(), drop=None):
        """Interface `ifname` receives `pkt`; it must cause exactly `out` (a list of
        (ifname, packet)) and the drop `drop` (a reason name) if given."""
        ts = (BASE_TIME + self.n // 1000, (self.n % 1000) * 1000)
        self.n += 1
        self.inputs[ifname].append((ts, bytes(pkt)))
        for oif, opkt in out:
            self.expected[oif].append((ts, bytes(opkt)))
        if drop:
            self.drops[drop] += 1

    def write(self, outdir: pathlib.Path):
        d = outdir / self.name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.yaml").write_text(
            f"# Golden scenario {self.name}: host A's configuration (see make_scenarios.py).\n"
            + yaml.safe_dump(self.cfg, sort_keys=False, default_flow_style=False))
        for ifname, pkts in sorted(self.inputs.items()):
            write_pcap(d / f"in-{ifname}.pcap", pkts)
        for ifname, pkts in sorted(self.expected.items()):
            write_pcap(d / f"expected-{ifname}.pcap", pkts)
        exp = {"drops": dict(sorted(self.drops.items())), "packets_in": self.n}
        exp.update(self.extra)
        exp["notes"] = self.notes
        (d / "expected.json").write_text(json.dumps(exp, indent=2, sort_keys=True) + "\n")


def write_pcap(path, pkts):
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for (sec, usec), data in pkts:
        out.append(struct.pack("<IIII", sec, usec, len(data), len(data)))
        out.append(data)
    path.write_bytes(b"".join(out))


# --- The scenarios ------------------------------------------------------------------

def vm1():
    return workload("vm1", "red", VM1_MAC, [VM1_IP, VM1_IP6])


def vm3(ip6=False):
    return workload("vm3", "red", VM3_MAC, [VM3_IP] + ([VM3_IP6] if ip6 else []))


def s_l2_vxlan():
    cfg = config(
        [vm1()], [network("red", 100)], [TUNNEL_B],
        [nh_tunnel("b_vxlan", "B", "vxlan", vni=100)],
        bridge=[{"network": "red", "mac": REM_MAC, "nexthop": "b_vxlan"}])
    s = Scenario("l2_vxlan", cfg, [
        "Bridged frames from vm1 to a MAC behind B go out in VXLAN (VNI 100) unchanged;",
        "Ethernet padding after the IP packet is removed before encapsulation;",
        "VXLAN from B for vm1's MAC is delivered as the inner frame, unchanged.",
    ])
    out = lambda inner: [("uplink", vxlan_out(inner))]
    e = Ether(src=VM1_MAC, dst=REM_MAC)
    p = e / ip4(VM1_IP, REM_IP, ident=11) / udp(1000, 2000, b"hello over vxlan")
    s.send("vm1", p, out(p))
    p = e / ip4(VM1_IP, REM_IP, ident=12) / tcp(40000, 80, "S", seq=1111)
    s.send("vm1", p, out(p))
    p = e / ip4(VM1_IP, REM_IP, ident=13, flags="DF") / tcp(40000, 80, "PA", seq=1112, ack=5001, payload=b"GET / HTTP/1.0\r\n\r\n")
    s.send("vm1", p, out(p))
    # A short frame with Ethernet padding (a NIC pads to 60 bytes): the padding goes.
    p = e / ip4(VM1_IP, REM_IP, ident=14) / udp(1000, 2000, b"x")
    s.send("vm1", p / Padding(b"\x00" * (60 - len(p))), out(p))
    p6 = e / ip6(VM1_IP6, REM_IP6, hlim=64) / udp(1001, 2001, b"v6 bridged")
    s.send("vm1", p6, out(p6))
    # From B: replies, and a new flow; one with a (valid) outer UDP checksum.
    back = Ether(src=REM_MAC, dst=VM1_MAC)
    q = back / ip4(REM_IP, VM1_IP, ident=21) / udp(2000, 1000, b"reply")
    s.send("uplink", vxlan_in(q, ident=0x201), [("vm1", q)])
    q = back / ip4(REM_IP, VM1_IP, ident=22) / tcp(80, 40000, "SA", seq=5000, ack=1112)
    s.send("uplink", vxlan_in(q, ident=0x202, chksum=None), [("vm1", q)])
    q = back / ip6(REM_IP6, VM1_IP6) / udp(2001, 1001, b"v6 reply")
    s.send("uplink", vxlan_in(q, ident=0x203), [("vm1", q)])
    q = back / ip4(REM_IP, VM1_IP, ident=23) / udp(3000, 3001, b"new flow from B")
    s.send("uplink", vxlan_in(q, ident=0x204, sport=50001), [("vm1", q)])
    return s


def s_l3_vxlan():
    cfg = config(
        [vm1()], [network("red", 100)], [TUNNEL_B],
        [nh_tunnel("b_vxlan", "B", "vxlan", vni=100)],
        routes=[route("red", "10.2.0.0/16", "b_vxlan"), route("red", "fd00:2::/64", "b_vxlan")])
    s = Scenario("l3_vxlan", cfg, [
        "Routed into VXLAN: inner Ethernet src = dst = router MAC, TTL/hop limit - 1;",
        "routed from VXLAN to vm1: Ethernet src = vm1's interface MAC (the router MAC by",
        "default), dst = vm1's peer MAC, TTL unchanged (decremented once, at the ingress host).",
    ])
    gw = Ether(src=VM1_MAC, dst=RMAC)
    inner_eth = Ether(src=RMAC, dst=RMAC)
    for i, pl in enumerate([udp(1000, 2000, b"routed udp"), tcp(40000, 443, "S", seq=7)]):
        p = ip4(VM1_IP, FAR_IP, ttl=64, ident=30 + i) / pl
        s.send("vm1", gw / p, [("uplink", vxlan_out(inner_eth / routed(p)))])
    p = ip4(VM1_IP, FAR_IP, ttl=17, ident=33, flags="DF") / udp(1000, 2000, b"ttl 17")
    s.send("vm1", gw / p, [("uplink", vxlan_out(inner_eth / routed(p)))])
    p6 = ip6(VM1_IP6, FAR_IP6, hlim=64) / udp(1000, 2000, b"routed v6")
    s.send("vm1", gw / p6, [("uplink", vxlan_out(inner_eth / routed(p6)))])
    # Replies from B (B routed them: inner Ethernet router MAC to router MAC).
    to_vm1 = Ether(src=RMAC, dst=VM1_MAC)
    q = ip4(FAR_IP, VM1_IP, ttl=63, ident=40) / udp(2000, 1000, b"reply")
    s.send("uplink", vxlan_in(inner_eth / q, ident=0x301), [("vm1", to_vm1 / q)])
    q = ip4(FAR_IP, VM1_IP, ttl=63, ident=41) / tcp(443, 40000, "SA", seq=100, ack=8)
    s.send("uplink", vxlan_in(inner_eth / q, ident=0x302), [("vm1", to_vm1 / q)])
    q6 = ip6(FAR_IP6, VM1_IP6, hlim=63) / udp(2000, 1000, b"reply v6")
    s.send("uplink", vxlan_in(inner_eth / q6, ident=0x303), [("vm1", to_vm1 / q6)])
    return s


def s_l3_mpls(kind):
    encap = "mpls_" + kind
    out = mpls_udp_out if kind == "udp" else mpls_gre_out
    inn = mpls_udp_in if kind == "udp" else mpls_gre_in
    vm1_mac = "02:00:00:00:aa:01"
    cfg = config(
        [workload("vm1", "red", VM1_MAC, [VM1_IP, VM1_IP6], mac=vm1_mac)],
        [network("red", 100)], [TUNNEL_B],
        [nh_tunnel("b_mpls", "B", encap, label=1000)],
        routes=[route("red", "10.2.0.0/16", "b_mpls"), route("red", "fd00:2::/64", "b_mpls")],
        labels=[{"label": 2001, "nexthop": "vm1"}])
    s = Scenario(f"l3_mpls_{kind}", cfg, [
        f"Routed into MPLS-in-{kind.upper()} (label 1000): no inner Ethernet, TTL - 1;",
        "label 2001 (next hop vm1) from B: the IP packet gets an Ethernet header, src = vm1's",
        "interface MAC (set to 02:00:00:00:aa:01 here), dst = vm1's peer MAC; TTL unchanged.",
    ])
    gw = Ether(src=VM1_MAC, dst=RMAC)
    p = ip4(VM1_IP, FAR_IP, ident=50) / udp(1000, 2000, b"into mpls")
    s.send("vm1", gw / p, [("uplink", out(routed(p), 1000))])
    p = ip4(VM1_IP, FAR_IP, ident=51, flags="DF") / tcp(40000, 22, "S", seq=9)
    s.send("vm1", gw / p, [("uplink", out(routed(p), 1000))])
    p6 = ip6(VM1_IP6, FAR_IP6, hlim=40) / udp(1000, 2000, b"v6 into mpls")
    s.send("vm1", gw / p6, [("uplink", out(routed(p6), 1000))])
    to_vm1 = Ether(src=vm1_mac, dst=VM1_MAC)
    q = ip4(FAR_IP, VM1_IP, ttl=63, ident=60) / udp(2000, 1000, b"from mpls")
    s.send("uplink", inn(q, 2001, ident=0x401), [("vm1", to_vm1 / q)])
    q = ip4(FAR_IP, VM1_IP, ttl=63, ident=61) / tcp(22, 40000, "SA", seq=1, ack=10)
    s.send("uplink", inn(q, 2001, ident=0x402), [("vm1", to_vm1 / q)])
    q6 = ip6(FAR_IP6, VM1_IP6, hlim=39) / udp(2000, 1000, b"v6 from mpls")
    s.send("uplink", inn(q6, 2001, ident=0x403), [("vm1", to_vm1 / q6)])
    return s


def s_l2_mpls(kind):
    encap = "mpls_" + kind
    out = mpls_udp_out if kind == "udp" else mpls_gre_out
    inn = mpls_udp_in if kind == "udp" else mpls_gre_in
    cfg = config(
        [vm1()], [network("red", 100)], [TUNNEL_B],
        [nh_tunnel("b_mpls_l2", "B", encap, label=1001),
         {"name": "red_bridge", "kind": "vrf", "network": "red", "inner": "ethernet"}],
        bridge=[{"network": "red", "mac": REM_MAC, "nexthop": "b_mpls_l2"}],
        labels=[{"label": 3001, "nexthop": "red_bridge"}])
    s = Scenario(f"l2_mpls_{kind}", cfg, [
        "tshark: an Ethernet frame right after the label (no control word, RFC 4448 section 4.6",
        "makes it optional) is only recognisable by the label, hence tshark_args.",
        f"Bridged frames to a MAC behind B go out whole inside MPLS-in-{kind.upper()} (label 1001);",
        "label 3001 (next hop: vrf red, inner ethernet) from B: the inner frame is bridged in red.",
    ])
    s.extra["tshark_args"] = ["-d", "mpls.label==1001,pwethnocw"]
    e = Ether(src=VM1_MAC, dst=REM_MAC)
    p = e / ip4(VM1_IP, REM_IP, ident=70) / udp(1000, 2000, b"l2 in mpls")
    s.send("vm1", p, [("uplink", out(p, 1001))])
    p = e / ip4(VM1_IP, REM_IP, ident=71) / tcp(40000, 80, "S", seq=3)
    s.send("vm1", p, [("uplink", out(p, 1001))])
    p6 = e / ip6(VM1_IP6, REM_IP6) / udp(1000, 2000, b"l2 v6 in mpls")
    s.send("vm1", p6, [("uplink", out(p6, 1001))])
    back = Ether(src=REM_MAC, dst=VM1_MAC)
    q = back / ip4(REM_IP, VM1_IP, ident=80) / udp(2000, 1000, b"l2 from mpls")
    s.send("uplink", inn(q, 3001, ident=0x501), [("vm1", q)])
    q = back / ip4(REM_IP, VM1_IP, ident=81) / tcp(80, 40000, "SA", seq=77, ack=4)
    s.send("uplink", inn(q, 3001, ident=0x502), [("vm1", q)])
    q6 = back / ip6(REM_IP6, VM1_IP6) / udp(2000, 1000, b"l2 v6 from mpls")
    s.send("uplink", inn(q6, 3001, ident=0x503), [("vm1", q6)])
    return s


def s_decap_to_right_workload():
    cfg = config([vm1(), vm3()], [network("red", 100)], [TUNNEL_B],
                 [nh_tunnel("b_vxlan", "B", "vxlan", vni=100)])
    s = Scenario("decap_to_right_workload", cfg, [
        "VXLAN for vm3's MAC (or routed to vm3's address) reaches vm3 only; for vm1's, vm1 only.",
    ])
    q = Ether(src=REM_MAC, dst=VM3_MAC) / ip4(REM_IP, VM3_IP, ident=90) / udp(2000, 1000, b"for vm3")
    s.send("uplink", vxlan_in(q, ident=0x601), [("vm3", q)])
    q = Ether(src=REM_MAC, dst=VM1_MAC) / ip4(REM_IP, VM1_IP, ident=91) / udp(2000, 1000, b"for vm1")
    s.send("uplink", vxlan_in(q, ident=0x602), [("vm1", q)])
    q = ip4(FAR_IP, VM3_IP, ttl=63, ident=92) / udp(2001, 1001, b"routed to vm3")
    s.send("uplink", vxlan_in(Ether(src=RMAC, dst=RMAC) / q, ident=0x603),
           [("vm3", Ether(src=RMAC, dst=VM3_MAC) / q)])
    q = Ether(src=REM_MAC, dst=VM3_MAC) / ip4(REM_IP, VM3_IP, ident=93) / tcp(2002, 22, "S", seq=5)
    s.send("uplink", vxlan_in(q, ident=0x604), [("vm3", q)])
    return s


def s_tenant_isolation():
    VMB_MAC = "02:00:00:00:03:05"
    cfg = config(
        [vm1(), workload("vmb1", "blue", VMB_MAC, [VM1_IP])],
        [network("red", 100, flood=["red_b"]), network("blue", 200, gateways=["10.1.0.1/24"], flood=["blue_b"])],
        [TUNNEL_B],
        [nh_tunnel("red_b", "B", "vxlan", vni=100), nh_tunnel("blue_b", "B", "vxlan", vni=200)],
        routes=[route("red", "10.3.0.0/16", "red_b")])
    s = Scenario("tenant_isolation", cfg, [
        "red (VNI 100, vm1 10.1.0.5) and blue (VNI 200, vmb1 also 10.1.0.5): VNI 100 reaches",
        "only vm1, VNI 200 only vmb1; vm1's broadcast and unknown unicast (even to vmb1's MAC)",
        "flood in red only (to B with VNI 100); blue has no route to 10.3.0.0/16 (no_route).",
    ])
    eth = lambda dst: Ether(src=REM_MAC, dst=dst)
    q = eth(VM1_MAC) / ip4(REM_IP, VM1_IP, ident=100) / udp(2000, 1000, b"red bridged")
    s.send("uplink", vxlan_in(q, vni=100, ident=0x701), [("vm1", q)])
    q = eth(VMB_MAC) / ip4(REM_IP, VM1_IP, ident=101) / udp(2000, 1000, b"blue bridged")
    s.send("uplink", vxlan_in(q, vni=200, ident=0x702), [("vmb1", q)])
    q = ip4(FAR_IP, VM1_IP, ttl=63, ident=102) / udp(2000, 1000, b"red routed")
    s.send("uplink", vxlan_in(Ether(src=RMAC, dst=RMAC) / q, vni=100, ident=0x703),
           [("vm1", Ether(src=RMAC, dst=VM1_MAC) / q)])
    q = ip4(FAR_IP, VM1_IP, ttl=63, ident=103) / udp(2000, 1000, b"blue routed")
    s.send("uplink", vxlan_in(Ether(src=RMAC, dst=RMAC) / q, vni=200, ident=0x704),
           [("vmb1", Ether(src=RMAC, dst=VMB_MAC) / q)])
    arp = Ether(src=VM1_MAC, dst=BCAST) / ARP(op=1, hwsrc=VM1_MAC, psrc=VM1_IP, hwdst="00:00:00:00:00:00", pdst=REM_IP)
    s.send("vm1", arp, [("uplink", vxlan_out(arp, vni=100))])
    p = Ether(src=VM1_MAC, dst=VMB_MAC) / ip4(VM1_IP, "10.1.0.50", ident=104) / udp(1000, 2000, b"to blue's mac")
    s.send("vm1", p, [("uplink", vxlan_out(p, vni=100))])
    p = ip4(VM1_IP, "10.3.0.9", ident=105) / udp(1000, 2000, b"red to 10.3")
    s.send("vm1", Ether(src=VM1_MAC, dst=RMAC) / p,
           [("uplink", vxlan_out(Ether(src=RMAC, dst=RMAC) / routed(p), vni=100))])
    p = ip4(VM1_IP, "10.3.0.9", ident=106) / udp(1000, 2000, b"blue to 10.3")
    s.send("vmb1", Ether(src=VMB_MAC, dst=RMAC) / p, drop="no_route")
    return s


def s_policy():
    VM9_MAC, VM9_IP = "02:00:00:00:09:09", "10.9.0.9"
    red_policy = [
        {"action": "deny", "src_network": "red", "dst_network": "red", "protocol": "udp", "dst_ports": "53"},
        {"action": "allow", "src_network": "red", "dst_network": "green", "protocol": "tcp", "dst_ports": "80"},
    ]
    cfg = config(
        [workload("vm1", "red", VM1_MAC, [VM1_IP], policy=True),
         workload("vm3", "red", VM3_MAC, [VM3_IP], policy=True),
         workload("vm9", "green", VM9_MAC, [VM9_IP], policy=True)],
        [network("red", 100, gateways=["10.1.0.1/24"], policy=red_policy),
         network("green", 300, gateways=["10.9.0.1/24"])],
        routes=[route("red", "10.9.0.0/24", "vm9"), route("green", "10.1.0.0/24", "vm1")])
    s = Scenario("policy", cfg, [
        "red allows tcp/80 to green; green has no rules (between networks: deny).",
        "vm1 -> vm9 tcp/80 and its reply pass (stateful); tcp/22 and vm9's new flow to vm1 are",
        "policy_denied; red's deny udp/53 within red drops bridged and routed vm1 -> vm3 (udp/54",
        "passes: within a network the default is allow).",
    ])
    to_gw = lambda src: Ether(src=src, dst=RMAC)
    p = ip4(VM1_IP, VM9_IP, ident=110) / tcp(40000, 80, "S", seq=100)
    s.send("vm1", to_gw(VM1_MAC) / p, [("vm9", Ether(src=RMAC, dst=VM9_MAC) / routed(p))])
    q = ip4(VM9_IP, VM1_IP, ident=111) / tcp(80, 40000, "SA", seq=900, ack=101)
    s.send("vm9", to_gw(VM9_MAC) / q, [("vm1", Ether(src=RMAC, dst=VM1_MAC) / routed(q))])
    p = ip4(VM1_IP, VM9_IP, ident=112) / tcp(40000, 80, "A", seq=101, ack=901)
    s.send("vm1", to_gw(VM1_MAC) / p, [("vm9", Ether(src=RMAC, dst=VM9_MAC) / routed(p))])
    p = ip4(VM1_IP, VM9_IP, ident=113) / tcp(40001, 22, "S", seq=200)
    s.send("vm1", to_gw(VM1_MAC) / p, drop="policy_denied")
    q = ip4(VM9_IP, VM1_IP, ident=114) / tcp(40002, 5000, "S", seq=300)
    s.send("vm9", to_gw(VM9_MAC) / q, drop="policy_denied")
    p = Ether(src=VM1_MAC, dst=VM3_MAC) / ip4(VM1_IP, VM3_IP, ident=115) / UDP(sport=1053, dport=53) / DNS(id=1, rd=1, qd=DNSQR(qname="a.example."))
    s.send("vm1", p, drop="policy_denied")
    p = ip4(VM1_IP, VM3_IP, ident=116) / UDP(sport=1054, dport=53) / DNS(id=2, rd=1, qd=DNSQR(qname="b.example."))
    s.send("vm1", to_gw(VM1_MAC) / p, drop="policy_denied")
    p = Ether(src=VM1_MAC, dst=VM3_MAC) / ip4(VM1_IP, VM3_IP, ident=117) / udp(1055, 54, b"not dns")
    s.send("vm1", p, [("vm3", p)])
    return s


def s_ecmp():
    cfg = config(
        [vm1()], [network("red", 100)], [TUNNEL_B, TUNNEL_C],
        [nh_tunnel("b_vxlan", "B", "vxlan", vni=100), nh_tunnel("c_vxlan", "C", "vxlan", vni=100),
         {"name": "bc", "kind": "ecmp", "members": ["b_vxlan", "c_vxlan"]}],
        routes=[route("red", "10.4.0.0/16", "bc")])
    s = Scenario("ecmp", cfg, [
        "10.4.0.0/16 -> ecmp [B, C]: 64 flows sent 3 times each; every packet of a flow to the",
        "same VTEP, each VTEP at least 16 flows. Expected packets carry B as outer destination",
        "(placeholder: the test checks the real one is B or C with its MAC, then masks it).",
    ])
    s.extra["ecmp"] = {"interface": "uplink", "members": [[B_IP, B_MAC], [C_IP, C_MAC]],
                       "min_flows_per_member": 16}
    s.extra["many_flows"] = True
    for rnd in range(3):
        for i in range(64):
            p = ip4(VM1_IP, f"10.4.{i // 8}.{1 + i % 8 * 3}", ident=1000 + rnd * 64 + i) / udp(20000 + i * 7, 5000 + i % 5, b"ecmp flow %02d" % i)
            s.send("vm1", Ether(src=VM1_MAC, dst=RMAC) / p,
                   [("uplink", vxlan_out(Ether(src=RMAC, dst=RMAC) / routed(p)))])
    return s


def s_gateway():
    cfg = config([vm1(), vm3()], [network("red", 100, flood=["b_vxlan", "c_vxlan"])],
                 [TUNNEL_B, TUNNEL_C],
                 [nh_tunnel("b_vxlan", "B", "vxlan", vni=100), nh_tunnel("c_vxlan", "C", "vxlan", vni=100)])
    s = Scenario("gateway", cfg, [
        "The virtual gateway answers ARP (42-byte reply, no padding), NS for fd00:1::1 (NA with",
        "R, S, O and the target link-layer option, hop limit 255), pings to 10.1.0.1 and",
        "fd00:1::1 (TTL/hop limit 64; IP id, flags and traffic class kept from the request, an",
        "assumption: the contract does not say). ARP for vm3's address is flooded to vm3 and",
        "to B and C in VXLAN. An ARP request for the gateway that arrives through a tunnel is",
        "not answered: it is flooded to the local workloads.",
    ])
    req = Ether(src=VM1_MAC, dst=BCAST) / ARP(op=1, hwsrc=VM1_MAC, psrc=VM1_IP, hwdst="00:00:00:00:00:00", pdst=GW4)
    rep = Ether(src=RMAC, dst=VM1_MAC) / ARP(op=2, hwsrc=RMAC, psrc=GW4, hwdst=VM1_MAC, pdst=VM1_IP)
    assert len(rep) == 42
    s.send("vm1", req / Padding(b"\x00" * 18), [("vm1", rep)])
    # Unpadded (as from a tap) too; and from vm3.
    s.send("vm1", req, [("vm1", rep)])
    req3 = Ether(src=VM3_MAC, dst=BCAST) / ARP(op=1, hwsrc=VM3_MAC, psrc=VM3_IP, hwdst="00:00:00:00:00:00", pdst=GW4)
    s.send("vm3", req3, [("vm3", Ether(src=RMAC, dst=VM3_MAC) / ARP(op=2, hwsrc=RMAC, psrc=GW4, hwdst=VM3_MAC, pdst=VM3_IP))])
    # NS to the solicited-node multicast address, from the global and the link-local address.
    for src in (VM1_IP6, "fe80::5"):
        ns = (Ether(src=VM1_MAC, dst="33:33:ff:00:00:01") / ip6(src, "ff02::1:ff00:1", hlim=255)
              / ICMPv6ND_NS(tgt=GW6) / ICMPv6NDOptSrcLLAddr(lladdr=VM1_MAC))
        na = (Ether(src=RMAC, dst=VM1_MAC) / ip6(GW6, src, hlim=255)
              / ICMPv6ND_NA(R=1, S=1, O=1, tgt=GW6) / ICMPv6NDOptDstLLAddr(lladdr=RMAC))
        assert len(na) == 86
        s.send("vm1", ns, [("vm1", na)])
    # Pings.
    ping = Ether(src=VM1_MAC, dst=RMAC) / ip4(VM1_IP, GW4, ttl=50, ident=0x1234, flags="DF") / ICMP(type=8, code=0, id=7, seq=1) / Raw(b"ping the gateway")
    pong = Ether(src=RMAC, dst=VM1_MAC) / ip4(GW4, VM1_IP, ttl=64, ident=0x1234, flags="DF") / ICMP(type=0, code=0, id=7, seq=1) / Raw(b"ping the gateway")
    s.send("vm1", ping, [("vm1", pong)])
    ping6 = Ether(src=VM1_MAC, dst=RMAC) / ip6(VM1_IP6, GW6, hlim=50) / ICMPv6EchoRequest(id=8, seq=2, data=b"ping6 the gateway")
    pong6 = Ether(src=RMAC, dst=VM1_MAC) / ip6(GW6, VM1_IP6, hlim=64) / ICMPv6EchoReply(id=8, seq=2, data=b"ping6 the gateway")
    s.send("vm1", ping6, [("vm1", pong6)])
    # ARP for another workload: flooded, unchanged.
    arp3 = Ether(src=VM1_MAC, dst=BCAST) / ARP(op=1, hwsrc=VM1_MAC, psrc=VM1_IP, hwdst="00:00:00:00:00:00", pdst=VM3_IP)
    s.send("vm1", arp3, [("vm3", arp3), ("uplink", vxlan_out(arp3, dst=B_IP, dst_mac=B_MAC)),
                         ("uplink", vxlan_out(arp3, dst=C_IP, dst_mac=C_MAC))])
    # ARP for the gateway from a remote workload, through a tunnel: not answered here.
    rarp = Ether(src=REM_MAC, dst=BCAST) / ARP(op=1, hwsrc=REM_MAC, psrc=REM_IP, hwdst="00:00:00:00:00:00", pdst=GW4)
    s.send("uplink", vxlan_in(rarp, ident=0x801), [("vm1", rarp), ("vm3", rarp)])
    return s


def s_flood():
    cfg = config([vm1(), vm3()], [network("red", 100, flood=["b_vxlan", "c_vxlan"])],
                 [TUNNEL_B, TUNNEL_C],
                 [nh_tunnel("b_vxlan", "B", "vxlan", vni=100), nh_tunnel("c_vxlan", "C", "vxlan", vni=100)])
    s = Scenario("flood", cfg, [
        "Broadcast, multicast and unknown unicast from vm1 go to vm3 and, in VXLAN, to B and C;",
        "what arrives from B goes to local workloads only (split horizon).",
    ])

    def everywhere_but(src, p):
        outs = [(w, p) for w in ("vm1", "vm3") if w != src]
        return outs + [("uplink", vxlan_out(p, dst=B_IP, dst_mac=B_MAC)),
                       ("uplink", vxlan_out(p, dst=C_IP, dst_mac=C_MAC))]

    dhcp = (Ether(src=VM1_MAC, dst=BCAST) / ip4("0.0.0.0", "255.255.255.255", ttl=64, ident=120)
            / udp(40067, 40068, b"broadcast to all of red"))
    s.send("vm1", dhcp, everywhere_but("vm1", dhcp))
    mc6 = Ether(src=VM1_MAC, dst="33:33:00:00:00:01") / ip6("fe80::5", "ff02::1", hlim=1) / udp(40053, 40053, b"all nodes")
    s.send("vm1", mc6, everywhere_but("vm1", mc6))
    unk = Ether(src=VM1_MAC, dst="02:00:00:00:02:77") / ip4(VM1_IP, "10.1.0.77", ident=121) / udp(1000, 2000, b"who has this mac")
    s.send("vm1", unk, everywhere_but("vm1", unk))
    arp = Ether(src=VM3_MAC, dst=BCAST) / ARP(op=1, hwsrc=VM3_MAC, psrc=VM3_IP, hwdst="00:00:00:00:00:00", pdst=REM_IP)
    s.send("vm3", arp, everywhere_but("vm3", arp))
    # From B: local workloads only.
    bc = (Ether(src=REM_MAC, dst=BCAST) / ip4(REM_IP, "10.1.0.255", ident=122) / udp(40137, 40137, b"broadcast from B"))
    s.send("uplink", vxlan_in(bc, ident=0x901), [("vm1", bc), ("vm3", bc)])
    rarp = Ether(src=REM_MAC, dst=BCAST) / ARP(op=1, hwsrc=REM_MAC, psrc=REM_IP, hwdst="00:00:00:00:00:00", pdst=VM1_IP)
    s.send("uplink", vxlan_in(rarp, ident=0x902), [("vm1", rarp), ("vm3", rarp)])
    unk = Ether(src=REM_MAC, dst="02:00:00:00:01:99") / ip4(REM_IP, "10.1.0.99", ident=123) / udp(1000, 2000, b"unknown from B")
    s.send("uplink", vxlan_in(unk, ident=0x903), [("vm1", unk), ("vm3", unk)])
    return s


def s_ttl():
    cfg = config([vm1(), vm3(ip6=True)], [network("red", 100)], [TUNNEL_B],
                 [nh_tunnel("b_vxlan", "B", "vxlan", vni=100)],
                 routes=[route("red", "10.2.0.0/16", "b_vxlan")])
    s = Scenario("ttl", cfg, [
        "Routed with TTL/hop limit <= 1: ttl_expired; with 2: forwarded with 1. A routed packet",
        "from a tunnel is not decremented again, so inner TTL 1 from B is delivered (TTL 1).",
    ])
    gw = Ether(src=VM1_MAC, dst=RMAC)
    to_vm3 = Ether(src=RMAC, dst=VM3_MAC)
    for ttl, ident in ((2, 130), (1, 131), (0, 132)):
        p = ip4(VM1_IP, VM3_IP, ttl=ttl, ident=ident) / udp(1000, 2000, b"ttl %d" % ttl)
        if ttl >= 2:
            s.send("vm1", gw / p, [("vm3", to_vm3 / routed(p))])
        else:
            s.send("vm1", gw / p, drop="ttl_expired")
    for hlim in (2, 1):
        p6 = ip6(VM1_IP6, VM3_IP6, hlim=hlim) / udp(1000, 2000, b"hlim %d" % hlim)
        if hlim >= 2:
            s.send("vm1", gw / p6, [("vm3", to_vm3 / routed(p6))])
        else:
            s.send("vm1", gw / p6, drop="ttl_expired")
    p = ip4(VM1_IP, FAR_IP, ttl=2, ident=133) / udp(1000, 2000, b"ttl 2 to B")
    s.send("vm1", gw / p, [("uplink", vxlan_out(Ether(src=RMAC, dst=RMAC) / routed(p)))])
    p = ip4(VM1_IP, FAR_IP, ttl=1, ident=134) / udp(1000, 2000, b"ttl 1 to B")
    s.send("vm1", gw / p, drop="ttl_expired")
    q = ip4(FAR_IP, VM1_IP, ttl=1, ident=135) / udp(2000, 1000, b"ttl 1 from B")
    s.send("uplink", vxlan_in(Ether(src=RMAC, dst=RMAC) / q, ident=0xa01),
           [("vm1", Ether(src=RMAC, dst=VM1_MAC) / q)])
    return s


def s_mtu():
    cfg = config(
        [vm1(), vm3()], [network("red", 100)], [TUNNEL_B],
        [nh_tunnel("b_vxlan", "B", "vxlan", vni=100)],
        bridge=[{"network": "red", "mac": REM_MAC, "nexthop": "b_vxlan"}])
    s = Scenario("mtu", cfg, [
        "The uplink's MTU is 1500: a bridged frame whose VXLAN packet is exactly 1500 bytes",
        "of IP goes out; one byte more is mtu_exceeded. A 1501-byte IP packet bridged to vm3",
        "(MTU 1500) is mtu_exceeded too; 1500 bytes pass.",
    ])
    e = Ether(src=VM1_MAC, dst=REM_MAC)
    # Outer IP = 20 + 8 + 8 + 14 + inner IP length: 1500 when the inner IP is 1450.
    for ip_len, ident in ((1450, 150), (1451, 151)):
        p = e / ip4(VM1_IP, REM_IP, ident=ident) / udp(1000, 2000, b"m" * (ip_len - 28))
        if ip_len == 1450:
            s.send("vm1", p, [("uplink", vxlan_out(p))])
        else:
            s.send("vm1", p, drop="mtu_exceeded")
    local = Ether(src=VM1_MAC, dst=VM3_MAC)
    for ip_len, ident in ((1500, 152), (1501, 153)):
        p = local / ip4(VM1_IP, VM3_IP, ident=ident) / udp(1000, 2000, b"l" * (ip_len - 28))
        if ip_len == 1500:
            s.send("vm1", p, [("vm3", p)])
        else:
            s.send("vm1", p, drop="mtu_exceeded")
    return s


def s_unknown():
    cfg = config([vm1()], [network("red", 100)], labels=[{"label": 2001, "nexthop": "vm1"}])
    s = Scenario("unknown", cfg, [
        "VXLAN with VNI 999: unknown_vni; MPLS label 4242 (UDP) and 4243 (GRE): unknown_label;",
        "VXLAN to 192.0.2.99 or to another MAC: not_for_vtep. Controls: VNI 100 and label 2001.",
    ])
    q = Ether(src=REM_MAC, dst=VM1_MAC) / ip4(REM_IP, VM1_IP, ident=140) / udp(2000, 1000, b"control")
    s.send("uplink", vxlan_in(q, vni=100, ident=0xb01), [("vm1", q)])
    s.send("uplink", vxlan_in(q, vni=999, ident=0xb02), drop="unknown_vni")
    ip = ip4(FAR_IP, VM1_IP, ttl=63, ident=141) / udp(2000, 1000, b"label")
    s.send("uplink", mpls_udp_in(ip, 2001, ident=0xb03), [("vm1", Ether(src=RMAC, dst=VM1_MAC) / ip)])
    s.send("uplink", mpls_udp_in(ip, 4242, ident=0xb04), drop="unknown_label")
    s.send("uplink", mpls_gre_in(ip, 4243, ident=0xb05), drop="unknown_label")
    s.send("uplink", vxlan_in(q, vni=100, ident=0xb06, dst="192.0.2.99"), drop="not_for_vtep")
    s.send("uplink", vxlan_in(q, vni=100, ident=0xb07, dst_mac="02:00:00:00:00:99"), drop="not_for_vtep")
    return s


def s_malformed():
    cfg = config([vm1(), vm3()], [network("red", 100)], labels=[{"label": 2001, "nexthop": "vm1"}])
    s = Scenario("malformed", cfg, [
        "One broken packet per layer, each with its parser's drop reason; workload frames are",
        "bridged to vm3's MAC and tunnel packets target vm1, so that nothing broken may pass.",
    ])
    e = Ether(src=VM1_MAC, dst=VM3_MAC)
    good = e / ip4(VM1_IP, VM3_IP, ident=150) / udp(1000, 2000, b"control")
    s.send("vm1", good, [("vm3", good)])
    s.send("vm1", bytes(e)[:10], drop="eth_truncated")
    s.send("vm1", e / ip4(VM1_IP, VM3_IP, ident=151, chksum=0x1234) / udp(1000, 2000, b"bad csum"), drop="ipv4_bad_checksum")
    s.send("vm1", e / ip4(VM1_IP, VM3_IP, ident=152, ihl=4) / udp(1000, 2000, b"ihl 4"), drop="ipv4_bad_header_length")
    s.send("vm1", e / ip4(VM1_IP, VM3_IP, ident=153, len=200) / udp(1000, 2000, b"long"), drop="ipv4_truncated")
    s.send("vm1", e / ip4(VM1_IP, VM3_IP, ident=154) / TCP(sport=1000, dport=80, dataofs=4, flags="S", seq=1, window=8192) / Raw(b"xxxxxxxx"),
           drop="tcp_bad_data_offset")
    s.send("vm1", e / ip4(VM1_IP, VM3_IP, ident=155) / UDP(sport=1000, dport=2000, len=6) / Raw(b"short len"), drop="udp_bad_length")
    s.send("vm1", e / ip6(VM1_IP6, VM3_IP6, plen=100) / udp(1000, 2000, b"v6 short"), drop="ipv6_truncated")
    s.send("vm1", Ether(src=VM1_MAC, dst=VM3_MAC) / Dot1Q(vlan=10, prio=0, id=0) / ip4(VM1_IP, VM3_IP, ident=156) / udp(1000, 2000, b"tagged"),
           drop="vlan_not_allowed")
    s.send("vm1", Ether(src=VM1_MAC, dst=VM3_MAC, type=0x88B5) / Raw(b"\x00" * 46), drop="unsupported_ethertype")
    # From the underlay.
    q = Ether(src=REM_MAC, dst=VM1_MAC) / ip4(REM_IP, VM1_IP, ident=160) / udp(2000, 1000, b"inner")
    s.send("uplink", vxlan_in(q, ident=0xc01), [("vm1", q)])
    s.send("uplink", from_vtep(ident=0xc02) / UDP(sport=50000, dport=4789, chksum=0) / VXLAN(flags=0x00, vni=100) / q,
           drop="vxlan_bad_flags")
    s.send("uplink", from_vtep(ident=0xc03) / UDP(sport=50000, dport=4789, chksum=0) / Raw(b"\x08\x00\x00\x00"),
           drop="vxlan_truncated")
    s.send("uplink", from_vtep(ident=0xc04) / UDP(sport=50000, dport=6635, chksum=0) / MPLS(label=2001, cos=0, s=0, ttl=64),
           drop="mpls_truncated")
    ip = ip4(FAR_IP, VM1_IP, ttl=63, ident=161) / udp(2000, 1000, b"gre v1")
    s.send("uplink", from_vtep(ident=0xc05, proto=47) / Raw(b"\x00\x01\x88\x47") / MPLS(label=2001, cos=0, s=1, ttl=64) / ip,
           drop="gre_bad_version")
    good_csum = vxlan_in(q, ident=0xc06, chksum=None)
    good_csum = Ether(bytes(good_csum))
    bad = good_csum[UDP].chksum ^ 0x00FF
    s.send("uplink", vxlan_in(q, ident=0xc06, chksum=bad), drop="udp_bad_checksum")
    # A checksum still to be finished by a device (a sender on this host, through a veth)
    # is taken, as the kernel takes it.
    s.send("uplink", vxlan_in(q, ident=0xc08, chksum=partial_udp_sum(vxlan_in(q, ident=0xc08))),
           [("vm1", q)])
    s.send("uplink", vxlan_in(q, ident=0xc07, flags="MF", frag=0), drop="outer_fragment")
    return s


def s_ipv6_underlay():
    tun = {"name": "B6", "underlay": "uplink", "remote": B_IP6, "remote_mac": B_MAC, "local": A_IP6}
    cfg = config(
        [vm1()], [network("red", 100)], [tun],
        [nh_tunnel("b6_vxlan", "B6", "vxlan", vni=100), nh_tunnel("b6_mpls", "B6", "mpls_udp", label=1002)],
        routes=[route("red", "10.2.0.0/16", "b6_vxlan")],
        bridge=[{"network": "red", "mac": REM_MAC, "nexthop": "b6_mpls"}],
        labels=[{"label": 2001, "nexthop": "vm1"}], v6=True)
    s = Scenario("ipv6_underlay", cfg, [
        "Tunnels over an IPv6 underlay: outer hop limit 64, traffic class 0, flow label = the",
        "inner flow hash (masked to 0 in the expected packets, checked per flow by the test),",
        "UDP checksum computed (masked to 0, verified by the test). From B over IPv6, a UDP",
        "checksum of zero is accepted (RFC 6935) and a non-zero one must verify.",
    ])
    s.extra["tshark_args"] = ["-d", "mpls.label==1002,pwethnocw"]

    def out6(shim, inner, dport):
        return (Ether(src=A_MAC, dst=B_MAC) / IPv6(src=A_IP6, dst=B_IP6, hlim=64, tc=0, fl=0, nh=17)
                / UDP(sport=0, dport=dport, chksum=0) / shim / inner)

    def in6(shim, inner, dport, chksum=0):
        u = UDP(sport=50000, dport=dport) if chksum is None else UDP(sport=50000, dport=dport, chksum=chksum)
        return Ether(src=B_MAC, dst=A_MAC) / IPv6(src=B_IP6, dst=A_IP6, hlim=64, tc=0, fl=0) / u / shim / inner

    p = ip4(VM1_IP, FAR_IP, ident=170) / udp(1000, 2000, b"routed over v6")
    s.send("vm1", Ether(src=VM1_MAC, dst=RMAC) / p,
           [("uplink", out6(VXLAN(flags=0x08, vni=100), Ether(src=RMAC, dst=RMAC) / routed(p), 4789))])
    p = ip4(VM1_IP, FAR_IP, ident=171) / tcp(40000, 443, "S", seq=1)
    s.send("vm1", Ether(src=VM1_MAC, dst=RMAC) / p,
           [("uplink", out6(VXLAN(flags=0x08, vni=100), Ether(src=RMAC, dst=RMAC) / routed(p), 4789))])
    f = Ether(src=VM1_MAC, dst=REM_MAC) / ip4(VM1_IP, REM_IP, ident=172) / udp(1000, 2000, b"bridged over v6")
    s.send("vm1", f, [("uplink", out6(MPLS(label=1002, cos=0, s=1, ttl=64), f, 6635))])
    q = Ether(src=REM_MAC, dst=VM1_MAC) / ip4(REM_IP, VM1_IP, ident=173) / udp(2000, 1000, b"from B6")
    s.send("uplink", in6(VXLAN(flags=0x08, vni=100), q, 4789, chksum=None), [("vm1", q)])
    q = Ether(src=REM_MAC, dst=VM1_MAC) / ip4(REM_IP, VM1_IP, ident=174) / udp(2000, 1000, b"zero csum")
    s.send("uplink", in6(VXLAN(flags=0x08, vni=100), q, 4789, chksum=0), [("vm1", q)])
    ip = ip4(FAR_IP, VM1_IP, ttl=63, ident=175) / udp(2000, 1000, b"label over v6")
    s.send("uplink", in6(MPLS(label=2001, cos=0, s=1, ttl=64), ip, 6635, chksum=None),
           [("vm1", Ether(src=RMAC, dst=VM1_MAC) / ip)])
    bad = Ether(bytes(in6(VXLAN(flags=0x08, vni=100), q, 4789, chksum=None)))[UDP].chksum ^ 0x0F0F
    s.send("uplink", in6(VXLAN(flags=0x08, vni=100), q, 4789, chksum=bad), drop="udp_bad_checksum")
    left = partial_udp_sum(in6(VXLAN(flags=0x08, vni=100), q, 4789))
    s.send("uplink", in6(VXLAN(flags=0x08, vni=100), q, 4789, chksum=left), [("vm1", q)])
    return s


SCENARIOS = [
    s_l2_vxlan, s_l3_vxlan,
    lambda: s_l3_mpls("udp"), lambda: s_l3_mpls("gre"),
    lambda: s_l2_mpls("udp"), lambda: s_l2_mpls("gre"),
    s_decap_to_right_workload, s_tenant_isolation, s_policy, s_ecmp, s_gateway, s_flood,
    s_ttl, s_mtu, s_unknown, s_malformed, s_ipv6_underlay,
]


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: make_scenarios.py OUTDIR")
    outdir = pathlib.Path(argv[1])
    names = []
    for make in SCENARIOS:
        s = make()
        s.write(outdir)
        names.append(s.name)
    (outdir / "scenarios.txt").write_text("".join(n + "\n" for n in names))


if __name__ == "__main__":
    main(sys.argv)
