"""A transparent function in a cluster's intent (docs/chains.md, "In the cluster"): the
service-chain lab (`ovrctl lab up --hosts 2 --tenants 1 --service-chain`) gets, on h1,
a Linux bridge in a namespace of its own between two ports `tb-l` and `tb-r` of network
`svc`, and the service `fw` becomes that one transparent instance.

- h1 steers its sessions into it: a ping from h1-t1-w1 to h2's ext workload crosses the
  bridge both ways, the requests entering its left from `tb-l`'s MAC to the gateway's
  (seen on the wire by scapy), unchanged in IP, and no nftables firewall sees them;
- h2 has no instance of its own and cannot bridge a frame to h1's (a bump in the wire
  has no MAC): its sessions fail closed (`chain_no_instance`).

One lab for the module (prefix `ovrht<pid>`), always taken down."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from system.chain_lab import counted, ext_on
from system.netns import until
from system.overlay_lab import OVRCTL, OverlayLab, sh

ROUTER_MAC = "00:00:5e:00:01:00"  # the networks' default gateway MAC (docs/dataplane.md)
TB_L_MAC, TB_R_MAC = "02:00:00:0e:00:01", "02:00:00:0e:00:02"

# Echo requests on an interface for a few seconds, as JSON.
SNIFF = textwrap.dedent("""
    import json, sys
    from scapy.all import ICMP, IP, Ether, sniff
    seen = [{"src": p[Ether].src, "dst": p[Ether].dst, "psrc": p[IP].src, "pdst": p[IP].dst,
             "ttl": p[IP].ttl}
            for p in sniff(iface=sys.argv[1], timeout=float(sys.argv[2]),
                           started_callback=lambda: print("sniffing", flush=True))
            if ICMP in p and p[ICMP].type == 8]
    print(json.dumps(seen))
""")


@pytest.fixture(scope="module")
def lab(request):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    lab = OverlayLab(f"ovrht{os.getpid() % 10000}", "--service-chain")
    request.addfinalizer(lambda: lab.__exit__(None, None, None))
    lab.__enter__()
    # The bridge's namespace is not the lab's: removed before the lab goes.
    lab.bridge = f"{lab.prefix}-tb"
    request.addfinalizer(lambda: sh("ip", "netns", "del", lab.bridge, check=False))
    return lab


def cluster(lab, *args):
    return sh(OVRCTL, "--etcd", ",".join(lab.status()["etcd"]), "cluster", *args)


def instances(lab, host):
    chains = lab.json(host, "chains")["chains"]
    return {i["name"]: i for i in chains[0]["functions"][0]["instances"]} if chains else {}


def ping(lab, src, dst, count):
    return sh("ping", "-c", count, "-i", "0.2", "-W", "1", dst, ns=lab.ns(src), check=False)


def rx_packets(ns, iface):
    return json.loads(sh("ip", "-s", "-j", "link", "show", iface, ns=ns).stdout)[0][
        "stats64"]["rx"]["packets"]


def test_a_transparent_function_serves_its_own_host_and_the_other_fails_closed(lab):
    br, h1 = lab.bridge, lab.ns("h1")
    sh("ip", "netns", "add", br)
    sh("ip", "link", "add", "br0", "type", "bridge", ns=br)
    for side, host_if in (("left", "tbl"), ("right", "tbr")):
        sh("ip", "link", "add", host_if, "netns", h1, "type", "veth", "peer", "name", side,
           "netns", br)
        sh("ip", "link", "set", side, "master", "br0", ns=br)
        sh("ip", "link", "set", side, "up", ns=br)
        sh("ip", "link", "set", host_if, "up", ns=h1)
    sh("ip", "link", "set", "br0", "up", ns=br)
    for side, mac, ifname in (("l", TB_L_MAC, "tbl"), ("r", TB_R_MAC, "tbr")):
        cluster(lab, "ports", "add", "--host", "h1", f"tb-{side}", "--network", "svc",
                "--mac", mac, "--interface", ifname)
    cluster(lab, "services", "add", "fw", "--replace", "--mode", "transparent",
            "--instance", "tb-h1:h1:tb-l:tb-r")
    until("h1 steers into its bridge, h2 has no instance", lambda: list(instances(lab, "h1"))
          == ["tb-h1"] and instances(lab, "h1")["tb-h1"]["healthy"]
          and instances(lab, "h2") == {}, timeout=10)
    # The sides send from their ports' MACs: the interfaces' own.
    ifs = {i["name"]: i for i in lab.json("h1", "interfaces")}
    assert (ifs["tbl"]["mac"], ifs["tbr"]["mac"]) == (TB_L_MAC, TB_R_MAC), ifs

    to_h2, to_h1 = ext_on(lab, "h2")["address"], ext_on(lab, "h1")["address"]
    firewalls = [s["namespace"] for s in lab.status()["services"]]
    before = [counted(ns) for ns in firewalls]
    until("h1-t1-w1 reaches ext on h2", lambda: ping(lab, "h1-t1-w1", to_h2, 1).returncode == 0,
          timeout=10)
    left, right = rx_packets(br, "left"), rx_packets(br, "right")
    sniffer = subprocess.Popen(["ip", "netns", "exec", br, sys.executable, "-c", SNIFF, "left",
                                "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert sniffer.stdout.readline().strip() == "sniffing"
        r = ping(lab, "h1-t1-w1", to_h2, 5)
        out, _ = sniffer.communicate(timeout=30)
    finally:
        if sniffer.poll() is None:
            sniffer.kill()
    assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout + r.stderr
    # Requests into the bridge's left, replies into its right.
    assert rx_packets(br, "left") >= left + 5 and rx_packets(br, "right") >= right + 5
    requests = json.loads(out)
    assert len(requests) >= 3, requests
    h1w1 = next(w for w in lab.status()["workloads"] if w["name"] == "h1-t1-w1")["address"]
    for p in requests:
        assert (p["src"], p["dst"]) == (TB_L_MAC, ROUTER_MAC), p
        assert (p["psrc"], p["pdst"]) == (h1w1, to_h2), p
    assert [counted(ns) for ns in firewalls] == before, "a firewall namespace saw the pings"

    # h2's sessions have no instance to go through: dropped, counted.
    dropped = lab.json("h2", "dropstats").get("chain_no_instance", 0)
    assert ping(lab, "h2-t1-w1", to_h1, 2).returncode != 0
    assert lab.json("h2", "dropstats").get("chain_no_instance", 0) >= dropped + 2
