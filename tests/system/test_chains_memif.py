"""A network function on memif in a service chain: DPDK's testpmd with two memif ports
(net_memif clients of ovr's two memif servers, the instance's left and right) forwarding
in `io` mode, port 0 to port 1 and back unchanged: a transparent function, a bump in
the wire. Workloads a (red) and b (blue) as in test_chains.py, red → blue through it.

Checked: ping and TCP cross testpmd (its port counters rise) and arrive at b with their
MACs and payloads intact, the frames out of testpmd byte for byte those ovr sent in; the
instance is healthy only while its memif ports are connected (testpmd not started yet:
the chain fails closed, counted under `chain_no_instance`; killed: it leaves within a
second, its sessions move to a second instance, a Linux bridge, and with that one down
too the chain fails closed; started again: traffic resumes through it); and a chain of
two functions, an nftables namespace routing (in-network) then testpmd, counted by
both.

testpmd runs on one CPU (both its lcores on CPU 1: its forwarding lcore polls that CPU
while it runs), with its own file prefix, in the test's directory, stopped by its PID."""

import textwrap
import time

import pytest

from system.netns import sh, until
from system.ovrd import binary
from system.test_chains import (A_IP, B_IP, B_MAC, CLIENT, PORT, ROUTER_MAC, ChainLab,
                                Topology, config, instance, port_mac)
from system.testpmd import Testpmd

# Where ovr sends from into the function's ports (a transparent function's ports need a
# MAC of their own) and testpmd's own ports' MACs (unused in io mode).
PL_MAC, PR_MAC = "02:00:00:d1:00:01", "02:00:00:d1:00:02"
PMD_L_MAC, PMD_R_MAC = "02:00:00:d2:00:01", "02:00:00:d2:00:02"
PATTERN = "a5c3"  # ping's payload pattern

# Frames from a that reach b's eth0, written to a pcap once a TCP segment with data came.
SNIFF = textwrap.dedent("""
    import sys
    from scapy.all import IP, TCP, Raw, sniff, wrpcap
    got = sniff(iface="eth0", timeout=30,
                lfilter=lambda p: IP in p and p[IP].src == sys.argv[2],
                stop_filter=lambda p: TCP in p and Raw in p,
                started_callback=lambda: print("sniffing", flush=True))
    wrpcap(sys.argv[1], got)
""")


class MemifChainLab(ChainLab):
    """Namespaces named ovrmc<pid>-…, deleted by exactly those names."""

    def __init__(self):
        super().__init__()
        self.prefix = self.prefix.replace("ovrsc", "ovrmc", 1)


class MemifTopology(Topology):
    def __init__(self, lab, tmp_path):
        super().__init__(lab, tmp_path)
        self.left, self.right = tmp_path / "pmd-l.sock", tmp_path / "pmd-r.sock"
        self.pmds = []  # every testpmd started, killed (by PID) at the end

    def build_memif(self, functions, bridge=False):
        """red → blue through `functions`: "fw" (an nftables namespace, in-network) and
        "pmd" (testpmd over memif, transparent), in that order. `bridge`: pmd has a
        second instance, pmd-2, a Linux bridge in namespace fw2 (veths f2l and f2r)."""
        self.workloads()
        if "fw" in functions:
            self.instance(1)
        cfg = config(1 if "fw" in functions else 0)
        cfg["interfaces"] += [
            {"name": name, "kind": "memif", "network": "svc", "mac": mac,
             "memif": {"role": "server", "socket": str(sock), "id": 0}}
            for name, mac, sock in (("pl", PL_MAC, self.left), ("pr", PR_MAC, self.right))]
        instances = [{"name": "pmd-1", "left": {"interface": "pl"}, "right": {"interface": "pr"}}]
        if bridge:
            self.instance(2, "transparent")
            cfg["interfaces"] += [{"name": f"f2{s}", "network": "svc", "mac": port_mac(2, s)}
                                  for s in "lr"]
            instances.append({"name": "pmd-2", "left": {"interface": "f2l"},
                              "right": {"interface": "f2r"}})
        cfg["services"] = [s for s in cfg["services"] if s["name"] in functions] + [
            {"name": "pmd", "mode": "transparent", "instances": instances}]
        cfg["chains"] = [{"name": "through-fw", "functions": functions}]
        self.run(cfg)

    def start_pmd(self):
        """testpmd on both memif ports (0: left, 1: right), io forwarding; waits until
        ovr holds the instance healthy again."""
        pmd = Testpmd(self.tmp, [("client", self.left, PMD_L_MAC),
                                 ("client", self.right, PMD_R_MAC)],
                      "io", lcores="0@1,1@1", tag="ovrmc")
        self.pmds.append(pmd)
        self.wait_health("pmd-1", True, timeout=10)
        return pmd

    def chains(self):
        # From the API in this process: a health change is seen when it happens, not
        # after an ovrctl process started (slow on a busy machine).
        return self.ovrd.api_get("/api/v1/chains")

    def links(self):
        return {link["name"]: link["state"] for link in self.ovrd.get("/api/v1/links")}

    def dropped(self):
        return self.json("dropstats").get("chain_no_instance", 0)

    def capture(self, interface, direction, packets):
        path = self.tmp / f"{interface}-{direction}.pcap"
        r = sh("curl", "-s", "-f", "--unix-socket", str(self.ovrd.socket), "-X", "POST",
               "-H", "Content-Type: application/json", "-d",
               f'{{"interface": "{interface}", "path": "{path}", "direction": "{direction}", '
               f'"packets": {packets}}}', "http://ovrd/api/v1/captures", check=False)
        assert r.returncode == 0, (r.stdout, r.stderr)
        return path

    def captured(self, path):
        """Waits until the capture into `path` took its count; its frames."""
        until(f"capture {path}", lambda: any(
            c["path"] == str(path) and c["state"] == "finished"
            for c in self.ovrd.get("/api/v1/captures")))
        return frames(path)

    def tcp_exchange(self):
        """One TCP session from a to b's echo server, 3 messages: whether all came back."""
        client = self.start(self.a, CLIENT, B_IP, str(PORT))
        ports = self.tell(client, "open 1")
        ok = self.tell(client, "send 3")
        self.tell(client, "quit")
        return ports, ok == [True]


@pytest.fixture
def memif_topo(tmp_path, request):
    binary("ovr-cli", "ovrctl")
    lab = MemifChainLab()
    t = MemifTopology(lab, tmp_path)
    try:
        t.build_memif(*request.param)
        yield t
    finally:
        for pmd in t.pmds:
            pmd.kill()
        t.close()
        lab.close()


def forwarded(requests, replies):
    """A condition on testpmd's ports' counters: at least `requests` frames in by port 0
    (from ovr's left port) and out of port 1, and `replies` in by port 1 and out of
    port 0. (Not equal counts: a frame that arrives while testpmd's other port is still
    connecting is dropped there, e.g. a retransmission of a session dropped meanwhile.)"""
    def cond(ports):
        (rx0, tx0), (rx1, tx1) = ports.get(0, (0, 0)), ports.get(1, (0, 0))
        return min(rx0, tx1) >= requests and min(rx1, tx0) >= replies
    return cond


def frames(pcap):
    from scapy.all import rdpcap

    return [bytes(f) for f in rdpcap(str(pcap))]


@pytest.mark.parametrize("memif_topo", [(["pmd"],)], indirect=True)
def test_ping_and_tcp_cross_testpmd_unchanged(memif_topo):
    t = memif_topo
    # No testpmd yet: the ports wait for it, the instance is down, the chain fails closed.
    assert t.links() == {"pl": "down", "pr": "down"}
    t.wait_health("pmd-1", False)
    dropped = t.dropped()
    assert t.ping(2).returncode != 0
    assert t.dropped() >= dropped + 2

    # (scapy takes seconds to load: before testpmd starts polling.)
    from scapy.all import ICMP, IP, TCP, Ether, Raw, rdpcap

    sniffer = t.start(t.b, SNIFF, str(t.tmp / "b.pcap"), A_IP, wait="sniffing")
    pmd = t.start_pmd()
    assert t.links() == {"pl": "up", "pr": "up"}
    # What a sends to ovr, what ovr sends into testpmd, what comes out of it: the pings.
    from_a, into = t.capture("wa", "rx", 8), t.capture("pl", "tx", 3)
    out_of = t.capture("pr", "rx", 3)
    r = sh("ping", "-c", "3", "-i", "0.2", "-W", "2", "-p", PATTERN, B_IP, ns=t.a, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    ports, ok = t.tcp_exchange()
    assert ok
    assert t.instance_of_sessions(ports) == {ports[0]: ("pmd/pmd-1/left", "pmd/pmd-1/right")}

    # testpmd forwarded them: requests in by port 0 (left) out of port 1, replies back.
    pmd.wait_ports(forwarded(3 + 5, 3 + 4), "the requests and replies")

    # Out of testpmd byte for byte as ovr sent them in: addressed to the gateway, from
    # ovr's left port.
    sent, came = t.captured(into), t.captured(out_of)
    assert len(sent) == 3 and sent == came
    for f in map(Ether, sent):
        assert (f.dst, f.src) == (ROUTER_MAC, PL_MAC)
        assert (f[IP].src, f[IP].dst) == (A_IP, B_IP) and f[ICMP].type == 8
    # (a's ARP may be among its frames.)
    echoes = [bytes(f[ICMP]) for f in map(Ether, t.captured(from_a)) if ICMP in f]

    # At b: the pings and the TCP data, from the gateway to b's MAC, payloads as sent.
    sniffer.wait(timeout=30)
    at_b = rdpcap(str(t.tmp / "b.pcap"))
    pings = [f for f in at_b if ICMP in f and f[ICMP].type == 8]
    assert len(pings) == 3, at_b
    for f in at_b:
        assert (f[Ether].dst, f[Ether].src) == (B_MAC, ROUTER_MAC)
    # The ICMP messages as a sent them (ping's timestamp, then its pattern).
    assert [bytes(f[ICMP]) for f in pings] == echoes
    assert all(e.endswith(bytes.fromhex(PATTERN) * 8) for e in echoes), echoes
    assert any(TCP in f and f[Raw].load == b"ping" for f in at_b if Raw in f)

    report = t.chains()["chains"][0]["functions"][0]
    assert report["mode"] == "transparent"
    (inst,) = report["instances"]
    assert inst["healthy"] and inst["left"]["up"] and inst["right"]["up"]


@pytest.mark.parametrize("memif_topo", [(["pmd"], True)], indirect=True)
def test_testpmd_killed_its_sessions_move_then_fail_closed_and_its_restart_resumes(memif_topo):
    t = memif_topo
    pmd = t.start_pmd()
    client = t.start(t.a, CLIENT, B_IP, str(PORT))

    def send(timeout=3):
        return t.tell(client, f"send {timeout}")

    ports = t.tell(client, "open 16")
    assert send() == [True] * 16
    on = {p: instance(into) for p, (into, _) in t.instance_of_sessions(ports).items()}
    assert set(on.values()) == {"pmd-1", "pmd-2"}, on  # spread over testpmd and the bridge
    bridged = t.counters(2)[0]

    # testpmd dies: its memif ports go down, pmd-1 leaves within a second; its sessions
    # move to the bridge, the bridge's stay.
    went = time.time()
    pmd.kill()
    left = t.wait_health("pmd-1", False)
    assert left - went < 1.0, left - went
    assert t.links() == {"pl": "down", "pr": "down"}
    assert send(5) == [True] * 16
    for p, (into, back) in t.instance_of_sessions(ports).items():
        assert instance(into) == "pmd-2" and instance(back) == "pmd-2", (p, into, back)
    assert t.counters(2)[0] >= bridged + 16

    # The bridge's link goes too: none left, the chain fails closed.
    sh("ip", "link", "set", "left", "down", ns=t.fw[2])
    t.wait_health("pmd-2", False)
    dropped = t.dropped()
    assert t.ping(3).returncode != 0
    assert send(0.3) == [False] * 16
    now = t.dropped()
    assert now >= dropped + 3 + 16, (dropped, now)
    assert t.chains()["dropped_no_instance"] >= now
    t.tell(client, "quit")

    # testpmd is started again (it connects to ovr's servers, still listening): traffic
    # resumes through it.
    pmd = t.start_pmd()
    assert t.ping(3).returncode == 0
    ports, ok = t.tcp_exchange()
    assert ok
    assert t.instance_of_sessions(ports) == {ports[0]: ("pmd/pmd-1/left", "pmd/pmd-1/right")}
    # Its counters started again with the new process.
    pmd.wait_ports(forwarded(3 + 3, 3 + 2), "the pings and the session")


@pytest.mark.parametrize("memif_topo", [(["fw", "pmd"],)], indirect=True)
def test_a_chain_of_nftables_then_testpmd(memif_topo):
    t = memif_topo
    pmd = t.start_pmd()
    r = t.ping(3)
    assert r.returncode == 0, r.stdout + r.stderr
    ports, ok = t.tcp_exchange()
    assert ok
    to_b, to_a = t.counters(1)
    assert to_b >= 3 + 3 and to_a >= 3 + 2, (to_b, to_a)  # pings; SYN, ACK, data
    pmd.wait_ports(forwarded(3 + 3, 3 + 2), "the pings and the session")
    # In by the first function's left, back into the last function's right.
    assert t.instance_of_sessions(ports) == {ports[0]: ("fw/fw-1/left", "pmd/pmd-1/right")}
    fw, pmd_fn = t.chains()["chains"][0]["functions"]
    assert (fw["name"], fw["mode"], pmd_fn["name"], pmd_fn["mode"]) == (
        "fw", "in-network", "pmd", "transparent")
    assert all(i["healthy"] for f in (fw, pmd_fn) for i in f["instances"])
