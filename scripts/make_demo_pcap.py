#!/usr/bin/env python3
"""Writes the main job's demo capture: overlay packets as a peer would send them, and
malformed ones that ovr must drop under a named reason. Usage: make_demo_pcap.py OUT.pcap"""

import sys

from scapy.all import (ARP, GRE, ICMP, IP, TCP, UDP, VXLAN, Dot1AD, Dot1Q, Ether,
                       ICMPv6EchoRequest, ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr, IPv6,
                       IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, Raw, wrpcap)
from scapy.contrib.mpls import MPLS

UNDERLAY = dict(src="02:00:00:00:01:01", dst="02:00:00:00:02:01")
VM_A = dict(src="02:00:0a:00:00:01", dst="02:00:0a:00:00:02")


def inner_icmp():
    return Ether(**VM_A) / IP(src="10.0.0.1", dst="10.0.0.2", id=1) / ICMP(id=7, seq=1)


def outer(proto_layers):
    return Ether(**UNDERLAY) / IP(src="192.0.2.1", dst="192.0.2.2", id=2) / proto_layers


packets = [
    outer(UDP(sport=51000, dport=4789) / VXLAN(flags=0x08, vni=100) / inner_icmp()),
    outer(UDP(sport=52000, dport=6635) / MPLS(label=1000, s=0, ttl=64) / MPLS(label=17, s=1, ttl=64)
          / IP(src="10.1.0.1", dst="10.1.0.9", id=3) / TCP(sport=40000, dport=80, seq=1, flags="S")),
    outer(GRE(proto=0x8847, key_present=1, key=42) / MPLS(label=2000, s=1, ttl=63)
          / IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=5000, dport=53)),
    Ether(**VM_A) / Dot1AD(vlan=100) / Dot1Q(vlan=200) / IP(src="10.0.0.1", dst="10.0.0.3", id=4) / UDP(sport=1, dport=2),
    Ether(src=VM_A["src"], dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=VM_A["src"], psrc="10.0.0.1", pdst="10.0.0.254"),
    Ether(**VM_A) / IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6ExtHdrHopByHop()
    / IPv6ExtHdrRouting(addresses=[]) / IPv6ExtHdrFragment(id=9, offset=0, m=0) / ICMPv6EchoRequest(id=1, seq=1),
    Ether(src=VM_A["src"], dst="33:33:ff:00:00:fe") / IPv6(src="fe80::1", dst="ff02::1:ff00:fe", hlim=255)
    / ICMPv6ND_NS(tgt="fe80::fe") / ICMPv6NDOptSrcLLAddr(lladdr=VM_A["src"]),
    # Malformed: what a hostile or broken peer sends.
    outer(UDP(sport=1, dport=4789) / Raw(b"\x08\x00\x00\x00")),  # VXLAN header cut short
    Ether(**VM_A, type=0x0800) / Raw(bytes(IP(src="10.0.0.1", dst="10.0.0.2", ihl=3) / UDP())),  # IHL below 5
    Ether(**VM_A) / IP(src="10.0.0.1", dst="10.0.0.2", len=200) / UDP(),  # total length beyond the frame
    outer(UDP(sport=1, dport=4789) / VXLAN(flags=0, vni=5) / inner_icmp()),  # VXLAN without the I flag
    outer(UDP(sport=1, dport=6635) / MPLS(label=99, s=0) / MPLS(label=98, s=0)),  # no bottom of stack
    outer(GRE(proto=0x8847, version=1) / MPLS(label=5, s=1) / IP()),  # GRE version 1
]

wrpcap(sys.argv[1], packets)
