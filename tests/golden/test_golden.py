"""Golden tests of ovr's dataplane: `ovrctl replay` over scapy-made captures must transmit
exactly the packets docs/dataplane.md says, on exactly the interfaces it says, and count
exactly the drops it says.

The scenarios are made by make_scenarios.py (next to this file) and checked in under
data/; the first test makes sure the checked-in files are what the script makes now.
Each scenario is replayed twice: one packet per vector (the output must come in input
order; copies of one input packet, e.g. flood replicas, may come in any order among
themselves) and with the default vector size (outputs compared as multisets).
"""

import collections
import difflib
import json
import pathlib
import shutil
import struct
import subprocess
import sys

import pytest
from scapy.all import UDP, VXLAN, Ether, IP, IPv6, TCP, ICMP, bind_layers, conf
from scapy.contrib.mpls import MPLS

conf.verb = 0
bind_layers(UDP, MPLS, dport=6635)

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DATA = HERE / "data"
GENERATOR = HERE / "make_scenarios.py"
OVRCTL = ROOT / "target" / "debug" / "ovrctl"

SCENARIOS = (DATA / "scenarios.txt").read_text().split() if (DATA / "scenarios.txt").exists() else []


# --- pcap and packet helpers --------------------------------------------------------

def read_pcap(path: pathlib.Path):
    """[(timestamp in ns, bytes)] of a classic pcap file (µs or ns resolution)."""
    b = path.read_bytes()
    magic = struct.unpack("<I", b[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        end = "<"
    else:
        end = ">"
        magic = struct.unpack(">I", b[:4])[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), f"{path}: not a pcap file"
    scale = 1 if magic == 0xA1B23C4D else 1000
    linktype = struct.unpack(end + "I", b[20:24])[0]
    assert linktype == 1, f"{path}: link type {linktype}, not Ethernet"
    out, at = [], 24
    while at < len(b):
        sec, frac, incl, orig = struct.unpack(end + "IIII", b[at:at + 16])
        at += 16
        assert incl == orig, f"{path}: truncated record"
        out.append((sec * 1_000_000_000 + frac * scale, b[at:at + incl]))
        at += incl
    return out


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


class Outer:
    """Offsets of a tunnel packet's outer headers (None if not a UDP/GRE tunnel packet)."""

    def __init__(self, b: bytes):
        self.v6 = self.ip = self.l4 = self.proto = None
        if len(b) < 14:
            return
        et = b[12:14]
        if et == b"\x08\x00" and len(b) >= 34:
            self.v6, self.ip = False, 14
            self.l4, self.proto = 14 + (b[14] & 0x0F) * 4, b[23]
        elif et == b"\x86\xdd" and len(b) >= 54:
            self.v6, self.ip, self.l4, self.proto = True, 14, 54, b[20]

    def udp_tunnel(self, b):
        return (self.proto == 17 and len(b) >= self.l4 + 8
                and struct.unpack("!H", b[self.l4 + 2:self.l4 + 4])[0] in (4789, 6635))


def udp6_checksum_ok(b: bytes, o: Outer) -> bool:
    ulen = struct.unpack("!H", b[o.l4 + 4:o.l4 + 6])[0]
    pseudo = b[22:54] + struct.pack("!IxxxB", ulen, 17)
    return csum(pseudo + b[o.l4:o.l4 + ulen]) == 0


def inner_of(b: bytes):
    """The inner packet (scapy) of an outer tunnel packet, or None."""
    p = Ether(b)
    for layer in (VXLAN, MPLS):
        if layer in p:
            inner = p[layer]
            while isinstance(inner, MPLS):
                inner = inner.payload
            return inner
    return None


def flow_of(inner):
    """A direction-independent key of an inner packet's flow, or None (not IP)."""
    ip = inner[IP] if IP in inner else inner[IPv6] if IPv6 in inner else None
    if ip is None:
        return None
    ports = (0, 0)
    if TCP in inner:
        ports = (inner[TCP].sport, inner[TCP].dport)
    elif UDP in inner:
        ports = (inner[UDP].sport, inner[UDP].dport)
    elif ICMP in inner:
        ports = (inner[ICMP].id, inner[ICMP].id)
    a, b = (ip.src, ports[0]), (ip.dst, ports[1])
    return (ip.nh if isinstance(ip, IPv6) else ip.proto, min(a, b), max(a, b))


def mask(b: bytes, ecmp=None, problems=None):
    """The packet with what depends on ovr's hash masked: the outer UDP source port of a
    tunnel (and over IPv6 its checksum and the flow label), and for ECMP the member chosen. Problems found
    on the way (wrong checksum, port out of range, non-member) go to `problems`."""
    o = Outer(b)
    if o.ip is None:
        return b
    m = bytearray(b)
    if not o.v6 and csum(b[14:o.l4]) != 0:
        problems.append("outer IPv4 header checksum does not verify")
    if o.udp_tunnel(b):
        sport = struct.unpack("!H", b[o.l4:o.l4 + 2])[0]
        if not 49152 <= sport <= 65535:
            problems.append(f"outer UDP source port {sport} outside 49152..65535")
        m[o.l4:o.l4 + 2] = b"\0\0"
        if o.v6:
            m[15] &= 0xF0  # flow label: the inner flow hash
            m[16:18] = b"\0\0"
            if not udp6_checksum_ok(b, o):
                problems.append("outer UDP checksum (IPv6) does not verify")
            m[o.l4 + 6:o.l4 + 8] = b"\0\0"
    if ecmp and (o.proto in (17, 47)):
        members = [(ip, mac) for ip, mac in ecmp["members"]]
        dst_ip = IP(bytes(m[14:])).dst if not o.v6 else IPv6(bytes(m[14:])).dst
        dst_mac = ":".join(f"{x:02x}" for x in m[0:6])
        if (dst_ip, dst_mac) not in members:
            problems.append(f"ECMP: outer destination {dst_ip} / {dst_mac} is not a member {members}")
        else:
            ip0, mac0 = members[0]
            m[0:6] = bytes.fromhex(mac0.replace(":", ""))
            if not o.v6:
                m[30:34] = bytes(int(x) for x in ip0.split("."))
                m[24:26] = b"\0\0"
                m[24:26] = struct.pack("!H", csum(bytes(m[14:o.l4])))
    return bytes(m)


def show(b: bytes) -> list:
    return Ether(b).show2(dump=True).splitlines()


def explain(expected: bytes, actual: bytes) -> str:
    diff = difflib.unified_diff(show(expected), show(actual), "expected", "ovr", lineterm="", n=2)
    return "\n".join(diff) or f"bytes differ:\n  expected {expected.hex()}\n  ovr      {actual.hex()}"


def closest(b: bytes, pool):
    return max(pool, key=lambda c: difflib.SequenceMatcher(None, b, c).ratio())


# --- Running ovr --------------------------------------------------------------------

@pytest.fixture(scope="session")
def ovrctl():
    if not OVRCTL.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli"], cwd=ROOT, check=True)
    return OVRCTL


def replay(ovrctl, scenario: pathlib.Path, out: pathlib.Path, vector=None):
    cmd = [str(ovrctl), "replay", "--config", str(scenario / "config.yaml"), "--out", str(out), "--json"]
    for f in sorted(scenario.glob("in-*.pcap")):
        cmd += ["--pcap", f"{f.stem[3:]}={f}"]
    if vector is not None:
        cmd += ["--vector", str(vector)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stderr}"
    return json.loads(r.stdout)


# --- The tests ----------------------------------------------------------------------

def test_scenarios_are_what_the_generator_makes(tmp_path):
    subprocess.run([sys.executable, str(GENERATOR), str(tmp_path)], check=True)
    made = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    checked_in = {p.relative_to(DATA): p.read_bytes() for p in DATA.rglob("*") if p.is_file()}
    assert made, "make_scenarios.py wrote nothing"
    assert sorted(made) == sorted(checked_in), "tests/golden/data differs in its list of files"
    for rel, data in made.items():
        assert checked_in[rel] == data, f"{rel} differs from what make_scenarios.py makes now"


def test_scenarios_exist():
    assert len(SCENARIOS) >= 16


@pytest.mark.parametrize("vector", [1, None], ids=["vector1", "vector-default"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario(name, vector, ovrctl, tmp_path):
    sc = DATA / name
    exp = json.loads((sc / "expected.json").read_text())
    out = tmp_path / "out"
    stats = replay(ovrctl, sc, out, vector)
    failures = []

    # Exactly the expected interfaces transmit.
    want = {p.name[len("expected-"):-len(".pcap")]: p for p in sc.glob("expected-*.pcap")}
    got = {p.stem: p for p in out.glob("*.pcap")}
    extra = sorted(set(got) - set(want))
    for i in extra:
        pk = read_pcap(got[i])
        if pk:
            failures.append(f"interface {i} transmitted {len(pk)} packet(s), none expected; first:\n"
                            + "\n".join(show(pk[0][1])))
    for i in sorted(set(want) - set(got)):
        failures.append(f"interface {i} transmitted nothing; expected {len(read_pcap(want[i]))} packet(s)")

    ecmp = exp.get("ecmp")
    sports = collections.defaultdict(set)
    member_of_flow = collections.defaultdict(set)
    labels = collections.defaultdict(set)
    for ifname in sorted(set(want) & set(got)):
        expected = read_pcap(want[ifname])
        actual = read_pcap(got[ifname])
        problems = []
        e_ifecmp = ecmp if ecmp and ecmp["interface"] == ifname else None
        act = []
        for ts, b in actual:
            o = Outer(b)
            inner = inner_of(b) if o.ip is not None and o.proto in (17, 47) else None
            fk = flow_of(inner) if inner is not None else None
            if fk is not None and o.udp_tunnel(b):
                sports[fk].add(struct.unpack("!H", b[o.l4:o.l4 + 2])[0])
            if fk is not None and o.v6:
                labels[fk].add(struct.unpack("!I", b[14:18])[0] & 0xFFFFF)
            if fk is not None and e_ifecmp:
                member_of_flow[fk].add(b[0:6])
            act.append((ts, mask(b, e_ifecmp, problems)))
        failures += [f"{ifname}: {p}" for p in sorted(set(problems))]
        exp_pk = [(ts, b) for ts, b in expected]
        if len(act) != len(exp_pk):
            failures.append(f"{ifname}: {len(act)} packets, expected {len(exp_pk)}")
        if vector == 1:
            ts_seq = [ts for ts, _ in act]
            if ts_seq != sorted(ts_seq):
                failures.append(f"{ifname}: output not in input order (timestamps {ts_seq})")
            # Copies of one input (same timestamp) may come in any order.
            a_sorted, e_sorted = sorted(act), sorted(exp_pk)
            for k, (e, a) in enumerate(zip(e_sorted, a_sorted)):
                if e != a:
                    if e[0] != a[0]:
                        failures.append(f"{ifname} packet {k}: caused by input at {a[0]} ns, expected {e[0]} ns:\n"
                                        + explain(e[1], a[1]))
                    else:
                        failures.append(f"{ifname} packet {k} differs:\n" + explain(e[1], a[1]))
                    break
        else:
            a_count = collections.Counter(b for _, b in act)
            e_count = collections.Counter(b for _, b in exp_pk)
            missing = list((e_count - a_count).elements())
            unexpected = list((a_count - e_count).elements())
            if missing:
                msg = f"{ifname}: {len(missing)} expected packet(s) missing, {len(unexpected)} unexpected"
                if unexpected:
                    msg += "; first missing against the closest unexpected:\n" + explain(missing[0], closest(missing[0], unexpected))
                failures.append(msg)
            elif unexpected:
                failures.append(f"{ifname}: {len(unexpected)} unexpected packet(s); first:\n" + "\n".join(show(unexpected[0])))

    # Outer source port: one per inner flow; spread over flows.
    for fk, ports in sports.items():
        if len(ports) != 1:
            failures.append(f"outer UDP source ports {sorted(ports)} for one inner flow {fk}")
    for fk, fl in labels.items():
        if len(fl) != 1:
            failures.append(f"outer IPv6 flow labels {sorted(fl)} for one inner flow {fk}")
    if exp.get("many_flows"):
        all_ports = set().union(*sports.values()) if sports else set()
        if len(all_ports) < 2:
            failures.append(f"outer UDP source port the same for all {len(sports)} flows: {all_ports}")
    if ecmp:
        per_member = collections.Counter()
        for fk, macs in member_of_flow.items():
            if len(macs) != 1:
                failures.append(f"ECMP: flow {fk} went to {len(macs)} VTEPs")
            per_member.update(macs)
        for ip, mac in ecmp["members"]:
            n = per_member[bytes.fromhex(mac.replace(":", ""))]
            if n < ecmp["min_flows_per_member"]:
                failures.append(f"ECMP: member {ip} got {n} flows, expected at least {ecmp['min_flows_per_member']}")

    # Drops: exactly the expected ones.
    drops = {k: v for k, v in stats.get("drops", {}).items() if v}
    if drops != exp["drops"]:
        failures.append(f"drop counters {drops}, expected {exp['drops']}")
    if stats.get("packets_in") != exp["packets_in"]:
        failures.append(f"packets_in {stats.get('packets_in')}, expected {exp['packets_in']}")

    # tshark finds every output packet well formed.
    for p in sorted(got.values()):
        text = subprocess.run(["tshark", "-n", "-r", str(p), "-V", *exp.get("tshark_args", [])],
                              capture_output=True, text=True, check=True).stdout
        if "Malformed Packet" in text or "[Malformed" in text:
            bad = [blk for blk in text.split("\nFrame ") if "Malformed" in blk]
            failures.append(f"tshark: {p.name} has malformed packets:\n{bad[0][:3000]}")

    assert not failures, f"scenario {name} (vector {vector or 'default'}):\n" + "\n\n".join(failures)
