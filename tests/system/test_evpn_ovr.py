"""Two ovr hosts that know each other only through BGP EVPN: each runs ovrd with its own
gobgpd, the two speakers peer over the underlay, and neither host has any static
reachability (no tunnels, next hops, bridge entries or routes in its configuration) nor
a cluster. Each installs the other's VTEP (its underlay MAC resolved by ARP), flood entry,
workload MAC and host route from the routes it learns; the workloads ping each other.
A BGP session lost (h2's gobgpd killed, or the speakers' link cut silently) removes
what came through it within the hold time; gobgpd started again is configured by ovrd
again, or the link mended, and the routes come back. A workload whose interface goes is
withdrawn and the other host removes what it had installed for it. ovrd restarted (its
learnt entries are not in its state file) learns them again from its gobgpd."""

import os
import signal
import time
from functools import partial

import pytest

from system.frr import Gobgpd, free_port
from system import netns
from system.netns import Lab, sh, stop
from system.ovrd import Ovrd

HOSTS = {1: "02:00:00:00:01:0b", 2: "02:00:00:00:02:0b"}

# BGP converges in seconds, not milliseconds.
until = partial(netns.until, timeout=30.0, every=0.2)



@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evpn-ovr")
    lab = Lab("o")
    lab.prefix = f"ovrev{os.getpid() % 10000}o"
    started = []
    try:
        u = lab.ns("u")
        sh("ip", "link", "add", "br0", "type", "bridge", ns=u)
        sh("ip", "link", "set", "br0", "up", ns=u)
        out = {"lab": lab, "u": u, "started": started}
        for n, w_mac in HOSTS.items():
            h = lab.ns(f"h{n}")
            lab.veth(h, "uplink", u, f"p{n}", mac_a=f"02:00:00:00:00:0{n}")
            lab.veth(h, "mgmt", u, f"m{n}")
            for p in (f"p{n}", f"m{n}"):
                sh("ip", "link", "set", p, "master", "br0", ns=u)
            sh("ip", "addr", "add", f"192.0.2.10{n}/24", "dev", "mgmt", ns=h)
            sh("sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1", ns=h)
            w = lab.ns(f"w{n}")
            lab.veth(w, "eth0", h, f"v-w{n}", mac_a=w_mac)
            sh("ip", "addr", "add", f"10.1.0.1{n}/24", "dev", "eth0", ns=w)
            (tmp / f"h{n}.yaml").write_text(f"""
interfaces:
  - {{ name: uplink, kind: underlay, mac: "02:00:00:00:00:0{n}", addresses: [192.0.2.{n}/24] }}
  - {{ name: v-w{n}, kind: workload, network: red, peer_mac: "{w_mac}", peer_addresses: [10.1.0.1{n}] }}
networks:
  - {{ name: red, vni: 100, gateways: [10.1.0.1/24] }}
""")
            gobgpd = Gobgpd(h, tmp / f"gobgpd{n}.log", free_port())
            gobgpd.log = tmp / f"gobgpd{n}.log"
            started.append(gobgpd)
            other = 3 - n
            args = ("--config", tmp / f"h{n}.yaml",
                    "--bgp", gobgpd.api, "--bgp-peer", f"192.0.2.10{other}",
                    "--bgp-address", f"192.0.2.10{n}", "--reach", "evpn",
                    "--fast-path-pin-dir", tmp / f"pins{n}")
            ovrd = Ovrd(h, tmp / f"h{n}.log", *args)
            started.append(ovrd)
            out.update({f"h{n}": h, f"w{n}": w, f"ovrd{n}": ovrd, f"gobgpd{n}": gobgpd,
                        f"ovrd{n}_args": args})
        yield out
    finally:
        for s in reversed(started):
            s.stop()
        lab.close()


def config(ovrd):
    return ovrd.get("/api/v1/config")


def learnt(ovrd):
    """The bridge entries and host routes ovrd learnt (beside its configuration)."""
    return ovrd.get("/api/v1/bgp/learnt")


def has_mac(ovrd, mac, nexthop=None):
    return any(b["mac"] == mac and b["installed"] and nexthop in (None, b["nexthop"])
               for b in learnt(ovrd)["bridge"])


def nothing_learnt(ovrd):
    l = learnt(ovrd)
    return not l["bridge"] and not l["routes"]


def test_two_ovr_hosts_learn_each_other_through_bgp_alone_and_their_workloads_ping(hosts):
    for n in HOSTS:
        # Nothing static: the configuration has no tunnel, bridge entry or route.
        c = config(hosts[f"ovrd{n}"])
        assert not c.get("tunnels") and not c.get("bridge") and not c.get("routes"), c
    for n, other in ((1, 2), (2, 1)):
        o = hosts[f"ovrd{n}"]
        until(f"h{n} installs h{other}'s workload", lambda: has_mac(
            o, HOSTS[other], f"evpn:192.0.2.{other}:100"))
        c = config(o)
        assert not c.get("bridge") and not c.get("routes"), "learnt, not configured"
        assert [(t["remote"], t["remote_mac"]) for t in c["tunnels"]] == \
            [(f"192.0.2.{other}", f"02:00:00:00:00:0{other}")], c["tunnels"]
        assert f"evpn:192.0.2.{other}:100" in c["networks"][0]["flood"], c["networks"]
        routes = learnt(o)["routes"]
        assert any(r["prefix"] == f"10.1.0.1{other}/32" and r["installed"] for r in routes), routes
        v = o.get("/api/v1/bgp/installed")
        assert v["source"] == "evpn" and not v["unresolved"], v
    r = sh("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.1.0.12", ns=hosts["w1"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    r = sh("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.1.0.11", ns=hosts["w2"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_lost_session_removes_its_routes_and_a_restarted_speaker_brings_them_back(hosts):
    o1 = hosts["ovrd1"]
    has_h2 = lambda: has_mac(o1, HOSTS[2])
    until("h2's workload at h1", has_h2)
    old = hosts["gobgpd2"]
    # Killed: no BGP notification, but its kernel closes the TCP connection; h1's gobgpd
    # drops the session and h2's paths with it; ovrd removes what it installed from them.
    stop(old.proc, signal.SIGKILL)
    until("h2's routes gone from h1", lambda: not config(o1).get("tunnels"), timeout=20)
    c = config(o1)
    assert nothing_learnt(o1) and not c["networks"][0]["flood"], (c, learnt(o1))
    new = Gobgpd(hosts["h2"], old_log(old), old.port)
    hosts["gobgpd2"] = new
    hosts["started"].append(new)
    until("h2's workload back at h1", has_h2, timeout=40)
    r = sh("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.1.0.12", ns=hosts["w1"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_partitioned_peer_is_dropped_within_the_hold_time_and_traffic_stops(hosts):
    """The speakers' link cut without a word (h2's management port taken off the underlay
    bridge; no FIN, no notification, the data path's uplink untouched): only the hold
    timer (9 s) can tell h1 that h2 is gone. Its routes go within it and the workloads
    stop reaching each other; the link back, the session and the routes come back."""
    o1, u = hosts["ovrd1"], hosts["u"]
    has_h2 = lambda: has_mac(o1, HOSTS[2])
    until("h2's workload at h1", has_h2)
    sh("ping", "-c", "1", "-W", "2", "10.1.0.12", ns=hosts["w1"])
    sh("ip", "link", "set", "m2", "nomaster", ns=u)
    try:
        cut = time.monotonic()
        until("h2's routes gone from h1", lambda: not learnt(o1)["bridge"], timeout=30)
        took = time.monotonic() - cut
        # At most the hold time after the last keepalive heard, plus ovrd's follow period.
        assert took <= 9 + 1.5, f"h2's routes left h1 {took:.1f} s after the cut"
        c = config(o1)
        assert nothing_learnt(o1) and not c["networks"][0]["flood"], (c, learnt(o1))
        r = sh("ping", "-c", "2", "-W", "1", "10.1.0.12", ns=hosts["w1"], check=False)
        assert r.returncode != 0, r.stdout
    finally:
        sh("ip", "link", "set", "m2", "master", "br0", ns=u)
    until("h2's workload back at h1", has_h2, timeout=40)
    r = sh("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.1.0.12", ns=hosts["w1"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def old_log(g):
    return g.log.with_name(g.log.stem + "-again.log")


def test_a_restarted_ovrd_learns_again_from_the_gobgpd_that_kept_running(hosts):
    o1 = hosts["ovrd1"]
    until("h2's workload at h1", lambda: has_mac(o1, HOSTS[2]))
    state = o1.log.with_suffix(".state.json").read_text()
    assert HOSTS[2] not in state.lower(), "learnt entries are not saved"
    o1.stop()
    # The same state file (and log) as before: a restart, not a first start.
    new = Ovrd(hosts["h1"], o1.log, *hosts["ovrd1_args"])
    hosts["ovrd1"] = new
    hosts["started"].append(new)
    until("h2's workload at h1 again", lambda: has_mac(new, HOSTS[2]), timeout=30)
    routes = learnt(new)["routes"]
    assert any(r["prefix"] == "10.1.0.12/32" and r["installed"] for r in routes), routes
    assert not config(new).get("bridge"), "learnt, not configured"
    r = sh("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.1.0.12", ns=hosts["w1"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_workload_deleted_on_one_host_is_withdrawn_and_unreachable_on_the_other(hosts):
    o1 = hosts["ovrd1"]
    until("h2's workload at h1", lambda: has_mac(o1, HOSTS[2]))
    sh("ip", "link", "del", "v-w2", ns=hosts["h2"])
    # h2 withdraws the workload (and its network's flood route: no workload is left
    # there); h1 removes the bridge entry, the host route, the flood entry and the tunnel.
    until("h2's workload gone from h1", lambda: not learnt(o1)["bridge"])
    until("h2's VTEP gone from h1", lambda: not config(o1).get("tunnels"))
    c = config(o1)
    assert nothing_learnt(o1) and not c["networks"][0]["flood"], (c, learnt(o1))
    r = sh("ping", "-c", "2", "-W", "1", "10.1.0.12", ns=hosts["w1"], check=False)
    assert r.returncode != 0, r.stdout

