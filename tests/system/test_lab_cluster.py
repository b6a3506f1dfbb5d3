"""The lab as a cluster (`ovrctl lab up`, the default): three hosts join etcd; a workload
added while the lab runs (`lab workload add`, which only writes its port to etcd) is
reached from another host, and no longer once deleted; a host whose ovrd is killed leaves
the cluster within its lease (5 s). With three etcd members, one killed, the cluster goes
on. A static lab refuses workloads that come and go.

One three-host lab for the module (prefix `ovrc<pid>`), always taken down; its tests run
in order, the last of them kills a host. The static and three-member cases bring up labs
of their own (`ovrs<pid>`, `ovrm<pid>`)."""

import json
import os
import subprocess
import time

import pytest

from conftest import ROOT
from system.overlay_lab import OverlayLab, sh

LEASE_TTL_S = 5


class Lab(OverlayLab):
    def up(self):
        r = self.ctl("up", "--hosts", "3", "--tenants", "1", check=False)
        if r.returncode != 0:
            self.ctl("down", check=False)
            pytest.fail(r.stdout + r.stderr)
        return self


@pytest.fixture(scope="module")
def lab(request):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    lab = Lab(f"ovrc{os.getpid() % 10000}")
    request.addfinalizer(lambda: lab.__exit__(None, None, None))
    return lab.up()


def keys(lab, prefix):
    return lab.etcdctl("get", "--prefix", "--keys-only", prefix).split()


def reached(lab, src, address, within_s):
    """Whether `src` gets an answer from `address` within `within_s` seconds (retrying)."""
    end = time.monotonic() + within_s
    while True:
        r = sh("ping", "-c", "1", "-W", "1", address, ns=lab.ns(src), check=False)
        if r.returncode == 0:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.1)


def test_every_host_has_joined_etcd(lab):
    v = lab.status()
    assert v["etcd"] and all(u.startswith("http://169.254.") for u in v["etcd"]), v["etcd"]
    assert keys(lab, "/ovr/v1/hosts/") == [f"/ovr/v1/hosts/h{h}" for h in (1, 2, 3)]
    # Each workload is a port (intent) and, its host having attached it, an endpoint.
    for w in v["workloads"]:
        assert keys(lab, f"/ovr/v1/ports/{w['host']}/{w['name']}")
        assert keys(lab, f"/ovr/v1/endpoints/{w['host']}/{w['name']}")


def test_a_workload_added_while_the_lab_runs_is_reached_and_gone_once_deleted(lab):
    r = lab.ctl("workload", "add", "--host", "3", "--tenant", "1")
    name = r.stdout.strip()
    assert name == "h3-t1-w2", r.stdout + r.stderr
    workloads = lab.status()["workloads"]
    w = next(w for w in workloads if w["name"] == name)
    assert (w["host"], w["tenant"]) == ("h3", 1)
    # The next free address of the tenant, and a MAC of its own.
    for field in ("address", "mac"):
        assert [x[field] for x in workloads].count(w[field]) == 1, (field, workloads)
    port = json.loads(lab.etcdctl("get", "--print-value-only", f"/ovr/v1/ports/h3/{name}"))
    assert port["network"] == "t1" and port["mac"] == w["mac"] and port["ips"] == [w["address"]]
    assert reached(lab, "h1-t1-w1", w["address"], 3), f"{name} ({w['address']}) not reached"

    lab.ctl("workload", "del", name)
    assert name not in {x["name"] for x in lab.status()["workloads"]}
    assert lab.ns(name) not in sh("ip", "netns", "list").stdout
    assert keys(lab, f"/ovr/v1/ports/h3/{name}") == []
    time.sleep(0.5)
    assert not reached(lab, "h1-t1-w1", w["address"], 1)


def test_workloads_of_a_static_lab_are_refused():
    static = OverlayLab(f"ovrs{os.getpid() % 10000}", "--static")
    with static:
        r = static.ctl("workload", "add", "--host", "1", "--tenant", "1", check=False)
        assert r.returncode == 1 and "static" in r.stderr, r.stderr


def test_a_killed_host_leaves_the_cluster_within_its_lease(lab):
    pid = next(h["ovrd_pid"] for h in lab.status()["hosts"] if h["name"] == "h2")
    os.kill(pid, 9)
    t = time.monotonic()
    while "/ovr/v1/hosts/h2" in keys(lab, "/ovr/v1/hosts/"):
        assert time.monotonic() - t < LEASE_TTL_S + 1, "h2 still in the cluster"
        time.sleep(0.1)
    assert keys(lab, "/ovr/v1/hosts/") == ["/ovr/v1/hosts/h1", "/ovr/v1/hosts/h3"]
    # Its endpoints went with its lease; the others still reach each other.
    assert keys(lab, "/ovr/v1/endpoints/h2/") == []
    assert reached(lab, "h1-t1-w1", "10.1.0.31", 2)


def test_three_etcd_members_and_one_killed_the_cluster_goes_on():
    with OverlayLab(f"ovrm{os.getpid() % 10000}", "--etcd-members", "3") as lab:
        v = lab.status()
        assert len(v["etcd"]) == 3 and len(v["etcd_members"]) == 3, v
        assert all(m["running"] for m in v["etcd_members"])
        os.kill(v["etcd_members"][0]["pid"], 9)
        # The two left elect a leader if needed; writes and the hosts' watches go on.
        name = lab.ctl("workload", "add", "--host", "2", "--tenant", "1").stdout.strip()
        address = next(w["address"] for w in lab.status()["workloads"] if w["name"] == name)
        assert reached(lab, "h1-t1-w1", address, 5), f"{name} ({address}) not reached"
