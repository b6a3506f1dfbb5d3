"""A stand-in for a virtual machine on a TAP device, as a hypervisor would give it one.

It opens /dev/net/tun (creating the TAP IFNAME, gone again when this process exits, like
a VM's), sets the link up, then behaves as a minimal IPv4 host with scapy: it answers ARP
and ping for its address, resolves and pings each --ping target, and stays for --hold
seconds answering. It prints one JSON line: which targets answered, and how many echo
requests it answered.

    python3 tapvm.py IFNAME --mac M --ip A [--ping IP ...] [--hold S]
                     [--wait-file F --wait-text T --wait-count N]
"""

import argparse
import fcntl
import json
import os
import select
import struct
import subprocess
import time

from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import ARP, Ether

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    subprocess.run(["ip", "link", "set", name, "up"], check=True)
    return fd


class Host:
    def __init__(self, fd, mac, ip):
        self.fd, self.mac, self.ip = fd, mac, ip
        self.neighbours, self.replies, self.answered = {}, set(), 0

    def send(self, pkt):
        os.write(self.fd, bytes(pkt))

    def poll(self, seconds):
        """Handles every frame arriving within `seconds`."""
        end = time.time() + seconds
        while (left := end - time.time()) > 0:
            if not select.select([self.fd], [], [], left)[0]:
                return
            self.handle(Ether(os.read(self.fd, 65536)))

    def handle(self, f):
        if ARP in f:
            a = f[ARP]
            self.neighbours[a.psrc] = a.hwsrc
            if a.op == 1 and a.pdst == self.ip:
                self.send(Ether(src=self.mac, dst=a.hwsrc) /
                          ARP(op=2, hwsrc=self.mac, psrc=self.ip, hwdst=a.hwsrc, pdst=a.psrc))
        elif IP in f and ICMP in f and f[IP].dst == self.ip:
            if f[ICMP].type == 8:
                self.answered += 1
                self.send(Ether(src=self.mac, dst=f.src) /
                          IP(src=self.ip, dst=f[IP].src) /
                          ICMP(type=0, id=f[ICMP].id, seq=f[ICMP].seq) / bytes(f[ICMP].payload))
            elif f[ICMP].type == 0 and f[ICMP].id == 0x7a7:
                self.replies.add(f[IP].src)

    def ping(self, dst, tries=5):
        for seq in range(tries):
            if dst not in self.neighbours:
                self.send(Ether(src=self.mac, dst="ff:ff:ff:ff:ff:ff") /
                          ARP(op=1, hwsrc=self.mac, psrc=self.ip, pdst=dst))
                self.poll(0.3)
                continue
            self.send(Ether(src=self.mac, dst=self.neighbours[dst]) /
                      IP(src=self.ip, dst=dst) / ICMP(id=0x7A7, seq=seq) / b"tapvm")
            self.poll(0.3)
            if dst in self.replies:
                return True
        return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ifname")
    p.add_argument("--mac", required=True)
    p.add_argument("--ip", required=True)
    p.add_argument("--ping", action="append", default=[])
    p.add_argument("--hold", type=float, default=0)
    p.add_argument("--wait-file", help="before talking, wait until this file contains "
                                         "--wait-text at least --wait-count times")
    p.add_argument("--wait-text")
    p.add_argument("--wait-count", type=int, default=1)
    a = p.parse_args()
    host = Host(open_tap(a.ifname), a.mac, a.ip)
    if a.wait_file:
        deadline = time.time() + 10
        while (open(a.wait_file).read().count(a.wait_text) < a.wait_count
               and time.time() < deadline):
            host.poll(0.05)
    print("up", flush=True)
    answered = {dst: host.ping(dst) for dst in a.ping}
    host.poll(a.hold)
    print(json.dumps({"pinged": answered, "echo_requests_answered": host.answered}), flush=True)


if __name__ == "__main__":
    main()
