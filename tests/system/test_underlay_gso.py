"""Tunnel packets toward one peer cross the host as one large frame (UDP segmentation
offload; docs/io.md, "Large frames across the underlay"), between two ovr hosts.

Hosts A and B each run ovrd with one workload (vm1 10.1.0.5 on A, vm2 10.1.0.6 on B) in
one network (VNI 100), joined by a veth underlay. A reads and sends its underlay with
AF_PACKET, so runs of VXLAN packets toward B leave A as one frame. B reads its underlay
with AF_PACKET (the frame arrives whole and B cuts it) or with AF_XDP (B's XDP program
takes segmentation offload away from A's veth: A's kernel cuts the frame, and B sees
datagrams whose UDP checksum was left to the veth, which it must accept).
A's workload leaves checksums and segmentation to its NIC (a container's default), and so
does B's unless B reads it with AF_XDP, which needs complete frames.
"""

import hashlib
import json
import random
import re
import subprocess
import time

import pytest

from system.netns import Lab, sh
from system.ovrd import Ovrd, binary

MACS = {"a": "02:00:00:00:00:0a", "b": "02:00:00:00:00:0b"}
VMS = {"a": ("vm1", "02:00:00:00:01:05", "10.1.0.5"), "b": ("vm2", "02:00:00:00:02:06", "10.1.0.6")}
UNDERLAY = {"a": "192.0.2.1", "b": "192.0.2.2"}
SIZE = 8 << 20


def config(me, peer):
    vm, mac, ip = VMS[me]
    _, peer_mac, _ = VMS[peer]
    return f"""
interfaces:
  - {{ name: uplink, kind: underlay, mac: "{MACS[me]}", addresses: [{UNDERLAY[me]}/24] }}
  - {{ name: {vm}, kind: workload, network: red, peer_mac: "{mac}", peer_addresses: [{ip}] }}
networks:
  - {{ name: red, vni: 100, gateways: [10.1.0.1/24], flood: [peer-red] }}
tunnels:
  - {{ name: to-peer, underlay: uplink, remote: {UNDERLAY[peer]}, remote_mac: "{MACS[peer]}" }}
nexthops:
  - {{ name: peer-red, kind: tunnel, tunnel: to-peer, encap: vxlan, vni: 100 }}
bridge:
  - {{ network: red, mac: "{peer_mac}", nexthop: peer-red }}
"""


# Sends SIZE bytes of a seeded random stream to the peer and reads as many back; prints
# the hash of what came back. The server echoes the hash of what it got, then its own.
SERVER = ("import socket,hashlib,random;s=socket.socket();"
          "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('{ip}',5001));s.listen(1);"
          "c,_=s.accept();h=hashlib.sha256();n=0\n"
          "while n<{size}:\n  x=c.recv(1<<16)\n  if not x: break\n  h.update(x);n+=len(x)\n"
          "c.sendall(h.hexdigest().encode()+b'\\n');c.sendall(random.Random(8).randbytes({size}));c.close()")
CLIENT = ("import socket,hashlib,random;s=socket.create_connection(('{ip}',5001),timeout=20);"
          "s.sendall(random.Random(7).randbytes({size}));f=s.makefile('rb');"
          "print(f.readline().decode().strip());print(hashlib.sha256(f.read()).hexdigest())")


@pytest.mark.parametrize("b_driver", ["af-packet", "af-xdp"])
def test_joined_tunnel_packets_reach_an_ovr_peer_whole_and_in_order(tmp_path, b_driver):
    lab = Lab("g")
    ovrds = {}
    try:
        hosts = {h: lab.ns(h) for h in ("a", "b")}
        lab.veth(hosts["a"], "uplink", hosts["b"], "uplink", MACS["a"], MACS["b"])
        vm_ns = {}
        for h, (vm, mac, ip) in VMS.items():
            vm_ns[h] = lab.ns(vm)
            lab.veth(hosts[h], vm, vm_ns[h], "eth0", None, mac)
            sh("ip", "addr", "add", f"{ip}/24", "dev", "eth0", ns=vm_ns[h])
            # Room for the VXLAN headers within the underlay's 1500 bytes.
            sh("ip", "link", "set", "eth0", "mtu", "1450", ns=vm_ns[h])
        if b_driver == "af-xdp":
            sh("ethtool", "-K", "eth0", "tx", "off", ns=vm_ns["b"])
        for h, peer, driver in (("a", "b", "af-packet"), ("b", "a", b_driver)):
            cfg = tmp_path / f"{h}.yaml"
            cfg.write_text(config(h, peer))
            ovrds[h] = Ovrd(hosts[h], tmp_path / f"{h}.log", "--config", cfg, "--driver", driver)
        expected = b_driver.replace("-", "_")
        assert re.search(rf"attached interface=uplink .*driver={expected}", ovrds["b"].text())

        server = subprocess.Popen(
            ["ip", "netns", "exec", vm_ns["b"], "python3", "-c", SERVER.format(ip=VMS["b"][2], size=SIZE)])
        try:
            time.sleep(0.5)
            client = sh("python3", "-c", CLIENT.format(ip=VMS["b"][2], size=SIZE), ns=vm_ns["a"],
                        check=False, timeout=60)
            assert client.returncode == 0, client.stderr
            up, down = client.stdout.split()
            assert up == hashlib.sha256(random.Random(7).randbytes(SIZE)).hexdigest()
            assert down == hashlib.sha256(random.Random(8).randbytes(SIZE)).hexdigest()
        finally:
            server.wait(timeout=10)

        # B dropped nothing for its checksum (nor anything else of the transfer's).
        ctl = [str(binary("ovr-cli", "ovrctl")), "--socket", str(ovrds["b"].socket), "--json"]
        drops = json.loads(sh(*ctl, "dropstats").stdout)
        assert "udp_bad_checksum" not in drops, drops
        for h in ("a", "b"):
            ovrds[h].stop()
            assert ovrds[h].proc.returncode == 0, ovrds[h].text()
        # A sent runs of tunnel packets as large frames; B's cut them (AF_PACKET) or was
        # handed them already cut by A's kernel (AF_XDP).
        closed = re.search(r"closed interface=uplink .*tx_joined=(\d+)", ovrds["a"].text())
        assert closed and int(closed[1]) > 0, ovrds["a"].text()
        cut = re.search(r"offload: (\d+) large frames cut into (\d+) segments", ovrds["b"].text())
        assert cut, ovrds["b"].text()
        if b_driver == "af-packet":
            assert 0 < int(cut[1]) < int(cut[2]), cut[0]
    finally:
        for o in ovrds.values():
            o.stop()
        lab.close()
