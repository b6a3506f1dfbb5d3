"""A service chain across hosts, in the lab as a cluster (`ovrctl lab up --hosts 2
--tenants 1 --service-chain`, docs/chains.md "In the cluster"): tenant 1's traffic to
network `ext` goes through a firewall with an instance on h1 and one on h2 (namespaces
with Linux forwarding and nftables), each host reaching the other's instance through the
overlay.

- `h1-t1-w1` pings the `ext` workload on h2, and the packets are counted by nftables in
  a firewall instance: both directions in the same one;
- a drop rule in every instance stops the ping (so it did go through them), and taking
  the rules out lets it through again;
- with the namespace of the instance the ping went through removed, the ping works again
  within 2 s (through the other one);
- `lab down` leaves nothing behind (OverlayLab checks it).

One lab for the module (prefix `ovrhc<pid>`), always taken down; the tests run in order
(the last removes an instance)."""

import os
import subprocess
import time

import pytest

from conftest import ROOT
from system.chain_lab import counted, delete_rules, ext_on
from system.overlay_lab import OverlayLab, sh


@pytest.fixture(scope="module")
def lab(request):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    lab = OverlayLab(f"ovrhc{os.getpid() % 10000}", "--service-chain")
    request.addfinalizer(lambda: lab.__exit__(None, None, None))
    return lab.__enter__()


def ping(lab, address, count=1, wait="1"):
    return sh("ping", "-c", count, "-i", "0.2", "-W", wait, address,
              ns=lab.ns("h1-t1-w1"), check=False)


def reached(lab, address, within_s, wait="0.3"):
    end = time.monotonic() + within_s
    while True:
        if ping(lab, address, wait=wait).returncode == 0:
            return True
        if time.monotonic() > end:
            return False


def test_the_lab_lists_its_firewall_instances_and_writes_the_chain(lab):
    services = lab.status()["services"]
    assert [(s["name"], s["host"]) for s in services] == [("fw-h1", "h1"), ("fw-h2", "h2")]
    names = sh("ip", "netns", "list").stdout
    for s in services:
        assert s["namespace"] in names, (s, names)
    assert lab.etcdctl("get", "--keys-only", "/ovr/v1/services/fw").strip()
    assert lab.etcdctl("get", "--keys-only", "/ovr/v1/chains/through-fw").strip()
    # Each host installed the chain with both instances: its own, and the other's
    # reached through the overlay.
    for h, other in (("h1", "h2"), ("h2", "h1")):
        chains = lab.json(h, "chains")["chains"]
        assert [c["name"] for c in chains] == ["through-fw"], chains
        inst = {i["name"]: i for i in chains[0]["functions"][0]["instances"]}
        assert set(inst) == {"fw-h1", "fw-h2"}, inst
        assert all(i["healthy"] for i in inst.values()), inst
        assert inst[f"fw-{h}"]["left"]["interface"] == "fwl"
        assert inst[f"fw-{other}"]["left"]["via"] == f"{other}:svc"


def test_the_ping_to_ext_on_h2_goes_through_one_firewall_both_ways(lab):
    dst = ext_on(lab, "h2")["address"]
    assert reached(lab, dst, 10), f"h1-t1-w1 does not reach {dst}"
    instances = [s["namespace"] for s in lab.status()["services"]]
    before = [counted(ns) for ns in instances]
    r = ping(lab, dst, count=5)
    assert r.returncode == 0, r.stdout + r.stderr
    grew = [counted(ns) - b for ns, b in zip(instances, before)]
    # 5 requests and 5 replies, all through the instance the session is pinned to.
    assert sorted(grew) == [0, 10], grew


def test_a_drop_rule_in_every_instance_stops_the_ping(lab):
    dst = ext_on(lab, "h2")["address"]
    instances = [s["namespace"] for s in lab.status()["services"]]
    for ns in instances:
        sh("nft", "insert", "rule", "inet", "fw", "forward", "drop", "comment", '"drop"', ns=ns)
    try:
        for _ in range(4):
            r = ping(lab, dst, count=1)
            assert r.returncode != 0, "the ping went through with every instance dropping"
    finally:
        for ns in instances:
            delete_rules(ns, "drop")
    assert reached(lab, dst, 5), "the ping does not come back once the drop rules are gone"


def test_with_the_instance_in_use_gone_the_ping_works_again_within_2s(lab):
    """One ping session (one ICMP id, a request every 50 ms) is pinned to an instance;
    that instance's namespace is removed; the session moves to the other instance: the
    longest run of lost replies is under 2 s, and the replies after it all come."""
    dst = ext_on(lab, "h2")["address"]
    services = lab.status()["services"]
    interval, run_s = 0.05, 7
    p = subprocess.Popen(
        ["ip", "netns", "exec", lab.ns("h1-t1-w1"), "ping", "-n", "-i", str(interval),
         "-w", str(run_s), dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1)
        before = {s["name"]: counted(s["namespace"]) for s in services}
        time.sleep(0.5)
        used = [s for s in services if counted(s["namespace"]) > before[s["name"]]]
        assert len(used) == 1, (before, services)
        used = used[0]
        other = next(s for s in services if s is not used)
        sh("ip", "netns", "del", used["namespace"])
        removed_at = time.monotonic()
        out, _ = p.communicate(timeout=run_s + 5)
    finally:
        if p.poll() is None:
            p.kill()
    seqs = sorted(int(w.split("=")[1]) for line in out.splitlines()
                  for w in line.split() if w.startswith("icmp_seq="))
    gaps = [b - a - 1 for a, b in zip(seqs, seqs[1:])]
    lost_s = max(gaps, default=0) * interval
    print(f"{used['name']} removed: the session moved to {other['name']}; "
          f"longest loss {lost_s:.2f} s, {len(seqs)} replies")
    assert lost_s <= 2.0, f"replies lost for {lost_s:.2f} s: {out}"
    # Answered to the end (ping numbers its requests from 1, one per interval).
    assert time.monotonic() - removed_at > 3, out
    assert seqs and seqs[-1] >= (run_s - 1) / interval * 0.8, out
    n = counted(other["namespace"])
    assert ping(lab, dst, count=2).returncode == 0
    assert counted(other["namespace"]) >= n + 4
