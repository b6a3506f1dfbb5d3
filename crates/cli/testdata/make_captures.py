#!/usr/bin/env python3
"""Makes the capture files crates/cli/src/capfile.rs is tested on, with tools other than
ovr: scapy writes them, editcap truncates them to a snapshot length and converts them to
pcapng. Run from anywhere: python3 crates/cli/testdata/make_captures.py"""

import pathlib
import subprocess

from scapy.all import ARP, ICMP, IP, UDP, Ether, IPv6, PcapNgWriter, Raw, conf, wrpcap
from scapy.layers.l2 import CookedLinux, CookedLinuxV2

conf.verb = 0
HERE = pathlib.Path(__file__).resolve().parent
A, B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"


def stamp(pkts, start=1700000000.0):
    for i, p in enumerate(pkts):
        p.time = start + i * 0.001
    return pkts


def main():
    # Ethernet: an ARP (42 bytes), a UDP packet (142 bytes), an ICMP echo (98 bytes).
    eth = stamp([
        Ether(src=A, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="10.1.0.11", pdst="10.1.0.1", hwsrc=A),
        Ether(src=A, dst=B) / IP(src="10.1.0.11", dst="10.1.0.21") / UDP(sport=1000, dport=2000) / Raw(b"x" * 100),
        Ether(src=A, dst=B) / IP(src="10.1.0.11", dst="10.1.0.21") / ICMP() / Raw(b"y" * 56),
    ])
    wrpcap(str(HERE / "eth.pcap"), eth)
    # Snapshot length 60: the UDP and ICMP packets keep 60 bytes of theirs.
    subprocess.run(["editcap", "-F", "pcap", "-s", "60", str(HERE / "eth.pcap"), str(HERE / "eth-snap60.pcap")], check=True)
    subprocess.run(["editcap", "-F", "pcapng", str(HERE / "eth.pcap"), str(HERE / "eth.pcapng")], check=True)
    # The same, written by scapy's own pcapng writer.
    w = PcapNgWriter(str(HERE / "eth-scapy.pcapng"))
    for p in eth:
        w.write(p)
    w.close()
    # Raw IP (101): an IPv4 and an IPv6 UDP packet.
    raw = stamp([
        IP(src="10.1.0.11", dst="10.1.0.21") / UDP(sport=1000, dport=2000) / Raw(b"r4"),
        IPv6(src="fd00::11", dst="fd00::21") / UDP(sport=1000, dport=2000) / Raw(b"r6"),
    ])
    wrpcap(str(HERE / "raw.pcap"), raw, linktype=101)
    # Linux cooked (113, 276): an IPv4 UDP packet to this host, from A.
    sll = stamp([CookedLinux(pkttype=0, lladdrtype=1, lladdrlen=6, src=bytes.fromhex("02000000000a") + b"\0\0", proto=0x0800)
                 / IP(src="10.1.0.11", dst="10.1.0.21") / UDP(sport=1000, dport=2000) / Raw(b"sl")])
    wrpcap(str(HERE / "sll.pcap"), sll, linktype=113)
    sll2 = stamp([CookedLinuxV2(proto=0x0800, ifindex=2, lladdrtype=1, pkttype=0, lladdrlen=6, src=bytes.fromhex("02000000000a") + b"\0\0")
                  / IP(src="10.1.0.11", dst="10.1.0.21") / UDP(sport=1000, dport=2000) / Raw(b"s2")])
    wrpcap(str(HERE / "sll2.pcap"), sll2, linktype=276)


if __name__ == "__main__":
    main()
