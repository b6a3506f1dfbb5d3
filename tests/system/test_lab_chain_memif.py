"""A network function on memif in a cluster's intent (docs/cluster.md, "Port"): the
service-chain lab (`ovrctl lab up --hosts 2 --tenants 1 --service-chain`) gains, on h2,
two memif ports `nf-l` and `nf-r` in network `svc` and DPDK's testpmd connected to them
in `mac` mode: an in-network function as ovr sees one, every frame in on one side out of
the other from that side's MAC to the gateway's (IP untouched). The service `fw` is then
that one instance alone.

- Before testpmd connects, h2 has the two memif interfaces but does not publish them as
  endpoints (a listening socket is not a workload), and h1 does not count the instance.
- Connected: both endpoints published; h1 reaches the instance through the overlay, h2
  has it as a local one; a ping from h1-t1-w1 to h2's ext workload and one from
  h2-t1-w1 to h1's go through testpmd, requests and replies, and through no nftables
  firewall.
- testpmd stopped: the endpoints are withdrawn, h1 leaves the instance out and the chain
  fails closed there (`chain_no_instance`).

One lab for the module (prefix `ovrhm<pid>`), always taken down with the testpmd."""

import json
import os
import subprocess

import pytest

from conftest import ROOT
from system.chain_lab import counted, ext_on
from system.netns import until
from system.overlay_lab import OVRCTL, OverlayLab, sh
from system.testpmd import Testpmd

ROUTER_MAC = "00:00:5e:00:01:00"  # the networks' default gateway MAC (docs/dataplane.md)
NF_L_MAC, NF_R_MAC = "02:00:00:0f:00:01", "02:00:00:0f:00:02"


@pytest.fixture(scope="module")
def lab(request, tmp_path_factory):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    lab = OverlayLab(f"ovrhm{os.getpid() % 10000}", "--service-chain")
    request.addfinalizer(lambda: lab.__exit__(None, None, None))
    lab.__enter__()
    lab.tmp = tmp_path_factory.mktemp("memif-nf")
    lab.pmd = None
    request.addfinalizer(lambda: lab.pmd and lab.pmd.kill())
    return lab


def cluster(lab, *args):
    etcd = ",".join(lab.status()["etcd"])
    return sh(OVRCTL, "--etcd", etcd, "cluster", *args)


def endpoint(lab, name):
    return lab.etcdctl("get", f"/ovr/v1/endpoints/h2/{name}", "--print-value-only").strip()


def instances(lab, host):
    chains = lab.json(host, "chains")["chains"]
    return {i["name"]: i for i in chains[0]["functions"][0]["instances"]} if chains else {}


def ping(lab, src, dst, count):
    return sh("ping", "-c", count, "-i", "0.2", "-W", "1", dst, ns=lab.ns(src), check=False)


def test_a_memif_function_in_the_cluster_takes_the_chain_while_connected(lab):
    socks = {side: lab.tmp / f"nf-{side}.sock" for side in "lr"}
    for side, mac, ip in (("l", NF_L_MAC, "10.98.1.30"), ("r", NF_R_MAC, "10.98.2.30")):
        cluster(lab, "ports", "add", "--host", "h2", f"nf-{side}", "--network", "svc",
                "--mac", mac, "--ip", ip, "--interface", f"nf{side}",
                "--memif-socket", socks[side])
    cluster(lab, "services", "add", "fw", "--replace", "--instance", "nf-h2:h2:nf-l:nf-r")

    # h2 has the memif interfaces, listening; nothing is published, h1 counts no instance.
    def memifs():
        i = {x["name"]: x for x in lab.json("h2", "interfaces")}
        return [i[n] for n in ("nfl", "nfr") if n in i and i[n]["kind"] == "memif"]
    until("h2's memif interfaces", lambda: len(memifs()) == 2 and all(
        os.path.exists(s) for s in socks.values()), timeout=10)
    # (h1 lists a remote instance only while both its ports are endpoints.)
    until("the service is nf-h2 alone", lambda: list(instances(lab, "h2")) == ["nf-h2"]
          and instances(lab, "h1") == {}, timeout=10)
    assert endpoint(lab, "nf-l") == "" and endpoint(lab, "nf-r") == ""
    assert not instances(lab, "h2")["nf-h2"]["healthy"]

    # testpmd connects: a function on the gateway's side of each port.
    gw = next(n for n in lab.json("h2", "networks") if n["name"] == "svc")["router_mac"]
    gw = gw or ROUTER_MAC
    lab.pmd = Testpmd(lab.tmp, [("client", socks["l"], NF_L_MAC), ("client", socks["r"], NF_R_MAC)],
                      "mac", f"--eth-peer=0,{gw}", f"--eth-peer=1,{gw}", tag=lab.prefix)
    until("both endpoints published", lambda: endpoint(lab, "nf-l") and endpoint(lab, "nf-r"),
          timeout=10)
    assert json.loads(endpoint(lab, "nf-l"))["mac"] == NF_L_MAC
    until("h1 counts the instance", lambda: instances(lab, "h1").get("nf-h2", {}).get("healthy"),
          timeout=5)
    remote, local = instances(lab, "h1")["nf-h2"], instances(lab, "h2")["nf-h2"]
    assert remote["left"]["via"] == "h2:svc", remote
    assert local["healthy"] and local["left"]["interface"] == "nfl", local

    firewalls = [s["namespace"] for s in lab.status()["services"]]
    before = [counted(ns) for ns in firewalls]
    # h1 → h2's ext: through the instance on h2 over the overlay; h2 → h1's ext: local.
    to_h2, to_h1 = ext_on(lab, "h2")["address"], ext_on(lab, "h1")["address"]
    until("h1-t1-w1 reaches ext on h2", lambda: ping(lab, "h1-t1-w1", to_h2, 1).returncode == 0,
          timeout=10)
    r = ping(lab, "h1-t1-w1", to_h2, 5)
    assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout + r.stderr
    r = ping(lab, "h2-t1-w1", to_h1, 3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [counted(ns) for ns in firewalls] == before, "a firewall namespace saw the pings"

    # Stopped: its final counters hold every request (into nf-l) and reply (into nf-r).
    pmd, lab.pmd = lab.pmd, None
    stats = pmd.stop()
    assert stats["RX-packets"] >= 2 * (1 + 5 + 3), stats
    assert stats["TX-packets"] == stats["RX-packets"], stats

    # Gone: withdrawn, h1 leaves it out and fails closed.
    until("both endpoints withdrawn", lambda: not endpoint(lab, "nf-l") and not endpoint(
        lab, "nf-r"), timeout=5)
    until("h1 leaves the instance out", lambda: "nf-h2" not in instances(lab, "h1"), timeout=5)
    dropped = lab.json("h1", "dropstats").get("chain_no_instance", 0)
    assert ping(lab, "h1-t1-w1", to_h2, 2).returncode != 0
    assert lab.json("h1", "dropstats").get("chain_no_instance", 0) >= dropped + 2
