"""Service chains on one host: workloads `a` (network red) and `b` (network blue) behind
one ovrd, and red's policy steering red → blue through the function `fw`, whose
instances are namespaces that route between their left and right with Linux forwarding
and count (and drop) with nftables. Checked: ICMP and TCP cross the function (its nftables
counters rise) and the replies come back through the same instance (ovr's flows name
it both ways); with two instances sessions spread and stay pinned; an instance whose
link goes down gives its sessions to the other, the others' stay; with none left the
chain fails closed, counted under `chain_no_instance`. A transparent instance (a Linux
bridge counting with nftables' bridge family) passes frames unchanged both ways."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT
from system.netns import Lab, sh, stop
from system.ovrd import Ovrd, binary

ROUTER_MAC = "00:00:5e:00:01:00"
A_MAC, B_MAC = "02:00:00:0a:00:02", "02:00:00:0b:00:02"
A_IP, B_IP = "10.1.0.2", "10.2.0.2"
PORT = 8080  # B's echo server
BLOCKED = 9999  # the port the dropping firewall refuses

ECHO_SERVER = textwrap.dedent("""
    import socket, sys, threading
    def serve(c):
        with c:
            while (d := c.recv(4096)):
                c.sendall(d)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(sys.argv[1])))
    s.listen(64)
    print("listening", flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
""")

# Holds TCP sessions open: "open N" connects N sessions, "send" sends on each and says
# which answered, "quit". One JSON line per command.
CLIENT = textwrap.dedent("""
    import json, socket, sys
    conns = []
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "open":
            for _ in range(int(cmd[1])):
                c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
                conns.append(c)
            print(json.dumps([c.getsockname()[1] for c in conns]), flush=True)
        elif cmd[0] == "send":
            c_timeout = float(cmd[1])
            ok = []
            for c in conns:
                try:
                    c.settimeout(c_timeout)
                    c.sendall(b"ping")
                    ok.append(c.recv(16) == b"ping")
                except OSError:
                    ok.append(False)
            print(json.dumps(ok), flush=True)
        else:
            break
""")

NFT = """
table inet fw {
    chain forward {
        type filter hook forward priority 0; policy accept;
        ip daddr 10.2.0.0/24 counter
        ip daddr 10.1.0.0/24 counter
    }
}
"""


class ChainLab(Lab):
    """Namespaces named ovrsc<pid>-…, deleted by exactly those names."""

    def __init__(self):
        super().__init__("")
        self.prefix = f"ovrsc{os.getpid() % 10000}"


def config(instances, mode="in-network", probe=None):
    """red → blue through `fw` with `instances` instances (1 or 2), probed with `probe`
    (None: links only)."""
    ifaces = [
        {"name": "wa", "network": "red", "peer_mac": A_MAC, "peer_addresses": [A_IP]},
        {"name": "wb", "network": "blue", "peer_mac": B_MAC, "peer_addresses": [B_IP]},
    ]
    insts = []
    for n in range(1, instances + 1):
        if mode == "transparent":
            # A bump in the wire: no MAC of its own; ovr's ports need theirs (a bridge
            # must not learn the gateway's MAC on either side).
            ifaces += [{"name": f"f{n}l", "network": "svc", "mac": port_mac(n, "l")},
                       {"name": f"f{n}r", "network": "svc", "mac": port_mac(n, "r")}]
            insts.append({"name": f"fw-{n}", "left": {"interface": f"f{n}l"},
                          "right": {"interface": f"f{n}r"}})
            continue
        ifaces += [{"name": f"f{n}l", "network": "svc"}, {"name": f"f{n}r", "network": "svc"}]
        insts.append({
            "name": f"fw-{n}",
            "left": {"interface": f"f{n}l", "mac": fw_mac(n, "l"), "address": f"10.99.1.1{n}"},
            "right": {"interface": f"f{n}r", "mac": fw_mac(n, "r"), "address": f"10.99.2.1{n}"},
        })
    return {
        "interfaces": ifaces,
        "networks": [
            {"name": "red", "gateways": ["10.1.0.1/24"],
             "policy": [{"action": "chain", "chain": "through-fw", "dst_network": "blue"}]},
            {"name": "blue", "gateways": ["10.2.0.1/24"]},
            {"name": "svc", "gateways": ["10.99.1.1/24", "10.99.2.1/24"]},
        ],
        "routes": [{"network": "red", "prefix": f"{B_IP}/32", "nexthop": "wb"},
                   {"network": "blue", "prefix": f"{A_IP}/32", "nexthop": "wa"}],
        "services": [{"name": "fw", "mode": mode, "instances": insts,
                      **({"probe": probe} if probe else {})}],
        "chains": [{"name": "through-fw", "functions": ["fw"]}],
    }


def fw_mac(n, side):
    return f"02:00:00:f{n}:00:{'01' if side == 'l' else '02'}"


def port_mac(n, side):
    return f"02:00:00:e{n}:00:{'01' if side == 'l' else '02'}"


class Topology:
    def __init__(self, lab, tmp_path):
        self.lab, self.tmp = lab, tmp_path
        self.procs, self.ovrd, self.fw = [], None, {}

    def build(self, instances, mode="in-network", probe=None):
        self.workloads()
        for n in range(1, instances + 1):
            self.instance(n, mode)
        self.run(config(instances, mode, probe))

    def workloads(self):
        """The host's namespace, a (red) and b (blue) behind it."""
        lab = self.lab
        self.host = lab.ns("host")
        self.a, self.b = lab.ns("a"), lab.ns("b")
        lab.veth(self.host, "wa", self.a, "eth0", mac_b=A_MAC)
        lab.veth(self.host, "wb", self.b, "eth0", mac_b=B_MAC)
        for ns, ip, gw in ((self.a, A_IP, "10.1.0.1"), (self.b, B_IP, "10.2.0.1")):
            sh("ip", "addr", "add", f"{ip}/24", "dev", "eth0", ns=ns)
            sh("ip", "route", "add", "default", "via", gw, ns=ns)

    def instance(self, n, mode="in-network"):
        """Instance n of `fw`: a namespace with ports left and right (veths to the host's
        f<n>l and f<n>r), routing with nftables counting (in-network) or bridging with
        nftables' bridge family counting (transparent)."""
        lab = self.lab
        self.family = "bridge" if mode == "transparent" else "inet"
        f = lab.ns(f"fw{n}")
        self.fw[n] = f
        lab.veth(self.host, f"f{n}l", f, "left", mac_b=fw_mac(n, "l"))
        lab.veth(self.host, f"f{n}r", f, "right", mac_b=fw_mac(n, "r"))
        if mode == "transparent":
            # Frames pass unchanged through a bridge, counted by nftables' bridge family.
            sh("ip", "link", "add", "br0", "type", "bridge", ns=f)
            for port in ("left", "right"):
                sh("ip", "link", "set", port, "master", "br0", ns=f)
            sh("ip", "link", "set", "br0", "up", ns=f)
            sh("nft", "-f", "-", ns=f, input=NFT.replace("inet", "bridge"))
            return
        sh("ip", "addr", "add", f"10.99.1.1{n}/24", "dev", "left", ns=f)
        sh("ip", "addr", "add", f"10.99.2.1{n}/24", "dev", "right", ns=f)
        sh("ip", "route", "add", "10.1.0.0/24", "via", "10.99.1.1", ns=f)
        sh("ip", "route", "add", "10.2.0.0/24", "via", "10.99.2.1", ns=f)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=f)
        sh("nft", "-f", "-", ns=f, input=NFT)

    def run(self, cfg):
        """ovrd in the host's namespace with configuration `cfg`, and b's echo servers."""
        path = self.tmp / "ovr.json"
        path.write_text(json.dumps(cfg))
        self.ovrd = Ovrd(self.host, self.tmp / "ovrd.log", "--config", path)
        self.start(self.b, ECHO_SERVER, str(PORT), wait="listening")
        self.start(self.b, ECHO_SERVER, str(BLOCKED), wait="listening")

    def start(self, ns, script, *args, wait=None):
        p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", script, *args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        if wait:
            assert wait in p.stdout.readline()
        return p

    @staticmethod
    def tell(client, command):
        """Sends one command to a client started with CLIENT; its JSON answer (none for
        `quit`)."""
        client.stdin.write(command + "\n")
        client.stdin.flush()
        return None if command == "quit" else json.loads(client.stdout.readline())

    def close(self):
        for p in self.procs:
            stop(p)
        if self.ovrd:
            self.ovrd.stop()

    def ctl(self, *args):
        r = subprocess.run([str(binary("ovr-cli", "ovrctl")), "--socket", str(self.ovrd.socket),
                            *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.stdout

    def json(self, *args):
        return json.loads(self.ctl("--json", *args))

    def counters(self, n):
        """nftables' counters in instance n: (packets towards blue, packets towards red)."""
        out = json.loads(sh("nft", "-j", "list", "chain", self.family, "fw", "forward",
                            ns=self.fw[n]).stdout)
        rules = [x["rule"] for x in out["nftables"] if "rule" in x]
        counts = []
        for r in rules:
            c = next((e["counter"] for e in r["expr"] if "counter" in e), None)
            if c is not None:
                counts.append(c["packets"])
        return counts

    def ping(self, count=3):
        return sh("ping", "-c", str(count), "-i", "0.2", "-W", "2", B_IP, ns=self.a,
                  check=False)

    def instance_of_sessions(self, ports):
        """For each client port: (instance of its entry flow, instance its reply goes
        back into), from ovr's flows."""
        flows = self.json("flows")["flows"]
        res = {}
        for p in ports:
            fwd = [f for f in flows if f["network"] == "red" and f["src_port"] == p
                   and f["protocol"] == 6]
            rev = [f for f in flows if f["network"] == "blue" and f["dst_port"] == p
                   and f["protocol"] == 6]
            assert len(fwd) == 1 and len(rev) == 1, (p, fwd, rev)
            res[p] = (fwd[0]["nexthop_name"], rev[0]["nexthop_name"])
        return res

    def chains(self):
        return self.json("chains")

    def wait_health(self, instance, healthy, timeout=3):
        """Waits until `instance` (of any function of the chain) is healthy or not; the
        time it was seen so."""
        deadline = time.time() + timeout
        while True:
            insts = [i for f in self.chains()["chains"][0]["functions"] for i in f["instances"]]
            i = next(x for x in insts if x["name"] == instance)
            if i["healthy"] == healthy:
                return time.time()
            assert time.time() < deadline, insts
            time.sleep(0.05)


@pytest.fixture
def topo(tmp_path, request):
    binary("ovr-cli", "ovrctl")
    lab = ChainLab()
    t = Topology(lab, tmp_path)
    try:
        t.build(*request.param) if isinstance(request.param, tuple) else t.build(request.param)
        yield t
    finally:
        t.close()
        lab.close()


def instance(nexthop_name):
    """'fw/fw-2/left' → 'fw-2'."""
    return nexthop_name.split("/")[1]


@pytest.mark.parametrize("topo", [1], indirect=True)
def test_icmp_and_tcp_cross_the_function_and_replies_come_back_through_it(topo):
    r = topo.ping(3)
    assert r.returncode == 0, r.stdout + r.stderr
    to_b, to_a = topo.counters(1)
    assert to_b >= 3 and to_a >= 3, (to_b, to_a)
    client = topo.start(topo.a, CLIENT, B_IP, str(PORT))
    ports = topo.tell(client, "open 1")
    assert topo.tell(client, "send 3") == [True]
    after_b, after_a = topo.counters(1)
    # SYN, ACK, data at least one way; SYN-ACK, data back the other.
    assert after_b >= to_b + 3 and after_a >= to_a + 2, (after_b, after_a)
    # Both directions of the session name the instance: in by its left, back by its right.
    assert topo.instance_of_sessions(ports) == {ports[0]: ("fw/fw-1/left", "fw/fw-1/right")}
    report = topo.chains()
    (ch,) = report["chains"]
    assert ch["name"] == "through-fw" and ch["from"] == "red"
    (inst,) = ch["functions"][0]["instances"]
    assert inst["healthy"] and inst["sessions"] >= 2  # the ping and the TCP session
    assert inst["left"]["to_function"] >= after_b and inst["right"]["to_function"] >= after_a
    assert "fw-1" in topo.ctl("chains")
    # The trace shows each pass: into the function's left, and out of its right into blue.
    topo.ctl("trace", "add", "8")
    assert topo.ping(2).returncode == 0
    trace = topo.ctl("trace", "show")
    assert "chain through-fw: function fw (1 of 1), instance fw-1, left" in trace, trace
    assert "from service port f1r" in trace, trace
    topo.tell(client, "quit")


@pytest.mark.parametrize("topo", [1], indirect=True)
def test_a_dropping_function_stops_its_port_and_passes_the_rest(topo):
    sh("nft", "insert", "rule", "inet", "fw", "forward", "tcp", "dport", str(BLOCKED),
       "counter", "drop", ns=topo.fw[1])
    blocked = sh(sys.executable, "-c", textwrap.dedent(f"""
        import socket
        try:
            socket.create_connection(("{B_IP}", {BLOCKED}), timeout=2)
            print("connected")
        except OSError:
            print("refused")
    """), ns=topo.a).stdout.strip()
    assert blocked == "refused"
    drops = topo.counters(1)[0]  # the drop rule is first now
    assert drops >= 1
    assert topo.ping(2).returncode == 0


@pytest.mark.parametrize("topo", [2], indirect=True)
def test_sessions_spread_stay_pinned_move_when_an_instance_goes_and_fail_closed(topo):
    client = topo.start(topo.a, CLIENT, B_IP, str(PORT))

    def send(timeout=3):
        return topo.tell(client, f"send {timeout}")

    ports = topo.tell(client, "open 16")
    assert send() == [True] * 16
    placed = topo.instance_of_sessions(ports)
    # Every session's reply goes back into the instance it went through.
    for p, (into, back) in placed.items():
        assert instance(into) == instance(back), (p, into, back)
    on = {p: instance(into) for p, (into, _) in placed.items()}
    assert set(on.values()) == {"fw-1", "fw-2"}, on  # spread
    before = {n: topo.counters(n) for n in (1, 2)}
    assert all(b[0] > 0 and b[1] > 0 for b in before.values()), before
    # They stay where they are.
    assert send() == [True] * 16
    assert {p: instance(i) for p, (i, _) in topo.instance_of_sessions(ports).items()} == on

    # fw-1's link goes down (from its side): it leaves, its sessions move to fw-2,
    # fw-2's stay.
    fw2_counts = topo.counters(2)
    went = time.time()
    sh("ip", "link", "set", "left", "down", ns=topo.fw[1])
    left = topo.wait_health("fw-1", False)
    assert left - went < 1.0
    assert send(5) == [True] * 16
    moved = topo.instance_of_sessions(ports)
    for p, (into, back) in moved.items():
        assert instance(into) == "fw-2" and instance(back) == "fw-2", (p, into, back)
    assert topo.counters(2)[0] >= fw2_counts[0] + 16
    report = topo.chains()["chains"][0]["functions"][0]["instances"]
    assert [i["healthy"] for i in report] == [False, True]

    # None left: the chain fails closed, every packet counted under its reason.
    sh("ip", "link", "set", "right", "down", ns=topo.fw[2])
    topo.wait_health("fw-2", False)
    dropped = topo.json("dropstats").get("chain_no_instance", 0)
    assert topo.ping(3).returncode != 0
    assert send(1) == [False] * 16
    now = topo.json("dropstats").get("chain_no_instance", 0)
    assert now >= dropped + 3 + 16, (dropped, now)
    assert topo.chains()["dropped_no_instance"] >= now

    # fw-1 is back: traffic flows again through it.
    sh("ip", "link", "set", "left", "up", ns=topo.fw[1])
    # (The kernel dropped fw-1's route through its link while it was down.)
    sh("ip", "route", "replace", "10.1.0.0/24", "via", "10.99.1.1", ns=topo.fw[1])
    topo.wait_health("fw-1", True)
    assert topo.ping(3).returncode == 0
    topo.tell(client, "quit")


@pytest.mark.parametrize("topo", [(1, "transparent")], indirect=True)
def test_a_transparent_function_passes_frames_unchanged_both_ways(topo):
    r = topo.ping(3)
    assert r.returncode == 0, r.stdout + r.stderr
    to_b, to_a = topo.counters(1)
    assert to_b >= 3 and to_a >= 3, (to_b, to_a)
    client = topo.start(topo.a, CLIENT, B_IP, str(PORT))
    ports = topo.tell(client, "open 1")
    assert topo.tell(client, "send 3") == [True]
    assert topo.instance_of_sessions(ports) == {ports[0]: ("fw/fw-1/left", "fw/fw-1/right")}
    (inst,) = topo.chains()["chains"][0]["functions"][0]["instances"]
    assert inst["healthy"] and topo.chains()["chains"][0]["functions"][0]["mode"] == "transparent"
    topo.tell(client, "quit")
