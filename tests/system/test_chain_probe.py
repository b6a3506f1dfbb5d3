"""Health probes of service instances (docs/chains.md "Health"): the chain of
test_chains.py with two instances of `fw`, probed by ARP or ICMP every 100 ms, down after
3 missed. Checked on the wire (scapy in the function's namespace): the probes come from
the gateway's address and MAC to the function's. An instance whose namespace keeps its
links up but stops answering (nftables drops the probes at its input) leaves within 1 s,
and the ping from a to b goes through the other instance; answering again, it comes back
within 1 s. `ovrctl chains` shows each side's probe."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from system.netns import Lab, sh
from system.ovrd import binary
from system.test_chains import ROUTER_MAC, Topology, config, fw_mac

PROBE = {"interval_ms": 100, "failures": 3}

# Prints the probes seen on an interface for a while, as JSON: ARP requests or ICMP echo
# requests with their addresses.
SNIFF = textwrap.dedent("""
    import json, sys
    from scapy.all import ARP, ICMP, IP, Ether, sniff
    iface, kind, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    seen = []
    for p in sniff(iface=iface, timeout=secs):
        if kind == "arp" and ARP in p and p[ARP].op == 1:
            seen.append({"src": p[Ether].src, "dst": p[Ether].dst,
                         "psrc": p[ARP].psrc, "pdst": p[ARP].pdst, "hwsrc": p[ARP].hwsrc})
        elif kind == "icmp" and ICMP in p and p[ICMP].type == 8:
            seen.append({"src": p[Ether].src, "dst": p[Ether].dst, "psrc": p[IP].src,
                         "pdst": p[IP].dst, "id": p[ICMP].id, "seq": p[ICMP].seq})
    print(json.dumps(seen))
""")

# What keeps the function from answering its probes, its links left up.
SILENCE = {
    "arp": "table arp ovrpb {\n chain input {\n type filter hook input priority 0; "
           "policy drop;\n }\n}\n",
    "icmp": "table inet ovrpb {\n chain input {\n type filter hook input priority 0;\n "
            "icmp type echo-request drop\n }\n}\n",
}


class ProbeLab(Lab):
    """Namespaces named ovrpb<pid>-…, deleted by exactly those names."""

    def __init__(self):
        super().__init__("")
        self.prefix = f"ovrpb{os.getpid() % 10000}"


@pytest.fixture(params=["arp", "icmp"])
def topo(tmp_path, request):
    binary("ovr-cli", "ovrctl")
    lab = ProbeLab()
    t = Topology(lab, tmp_path)
    try:
        t.build(2, "in-network", {"kind": request.param, **PROBE})
        t.kind = request.param
        yield t
    finally:
        t.close()
        lab.close()


def sniff(topo, n, iface, secs=0.6):
    r = sh("ip", "netns", "exec", topo.fw[n], sys.executable, "-c", SNIFF, iface, topo.kind,
           str(secs), timeout=30)
    return json.loads(r.stdout)


def sides(topo, name):
    """(left, right) port reports of instance `name`."""
    f = topo.chains()["chains"][0]["functions"][0]
    i = next(x for x in f["instances"] if x["name"] == name)
    return i["left"], i["right"]


def link_up(ns, iface):
    return json.loads(sh("ip", "-j", "link", "show", iface, ns=ns).stdout)[0]["operstate"]


def test_a_silent_instance_leaves_within_a_second_and_comes_back_when_it_answers(topo):
    kind = topo.kind
    # On the wire: every 100 ms, from the gateway (its address and MAC on svc) to fw-1.
    seen = sniff(topo, 1, "left")
    assert 3 <= len(seen) <= 9, seen
    for p in seen:
        assert (p["src"], p["dst"]) == (ROUTER_MAC, fw_mac(1, "l")), p
        assert (p["psrc"], p["pdst"]) == ("10.99.1.1", "10.99.1.11"), p
        if kind == "arp":
            assert p["hwsrc"] == ROUTER_MAC, p
        else:
            assert p["id"] == 0x6F76, p
    if kind == "icmp":
        assert len({p["seq"] for p in seen}) == len(seen), seen
    right = sniff(topo, 2, "right", 0.3)
    assert right and all(p["pdst"] == "10.99.2.12" for p in right), right

    # Both answer: healthy, the probes shown per side.
    for name in ("fw-1", "fw-2"):
        topo.wait_health(name, True)
    f = topo.chains()["chains"][0]["functions"][0]
    assert f["probe"] == {"kind": kind, "interval_ms": 100, "failures": 3}
    left, _ = sides(topo, "fw-1")
    assert left["probe"]["kind"] == kind and left["probe"]["answered"] >= 3, left
    assert left["probe"]["missed"] == 0 and not left["probe"]["failed"], left
    assert left["probe"]["last_answer_ms_ago"] < 500, left
    text = topo.ctl("chains")
    assert f"probe {kind} every 100 ms, down after 3 missed" in text, text
    assert f"[{kind} answered" in text, text
    assert topo.ping(3).returncode == 0

    # fw-1 stops answering, its links up: it leaves within 1 s.
    went = time.time()
    sh("nft", "-f", "-", ns=topo.fw[1], input=SILENCE[kind])
    gone = topo.wait_health("fw-1", False)
    assert gone - went < 1.0, gone - went
    print(f"{kind}: fw-1 left {gone - went:.3f} s after it went silent")
    assert link_up(topo.fw[1], "left") == "UP" and link_up(topo.fw[1], "right") == "UP"
    assert link_up(topo.host, "f1l") == "UP"
    left, right = sides(topo, "fw-1")
    assert left["probe"]["failed"] and left["probe"]["missed"] >= 3, left
    assert not left["up"], left
    # The ping goes through fw-2 only.
    before = {n: topo.counters(n) for n in (1, 2)}
    r = topo.ping(3)
    assert r.returncode == 0, r.stdout + r.stderr
    after = {n: topo.counters(n) for n in (1, 2)}
    assert after[1] == before[1], (before, after)
    assert after[2][0] >= before[2][0] + 3 and after[2][1] >= before[2][1] + 3, (before, after)
    assert topo.json("dropstats").get("chain_no_instance", 0) == 0

    # It answers again: back within 1 s.
    back = time.time()
    sh("nft", "delete", "table", "arp" if kind == "arp" else "inet", "ovrpb", ns=topo.fw[1])
    up = topo.wait_health("fw-1", True)
    assert up - back < 1.0, up - back
    print(f"{kind}: fw-1 back {up - back:.3f} s after it answered again")
    left, _ = sides(topo, "fw-1")
    assert left["up"] and left["probe"]["missed"] == 0, left
    assert topo.ping(2).returncode == 0


    # Through the API, a probe out of bounds is refused at its field, the running one kept.
    cfg = config(2, "in-network", {"kind": kind, "interval_ms": 5, "failures": 3})
    r = subprocess.run(["curl", "-s", "-X", "PUT", "-H", "content-type: application/json",
                        "--unix-socket", str(topo.ovrd.socket), "-d", json.dumps(cfg),
                        "http://ovrd/api/v1/config"], capture_output=True, text=True, timeout=10)
    assert "services[0].probe.interval_ms" in r.stdout and "out of range" in r.stdout, r.stdout
    assert topo.chains()["chains"][0]["functions"][0]["probe"]["interval_ms"] == 100
