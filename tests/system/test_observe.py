"""Observability through ovrctl against a running ovrd, with real traffic between
namespaces: the packet trace, pcap captures read back by tshark and scapy, /metrics, and
ovrctl's errors (each with its own exit status).

Host A is a namespace where ovrd owns two veths to two workload namespaces, both in
network red (10.1.0.0/24 and 10.2.0.0/24, routed by ovr's virtual gateway).
"""

import json
import os
import shutil
import socket
import subprocess
import time

import tempfile

import pytest
from scapy.all import IP, Ether, rdpcap

from conftest import ROOT
from system.netns import Lab, sh
from system.test_agent import VM1_MAC, VM2_MAC, Host, two_vms

GW_MAC = "02:00:00:00:00:01"

CONFIG = f"""
interfaces:
  - {{ name: vm1, network: red, peer_mac: "{VM1_MAC}", peer_addresses: [10.1.0.5] }}
  - {{ name: vm2, network: red, peer_mac: "{VM2_MAC}", peer_addresses: [10.2.0.5] }}
networks:
  - {{ name: red, vni: 100, router_mac: "{GW_MAC}", gateways: [10.1.0.1/24, 10.2.0.1/24] }}
"""

# ovrctl's exit statuses (crates/cli/src/api/mod.rs, `exit`).
FAILED, NOT_RUNNING, PERMISSION_DENIED, NOT_FOUND = 1, 3, 4, 5


@pytest.fixture
def host(tmp_path, request):
    """ovrd with one worker, or as many as the test asks for (indirect parameter)."""
    workers = getattr(request, "param", 1)
    subprocess.run(["cargo", "build", "-q", "-p", "ovrd", "-p", "ovr-cli"],
                   cwd=ROOT, check=True)
    lab = Lab("ob")
    # This suite's namespaces carry its own prefix.
    lab.prefix = f"ovrob{os.getpid() % 10000}"
    h = None
    try:
        a, vm1, vm2 = two_vms(lab)
        debug = ROOT / "target" / "debug"
        h = Host(debug / "ovrd", debug / "ovrctl", a, tmp_path, "--workers", workers)
        h.config.write_text(CONFIG)
        h.vm1, h.vm2 = vm1, vm2
        h.start()
        # Neighbours learnt before anything is traced or captured.
        for ns, gw in ((vm1, "10.1.0.1"), (vm2, "10.2.0.1")):
            r = sh("ping", "-c", "1", "-W", "2", gw, ns=ns, check=False)
            assert r.returncode == 0, r.stdout + r.stderr
        yield h
    finally:
        if h is not None:
            h.stop()
        lab.close()


def in_ns(ns, code, timeout=30):
    """Runs Python code in a namespace (scapy, sockets)."""
    r = subprocess.run(["ip", "netns", "exec", ns, "python3", "-c", code],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def send_udp(h, dst, count, dport=7000, ttl=64):
    in_ns(h.vm1, f"""
from scapy.all import Ether, IP, UDP, Raw, sendp
p = Ether(src="{VM1_MAC}", dst="{GW_MAC}") / IP(src="10.1.0.5", dst="{dst}", ttl={ttl}) \\
    / UDP(sport=5555, dport={dport}) / Raw(b"ovr-trace")
sendp([p] * {count}, iface="eth0", verbose=False)
""")


class UdpSink:
    """A UDP socket in vm2 that takes the test's datagrams (so vm2 sends no ICMP
    unreachable back); stopped by its PID."""

    def __init__(self, ns, port):
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, "python3", "-c",
             f"import socket,time\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             f"s.bind(('0.0.0.0', {port}))\nprint('ready', flush=True)\ntime.sleep(60)"],
            stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=10)


def step(p, node):
    return next((s for s in p["steps"] if s["node"] == node), {"detail": ""})


def flow_of(p, text):
    """Whether the traced packet is of this flow (as ip-input saw it)."""
    return text in (step(p, "ip-input")["detail"] or "")


def test_trace_shows_each_packets_path_and_decisions(host):
    h = host
    sink = UdpSink(h.vm2, 7000)
    try:
        assert "tracing the next 5 packets" in h.ctl("trace", "add", "5").stdout
        # One at a time: the second finds the flow the first set up (two packets of a
        # new flow in one vector both go to flow-setup, where the second finds it).
        send_udp(h, "10.2.0.5", 1)
        send_udp(h, "10.2.0.5", 1)
        send_udp(h, "10.9.9.9", 1)
        deadline = time.time() + 5
        while True:
            t = h.json("trace", "show")
            to_vm2 = [p for p in t["packets"] if flow_of(p, "10.1.0.5 -> 10.2.0.5 proto 17")]
            lost = [p for p in t["packets"] if flow_of(p, "10.1.0.5 -> 10.9.9.9 proto 17")]
            if len(to_vm2) + len(lost) >= 3 or time.time() > deadline:
                break
            time.sleep(0.1)
    finally:
        sink.stop()
    assert len(to_vm2) == 2 and len(lost) == 1, json.dumps(t, indent=1)

    # The first packet of the flow misses and is set up; the second hits the flow.
    first, second = to_vm2
    nodes = [s["node"] for s in first["steps"]]
    assert nodes == ["ethernet-input", "ip-input", "flow", "flow-setup", "ip-rewrite",
                     "interface-output"], nodes
    assert [s["node"] for s in second["steps"]] == [
        "ethernet-input", "ip-input", "flow", "ip-rewrite", "interface-output"]
    # Each step names where the packet went next; the last has no next.
    assert [s["next"] for s in first["steps"]] == nodes[1:] + [None]
    eth = step(first, "ethernet-input")["detail"]
    assert "rx vm1" in eth and "vrf red (" in eth and "vni 100" in eth, eth
    assert f"{VM1_MAC} -> {GW_MAC}" in eth and "routed" in eth, eth
    assert "ports 5555 -> 7000" in step(first, "ip-input")["detail"]
    assert "flow miss" in step(first, "flow")["detail"]
    setup = step(first, "flow-setup")["detail"]
    assert "created with its reverse" in setup and f"interface vm2 to {VM2_MAC}" in setup, setup
    hit = step(second, "flow")["detail"]
    assert " hit: " in hit and "interface vm2" in hit, hit
    assert "ttl now 63" in step(first, "ip-rewrite")["detail"]
    for p in to_vm2:
        assert p["rx_interface"] == "vm1"
        assert p["fate"].startswith("sent on vm2"), p["fate"]
    # No route: dropped, the reason named.
    (p,) = lost
    assert [s["node"] for s in p["steps"]][-2:] == ["flow-setup", "drop"]
    assert p["fate"].startswith("dropped: no_route"), p["fate"]
    assert "no flow installed" in step(p, "flow-setup")["detail"]

    human = h.ctl("trace", "show").stdout
    assert "packet 1 from vm1: sent on vm2" in human, human
    assert "flow-setup" in human and "-> ip-rewrite" in human, human
    h.ctl("trace", "clear")
    assert h.json("trace", "show") == {"pending": 0, "packets": [], "full": False}


TCP_SERVER = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8000)); s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
c.sendall(c.recv(100).upper())
c.close()
"""

TCP_CLIENT = """
import socket
c = socket.create_connection(("10.2.0.5", 8000), timeout=5)
c.sendall(b"hello ovr")
print(c.recv(100).decode())
c.close()
"""


def tshark(path, *fields):
    args = ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=|"]
    for f in fields:
        args += ["-e", f]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split("|") for line in r.stdout.splitlines()]


# With two workers each has a copy of the tap: one file, one frame budget.
@pytest.mark.parametrize("host", [1, 2], indirect=True, ids=["1-worker", "2-workers"])
def test_capture_of_a_tcp_session_reads_back_field_by_field(host):
    h = host
    pcap = h.tmp / "vm1.pcap"
    started = h.json("capture", "start", "vm1", str(pcap))
    assert started["state"] == "running" and started["direction"] == "both", started
    server = subprocess.Popen(["ip", "netns", "exec", h.vm2, "python3", "-c", TCP_SERVER],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        assert in_ns(h.vm1, TCP_CLIENT).strip() == "HELLO OVR"
        server.wait(timeout=10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
    time.sleep(0.3)  # the last ACKs and FINs
    listed = h.json("capture", "list")
    assert [c["id"] for c in listed] == [started["id"]], listed
    done = h.json("capture", "stop", str(started["id"]))
    assert done["state"] == "finished" and done["ended"] == "stopped", done
    assert done["dropped"] == 0 and done["written"] >= 8, done

    rows = tshark(pcap, "eth.src", "eth.dst", "ip.src", "ip.dst", "ip.ttl", "tcp.srcport",
                  "tcp.dstport", "tcp.flags.syn", "tcp.flags.ack", "tcp.flags.fin",
                  "tcp.payload", "tcp.checksum.status")
    assert len(rows) == done["written"], rows
    tcp = [r for r in rows if r[5]]
    assert len(tcp) >= 6, rows
    out = [r for r in tcp if r[2] == "10.1.0.5"]   # received from vm1
    back = [r for r in tcp if r[2] == "10.2.0.5"]  # handed to vm1 for sending
    # Received as vm1 sent them: to the gateway MAC, TTL 64, to port 8000.
    assert all(r[0] == VM1_MAC and r[1] == GW_MAC and r[3] == "10.2.0.5" and r[4] == "64"
               and r[6] == "8000" for r in out), out
    # Sent to vm1 after routing: to vm1's MAC, TTL decremented by ovr.
    assert all(r[1] == VM1_MAC and r[3] == "10.1.0.5" and r[4] == "63" and r[5] == "8000"
               for r in back), back
    # The handshake in order, the data both ways, the close.
    assert (out[0][7], out[0][8]) == ("1", "0"), out[0]            # SYN
    assert (back[0][7], back[0][8]) == ("1", "1"), back[0]         # SYN-ACK
    assert (out[1][7], out[1][8]) == ("0", "1"), out[1]            # ACK
    payload = lambda rs: bytes.fromhex(next(r[10] for r in rs if r[10]).replace(":", ""))  # noqa: E731
    assert payload(out) == b"hello ovr"
    assert payload(back) == b"HELLO OVR"
    assert any(r[9] == "1" for r in out) and any(r[9] == "1" for r in back)
    # scapy reads the same file: whole frames (no snap), the same count.
    frames = rdpcap(str(pcap))
    assert len(frames) == done["written"]
    assert all(len(bytes(f)) == f.wirelen for f in frames)
    assert frames[0][Ether].src == VM1_MAC and frames[0][IP].dst == "10.2.0.5"


@pytest.mark.parametrize("host", [1, 2], indirect=True, ids=["1-worker", "2-workers"])
def test_a_capture_ends_by_itself_after_its_count(host):
    h = host
    pcap = h.tmp / "rx3.pcap"
    c = h.json("capture", "start", "vm1", str(pcap), "--rx", "--count", "3", "--snaplen", "40")
    sink = UdpSink(h.vm2, 7000)
    try:
        send_udp(h, "10.2.0.5", 5)
    finally:
        sink.stop()
    deadline = time.time() + 5
    while (info := h.json("capture", "list")[0])["state"] != "finished":
        assert time.time() < deadline, info
        time.sleep(0.1)
    assert info["ended"] == "packet count reached" and info["written"] == 3, info
    frames = rdpcap(str(pcap))
    assert len(frames) == 3
    # Cut at the snap length, the original length kept.
    assert [(len(bytes(f)), f.wirelen) for f in frames] == [(40, 14 + 20 + 8 + 9)] * 3
    assert all(f[Ether].src == VM1_MAC and f[IP].dst == "10.2.0.5" for f in frames)
    # Refusals: the file exists now; an unknown interface; nothing new is listed.
    r = h.ctl("capture", "start", "vm1", str(pcap), check=False)
    assert r.returncode == FAILED and "field: path" in r.stderr, r.stderr
    r = h.ctl("capture", "start", "nope", str(h.tmp / "n.pcap"), check=False)
    assert r.returncode == FAILED and "field: interface" in r.stderr, r.stderr
    assert not (h.tmp / "n.pcap").exists()
    assert len(h.json("capture", "list")) == 1
    h.ctl("capture", "stop", str(c["id"]))


def metrics(h):
    r = subprocess.run(["curl", "-sf", "--unix-socket", str(h.socket), "http://ovrd/metrics"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_metrics_cover_interfaces_drops_flows_and_node_time(host):
    h = host
    sink = UdpSink(h.vm2, 7000)
    try:
        send_udp(h, "10.2.0.5", 3)
        send_udp(h, "10.9.9.9", 2)
    finally:
        sink.stop()
    time.sleep(0.2)
    text = metrics(h)
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            values[k] = float(v)
    assert values['ovr_interface_rx_packets_total{interface="vm1"}'] >= 5
    assert values['ovr_interface_tx_packets_total{interface="vm2"}'] >= 3
    assert values['ovr_drops_total{reason="no_route"}'] >= 2
    assert values["ovr_flows_active"] >= 2
    assert values["ovr_flows_created_total"] >= 1
    assert "ovr_flows_aged_total" in values
    for node in ("ethernet-input", "flow", "interface-output"):
        assert values[f'ovr_node_packets_total{{node="{node}"}}'] > 0
        assert values[f'ovr_node_seconds_total{{node="{node}"}}'] > 0
        assert values[f'ovr_node_ns_per_packet{{node="{node}"}}'] > 0
    # Every family announced once.
    types = [line for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(types) == len(set(types))


def test_ovrctl_errors_have_a_message_and_a_status_each(host, tmp_path):
    h = host

    def run(*args, socket_path=None):
        cmd = [str(h.ovrctl), "--socket", str(socket_path or h.socket), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)

    # No daemon: no socket, or a socket nobody listens on.
    r = run("routes", socket_path=tmp_path / "none.sock")
    assert r.returncode == NOT_RUNNING and "ovrd is not running" in r.stderr, r
    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()
    r = run("counters", socket_path=stale)
    assert r.returncode == NOT_RUNNING and "ovrd is not running" in r.stderr, r
    # Not found.
    r = run("routes", "show", "red", "10.77.0.0/24")
    assert r.returncode == NOT_FOUND and r.stderr.startswith("ovrctl: not found:"), r
    r = run("capture", "stop", "99")
    assert r.returncode == NOT_FOUND and "no capture 99" in r.stderr, r
    # Refused: the field named, status 1.
    r = run("trace", "add", "0")
    assert r.returncode == FAILED and "field: packets" in r.stderr, r
    # Each a single line.
    assert r.stderr.count("\n") == 1
    # Permission denied: the socket is root's, tried as nobody (ovrctl copied where
    # nobody may run it).
    bindir = tempfile.mkdtemp(prefix="ovrob-")
    try:
        os.chmod(bindir, 0o755)
        binary = shutil.copy(h.ovrctl, bindir)
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            binary, "--socket", str(h.socket), "counters"],
                           capture_output=True, text=True, timeout=30)
    finally:
        shutil.rmtree(bindir)
    assert r.returncode == PERMISSION_DENIED and "permission denied" in r.stderr, r

    # vrfs: the networks with VRF id and VNI.
    table = h.ctl("vrfs").stdout
    header, row = table.splitlines()[:2]
    assert header.split()[:3] == ["id", "name", "vni"], table
    assert row.split()[1:3] == ["red", "100"], table
    assert h.json("vrfs") == h.json("networks")
