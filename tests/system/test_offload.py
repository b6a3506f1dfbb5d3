"""The fast path (`ovrd --offload xdp|tc`, `ovrctl lab --offload=xdp|tc`) in the two-host lab.

Turning offload on must change speed, never behaviour: the same scapy-made frames give the
same underlay and workload packets, field by field, with offload off and on, while the
fast path really carries them (user space sees only each flow's first packets); a policy
change stops an offloaded flow at once; TCP from workloads whose stacks leave checksums
to the NIC arrives intact; the kernel's VXLAN still interoperates. The fast path's tests
run at both hooks (XDP, TC), with one forwarding worker and with two (one program and its
maps for the whole ovrd, each worker offloading the flows it owns).

Each lab has its own prefix (`ovrf<pid>x`) and directory and is taken down on failure."""

import hashlib
import json
import os
import subprocess
import time

import pytest
from scapy.all import IP, TCP, UDP, Ether, Raw, VXLAN  # noqa: F401 (VXLAN binds 4789)

from conftest import ROOT
from system.capture import Capture
from system.overlay_lab import OverlayLab, sh

ROUTER_MAC = "00:00:5e:00:01:00"
W1_MAC, W2_MAC = "02:01:00:01:01:01", "02:01:00:01:02:01"
W1_IP, W2_IP = "10.1.0.11", "10.1.0.21"


@pytest.fixture(scope="module", autouse=True)
def build():
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)


class Lab(OverlayLab):
    def __init__(self, tag, *up_args):
        # Static labs: these tests change ovrd's configuration through its API, which a
        # cluster member refuses (the cluster owns it).
        super().__init__(f"ovrf{os.getpid() % 1000}{tag}", "--static", *up_args)


WORKERS = pytest.mark.parametrize("workers", [1, 2])
HOOKS = pytest.mark.parametrize("hook", ["xdp", "tc"])


def workers_args(workers):
    """ovrctl lab arguments for `workers` forwarding workers in every ovrd."""
    return (f"--ovrd-arg=--workers={workers}",) if workers > 1 else ()


def tag(letter, workers, hook="xdp"):
    return (letter if workers == 1 else f"{letter}{workers}") + ("c" if hook == "tc" else "")


def user_space_share(lab, host, iface, node):
    """(frames the interface received, frames the pipeline's `node` saw)."""
    c = lab.json(host, "counters")
    # (Counters list only interfaces and nodes that saw packets.)
    rx = next((i["rx_packets"] for i in c["interfaces"] if i["name"] == iface), 0)
    seen = next((n["packets"] for n in c["nodes"] if n["name"] == node), 0)
    return rx, seen


SEND = r"""
import sys, time
from scapy.all import Ether, IP, UDP, TCP, Raw, sendp
frames = []
for i in range(60):
    pay = Raw(bytes((i + j) %% 256 for j in range(20 + 23 * i)))
    # bridged (to the remote workload's MAC) and routed (to the gateway MAC)
    frames.append(Ether(src="%(w1)s", dst="%(w2)s") / IP(src="%(a)s", dst="%(b)s", ttl=64) /
                  UDP(sport=4000, dport=9999) / pay)
    frames.append(Ether(src="%(w1)s", dst="%(gw)s") / IP(src="%(a)s", dst="%(b)s", ttl=17) /
                  UDP(sport=4001, dport=9999) / pay)
    frames.append(Ether(src="%(w1)s", dst="%(w2)s") / IP(src="%(a)s", dst="%(b)s", ttl=64) /
                  TCP(sport=4002, dport=9998, flags="PA", seq=1000 + i) / pay)
for f in frames:
    sendp(f, iface="eth0", verbose=False)
    time.sleep(0.005)
""" % {"w1": W1_MAC, "w2": W2_MAC, "gw": ROUTER_MAC, "a": W1_IP, "b": W2_IP}


def ours(p):
    """One of SEND's frames (not ARP or other traffic of the workloads' own stacks)."""
    return IP in p and ((UDP in p and p[UDP].dport == 9999) or (TCP in p and p[TCP].dport == 9998))


def fields(p):
    """Every header field scapy decodes, and the payload, of one captured frame."""
    out = []
    layer = p
    while layer is not None and not isinstance(layer, Raw):
        out.append((layer.name, dict(layer.fields)))
        layer = layer.payload if layer.payload else None
    out.append(("payload", bytes(p[Raw].load) if Raw in p else b""))
    return out


def run_frames(hook, tmp_path, workers=1):
    """SEND's frames through a lab whose ovrds run the fast path at `hook` (None: off)."""
    args = (f"--offload={hook}",) if hook else ()
    with Lab(tag("o" if hook else "n", workers, hook), *args, *workers_args(workers)) as lab:
        # h1 routes to the remote workload's address over VXLAN (the lab bridges it).
        lab.api("h1", "routes", "add", "network=t1", f"prefix={W2_IP}/32", "nexthop=h2-t1")
        # Only what h1 sends and what w2 receives (not w2's own RSTs and ICMP errors).
        under = Capture(lab.ns("underlay"), "h1", tmp_path / f"u{hook}.pcap",
                        bpf="udp port 4789 and src host 192.0.2.1")
        work = Capture(lab.ns("h2-t1-w1"), "eth0", tmp_path / f"w{hook}.pcap",
                       bpf=f"not ether src {W2_MAC}")
        sh("python3", "-c", SEND, ns=lab.ns("h1-t1-w1"), timeout=120)
        u, w = [p for p in under.packets() if ours(p[VXLAN].payload)], [
            p for p in work.packets() if ours(p)]
        shares = (user_space_share(lab, "h1", "t1w1", "established"),
                  user_space_share(lab, "h2", "uplink", "underlay-input"))
        flows = {h: lab.json(h, "flows", "--port", "9999")["flows"] +
                 lab.json(h, "flows", "--port", "9998")["flows"] for h in ("h1", "h2")}
        counters = {h: (lab.json(h, "counters"), lab.api(h, "counters")) for h in ("h1", "h2")}
        log = lab.ctl("down").stdout
    return u, w, shares, flows, counters, log


@HOOKS
@WORKERS
def test_same_packets_with_and_without_offload(tmp_path, workers, hook):
    u_off, w_off, _, _, off_counters, _ = run_frames(None, tmp_path)
    u_on, w_on, (h1, h2), flows, counters, log = run_frames(hook, tmp_path, workers)
    assert len(u_off) == 180 and len(w_off) == 180, (len(u_off), len(w_off))
    # Field by field (scapy's decoding) and byte for byte: the outer IP id is 0 both ways.
    assert [fields(p) for p in u_on] == [fields(p) for p in u_off]
    assert [bytes(p) for p in u_on] == [bytes(p) for p in u_off]
    assert [bytes(p) for p in w_on] == [bytes(p) for p in w_off]
    # What the pipeline does, as checked against the sent frames: VXLAN 101, outer id 0
    # DF TTL 64 no UDP checksum; routed: gateway MACs inside, TTL 17 → 16 once.
    for p in u_on:
        assert p[VXLAN].vni == 101 and p[IP].id == 0 and p[IP].flags == "DF"
        assert p[IP].ttl == 64 and p[UDP].chksum == 0
        inner = p[VXLAN].payload
        if inner[Ether].dst == ROUTER_MAC:
            assert inner[Ether].src == ROUTER_MAC and inner[IP].ttl == 16
    routed = [p for p in w_on if p[Ether].src != W1_MAC]
    assert len(routed) == 60 and all(p[IP].ttl == 16 and p[Ether].dst == W2_MAC for p in routed)
    # The fast path carried them: user space saw only each flow's first packets.
    (h1_rx, h1_user), (h2_rx, h2_user) = h1, h2
    assert h1_rx >= 180 and h1_user <= 20, h1
    assert h2_rx >= 180 and h2_user <= 20, h2
    assert "fast path: flows" in log and " hit " in log
    # The API's counters say what the fast path did (summed over the workers): on each
    # host it holds the three flows (and reverses) and carried all but the first packets
    # of the 180 sent, plus some of the 60 RSTs w2's stack answers the TCP segments with
    # (their flow is offloaded too); without it, all zero.
    for host, (c, text) in counters.items():
        fp = c["fast_path"]
        assert 3 <= fp["flows"] <= 6 and fp["installed"] >= 3, (host, fp)
        assert 180 - 20 <= fp["packets"] <= 180 + 60, (host, fp)
        assert f"fast path: {fp['flows']} flows (installed {fp['installed']}," in text, text
    for c, text in off_counters.values():
        assert set(c["fast_path"].values()) == {0} and "fast path" not in text, (c, text)
    # The fast path's packets are in the flows the API shows (merged from every worker):
    # each of the three flows counts all 60 packets on both hosts.
    for host, fl in flows.items():
        fwd = [f for f in fl if f["dst_port"] in (9999, 9998)]
        assert sorted(f["packets"] for f in fwd) == [60, 60, 60], (host, fl)
        # ...and the dump says the fast path carries them.
        assert all(f["offloaded"] for f in fwd), (host, fl)
        if workers > 1:
            # Ids are local id × workers + worker: the flows' hashes put the routed one in
            # worker 0 and the two bridged ones in worker 1, each with its reverse, so
            # both workers' fast paths carried flows and merged them into the API's.
            assert {f["id"] % workers for f in fwd} == {0, 1}, fl
            assert all(f["reverse"] is None or f["reverse"] % workers == f["id"] % workers
                       for f in fl), fl


def udp_receiver(lab, seconds, ns="h2-t1-w1"):
    """Prints the arrival time of each datagram to port 9999 in `ns` (or its payload,
    if that is a number) for `seconds`."""
    code = ("import socket,time,sys\n"
            "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',9999))\n"
            f"s.settimeout(0.2); end=time.time()+{seconds}\n"
            "while time.time()<end:\n"
            "    try: b=s.recv(2048); print(b.decode() if b.isdigit() else time.time(),"
            " flush=True)\n"
            "    except socket.timeout: pass\n")
    return subprocess.Popen(["ip", "netns", "exec", lab.ns(ns), "python3", "-c", code],
                            stdout=subprocess.PIPE, text=True)


@HOOKS
@WORKERS
def test_policy_change_stops_an_offloaded_flow(workers, hook):
    with Lab(tag("p", workers, hook), f"--offload={hook}", *workers_args(workers)) as lab:
        rx = udp_receiver(lab, 7)
        time.sleep(0.5)
        send = ("import time\nfrom scapy.all import *\n"
                f"f=Ether(src='{W1_MAC}',dst='{W2_MAC}')/IP(src='{W1_IP}',dst='{W2_IP}')/"
                "UDP(sport=5000,dport=9999)/Raw(b'x'*64)\n"
                "s=conf.L2socket(iface='eth0')\n"
                "end=time.time()+5\n"
                "while time.time()<end:\n    s.send(f); time.sleep(0.005)\n")
        sender = subprocess.Popen(["ip", "netns", "exec", lab.ns("h1-t1-w1"), "python3", "-c", send])
        # Flowing, and offloaded, before the change (scapy can take seconds to start
        # sending on a loaded machine; it then sends for 5 s).
        deadline = time.monotonic() + 30
        while True:
            before = user_space_share(lab, "h2", "uplink", "underlay-input")
            carried = lab.json("h2", "flows", "--port", "9999")["flows"]
            if (before[0] > 150 and any(f["offloaded"] for f in carried)) \
                    or time.monotonic() > deadline or sender.poll() is not None:
                break
            time.sleep(0.2)
        lab.api("h2", "policies", "set", "t1",
                '[{"action":"deny","protocol":"udp","dst_ports":"9999"}]')
        changed = time.time()
        sender.wait(timeout=20)
        times = [float(t) for t in rx.communicate(timeout=20)[0].split()]
        drops = lab.json("h2", "dropstats")
        after = lab.json("h2", "flows", "--port", "9999")["flows"]
    # Flowing before, through the fast path (user space saw a handful of the packets),
    # which the flow dump said; after the change, no flow is carried there.
    assert any(f["offloaded"] and f["dst_port"] == 9999 for f in carried), carried
    assert after and not any(f["offloaded"] for f in after), after
    assert len([t for t in times if t < changed]) > 100, len(times)
    assert before[0] > 100 and before[1] < 10, before
    # The new policy applies to the offloaded flow within the worker's poll interval.
    late = [t for t in times if t > changed + 0.3]
    assert late == [], f"{len(late)} packets after the deny"
    assert drops.get("policy_denied", 0) > 100, drops


# One side of a TCP transfer over `c`: 'send' sends 8 MiB and prints their digest,
# 'recv' prints the digest and length of what arrived.
TRANSFER = r"""
if sys.argv[1] == 'send':
    data = bytes(hashlib.sha256(str(i).encode()).digest()[i % 32] for i in range(1 << 16)) * 128
    c.sendall(data); c.close(); print(hashlib.sha256(data).hexdigest())
else:
    h = hashlib.sha256(); n = 0
    while True:
        b = c.recv(1 << 16)
        if not b: break
        h.update(b); n += len(b)
    print(h.hexdigest(), n)
"""

TRANSFER_SERVER = r"""
import hashlib, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 7001)); s.listen(1); s.settimeout(30)
c, _ = s.accept(); c.settimeout(30)
""" + TRANSFER


def transfer_client(server_ip):
    return ("import hashlib, socket, sys\n"
            f"c = socket.create_connection(('{server_ip}', 7001), timeout=30)\n" + TRANSFER)


def transfer(lab, client, server_ns, server_ip, direction):
    """8 MiB from one workload to the other over TCP; returns (sent hash, received hash, n)."""
    srv = subprocess.Popen(["ip", "netns", "exec", server_ns, "python3", "-c", TRANSFER_SERVER,
                            "send" if direction == "down" else "recv"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    cli = sh("python3", "-c", transfer_client(server_ip),
             "recv" if direction == "down" else "send", ns=lab.ns(client))
    out = srv.communicate(timeout=60)[0].split()
    mine = cli.stdout.split()
    sent, got = (out, mine) if direction == "down" else (mine, out)
    return sent[0], got[0], int(got[1])


@HOOKS
@WORKERS
def test_tcp_from_workloads_with_offloads_on(workers, hook):
    with Lab(tag("t", workers, hook), f"--offload={hook}", *workers_args(workers)) as lab:
        # The workloads keep their checksum offload (the lab's default): partial checksums.
        feats = sh("ethtool", "-k", "eth0", ns=lab.ns("h1-t1-w1")).stdout
        assert "tx-checksumming: on" in feats
        for direction in ("down", "up"):
            sent, got, n = transfer(lab, "h1-t1-w1", lab.ns("h2-t1-w1"), W2_IP, direction)
            assert n == 8 << 20 and sent == got, direction
        # The decapsulating side's fast path carried data (complete checksums from ovr).
        for host in ("h1", "h2"):
            rx, user = user_space_share(lab, host, "uplink", "underlay-input")
            assert rx > 3000 and user < rx / 4, (host, rx, user)


@HOOKS
@WORKERS
def test_kernel_vxlan_interop_with_offload(workers, hook):
    with Lab(tag("k", workers, hook), f"--offload={hook}", "--kernel-host",
             *workers_args(workers)) as lab:
        r = sh("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.1.0.31", ns=lab.ns("h1-t1-w1"),
               check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        for direction in ("down", "up"):
            sent, got, n = transfer(lab, "h1-t1-w1", lab.ns("h3-t1-w1"), "10.1.0.31", direction)
            assert n == 8 << 20 and sent == got, direction
        rx, user = user_space_share(lab, "h1", "uplink", "underlay-input")
    # The kernel's VXLAN sends an outer UDP checksum, which the program verifies: the
    # fast path carries the kernel host's traffic too.
    assert rx > 3000 and user < rx / 4, (rx, user)


# From the kernel host's namespace: VXLAN packets of one inner UDP flow to h1's workload,
# with the outer UDP checksum right or (every odd one) wrong.
OUTER_SUMS = r"""
import json, subprocess, time
from scapy.all import Ether, IP, UDP, VXLAN, Raw, raw, sendp
def mac(ns, dev):
    out = subprocess.run(["ip", "-j", "-n", ns, "link", "show", dev], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)[0]["address"]
h1, h3, w3 = mac("%(p)s-h1", "uplink"), mac("%(p)s-h3", "uplink"), mac("%(p)s-h3-t1-w1", "eth0")
for i in range(%(n)d):
    f = (Ether(src=h3, dst=h1) / IP(src="192.0.2.3", dst="192.0.2.1") /
         UDP(sport=50000, dport=4789) / VXLAN(vni=101, flags=0x08) /
         Ether(src=w3, dst="%(w1)s") / IP(src="10.1.0.31", dst="%(a)s") /
         UDP(sport=5555, dport=9999) / Raw(b"%%04d" %% i))
    b = bytearray(raw(f))
    if i %% 2:
        b[40] ^= 0xff  # the outer UDP checksum, wrong
    sendp(bytes(b), iface="uplink", verbose=False)
    time.sleep(0.01)
"""


@HOOKS
def test_the_fast_path_verifies_the_outer_udp_checksum_of_a_kernel_peer(hook):
    """An outer UDP checksum the kernel has not verified is summed by the program: of an
    offloaded flow's VXLAN packets, those whose outer checksum is wrong are not
    forwarded (counted by the program, dropped by user space under its reason), the rest
    are, by the fast path."""
    with Lab(tag("u", 1, hook), f"--offload={hook}", "--kernel-host") as lab:
        rx = udp_receiver(lab, 8, ns="h1-t1-w1")
        time.sleep(0.5)
        # The flow, as the kernel host's own stack sends it (its first packet through
        # user space, which offloads the flow).
        sh("python3", "-c", "import socket,time\n"
           "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',5555))\n"
           "for i in range(5): s.sendto(b'warm', ('" + W1_IP + "', 9999)); time.sleep(0.1)",
           ns=lab.ns("h3-t1-w1"))
        sh("python3", "-c", OUTER_SUMS % {"p": lab.prefix, "n": 100, "w1": W1_MAC, "a": W1_IP},
           ns=lab.ns("h3"))
        got = rx.communicate(timeout=30)[0].split()
        drops = lab.json("h1", "dropstats")
        down = lab.ctl("down").stdout
    payloads = sorted(int(g) for g in got if g.isdigit())
    assert payloads == list(range(0, 100, 2)), payloads
    assert drops.get("udp_bad_checksum", 0) == 50, drops
    checksum = int(down.split("program: hit ")[1].split(" checksum ")[1].split()[0])
    assert checksum == 50, down
    hits = int(down.split("program: hit ")[1].split()[0])
    assert hits >= 50, down


@WORKERS
def test_redirect_to_a_peer_without_napi_is_detected_and_counted(workers):
    """Without GRO on the veth peers (only `--offload=xdp` passed to ovrd), the kernel
    drops what XDP redirects there: ovrd must notice, count it, and fall back to user
    space for those egresses, so the flow keeps going."""
    with Lab(tag("r", workers), "--ovrd-arg=--offload=xdp", *workers_args(workers)) as lab:
        rx = udp_receiver(lab, 6)
        time.sleep(0.5)
        send = ("import time\nfrom scapy.all import *\n"
                f"f=Ether(src='{W1_MAC}',dst='{W2_MAC}')/IP(src='{W1_IP}',dst='{W2_IP}')/"
                "UDP(sport=5001,dport=9999)/Raw(b'y'*64)\n"
                "s=conf.L2socket(iface='eth0')\n"
                "for _ in range(300):\n    s.send(f); time.sleep(0.01)\n")
        sh("python3", "-c", send, ns=lab.ns("h1-t1-w1"), timeout=60)
        received = len(rx.communicate(timeout=20)[0].split())
        down = lab.ctl("down").stdout
    failed = [int(x.split(")")[0]) for x in down.split("redirect_failed ")[1:]]
    assert len(failed) == 2 and sum(failed) > 0, down
    # Every frame either arrived or was counted as lost to the failed redirect, and the
    # loss stopped within the detection interval.
    assert received + sum(failed) == 300, (received, failed)
    assert received >= 240, (received, failed)


@WORKERS
def test_tc_fast_path_carries_tcp_as_large_vxlan_frames(tmp_path, workers):
    """At TC the kernel's large (GSO) packets cross whole: a workload's 64 KB TCP packets
    are encapsulated as one VXLAN frame each (tshark reads every captured underlay frame
    as VXLAN of the tenant's VNI), decapsulated whole on the other host, and arrive
    intact; what is not IPv4 (ARP) still reaches ovrd behind the program."""
    with Lab(tag("g", workers, "tc"), "--offload=tc", *workers_args(workers)) as lab:
        pcap = str(tmp_path / "under.pcap")
        under = Capture(lab.ns("underlay"), "h1", pcap, bpf="udp port 4789 and src host 192.0.2.1")
        sent, got, n = transfer(lab, "h1-t1-w1", lab.ns("h2-t1-w1"), W2_IP, "up")
        under.stop()
        arp = sh("ip", "neigh", "show", W2_IP, ns=lab.ns("h1-t1-w1")).stdout
        c = {h: lab.json(h, "counters") for h in ("h1", "h2")}
        down = lab.ctl("down").stdout
    assert n == 8 << 20 and sent == got
    assert "lladdr" in arp, arp
    rows = [line.split("\t") for line in sh(
        "tshark", "-r", pcap, "-T", "fields", "-e", "frame.len", "-e", "vxlan.vni",
        "-e", "tcp.dstport").stdout.splitlines()]
    assert len(rows) > 20, rows
    assert all(r[1] == "101" for r in rows), rows[:5]
    data = [int(r[0]) for r in rows if r[2] == "7001"]
    # Most of the data in frames beyond the MTU (the capture may miss some in a burst).
    assert sum(x for x in data if x > 1514) > sum(data) * 3 // 4, data
    for host in ("h1", "h2"):
        fp = c[host]["fast_path"]
        assert fp["packets"] > 5000 and fp["bytes"] > 8 << 20, (host, fp)
    assert "program: hit " in down, down


def test_tc_decapsulated_large_packets_are_cut_right_where_a_workload_forwards_them():
    """A large packet decapsulated at TC keeps the kernel's tunnel marks (docs/io.md):
    where the workload forwards it onto a link that takes no large packets, the kernel
    must still cut it into correct TCP segments. Here h2's workload bridges its eth0 to
    a veth without segmentation offload, into a namespace that owns w2's MAC and address;
    8 MiB hash-checked across it, carried by the fast path."""
    with Lab(tag("b", 1, "tc"), "--offload=tc") as lab:
        w2, inner = lab.ns("h2-t1-w1"), lab.ns("in")
        sh("ip", "netns", "add", inner)
        try:
            # eth0 gives its MAC up (a bridge would keep frames to it for itself).
            for cmd in (["ip", "addr", "flush", "dev", "eth0"],
                        ["ip", "link", "set", "eth0", "down"],
                        ["ip", "link", "set", "eth0", "address", "02:01:00:01:02:99"],
                        ["ip", "link", "set", "eth0", "up"],
                        ["ip", "link", "add", "br0", "type", "bridge"],
                        ["ip", "link", "set", "eth0", "master", "br0"],
                        ["ip", "link", "add", "n0", "type", "veth", "peer", "n1"],
                        ["ethtool", "-K", "n0", "tso", "off", "gso", "off", "sg", "off"],
                        ["ip", "link", "set", "n0", "master", "br0"],
                        ["ip", "link", "set", "n1", "netns", inner],
                        ["ip", "link", "set", "br0", "up"], ["ip", "link", "set", "n0", "up"]):
                sh(*cmd, ns=w2)
            for cmd in (["ip", "link", "set", "n1", "address", W2_MAC, "name", "eth0"],
                        ["ip", "addr", "add", f"{W2_IP}/24", "dev", "eth0"],
                        ["ip", "link", "set", "eth0", "up"], ["ip", "link", "set", "lo", "up"]):
                sh(*cmd, ns=inner)
            sent, got, n = transfer(lab, "h1-t1-w1", inner, W2_IP, "up")
            rx, user = user_space_share(lab, "h2", "uplink", "underlay-input")
            cut = sh("ip", "-s", "link", "show", "n0", ns=w2).stdout
        finally:
            sh("ip", "netns", "del", inner, check=False)
    assert n == 8 << 20 and sent == got
    assert rx > 3000 and user < rx / 4, (rx, user)
    # n0 sent the data as segments: no more than an MTU each.
    tx = cut.split("TX:")[1].split("\n")[1].split()
    assert int(tx[1]) > 5000 and int(tx[0]) / int(tx[1]) < 1514, cut


# A stream of large TCP packets (GSO, as a stack with TSO hands its NIC) from a raw
# packet socket: the virtio-net header asks the kernel to cut each into 1448-byte
# segments and finish their checksums. No handshake: ovr forwards by flow, not by
# connection state.
GSO_SEND = r"""
import socket, struct, time
from scapy.all import Ether, IP, TCP, raw
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.setsockopt(263, 15, 1)  # SOL_PACKET, PACKET_VNET_HDR
s.bind(("eth0", 0))
MSS, N = 1448, 20
def pseudo(src, dst, length):
    w = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, length)
    t = sum(struct.unpack("!6H", w))
    while t >> 16: t = (t & 0xffff) + (t >> 16)
    return t
for k in range(%(count)d):
    pay = bytes((k * 7 + j) %% 251 for j in range(MSS * N))
    f = Ether(src="%(w1)s", dst="%(w2)s") / IP(src="%(a)s", dst="%(b)s", flags="DF") / \
        TCP(sport=4100, dport=9100, flags="A", seq=1 + k * MSS * N, chksum=0) / pay
    b = bytearray(raw(f))
    struct.pack_into("!H", b, 50, pseudo("%(a)s", "%(b)s", 20 + len(pay)))
    # flags NEEDS_CSUM, gso TCPV4, hdr_len, gso_size, csum_start, csum_offset
    s.send(struct.pack("<BBHHHH", 1, 1, 54, MSS, 34, 16) + bytes(b))
    time.sleep(0.05)
"""

# A VM's end of a TAP (no virtio-net header: the kernel must hand it complete frames):
# makes the TAP, then prints every TCP frame to port 9100 as "length seq checksum-ok
# payload-hex" for `seconds`.
TAP_VM = r"""
import fcntl, os, select, struct, time
from scapy.all import Ether, IP, TCP, raw
fd = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(fd, 0x400454CA, struct.pack("16sH", b"t1w1", 0x0002 | 0x1000))  # TAP, no PI
os.system("ip link set t1w1 up")
print("ready", flush=True)
end = time.time() + %(seconds)f
while (left := end - time.time()) > 0:
    if not select.select([fd], [], [], left)[0]:
        break
    data = os.read(fd, 65536)
    f = Ether(data)
    if IP in f and TCP in f and f[TCP].dport == 9100:
        given, p = f[TCP].chksum, IP(raw(f[IP]))
        del p[TCP].chksum
        ok = IP(raw(p))[TCP].chksum == given
        print(len(data), f[TCP].seq, int(ok), bytes(f[TCP].payload).hex(), flush=True)
"""


def test_tc_decapsulated_large_packets_reach_a_vm_tap_as_complete_segments():
    """A VM's TAP without offloads behind the TC fast path: the large packets TC
    decapsulates (tunnel marks and all, docs/io.md) must reach the VM as MTU-sized
    segments with correct checksums and the bytes that were sent."""
    gso, count = 20 * 1448, 10
    with Lab(tag("v", 1, "tc"), "--offload=tc") as lab:
        # h2's workload becomes a VM: its veth goes, a TAP of the same name comes (ovrd
        # attaches it again by name).
        sh("ip", "link", "del", "t1w1", ns=lab.ns("h2"))
        vm = subprocess.Popen(["ip", "netns", "exec", lab.ns("h2"), "python3", "-c",
                               TAP_VM % {"seconds": 12}], stdout=subprocess.PIPE, text=True)
        assert vm.stdout.readline().strip() == "ready"
        deadline = time.time() + 10
        while "attached interface=t1w1" not in lab.log("h2").split("let go")[-1]:
            assert time.time() < deadline, lab.log("h2")
            time.sleep(0.1)
        sh("python3", "-c", GSO_SEND % {"count": count, "w1": W1_MAC, "w2": W2_MAC,
                                         "a": W1_IP, "b": W2_IP}, ns=lab.ns("h1-t1-w1"))
        out = vm.communicate(timeout=30)[0].split("\n")
        c = lab.json("h2", "counters")
    frames = [line.split() for line in out if line]
    assert len(frames) == count * 20, len(frames)
    assert all(int(n) <= 1514 and ok == "1" for n, _, ok, _ in frames), frames[:3]
    got = {int(seq): bytes.fromhex(h) for _, seq, _, h in frames}
    for k in range(count):
        want = bytes((k * 7 + j) % 251 for j in range(gso))
        start = 1 + k * gso
        have = b"".join(got.get(start + i * 1448, b"") for i in range(20))
        assert have == want, k
    # All but each flow's first packets came through the fast path whole.
    assert c["fast_path"]["packets"] >= (count - 2) * 20, c["fast_path"]


def test_tc_fast_path_offloads_new_flows_after_flows_are_deleted():
    """Flow ids are reused: after `ovrctl flows --delete` (or flows that came and went)
    a new TCP connection takes the ids of gone ones and is carried by the fast path again,
    and nothing on the way is dropped because one host's fast path carries it and the
    other's does not."""
    with Lab(tag("i", 1, "tc"), "--offload=tc") as lab:
        carried = []
        for round in range(2):
            before = {h: lab.json(h, "counters")["fast_path"]["packets"] for h in ("h1", "h2")}
            sent, got, n = transfer(lab, "h1-t1-w1", lab.ns("h2-t1-w1"), W2_IP, "up")
            assert n == 8 << 20 and sent == got, round
            after = {h: lab.json(h, "counters") for h in ("h1", "h2")}
            carried.append({h: after[h]["fast_path"]["packets"] - before[h] for h in before})
            for h in ("h1", "h2"):
                assert "offload_bad_segmentation" not in after[h]["drops"], (h, after[h]["drops"])
                lab.api(h, "flows", "--delete")
    for round, c in enumerate(carried):
        for h in ("h1", "h2"):
            assert c[h] > 1000, (round, carried)


def test_user_space_cuts_the_large_tunnel_frames_of_a_tc_peer():
    """A host whose ovrd runs without the fast path (h2, user space alone) receives h1's
    TC fast path traffic as large VXLAN frames (a 64 KB TCP packet each): it cuts them
    into whole tunnel packets and forwards them; nothing is dropped."""
    with Lab(tag("s", 1, "tc"), "--offload=tc") as lab:
        with open(f"{lab.dir}/state.json") as f:
            h2 = next(h for h in json.load(f)["hosts"] if h["name"] == "h2")
        os.kill(h2["ovrd_pid"], 15)
        deadline = time.time() + 10
        while os.path.exists(f"/proc/{h2['ovrd_pid']}") and time.time() < deadline:
            time.sleep(0.1)
        # The stopped ovrd's fast path stays pinned and forwarding until the next ovrd
        # on its pin directory starts without one: that ovrd removes it.
        pins = f"{lab.dir}/bpf/h2"
        assert os.listdir(pins), "the fast path was left pinned"
        log = f"{lab.dir}/h2-user-space.log"
        ovrd = subprocess.Popen(
            ["ip", "netns", "exec", lab.ns("h2"), ROOT / "target" / "debug" / "ovrd",
             "--config", h2["config"], "--api-socket", f"{lab.dir}/h2.sock",
             "--state", f"{lab.dir}/h2.state.json", "--fast-path-pin-dir", pins],
            stdout=open(log, "w"), stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 10
            while "forwarding" not in open(log).read() and time.time() < deadline:
                time.sleep(0.1)
            assert not os.path.exists(pins) or not os.listdir(pins), os.listdir(pins)
            assert "left pinned is removed" in open(log).read()
            sent, got, n = transfer(lab, "h1-t1-w1", lab.ns("h2-t1-w1"), W2_IP, "up")
            c = {h: lab.json(h, "counters") for h in ("h1", "h2")}
        finally:
            ovrd.terminate()
            ovrd.wait(timeout=10)
    assert n == 8 << 20 and sent == got
    assert c["h1"]["fast_path"]["packets"] > 1000, c["h1"]["fast_path"]
    assert c["h2"]["fast_path"]["packets"] == 0
    large = c["h2"]["offload"]
    assert large["large_frames"] > 50 and large["segments"] > 10 * large["large_frames"], large
    assert not any(r.startswith("offload_") for r in c["h2"]["drops"]), c["h2"]["drops"]
