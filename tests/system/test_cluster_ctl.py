"""`ovrctl cluster` against a real etcd (one member for the module, emptied before each
test): what add writes is checked field by field against what etcdctl reads back, bad
values and duplicates are refused with nothing written (the revision does not move), and
`hosts` follows a host's lease."""

import base64
import json
import os
import re
import subprocess
import time

import pytest

from conftest import ROOT
from system.etcd import EtcdCluster, Tls
from system.netns import Lab, sh

OVRCTL = ROOT / "target" / "debug" / "ovrctl"


@pytest.fixture(scope="module")
def etcd():
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli"], cwd=ROOT, check=True)
    with EtcdCluster(members=1, name_prefix="ctl") as e:
        yield e


@pytest.fixture(autouse=True)
def empty(etcd):
    etcd.ctl("del", "--prefix", "/ovr/")


def cluster(etcd, *args, urls=None, env=None):
    """`ovrctl --json cluster ARGS`: (exit status, stdout as JSON or None, stderr)."""
    r = subprocess.run([str(OVRCTL), "--json", "--etcd", ",".join(urls or etcd.urls),
                        "cluster", *args], capture_output=True, text=True, timeout=30,
                       env=env)
    out = json.loads(r.stdout) if r.stdout.strip() else None
    return r.returncode, out, r.stderr


def ok(etcd, *args):
    code, out, err = cluster(etcd, *args)
    assert code == 0, f"cluster {' '.join(args)}: {err}"
    return out


def stored(etcd, prefix="/ovr/"):
    """Every key under `prefix` and its value (JSON decoded), as etcdctl reads them."""
    r = etcd.ctl("get", "--prefix", prefix, "-w", "json")
    kvs = json.loads(r.stdout).get("kvs", [])
    return {base64.b64decode(kv["key"]).decode():
            json.loads(base64.b64decode(kv["value"])) for kv in kvs}


def same_as_stored(etcd, listed, key_of):
    """Each listed object is its stored value plus the names its key holds."""
    values = stored(etcd, "/ovr/v1/")
    for o in listed:
        names = {"name": o["name"], **({"host": o["host"]} if "host" in o else {})}
        value = {k: v for k, v in o.items() if k not in names}
        assert values[key_of(o)] == value, o
        assert "error" not in o


def test_networks_add_list_show_del(etcd):
    w = ok(etcd, "networks", "add", "red", "--vni", "100", "--subnet", "10.1.0.0/24",
           "--subnet", "fd00:1::/64", "--gateway", "10.1.0.1/24", "--encap", "mpls_udp",
           "--no-flood")
    assert w["key"] == "/ovr/v1/networks/red" and w["revision"] > 0
    ok(etcd, "networks", "add", "blue", "--vni", "200")
    values = stored(etcd)
    assert values["/ovr/v1/networks/red"] == {
        "vni": 100, "subnets": ["10.1.0.0/24", "fd00:1::/64"], "gateways": ["10.1.0.1/24"],
        "encap": "mpls_udp", "flood": False}
    assert values["/ovr/v1/networks/blue"] == {
        "vni": 200, "subnets": [], "gateways": [], "encap": "vxlan", "flood": True}

    listed = ok(etcd, "networks", "list")
    assert sorted(o["name"] for o in listed) == ["blue", "red"]
    same_as_stored(etcd, listed, lambda o: f"/ovr/v1/networks/{o['name']}")
    assert ok(etcd, "networks", "show", "red") == {"name": "red",
                                                   **values["/ovr/v1/networks/red"]}

    d = ok(etcd, "networks", "del", "red")
    assert d["key"] == "/ovr/v1/networks/red" and d["revision"] > w["revision"]
    assert list(stored(etcd)) == ["/ovr/v1/networks/blue"]
    assert [o["name"] for o in ok(etcd, "networks")] == ["blue"]
    code, _, err = cluster(etcd, "networks", "del", "red")
    assert code == 5 and json.loads(err)["code"] == 5
    assert cluster(etcd, "networks", "show", "red")[0] == 5


def test_ports_by_host(etcd):
    for host, name, mac, ip in (("h1", "web-1", "02:00:00:00:01:01", "10.1.0.11"),
                                ("h1", "web-2", "02:00:00:00:01:02", "10.1.0.12"),
                                ("h10", "db-1", "02:00:00:00:10:01", "10.1.0.21")):
        ok(etcd, "ports", "add", "--host", host, name, "--network", "red", "--mac", mac,
           "--ip", ip, "--interface", f"v-{name}", "--meta", "pod=x", "--meta", "ns=a=b")
    assert stored(etcd)["/ovr/v1/ports/h1/web-1"] == {
        "network": "red", "mac": "02:00:00:00:01:01", "ips": ["10.1.0.11"],
        "interface": "v-web-1", "metadata": {"pod": "x", "ns": "a=b"}}

    def key(o):
        return f"/ovr/v1/ports/{o['host']}/{o['name']}"
    every = ok(etcd, "ports", "list")
    assert sorted(key(o) for o in every) == sorted(stored(etcd))
    same_as_stored(etcd, every, key)
    # h1 is not a prefix of h10.
    h1 = ok(etcd, "ports", "list", "--host", "h1")
    assert sorted(o["name"] for o in h1) == ["web-1", "web-2"]

    ok(etcd, "ports", "del", "--host", "h1", "web-1")
    assert "/ovr/v1/ports/h1/web-1" not in stored(etcd)
    assert cluster(etcd, "ports", "del", "--host", "h10", "web-1")[0] == 5


def test_policies_add_list_del(etcd):
    rules = [{"action": "deny", "protocol": "tcp", "dst_ports": "23"},
             {"action": "allow", "src_network": "blue"}]
    ok(etcd, "policies", "add", "no-telnet", "--network", "red", "--rules", json.dumps(rules))
    assert stored(etcd) == {"/ovr/v1/policies/no-telnet": {"network": "red", "rules": rules}}
    listed = ok(etcd, "policies", "list")
    assert [o["name"] for o in listed] == ["no-telnet"]
    same_as_stored(etcd, listed, lambda o: f"/ovr/v1/policies/{o['name']}")
    ok(etcd, "policies", "del", "no-telnet")
    assert stored(etcd) == {} and ok(etcd, "policies") == []


@pytest.mark.parametrize("args,says", [
    (["networks", "add", "red", "--vni", "0"], "vni: 0"),
    (["networks", "add", "red", "--vni", "16777216"], "vni"),
    (["networks", "add", "red", "--vni", "5", "--subnet", "10.0.0.0/24",
      "--gateway", "10.9.0.1/24"], "gateways[0]"),
    (["networks", "add", "red", "--vni", "5", "--subnet", "10.0.0.300/24"], "10.0.0.300"),
    (["networks", "add", "r d", "--vni", "5"], "not a name"),
    (["ports", "add", "--host", "h1", "p", "--network", "red", "--mac", "02:00:zz:00:00:01",
      "--interface", "v1"], "02:00:zz:00:00:01"),
    (["ports", "add", "--host", "h1", "p", "--network", "red", "--mac", "01:00:5e:00:00:01",
      "--interface", "v1"], "not a unicast MAC"),
    (["ports", "add", "--host", "h1", "p", "--network", "red", "--mac", "02:00:00:00:00:01",
      "--interface", "a-name-too-long-for-linux"], "interface"),
    (["policies", "add", "p", "--network", "red", "--rules",
      '[{"action": "deny", "bogus": 1}]'], "unknown field `bogus`"),
    (["policies", "add", "p", "--network", "red", "--rules", '[{"action": "maybe"}]'],
     "maybe"),
])
def test_bad_values_are_refused_and_nothing_is_written(etcd, args, says):
    before = etcd.revision()
    code, _, err = cluster(etcd, *args)
    assert code == 1, err
    e = json.loads(err)
    assert e["code"] == 1 and "nothing written" in e["error"] and says in e["error"], e
    assert etcd.revision() == before and stored(etcd) == {}


@pytest.mark.parametrize("args", [
    ["policies", "add", "p", "--network", "red", "--rules", "[{"],
    ["ports", "add", "--host", "h1", "p", "--network", "red", "--mac", "02:00:00:00:00:01",
     "--interface", "v1", "--meta", "novalue"],
    ["networks", "add", "red", "--vni", "x"],
    ["networks", "add", "red"],
])
def test_usage_errors_exit_2_and_write_nothing(etcd, args):
    before = etcd.revision()
    code, _, err = cluster(etcd, *args)
    assert code == 2 and json.loads(err)["code"] == 2, err
    assert etcd.revision() == before


def test_add_of_an_existing_name_is_refused_unless_replace(etcd):
    ok(etcd, "networks", "add", "red", "--vni", "100")
    before = etcd.revision()
    code, _, err = cluster(etcd, "networks", "add", "red", "--vni", "200")
    assert code == 1 and "exists" in json.loads(err)["error"]
    assert etcd.revision() == before
    assert stored(etcd)["/ovr/v1/networks/red"]["vni"] == 100
    ok(etcd, "networks", "add", "red", "--vni", "200", "--replace")
    assert stored(etcd)["/ovr/v1/networks/red"]["vni"] == 200


def grant(etcd, ttl):
    out = etcd.ctl("lease", "grant", str(ttl)).stdout
    return re.search(r"lease ([0-9a-f]+) granted", out).group(1)


def test_hosts_follow_their_lease(etcd):
    lease = grant(etcd, 5)
    h1 = {"vtep": "192.168.1.1", "mac": "02:00:00:00:aa:01",
          "underlay": ["192.168.1.1/24"], "version": "0.1.0"}
    h2 = {"vtep": "192.168.1.2", "mac": "02:00:00:00:aa:02", "version": "0.1.0"}
    etcd.ctl("put", f"--lease={lease}", "/ovr/v1/hosts/h1", json.dumps(h1))
    etcd.ctl("put", f"--lease={lease}", "/ovr/v1/hosts/h2", json.dumps(h2))
    report = {"applied_revision": etcd.revision(), "networks": ["red"], "rejected_count": 2,
              "rejected": {"/ovr/v1/ports/h1/p": "network: unknown"}}
    etcd.ctl("put", "/ovr/status/v1/h1", json.dumps(report))  # not leased: it stays

    hosts = {h["name"]: h for h in ok(etcd, "hosts")}
    lag = etcd.revision() - report["applied_revision"]
    assert hosts["h1"] == {"name": "h1", "alive": True, **h1, "applied_revision":
                           report["applied_revision"], "lag": lag, "rejected": 2}
    assert hosts["h2"] == {"name": "h2", "alive": True, **h2, "underlay": [],
                           "applied_revision": None, "lag": None, "rejected": None}

    etcd.ctl("lease", "revoke", lease)
    hosts = {h["name"]: h for h in ok(etcd, "hosts")}
    assert list(hosts) == ["h1"]
    assert hosts["h1"]["alive"] is False and hosts["h1"]["vtep"] is None
    assert hosts["h1"]["applied_revision"] == report["applied_revision"]


def test_status_counts_and_lists_rejected_and_invalid_keys(etcd):
    ok(etcd, "networks", "add", "red", "--vni", "100")
    ok(etcd, "ports", "add", "--host", "h1", "p", "--network", "red", "--mac",
       "02:00:00:00:00:01", "--interface", "v1")
    assert ok(etcd, "status")["rejected"] == []
    etcd.ctl("put", "/ovr/v1/networks/junk", '{"vni": 7, "colour": "red"}')
    etcd.ctl("put", "/ovr/v1/routers/r1", "{}")
    etcd.ctl("put", "/ovr/status/v1/h1", json.dumps(
        {"applied_revision": 1, "networks": [], "rejected_count": 3,
         "rejected": {"/ovr/v1/ports/h1/p": "network red: no such network"}}))
    # Printed in full, and a failure (exit 7) for scripts and probes.
    code, s, err = cluster(etcd, "status")
    assert code == 7 and "rejected" in json.loads(err)["error"], err
    assert s["endpoints"] == etcd.urls and s["revision"] == etcd.revision()
    assert s["counts"] == {"networks": 1, "policies": 0, "ports": 1, "hosts": 0,
                           "endpoints": 0}
    assert s["rejected"][0] == {"host": "h1", "key": "/ovr/v1/ports/h1/p",
                                "reason": "network red: no such network"}
    assert s["rejected"][1]["key"] is None and "2 more" in s["rejected"][1]["reason"]
    invalid = {i["key"]: i["reason"] for i in s["invalid"]}
    assert set(invalid) == {"/ovr/v1/networks/junk", "/ovr/v1/routers/r1"}
    assert "colour" in invalid["/ovr/v1/networks/junk"]
    # The list shows the invalid value too, with why.
    junk = [o for o in ok(etcd, "networks") if o["name"] == "junk"][0]
    assert junk["colour"] == "red" and "colour" in junk["error"]


def test_etcd_from_the_environment_and_unreachable(etcd):
    env = {**os.environ, "OVR_ETCD": ",".join(etcd.urls)}
    r = subprocess.run([str(OVRCTL), "--json", "cluster", "networks", "add", "red", "--vni",
                        "9"], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0, r.stderr
    assert stored(etcd)["/ovr/v1/networks/red"]["vni"] == 9
    t = time.monotonic()
    code, _, err = cluster(etcd, "networks", urls=["http://127.0.0.1:9"])
    assert code == 1 and "etcd at http://127.0.0.1:9" in json.loads(err)["error"]
    assert time.monotonic() - t < 15


def test_three_members_survive_the_loss_of_the_leader(tmp_path):
    """The helper's three members: writes go on through the others once the leader is
    killed, and the restarted member rejoins with what it missed."""
    with EtcdCluster(members=3, name_prefix="ctl3", base_dir=tmp_path) as e:
        ok(e, "networks", "add", "red", "--vni", "1")
        leader = e.leader()
        e.kill(leader)
        deadline = time.monotonic() + 10
        while cluster(e, "networks", "add", "blue", "--vni", "2", "--replace")[0] != 0:
            assert time.monotonic() < deadline, "no write within 10 s of the leader's loss"
            time.sleep(0.2)
        e.start(leader)
        alone = [e.urls[leader]]
        assert sorted(o["name"] for o in cluster(e, "networks", urls=alone)[1]) == [
            "blue", "red"]


def test_etcd_inside_a_network_namespace():
    """The helper's members in a namespace, on its address: ovrctl reaches them from there."""
    lab = Lab("ce")
    try:
        ns = lab.ns("etcd")
        sh("ip", "addr", "add", "10.77.0.1/32", "dev", "lo", ns=ns)
        with EtcdCluster(members=1, name_prefix="ctlns", netns=ns, host="10.77.0.1") as e:
            assert e.urls[0].startswith("http://10.77.0.1:")
            r = sh(str(OVRCTL), "--etcd", e.urls[0], "cluster", "networks", "add", "red",
                   "--vni", "3", ns=ns)
            assert "written" in r.stdout
            assert json.loads(e.ctl("get", "/ovr/v1/networks/red", "--print-value-only")
                              .stdout)["vni"] == 3
    finally:
        lab.close()


def test_etcd_with_client_certificates(tmp_path):
    """https and --client-cert-auth: ovrctl gets in with --etcd-ca/--etcd-cert/--etcd-key,
    and not without its certificate."""
    tls = Tls(str(tmp_path))
    with EtcdCluster(members=1, name_prefix="ctltls", base_dir=tmp_path, tls=tls) as e:
        assert e.urls[0].startswith("https://")
        ca = ["--etcd-ca", tls.ca]
        client = [*ca, "--etcd-cert", tls.client_cert, "--etcd-key", tls.client_key]
        code, out, err = cluster(e, *client, "networks", "add", "red", "--vni", "4")
        assert code == 0, err
        assert json.loads(e.ctl("get", "/ovr/v1/networks/red", "--print-value-only")
                          .stdout)["vni"] == 4
        assert [o["name"] for o in cluster(e, *client, "networks")[1]] == ["red"]
        code, _, err = cluster(e, *ca, "networks")
        assert code == 1 and "etcd at https://" in json.loads(err)["error"]
