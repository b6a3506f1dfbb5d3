"""BGP EVPN against the real thing: an ovr host (ovrd driving its gobgpd over gRPC) and
a host running the Linux kernel's bridge + VXLAN device with FRR (zebra, bgpd,
`advertise-all-vni`), peered over the underlay. What ovr advertises is read back by
independent tools: FRR installs ovr's workload MAC in the kernel's forwarding database
(`extern_learn`, towards ovr's VTEP, in the VXLAN device of the right VNI) and its flood
entry from the type-3 route; GoBGP's own CLI lists the routes. The other way, ovr
installs what FRR advertises (the kernel host's VTEP, its underlay MAC resolved by ovrd's
own ARP, its flood entry and its workload's MAC) and traffic crosses both ways. A workload
whose interface goes away is withdrawn from the kernel host again."""

import json
import os
import subprocess
from functools import partial

import pytest

from system.frr import Frr, Gobgpd, free_port
from system import netns
from system.netns import Lab, sh
from system.ovrd import Ovrd, binary

W1_MAC = "02:00:00:72:00:0b"
KW_MAC = "02:00:00:6b:00:32"
VNI = 100

# BGP converges in seconds, not milliseconds.
until = partial(netns.until, timeout=20.0, every=0.2)


BGPD_CONF = """frr defaults datacenter
hostname kernel-host
router bgp 65000
 bgp router-id 192.0.2.9
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor 192.0.2.101 remote-as 65000
 neighbor 192.0.2.101 timers 3 9
 address-family l2vpn evpn
  neighbor 192.0.2.101 activate
  advertise-all-vni
 exit-address-family
"""


def kernel_and_ovr(tmp, prefix, bgpd_conf=BGPD_CONF, network=""):
    """The two hosts, FRR with `bgpd_conf` on the kernel host and ovrd (its network
    `red` with `network` appended to its YAML mapping) on h1, peered: a generator
    yielding their handles, stopping everything after."""
    lab = Lab("e")
    lab.prefix = prefix
    started = []
    try:
        u = lab.ns("u")
        sh("ip", "link", "add", "br0", "type", "bridge", ns=u)
        sh("ip", "link", "set", "br0", "up", ns=u)
        # h1: ovrd owns the uplink and the VTEP address; its kernel speaks BGP from mgmt.
        h1 = lab.ns("h1")
        lab.veth(h1, "uplink", u, "p1", mac_a="02:00:00:00:00:01")
        lab.veth(h1, "mgmt", u, "m1")
        for p in ("p1", "m1"):
            sh("ip", "link", "set", p, "master", "br0", ns=u)
        sh("ip", "addr", "add", "192.0.2.101/24", "dev", "mgmt", ns=h1)
        sh("sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1", ns=h1)
        w1 = lab.ns("w1")
        lab.veth(w1, "eth0", h1, "v-w1", mac_a=W1_MAC)
        sh("ip", "addr", "add", "10.1.0.11/24", "dev", "eth0", ns=w1)
        # k: the kernel's VXLAN for VNI 100 in a bridge, FRR advertising it.
        k = lab.ns("k")
        lab.veth(k, "eth0", u, "pk")
        sh("ip", "link", "set", "pk", "master", "br0", ns=u)
        sh("ip", "addr", "add", "192.0.2.9/24", "dev", "eth0", ns=k)
        sh("ip", "link", "add", "br100", "type", "bridge", ns=k)
        sh("ip", "link", "add", "vxlan100", "type", "vxlan", "id", str(VNI), "local",
           "192.0.2.9", "dstport", "4789", "nolearning", ns=k)
        sh("ip", "link", "set", "vxlan100", "master", "br100", ns=k)
        sh("bridge", "link", "set", "dev", "vxlan100", "neigh_suppress", "on", "learning",
           "off", ns=k)
        kw = lab.ns("kw")
        lab.veth(kw, "eth0", k, "v-kw", mac_a=KW_MAC)
        sh("ip", "link", "set", "v-kw", "master", "br100", ns=k)
        sh("ip", "addr", "add", "10.1.0.50/24", "dev", "eth0", ns=kw)
        for dev in ("br100", "vxlan100"):
            sh("ip", "link", "set", dev, "up", ns=k)
        frr = Frr(k, tmp / "frr", bgpd_conf)
        started.append(frr)
        gobgpd = Gobgpd(h1, tmp / "gobgpd.log", free_port())
        started.append(gobgpd)
        (tmp / "h1.yaml").write_text(f"""
interfaces:
  - {{ name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }}
  - {{ name: v-w1, kind: workload, network: red, peer_mac: "{W1_MAC}", peer_addresses: [10.1.0.11] }}
networks:
  - {{ name: red, vni: {VNI}, gateways: [10.1.0.1/24]{network} }}
""")
        ovrd = Ovrd(h1, tmp / "h1.log", "--config", tmp / "h1.yaml", "--bgp", gobgpd.api,
                    "--bgp-peer", "192.0.2.9", "--bgp-address", "192.0.2.101",
                    "--fast-path-pin-dir", tmp / "pins")
        started.append(ovrd)
        yield {"k": k, "h1": h1, "w1": w1, "kw": kw, "frr": frr, "gobgpd": gobgpd,
               "ovrd": ovrd, "lab": lab}
    finally:
        for s in reversed(started):
            s.stop()
        lab.close()


@pytest.fixture(scope="module")
def evpn(tmp_path_factory):
    yield from kernel_and_ovr(tmp_path_factory.mktemp("evpn"), f"ovrev{os.getpid() % 10000}")


def fdb(ns):
    return sh("bridge", "fdb", "show", "dev", "vxlan100", ns=ns).stdout


def test_the_kernel_host_learns_ovrs_workload_and_flood_entry_from_bgp(evpn):
    evpn["ovrd"].wait_for("bgp: speaker configured")
    def state():
        out = evpn["frr"].vtysh("show bgp l2vpn evpn summary json")
        peers = json.loads(out or "{}").get("peers", {})
        return peers.get("192.0.2.101", {}).get("state") == "Established"

    until("FRR's session with ovr's speaker", state, timeout=30)
    # Before any traffic: the workload's MAC towards h1's VTEP, installed by FRR from the
    # type-2 route (extern_learn), and the flood entry from the type-3 route.
    line = until("w1's MAC towards h1 in the kernel host's fdb", lambda: next(
        (ln for ln in fdb(evpn["k"]).splitlines()
         if ln.startswith(W1_MAC) and "dst 192.0.2.1 " in ln + " "), None))
    assert "extern_learn" in line, fdb(evpn["k"])
    flood = [ln for ln in fdb(evpn["k"]).splitlines() if ln.startswith("00:00:00:00:00:00")]
    assert any("dst 192.0.2.1" in ln for ln in flood), fdb(evpn["k"])
    # FRR took the VNI from the label field as ovr wrote it: the route is in VNI 100.
    routes = evpn["frr"].vtysh("show evpn mac vni 100")
    assert W1_MAC in routes and "192.0.2.1" in routes, routes
    # GoBGP's own command line lists what ovr advertises: types 2 (MAC, MAC/IP), 3, 5.
    rib = evpn["gobgpd"].cli("global", "rib", "-a", "evpn")
    assert W1_MAC in rib and "10.1.0.11" in rib and "10.1.0.0" in rib, rib
    # And FRR's type 3 for VNI 100 reached ovr's speaker.
    until("FRR's type 3 at ovr's speaker", lambda: "[type:multicast][rd:192.0.2.9" in
          evpn["gobgpd"].cli("global", "rib", "-a", "evpn"), timeout=20)
    # ovrd's API shows the session and the routes both ways.
    n = evpn["ovrd"].get("/api/v1/bgp/neighbors")
    assert [(x["address"], x["state"]) for x in n] == [("192.0.2.9", "established")], n
    routes = evpn["ovrd"].get("/api/v1/bgp/routes")
    assert not [r for r in routes if "refused" in r], json.dumps(routes, indent=1)
    out = {(r["type"], r.get("mac"), r.get("ip")) for r in routes if r["direction"] == "out"}
    assert ("mac-ip", W1_MAC, "10.1.0.11") in out and ("imet", None, None) in out, json.dumps(routes, indent=1)
    frr_imet = [r for r in routes if r["direction"] == "in" and r.get("type") == "imet"]
    assert frr_imet and frr_imet[0]["next_hop"] == "192.0.2.9", routes
    assert frr_imet[0]["pmsi"]["label"] == VNI and "65000:100" in frr_imet[0]["route_targets"]
    # ovrctl shows the same.
    ctl = [str(binary("ovr-cli", "ovrctl")), "--socket", str(evpn["ovrd"].socket)]
    r = subprocess.run([*ctl, "--json", "bgp", "neighbors"], capture_output=True, text=True)
    assert json.loads(r.stdout)[0]["state"] == "established", r.stderr
    r = subprocess.run([*ctl, "bgp", "routes"], capture_output=True, text=True)
    assert W1_MAC in r.stdout and "192.0.2.9" in r.stdout and "direction" in r.stdout, r


def config(ovrd):
    return ovrd.get("/api/v1/config")


def learnt(ovrd):
    """The bridge entries and host routes ovrd learnt (beside its configuration)."""
    return ovrd.get("/api/v1/bgp/learnt")


def test_ovr_installs_the_kernel_hosts_workload_from_bgp_and_traffic_crosses_both_ways(evpn):
    ovrd = evpn["ovrd"]
    # The kernel host's VTEP: its underlay MAC resolved by ovrd's ARP on the underlay,
    # then a tunnel to it and its flood entry (FRR's type 3) in red.
    k_mac = sh("cat", "/sys/class/net/eth0/address", ns=evpn["k"]).stdout.strip()
    def resolved():
        v = ovrd.get("/api/v1/bgp/installed")
        return [x for x in v["vteps"] if x["vtep"] == "192.0.2.9" and x.get("mac") == k_mac]
    until("the kernel host's VTEP resolved", resolved)
    until("the flood entry towards the kernel host", lambda: "evpn:192.0.2.9:100" in
          config(ovrd)["networks"][0]["flood"])
    tunnels = config(ovrd)["tunnels"]
    assert [(t["remote"], t["remote_mac"]) for t in tunnels] == [("192.0.2.9", k_mac)], tunnels
    # The kernel workload speaks once (its bridge learns it locally; FRR advertises it).
    sh("ping", "-c", "1", "-W", "1", "10.1.0.99", ns=evpn["kw"], check=False)
    kw_mac = KW_MAC
    until("kw's MAC installed from FRR's type 2", lambda: any(
        b["mac"] == kw_mac and b["nexthop"] == "evpn:192.0.2.9:100" and b["installed"]
        for b in learnt(ovrd)["bridge"]))
    assert not config(ovrd).get("bridge"), "learnt, not configured"
    # Traffic both ways: ovr's workload first, then the kernel host's.
    r = sh("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.1.0.50", ns=evpn["w1"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    r = sh("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.1.0.11", ns=evpn["kw"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    # And the API names what came from where.
    v = ovrd.get("/api/v1/bgp/installed")
    assert v["source"] == "evpn" and v["installed"]["macs"] >= 1, v
    assert v["installed"]["tunnels"] == 1 and not v["unresolved"], v
    ctl = [str(binary("ovr-cli", "ovrctl")), "--socket", str(ovrd.socket)]
    r = subprocess.run([*ctl, "bgp", "installed"], capture_output=True, text=True)
    assert "192.0.2.9" in r.stdout and "resolved" in r.stdout and k_mac in r.stdout, r


def test_a_workload_that_goes_is_withdrawn_from_the_kernel_host(evpn):
    until("w1's MAC in the kernel host's fdb", lambda: W1_MAC in fdb(evpn["k"]))
    sh("ip", "link", "del", "v-w1", ns=evpn["h1"])
    until("w1's MAC withdrawn", lambda: W1_MAC not in fdb(evpn["k"]))
    assert "bgp: advertisements follow the configuration" in evpn["ovrd"].text()
