"""memif against a real peer: DPDK's testpmd with its memif PMD (net_memif).

ovrd runs a copy of examples/memif-l2.yaml (socket paths moved into the test's
directory): two memif servers in one L2 network. testpmd clients connect to both, one
sending 64-byte frames to 02:00:00:00:00:0b (txonly) into memif-a, the other counting
what ovr forwards out of memif-b (rxonly). Then the receiver is killed and started again
(the link goes down and comes back, traffic flows again), and ovr plays the client
towards a testpmd server, across an admin down/up of its interface.

Every testpmd and ovrd has its own directory, file prefix and sockets, and is stopped by
its own PID. testpmd's counters are read from its final report (SIGINT while still
connected: its counters reset when the link drops).
"""

import json
import re
import signal
import subprocess
import time

import pytest

from conftest import ROOT
from system.netns import stop
from system.ovrd import UnixHTTP
from system.testpmd import Testpmd, wait_until

MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"

def binaries():
    subprocess.run(["cargo", "build", "-q", "-p", "ovrd", "-p", "ovr-cli"], cwd=ROOT, check=True)
    return ROOT / "target" / "debug" / "ovrd", ROOT / "target" / "debug" / "ovrctl"


class Ovrd:
    """ovrd in the root namespace (memif needs no kernel interface)."""

    def __init__(self, tmp, config_text, *args):
        self.ovrd, self.ovrctl = binaries()
        self.tmp = tmp
        self.socket, self.state = tmp / "ovrd.sock", tmp / "state.json"
        self.config = tmp / "memif-l2.yaml"
        self.config.write_text(config_text)
        self.log = tmp / "ovrd.log"
        self.proc = subprocess.Popen(
            [str(self.ovrd), "--config", str(self.config), "--api-socket", str(self.socket),
             "--state", str(self.state), *args],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        wait_until(lambda: "forwarding" in self.log.read_text(), "ovrd forwarding", self.check)

    def check(self):
        assert self.proc.poll() is None, self.log.read_text()

    def api(self, method, path, body=None):
        c = UnixHTTP(self.socket)
        c.request(method, path, body=None if body is None else json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        assert r.status < 300, (r.status, data)
        return json.loads(data) if data else None

    def link(self, name):
        return next((l for l in self.api("GET", "/api/v1/links") if l["name"] == name), None)

    def counters(self, name):
        return next(i for i in self.api("GET", "/api/v1/counters/interfaces") if i["name"] == name)

    def wait_link(self, name, state, timeout=15):
        wait_until(lambda: (self.link(name) or {}).get("state") == state, f"{name} {state}",
                   self.check, timeout)
        return self.link(name)

    def set_admin(self, name, up):
        o = self.api("GET", f"/api/v1/interfaces/{name}")
        o["admin_up"] = up
        self.api("PUT", f"/api/v1/interfaces/{name}", o)

    def stop(self):
        stop(self.proc)


def example(tmp):
    text = (ROOT / "examples" / "memif-l2.yaml").read_text()
    assert "/run/ovr/memif-a.sock" in text and "/run/ovr/memif-b.sock" in text
    return text.replace("/run/ovr/", f"{tmp}/")


def b_as_client(tmp, sock):
    """The example with ovr a client of memif-b's network function, which listens on
    `sock`."""
    config = example(tmp).replace(
        f"""      role: server
      socket: {tmp}/memif-b.sock""",
        f"""      role: client
      socket: {sock}""")
    assert "role: client" in config
    return config


@pytest.fixture
def procs():
    started = []
    yield started
    for p in reversed(started):
        if isinstance(p, Testpmd):
            p.kill()
        else:
            p.stop()


def receiver(tmp, procs, sock, role="client", extra=()):
    """A testpmd counting what arrives (rxonly, MAC_B), added to the test's processes;
    `extra`: more of testpmd's options."""
    procs.append(Testpmd(tmp, [(role, sock, MAC_B)], "rxonly", *extra))
    return procs[-1]


def sender(tmp, procs, sock, extra=()):
    """A testpmd client sending 64-byte frames from MAC_A to MAC_B (txonly), likewise."""
    procs.append(Testpmd(tmp, [("client", sock, MAC_A)], "txonly", f"--eth-peer=0,{MAC_B}",
                         *extra))
    return procs[-1]


def assert_64_bytes(stats):
    """The frames the receiving testpmd counted were 64 bytes long (as sent). Its packet
    and byte counters are read a moment apart while frames arrive: within 0.1%."""
    busy = [(p, b) for p, b in stats["port_rx"] if p > 10_000]
    assert busy, stats
    assert all(abs(b / p - 64) < 0.064 for p, b in busy), busy[-3:]


def check_frames(pcap, count):
    """The frames ovr handed to memif-b: testpmd's txonly frames, whole."""
    from scapy.all import IP, UDP, Ether, rdpcap

    frames = rdpcap(str(pcap))
    assert len(frames) == count
    for f in frames:
        assert f[Ether].dst == MAC_B and f[Ether].src == MAC_A
        assert len(f) == 64
        ip = f[IP]
        assert (ip.src, ip.dst) == ("198.18.0.1", "198.18.0.2")
        assert (f[UDP].sport, f[UDP].dport) == (9, 9)
        # The IP checksum still holds: the header arrived as testpmd wrote it.
        sent = ip.chksum
        del ip.chksum
        assert IP(bytes(ip)).chksum == sent


def stop_and_check(ovrd, rx, tx, at_least):
    """Stops the receiver (first, while still connected) and the sender: at least
    `at_least` 64-byte frames arrived, no more than were sent, and ovr counted them in
    on memif-a and out on memif-b. Returns the receiver's counters."""
    got = rx.stop()
    sent = tx.stop()
    assert got["RX-packets"] >= at_least, (got, sent)
    assert_64_bytes(got)
    assert sent["TX-packets"] >= got["RX-packets"]
    a, b = ovrd.counters("memif-a"), ovrd.counters("memif-b")
    assert a["rx_packets"] >= got["RX-packets"] and b["tx_packets"] >= got["RX-packets"], (a, b)
    return got


def test_testpmd_to_testpmd_through_ovr(tmp_path, procs):
    ovrd = Ovrd(tmp_path, example(tmp_path))
    procs.append(ovrd)
    a_sock, b_sock = tmp_path / "memif-a.sock", tmp_path / "memif-b.sock"
    assert ovrd.link("memif-a")["state"] == "down" and ovrd.link("memif-b")["role"] == "server"

    rx = receiver(tmp_path, procs, b_sock)
    link_b = ovrd.wait_link("memif-b", "up")
    assert link_b["peer_name"].startswith("DPDK") and link_b["version"] == "2.0"
    assert link_b["peer_interface"] == "net_memif0"
    tx = sender(tmp_path, procs, a_sock)
    ovrd.wait_link("memif-a", "up")
    out = subprocess.run([str(ovrd.ovrctl), "--socket", str(ovrd.socket), "interfaces"],
                         capture_output=True, text=True, check=True).stdout
    assert re.search(r"memif-a .* up \(DPDK [\d.]+ net_memif0, memif 2\.0\)", out), out

    pcap = tmp_path / "b-tx.pcap"
    ovrd.api("POST", "/api/v1/captures", {"interface": "memif-b", "path": str(pcap),
                                           "direction": "tx", "packets": 50})
    time.sleep(5)
    stop_and_check(ovrd, rx, tx, 100_000)
    wait_until(lambda: pcap.exists() and pcap.stat().st_size >= 24 + 50 * 80, "capture")
    check_frames(pcap, 50)

    # Both peers went: the links are down, the disconnects counted by reason.
    link_b = ovrd.wait_link("memif-b", "down")
    assert link_b["disconnects"].get("peer_closed", 0) >= 1
    assert sum(ovrd.link("memif-a")["bad_descriptors"].values()) == 0

    # The receiver comes back (a restarted network function), then the sender.
    rx = receiver(tmp_path, procs, b_sock)
    assert ovrd.wait_link("memif-b", "up")["connects"] == 2
    tx = sender(tmp_path, procs, a_sock)
    ovrd.wait_link("memif-a", "up")
    time.sleep(3)
    got = rx.stop()
    tx.stop()
    assert got["RX-packets"] >= 50_000, got


def test_queues_are_read_by_several_workers(tmp_path, procs):
    """Two queues each way on both links and two workers: each worker reads one receive
    queue of memif-a (queue 0 on the worker the interface is dealt to, queue 1 on the
    other), and every frame still reaches the receiver."""
    config = example(tmp_path).replace("queues: 1", "queues: 2")
    config = config.replace("      mode: ethernet\n\nnetworks:", "      mode: ethernet\n      queues: 2\n\nnetworks:")
    assert config.count("queues: 2") == 2, config
    ovrd = Ovrd(tmp_path, config, "--workers", "2")
    procs.append(ovrd)
    two = ("--rxq=2", "--txq=2")
    rx = receiver(tmp_path, procs, tmp_path / "memif-b.sock", extra=two)
    ovrd.wait_link("memif-b", "up")
    tx = sender(tmp_path, procs, tmp_path / "memif-a.sock", extra=("--txonly-multi-flow", *two))
    link_a = ovrd.wait_link("memif-a", "up")
    assert link_a["queues"] == {"rx": 2, "tx": 2}, link_a
    wait_until(lambda: all(q["frames"] > 10_000 for q in ovrd.link("memif-a")["rx_queues"]),
               "both of memif-a's queues read", ovrd.check)
    queues = ovrd.link("memif-a")["rx_queues"]
    assert sorted(q["worker"] for q in queues) == [0, 1], queues
    rx.wait_ports(lambda p: p.get(0, (0, 0))[0] > 20_000, "frames arrive")
    stop_and_check(ovrd, rx, tx, 20_000)


def test_ovr_as_client_of_testpmd_and_admin_down_up(tmp_path, procs):
    b_sock = tmp_path / "nf-b.sock"
    config = b_as_client(tmp_path, b_sock)
    # The network function is the server here: it listens first.
    rx = receiver(tmp_path, procs, b_sock, "server")
    wait_until(lambda: b_sock.exists(), "testpmd's socket")
    ovrd = Ovrd(tmp_path, config)
    procs.append(ovrd)
    link_b = ovrd.wait_link("memif-b", "up")
    assert link_b["role"] == "client" and link_b["peer_name"].startswith("DPDK")
    tx = sender(tmp_path, procs, tmp_path / "memif-a.sock")
    ovrd.wait_link("memif-a", "up")
    time.sleep(3)
    forwarded = ovrd.counters("memif-b")["tx_packets"]
    assert forwarded >= 50_000, forwarded
    # The sender stops before the link to the testpmd server goes down (a testpmd server
    # may crash if its peer leaves while it forwards).
    tx.stop()

    # Admin down: ovr leaves (its peer is told); admin up: ovr connects again.
    ovrd.set_admin("memif-b", False)
    wait_until(lambda: not any(l["name"] == "memif-b" for l in ovrd.api("GET", "/api/v1/links")),
               "memif-b let go", ovrd.check)
    ovrd.set_admin("memif-b", True)
    link_b = ovrd.wait_link("memif-b", "up")
    assert rx.proc.poll() is None, rx.text()
    tx = sender(tmp_path, procs, tmp_path / "memif-a.sock")
    ovrd.wait_link("memif-a", "up")
    time.sleep(3)
    got = rx.stop()
    tx.stop()
    assert got["RX-packets"] >= 50_000, got
    assert_64_bytes(got)


def test_links_come_back_after_ovrd_is_killed_and_restarted(tmp_path, procs):
    """kill -9 of ovrd, then a restart from its state file: ovr's client link connects to
    the testpmd server again by itself, and its server link listens again on the socket
    path the killed process left behind. (DPDK's net_memif client does not reconnect by
    itself, unlike VPP's and libmemif's: the sender is started again.)"""
    b_sock = tmp_path / "nf-b.sock"
    config = b_as_client(tmp_path, b_sock)
    rx = receiver(tmp_path, procs, b_sock, "server")
    wait_until(lambda: b_sock.exists(), "testpmd's socket")
    first = Ovrd(tmp_path, config)
    procs.append(first)
    first.wait_link("memif-b", "up")
    tx = sender(tmp_path, procs, tmp_path / "memif-a.sock")
    first.wait_link("memif-a", "up")
    wait_until(lambda: first.counters("memif-b")["tx_packets"] >= 50_000, "frames forwarded",
               first.check)

    first.proc.kill()
    first.proc.wait()
    assert (tmp_path / "memif-a.sock").exists()
    tx.stop()
    # DPDK 22.11's memif server sometimes dies of SIGSEGV moments after its client
    # vanishes while it forwards (../shared/PLATFORM.md; seen here in about one run in
    # ten, with ovrd builds before and after the engine changes of 2026-11-28): testpmd's
    # bug, not what this test is about. Then a new server listens on the same path, and
    # ovr's client must find it by itself all the same.
    time.sleep(1)
    if rx.proc.poll() is not None:
        assert rx.proc.returncode == -signal.SIGSEGV, rx.text()
        rx.kill()
        b_sock.unlink(missing_ok=True)
        rx = receiver(tmp_path, procs, b_sock, "server")
        wait_until(lambda: b_sock.exists(), "testpmd's socket")

    again = Ovrd(tmp_path, config)
    procs.append(again)
    link_b = again.wait_link("memif-b", "up")
    assert link_b["connects"] == 1 and link_b["peer_name"].startswith("DPDK")
    tx = sender(tmp_path, procs, tmp_path / "memif-a.sock")
    again.wait_link("memif-a", "up")
    time.sleep(3)
    # testpmd's counters started again when the link came back: these frames all came
    # through the restarted ovrd.
    got = rx.stop()
    tx.stop()
    assert got["RX-packets"] >= 50_000, got
    assert_64_bytes(got)
    assert again.counters("memif-b")["tx_packets"] >= got["RX-packets"]


U_MAC, REMOTE_MAC = "02:00:00:00:01:01", "02:00:00:00:01:02"


def memif_underlay(tmp):
    """memif-a a network function's interface in network red (VNI 100); the underlay
    itself a memif interface (memif-u, 192.0.2.1), with a VXLAN tunnel to 192.0.2.2, behind
    which MAC_B lives."""
    return f"""
interfaces:
  - name: memif-a
    kind: memif
    network: red
    peer_mac: "{MAC_A}"
    memif: {{ role: server, socket: {tmp}/memif-a.sock, id: 0 }}
  - name: memif-u
    kind: underlay
    mac: "{U_MAC}"
    addresses: [192.0.2.1/24]
    memif: {{ role: server, socket: {tmp}/memif-u.sock, id: 0 }}
networks:
  - {{ name: red, vni: 100 }}
tunnels:
  - {{ name: to-b, underlay: memif-u, remote: 192.0.2.2, remote_mac: "{REMOTE_MAC}" }}
nexthops:
  - {{ name: b-red, kind: tunnel, tunnel: to-b, encap: vxlan, vni: 100 }}
bridge:
  - {{ network: red, mac: "{MAC_B}", nexthop: b-red }}
"""


def test_vxlan_through_a_memif_underlay(tmp_path, procs):
    """The underlay may be another switch's memif: testpmd's frames into memif-a leave
    memif-u inside VXLAN, to a testpmd counting them; ovr's capture of memif-u shows each
    whole, dissected by scapy: the tunnel's MACs and addresses, UDP 4789, VNI 100, and the
    frame inside as testpmd sent it. The other way, VXLAN packets built by scapy, replayed
    by testpmd into memif-u, come out of memif-a decapsulated."""
    from scapy.all import IP, UDP, VXLAN, Ether, rdpcap, wrpcap

    ovrd = Ovrd(tmp_path, memif_underlay(tmp_path))
    procs.append(ovrd)
    peer = {"memif-a": MAC_A, "memif-u": REMOTE_MAC}

    def through(into, out, sender):
        """Frames from `sender(socket)` (a testpmd on `into`) through ovr for 3 s, out of
        `out` to a testpmd counting them, 20 of them captured there by ovr: that
        testpmd's counters and the captured frames."""
        procs.append(Testpmd(tmp_path, [("client", tmp_path / f"{out}.sock", peer[out])],
                             "rxonly"))
        rx = procs[-1]
        ovrd.wait_link(out, "up")
        procs.append(sender(tmp_path / f"{into}.sock"))
        tx = procs[-1]
        ovrd.wait_link(into, "up")
        pcap = tmp_path / f"{out}-tx.pcap"
        ovrd.api("POST", "/api/v1/captures", {"interface": out, "path": str(pcap),
                                               "direction": "tx", "packets": 20})
        time.sleep(3)
        got = rx.stop()
        tx.stop()
        assert got["RX-packets"] >= 20_000, got
        wait_until(lambda: pcap.exists() and len(rdpcap(str(pcap))) == 20, "capture")
        return got, rdpcap(str(pcap))

    got, frames = through("memif-a", "memif-u", lambda sock: Testpmd(
        tmp_path, [("client", sock, MAC_A)], "txonly", f"--eth-peer=0,{MAC_B}"))
    busy = [(p, b) for p, b in got["port_rx"] if p > 10_000]
    assert busy and all(abs(b / p - (64 + 50)) < 0.12 for p, b in busy), busy[-3:]
    assert ovrd.counters("memif-u")["tx_packets"] >= got["RX-packets"]
    for f in frames:
        assert (f[Ether].src, f[Ether].dst) == (U_MAC, REMOTE_MAC)
        assert (f[IP].src, f[IP].dst, f[IP].proto) == ("192.0.2.1", "192.0.2.2", 17)
        assert f[UDP].dport == 4789 and f[VXLAN].vni == 100
        inner = f[VXLAN].payload
        assert (inner[Ether].src, inner[Ether].dst) == (MAC_A, MAC_B) and len(inner) == 64
        assert (inner[IP].src, inner[IP].dst) == ("198.18.0.1", "198.18.0.2")
        # The outer IPv4 checksum is right: scapy's own over the same header agrees.
        sent = f[IP].chksum
        del f[IP].chksum
        assert IP(bytes(f[IP])).chksum == sent

    # The other way: from the tunnel's far end (192.0.2.2), 16 flows to MAC_A.
    replay = tmp_path / "from-b.pcap"
    wrpcap(str(replay), [
        Ether(src=REMOTE_MAC, dst=U_MAC) / IP(src="192.0.2.2", dst="192.0.2.1")
        / UDP(sport=49152 + i, dport=4789, chksum=0) / VXLAN(vni=100)
        / Ether(src=MAC_B, dst=MAC_A) / IP(src="198.18.0.2", dst="198.18.0.1")
        / UDP(sport=1000 + i, dport=9) / bytes(22)
        for i in range(16)])
    _, frames = through("memif-u", "memif-a", lambda sock: Testpmd(
        tmp_path, [("client", sock, REMOTE_MAC)], "io", replay=replay))
    for f in frames:
        assert (f[Ether].src, f[Ether].dst) == (MAC_B, MAC_A) and len(f) == 64
        assert (f[IP].src, f[IP].dst) == ("198.18.0.2", "198.18.0.1")
        assert f[UDP].dport == 9 and 1000 <= f[UDP].sport < 1016
