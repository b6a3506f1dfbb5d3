"""ovr-cni driven as a container runtime drives it: the spec's environment variables and
the network configuration on stdin, against a small real cluster (one etcd, two hosts
each running `ovrd --etcd` in a namespace of its own). Containers are fresh network
namespaces; the plugin puts their interface there, the host end in ovrd's namespace
(found through the API socket), registers the port and takes an address from the
cluster's allocator (`"ipam": {"type": "ovr"}`), and they ping each other across the
underlay. DEL twice, nothing left; errors are the spec's JSON with its codes."""

import json
import os
import shutil
import tempfile
import pathlib
import subprocess
import time

import pytest

from system.etcd_hosts import EtcdHosts
from system.netns import sh, until
from system.ovrd import binary

RED = {"vni": 100, "subnets": ["10.1.0.0/24"], "gateways": ["10.1.0.1/24"]}
BLUE = {"vni": 200, "subnets": ["10.1.0.0/24"], "gateways": ["10.1.0.1/24"]}
GREEN = {"vni": 300, "subnets": ["10.3.0.0/24", "fd00:3::/64"],
         "gateways": ["10.3.0.1/24", "fd00:3::1/64"]}


class Cluster(EtcdHosts):
    def __init__(self, tmp):
        super().__init__(tmp, "n", "ovrcni", hosts=2,
                         networks={"red": RED, "blue": BLUE, "green": GREEN})


@pytest.fixture(scope="module")
def cl(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cni"))
    try:
        c.up()
        yield c
    finally:
        c.down()


@pytest.fixture(scope="module")
def plugin():
    return binary("ovr-cni")


def conf(cl, host, **over):
    c = {"cniVersion": "1.0.0", "name": "red-net", "type": "ovr-cni", "network": "red",
         "socket": str(cl.hosts[host].socket), "ipam": {"type": "ovr"}}
    c.update(over)
    return c


def cni(plugin, command, config, container="", netns="", ifname="eth0", args="",
        path="/usr/lib/cni"):
    """Runs the plugin: (exit status, parsed stdout or None)."""
    env = {"CNI_COMMAND": command, "CNI_CONTAINERID": container, "CNI_NETNS": netns,
           "CNI_IFNAME": ifname, "CNI_ARGS": args, "CNI_PATH": path, "PATH": "/usr/bin:/bin"}
    text = config if isinstance(config, str) else json.dumps(config)
    r = subprocess.run([str(plugin)], input=text, env=env, capture_output=True, text=True,
                       timeout=60)
    out = json.loads(r.stdout) if r.stdout.strip() else None
    return r.returncode, out


def links(ns):
    return json.loads(sh("ip", "-j", "link", "show", ns=ns).stdout)


def host_links(cl, i):
    return [l["ifname"] for l in links(f"{cl.lab.prefix}-h{i}")]


def test_version_lists_1_0_0(plugin):
    st, v = cni(plugin, "VERSION", {"cniVersion": "1.0.0"})
    assert st == 0 and "1.0.0" in v["supportedVersions"] and "1.1.0" in v["supportedVersions"], v


def test_containers_on_two_hosts_reach_each_other_and_del_leaves_nothing(cl, plugin):
    made = {}
    try:
        for i, cid in ((1, "ctr-a1"), (2, "ctr-b2")):
            ns = cl.lab.ns(f"c{i}")
            st, r = cni(plugin, "ADD", conf(cl, i), cid, f"/var/run/netns/{ns}",
                        args="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod" + str(i))
            assert st == 0, r
            made[i] = (cid, ns, r)
            # The spec's shape: the interface in its sandbox, the address pointing at it.
            assert r["cniVersion"] == "1.0.0"
            assert r["interfaces"][0]["name"] == "eth0"
            assert r["interfaces"][0]["sandbox"] == f"/var/run/netns/{ns}"
            assert r["ips"][0]["interface"] == 0 and r["ips"][0]["gateway"] == "10.1.0.1", r
            assert r["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.1.0.1"}], r
            eth0 = json.loads(sh("ip", "-j", "addr", "show", "eth0", ns=ns).stdout)[0]
            assert eth0["address"] == r["interfaces"][0]["mac"]
            assert eth0["mtu"] == 1450, "VXLAN on a 1500 underlay"
            assert [a["local"] for a in eth0["addr_info"]] == [r["ips"][0]["address"].split("/")[0]]
            assert "default via 10.1.0.1" in sh("ip", "route", ns=ns).stdout
        a1 = made[1][2]["ips"][0]["address"].split("/")[0]
        b2 = made[2][2]["ips"][0]["address"].split("/")[0]
        assert a1 != b2, "one address given twice across hosts"
        # The port (with the pod's names), and the address's lease, are in etcd.
        ports = cl.etcd_keys("/ovr/v1/ports/")
        assert len(ports) == 2 and any(p.startswith("/ovr/v1/ports/h1/ctr-a1-") for p in ports), ports
        port = json.loads(cl.etcd.ctl("get", "--print-value-only", "/ovr/v1/ports/h1/ctr-a1-eth0").stdout)
        assert port["metadata"]["k8s.pod"] == "pod1" and port["ips"] == [a1], port
        assert sorted(cl.etcd_keys("/ovr/ipam/v1/red/")) == sorted(
            [f"/ovr/ipam/v1/red/{a1}", f"/ovr/ipam/v1/red/{b2}"])
        # Across the underlay, both ways (the first pings may go while neighbours resolve).
        until("c1 reaches c2", lambda: sh("ping", "-c", "1", "-W", "1", b2, ns=made[1][1],
                                          check=False).returncode == 0, 10)
        assert sh("ping", "-c", "3", "-i", "0.2", "-W", "1", a1, ns=made[2][1],
                  check=False).returncode == 0
        # CHECK agrees with what ADD made; and notices when the address goes.
        c1 = conf(cl, 1, prevResult=made[1][2])
        assert cni(plugin, "CHECK", c1, "ctr-a1", f"/var/run/netns/{made[1][1]}") == (0, None)
        sh("ip", "addr", "flush", "dev", "eth0", ns=made[1][1])
        st, e = cni(plugin, "CHECK", c1, "ctr-a1", f"/var/run/netns/{made[1][1]}")
        assert st != 0 and e["code"] == 103, e
        # DEL twice each: the second finds everything gone and succeeds.
        for i, (cid, ns, r) in made.items():
            for _ in range(2):
                st, out = cni(plugin, "DEL", conf(cl, i, prevResult=r), cid,
                              f"/var/run/netns/{ns}")
                assert st == 0, out
            assert [l["ifname"] for l in links(ns)] == ["lo"]
            assert not [l for l in host_links(cl, i) if l.startswith("ovr")], host_links(cl, i)
        assert cl.etcd_keys("/ovr/v1/ports/") == []
        assert cl.etcd_keys("/ovr/ipam/v1/") == []
        assert sh("ping", "-c", "1", "-W", "1", b2, ns=made[1][1], check=False).returncode != 0
    finally:
        for i, (cid, ns, _) in made.items():
            cni(plugin, "DEL", conf(cl, i), cid, f"/var/run/netns/{ns}")


def test_del_succeeds_when_the_namespace_is_gone(cl, plugin):
    ns = cl.lab.ns("gone")
    st, r = cni(plugin, "ADD", conf(cl, 1), "ctr-gone", f"/var/run/netns/{ns}")
    assert st == 0, r
    sh("ip", "netns", "del", ns)
    cl.lab.namespaces.remove(ns)
    assert cni(plugin, "DEL", conf(cl, 1), "ctr-gone", f"/var/run/netns/{ns}") == (0, None)
    assert cni(plugin, "DEL", conf(cl, 1), "ctr-gone", "") == (0, None)
    assert not [k for k in cl.etcd_keys("/ovr/") if ("ctr-gone" in k and "/endpoints/" not in k)
                or "/ovr/ipam/" in k]
    # The endpoint is ovrd's to withdraw, once it sees the port gone.
    until("endpoint withdrawn", lambda: not cl.etcd_keys("/ovr/v1/endpoints/h1/ctr-gone"), 2)
    assert not [l for l in host_links(cl, 1) if l.startswith("ovr")]


def test_errors_are_the_specs_json_and_a_failed_add_leaves_nothing(cl, plugin):
    ns = cl.lab.ns("bad")
    netns = f"/var/run/netns/{ns}"
    # Invalid network configuration (no network): 7; not JSON: 6; a version we do not
    # speak: 1; no CNI_NETNS: 4.
    c = conf(cl, 1)
    del c["network"]
    st, e = cni(plugin, "ADD", c, "ctr-x", netns)
    assert st != 0 and e["code"] == 7 and "network" in e["msg"], e
    st, e = cni(plugin, "ADD", "{not json", "ctr-x", netns)
    assert st != 0 and e["code"] == 6, e
    st, e = cni(plugin, "ADD", conf(cl, 1, cniVersion="9.9.9"), "ctr-x", netns)
    assert st != 0 and e["code"] == 1, e
    st, e = cni(plugin, "ADD", conf(cl, 1), "ctr-x", "")
    assert st != 0 and e["code"] == 4 and "CNI_NETNS" in e["msg"], e
    st, e = cni(plugin, "ADD", conf(cl, 1, network="nosuch"), "ctr-x", netns)
    assert st != 0 and e["code"] == 7, e
    # An ADD that fails half-way (the interface name is taken in the container, found
    # after the address was allocated) undoes what it did: no address, no veth, no port.
    sh("ip", "link", "add", "eth0", "type", "veth", "peer", "name", "other", ns=ns)
    st, e = cni(plugin, "ADD", conf(cl, 1), "ctr-x", netns)
    assert st != 0 and e["code"] == 102 and "exists" in e["msg"], e
    assert cl.etcd_keys("/ovr/ipam/v1/") == [] and cl.etcd_keys("/ovr/v1/ports/") == []
    assert sorted(l["ifname"] for l in links(ns)) == ["eth0", "lo", "other"]
    assert not [l for l in host_links(cl, 1) if l.startswith("ovr")]
    # ovrd not there: try again later (11).
    st, e = cni(plugin, "ADD", conf(cl, 1, socket=str(cl.tmp / "none.sock")), "ctr-x", netns)
    assert st != 0 and e["code"] == 11, e


def test_networks_are_isolated_and_the_runtime_picks_mac_and_address(cl, plugin):
    """A blue container (same subnet, another VNI) with the address and MAC the runtime
    asked for (capabilities ips and mac) does not reach a red one on the other host; a
    red one there does."""
    made = []
    try:
        for cid, host, net, rc in (("ctr-r1", 1, "red", {}),
                                   ("ctr-r2", 2, "red", {}),
                                   ("ctr-b2", 2, "blue", {"ips": ["10.1.0.50/24"],
                                                          "mac": "02:00:00:00:bb:02"}),
                                   ("ctr-b1", 1, "blue", {"ips": ["10.1.0.51"]})):
            ns = cl.lab.ns(cid)
            c = conf(cl, host, network=net, name=f"{net}-net", runtimeConfig=rc)
            st, r = cni(plugin, "ADD", c, cid, f"/var/run/netns/{ns}")
            assert st == 0, r
            made.append((cid, ns, c, r))
        r1 = made[0][3]["ips"][0]["address"].split("/")[0]
        blue = made[2][3]
        assert blue["ips"][0]["address"] == "10.1.0.50/24", blue
        assert blue["interfaces"][0]["mac"] == "02:00:00:00:bb:02", blue
        assert cl.etcd_keys("/ovr/ipam/v1/blue/") == ["/ovr/ipam/v1/blue/10.1.0.50",
                                                 "/ovr/ipam/v1/blue/10.1.0.51"]
        until("red reaches red", lambda: sh("ping", "-c", "1", "-W", "1", r1, ns=made[1][1],
                                            check=False).returncode == 0, 10)
        until("blue reaches blue", lambda: sh("ping", "-c", "1", "-W", "1", "10.1.0.51",
                                              ns=made[2][1], check=False).returncode == 0, 10)
        assert sh("ping", "-c", "3", "-i", "0.2", "-W", "1", r1, ns=made[2][1],
                  check=False).returncode != 0, "blue reached red"
    finally:
        for cid, ns, c, _ in made:
            assert cni(plugin, "DEL", c, cid, f"/var/run/netns/{ns}") == (0, None)
    assert cl.etcd_keys("/ovr/v1/ports/") == [] and cl.etcd_keys("/ovr/ipam/v1/") == []


def test_a_policed_container_sends_no_more_than_its_rate(cl, plugin):
    """`police` in the network configuration reaches the port and ovrd's interface; a
    container pinging at 100/s gets through about its burst and its rate, the rest
    counted as `policed` on its host."""
    made = []
    try:
        policed = conf(cl, 1, police={"packetsPerSecond": 10, "burst": 5})
        for cid, host, c in (("ctr-p1", 1, policed), ("ctr-q2", 2, conf(cl, 2))):
            ns = cl.lab.ns(cid)
            st, r = cni(plugin, "ADD", c, cid, f"/var/run/netns/{ns}")
            assert st == 0, r
            made.append((cid, ns, c, r))
        port = json.loads(cl.etcd.ctl("get", "--print-value-only",
                                      "/ovr/v1/ports/h1/ctr-p1-eth0").stdout)
        assert port["police"] == {"packets_per_second": 10, "burst": 5}, port
        h1 = cl.hosts[1]
        until("the policed interface on h1", lambda: h1.get(
            f"/api/v1/interfaces/{port['interface']}").get("police") ==
            {"packets_per_second": 10, "burst": 5}, 10)
        q2 = made[1][3]["ips"][0]["address"].split("/")[0]
        until("p1 reaches q2", lambda: sh("ping", "-c", "1", "-W", "1", q2, ns=made[0][1],
                                          check=False).returncode == 0, 10)
        time.sleep(1)  # the bucket full again
        before = h1.get("/api/v1/counters")["drops"].get("policed", 0)
        out = sh("ping", "-c", "200", "-i", "0.01", "-W", "1", "-q", q2, ns=made[0][1],
                 check=False).stdout
        got = int(out.split(" received")[0].rsplit(",", 1)[1])
        # About 2 s at 100/s: the burst of 5 and 10/s pass (ARP rides the same bucket).
        assert 10 <= got <= 40, out
        # Drops in the kernel's filter reach the counters every 200 ms: wait for the last.
        policed_now = lambda: h1.get("/api/v1/counters")["drops"].get("policed", 0) - before
        until(f"the policed echoes counted ({out})", lambda: policed_now() >= 200 - got - 5, 2)
    finally:
        for cid, ns, c, _ in made:
            assert cni(plugin, "DEL", c, cid, f"/var/run/netns/{ns}") == (0, None)
    assert cl.etcd_keys("/ovr/v1/ports/") == [] and cl.etcd_keys("/ovr/ipam/v1/") == []


def test_dual_stack_network_gives_an_address_of_each_family(cl, plugin):
    """In a network with an IPv4 and an IPv6 subnet, the `ovr` IPAM gives each container
    one address of each, cluster-wide; IPv6 is usable at once (no DAD wait) and crosses
    the underlay; DEL releases both."""
    made = []
    try:
        for cid, host in (("ctr-g1", 1), ("ctr-g2", 2)):
            ns = cl.lab.ns(cid)
            c = conf(cl, host, network="green", name="green-net")
            st, r = cni(plugin, "ADD", c, cid, f"/var/run/netns/{ns}")
            assert st == 0, r
            made.append((cid, ns, c, r))
            ips = r["ips"]
            assert [ip["address"].split("/")[1] for ip in ips] == ["24", "64"], ips
            assert ips[0]["address"].startswith("10.3.0.") and ips[0]["gateway"] == "10.3.0.1"
            assert ips[1]["address"].startswith("fd00:3::") and ips[1]["gateway"] == "fd00:3::1"
            assert r["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.3.0.1"},
                                   {"dst": "::/0", "gw": "fd00:3::1"}], r
            eth0 = json.loads(sh("ip", "-j", "-6", "addr", "show", "eth0", ns=ns).stdout)[0]
            [a6] = [a for a in eth0["addr_info"] if a["scope"] == "global"]
            assert a6["local"] == ips[1]["address"].split("/")[0] and not a6.get("tentative"), a6
        g2 = [ip["address"].split("/")[0] for ip in made[1][3]["ips"]]
        assert sorted(cl.etcd_keys("/ovr/ipam/v1/green/")) == sorted(
            f"/ovr/ipam/v1/green/{a}" for _, _, _, r in made
            for a in (ip["address"].split("/")[0] for ip in r["ips"]))
        until("g1 reaches g2 over IPv6", lambda: sh("ping", "-6", "-c", "1", "-W", "1", g2[1],
                                                    ns=made[0][1], check=False).returncode == 0, 10)
        assert sh("ping", "-c", "2", "-i", "0.2", "-W", "1", g2[0], ns=made[0][1],
                  check=False).returncode == 0
    finally:
        for cid, ns, c, _ in made:
            assert cni(plugin, "DEL", c, cid, f"/var/run/netns/{ns}") == (0, None)
    assert cl.etcd_keys("/ovr/v1/ports/") == [] and cl.etcd_keys("/ovr/ipam/v1/") == []


def test_an_address_given_again_is_reached_at_its_new_mac_at_once(cl, plugin):
    """A container gone, its address given to the next one (another MAC): a peer that
    talked to the first still has the old MAC in its ARP cache, and would send there
    for half a minute or more. The new container announces itself (a gratuitous ARP once
    ovrd forwards for it): the peer's first ping reaches it."""
    peer, anchor = cl.lab.ns("garp-peer"), cl.lab.ns("garp-anchor")
    # The peer on h1; on h2 a container that stays, so that h1 floods to h2 all along
    # (a host learns that another is in the network when that one publishes a port).
    made = [("ctr-gp", 1, peer, conf(cl, 1)), ("ctr-gh", 2, anchor, conf(cl, 2))]
    try:
        for cid, _, ns, c in made:
            st, r = cni(plugin, "ADD", c, cid, f"/var/run/netns/{ns}")
            assert st == 0, r
        until("h1 knows h2 is in red", lambda: sh(
            "ping", "-c", "1", "-W", "1", r["ips"][0]["address"].split("/")[0], ns=peer,
            check=False).returncode == 0, 10)
        macs = []
        for cid in ("ctr-ga", "ctr-gb"):
            ns = cl.lab.ns(cid)
            cc = conf(cl, 2, runtimeConfig={"ips": ["10.1.0.77/24"]})
            st, r = cni(plugin, "ADD", cc, cid, f"/var/run/netns/{ns}")
            assert st == 0, r
            made.append((cid, 2, ns, cc))
            macs.append(r["interfaces"][0]["mac"])
            assert sh("ping", "-c", "1", "-W", "1", "10.1.0.77", ns=peer,
                      check=False).returncode == 0, f"{cid}: the first ping is lost"
            neigh = json.loads(sh("ip", "-j", "neigh", "show", "10.1.0.77", ns=peer).stdout)
            assert [n["lladdr"] for n in neigh] == [r["interfaces"][0]["mac"]], neigh
            assert cni(plugin, "DEL", cc, cid, f"/var/run/netns/{ns}") == (0, None)
            made.pop()
        assert macs[0] != macs[1]
    finally:
        for cid, host, ns, cc in made:
            cni(plugin, "DEL", cc, cid, f"/var/run/netns/{ns}")
    assert cl.etcd_keys("/ovr/v1/ports/") == [] and cl.etcd_keys("/ovr/ipam/v1/") == []


def test_status_and_gc(cl, plugin):
    c = conf(cl, 2, cniVersion="1.1.0")
    assert cni(plugin, "STATUS", c) == (0, None)
    st, e = cni(plugin, "STATUS", dict(c, socket=str(cl.tmp / "none.sock")))
    assert st != 0 and e["code"] == 50, e
    keep, drop = cl.lab.ns("keep"), cl.lab.ns("drop")
    for cid, ns in (("ctr-keep", keep), ("ctr-drop", drop)):
        st, r = cni(plugin, "ADD", c, cid, f"/var/run/netns/{ns}")
        assert st == 0, r
    gc = dict(c, **{"cni.dev/valid-attachments": [{"containerID": "ctr-keep", "ifname": "eth0"}]})
    assert cni(plugin, "GC", gc) == (0, None)
    assert [k.rsplit("/", 1)[1] for k in cl.etcd_keys("/ovr/v1/ports/")] == ["ctr-keep-eth0"]
    assert len(cl.etcd_keys("/ovr/ipam/v1/")) == 1
    assert [l["ifname"] for l in links(drop)] == ["lo"], "the stale veth went with its port"
    assert cni(plugin, "DEL", c, "ctr-keep", f"/var/run/netns/{keep}") == (0, None)
    assert cl.etcd_keys("/ovr/v1/ports/") == [] and cl.etcd_keys("/ovr/ipam/v1/") == []


def test_a_delegated_ipam_plugin_gives_the_address(cl, plugin, tmp_path):
    """host-local, run from CNI_PATH with the configuration: its address goes on the
    interface and into the port; DEL gives the lease back to it."""
    ns = cl.lab.ns("hl")
    c = conf(cl, 1, ipam={"type": "host-local", "dataDir": str(tmp_path),
                          "ranges": [[{"subnet": "10.1.0.0/24", "rangeStart": "10.1.0.200",
                                       "rangeEnd": "10.1.0.209"}]]})
    st, r = cni(plugin, "ADD", c, "ctr-hl", f"/var/run/netns/{ns}")
    assert st == 0, r
    assert r["ips"][0]["address"] == "10.1.0.200/24" and r["ips"][0]["interface"] == 0, r
    assert r["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.1.0.1"}], r
    port = json.loads(cl.etcd.ctl("get", "--print-value-only", "/ovr/v1/ports/h1/ctr-hl-eth0").stdout)
    assert port["ips"] == ["10.1.0.200"], port
    assert (tmp_path / "red-net" / "10.1.0.200").exists()
    assert cni(plugin, "CHECK", dict(c, prevResult=r), "ctr-hl", f"/var/run/netns/{ns}") == (0, None)
    assert cni(plugin, "DEL", c, "ctr-hl", f"/var/run/netns/{ns}") == (0, None)
    assert not (tmp_path / "red-net" / "10.1.0.200").exists()
    assert cl.etcd_keys("/ovr/v1/ports/") == [] and cl.etcd_keys("/ovr/ipam/v1/") == []
    # An IPAM plugin that is not on CNI_PATH is a configuration error.
    st, e = cni(plugin, "ADD", conf(cl, 1, ipam={"type": "nosuch"}), "ctr-hl", f"/var/run/netns/{ns}")
    assert st != 0 and e["code"] == 7 and "nosuch" in e["msg"], e
    assert [l["ifname"] for l in links(ns)] == ["lo"]


PODMAN_CONF = """[containers]
cgroupns="host"
default_ulimits=["nofile=20000:20000","nproc=32768:32768"]
[engine]
cgroup_manager="cgroupfs"
events_logger="file"
runtime="runc"
[network]
network_backend="cni"
cni_plugin_dirs=["{bin}","/usr/lib/cni"]
network_config_dir="{netd}"
"""


class Podman:
    """podman with a configuration, storage and CNI directories of its own (nothing under
    /etc or /var/lib/containers is touched); networks ovr-h1 and ovr-h2 attach to red
    through host 1's and host 2's ovrd."""

    def __init__(self, tmp, plugin, cl):
        self.tmp = tmp
        # podman wants a runroot of at most 50 characters.
        self.runroot = tempfile.mkdtemp(prefix="ovrpm", dir="/run")
        (tmp / "bin").mkdir()
        (tmp / "net.d").mkdir()
        shutil.copy(plugin, tmp / "bin" / "ovr-cni")
        (tmp / "containers.conf").write_text(
            PODMAN_CONF.format(bin=tmp / "bin", netd=tmp / "net.d"))
        for i in (1, 2):
            (tmp / "net.d" / f"ovr-h{i}.conflist").write_text(json.dumps({
                "cniVersion": "1.0.0", "name": f"ovr-h{i}",
                "plugins": [{"type": "ovr-cni", "network": "red",
                             "socket": str(cl.hosts[i].socket), "ipam": {"type": "ovr"},
                             "capabilities": {"mac": True, "ips": True}}]}))
        root = tmp / "rootfs"
        (root / "bin").mkdir(parents=True)
        shutil.copy("/bin/busybox", root / "bin" / "busybox")
        subprocess.run(["tar", "-C", str(root), "-cf", str(tmp / "rootfs.tar"), "."], check=True)
        try:
            self("import", str(tmp / "rootfs.tar"), "localhost/ovr-bb:1")
        except BaseException:
            shutil.rmtree(self.runroot, ignore_errors=True)
            raise

    def __call__(self, *args, check=True, timeout=60):
        env = dict(os.environ, CONTAINERS_CONF=str(self.tmp / "containers.conf"))
        r = subprocess.run(["podman", "--root", str(self.tmp / "root"),
                            "--runroot", self.runroot, *args],
                           env=env, capture_output=True, text=True, timeout=timeout)
        assert not check or r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    def run(self, name, network):
        self("run", "-d", "--name", name, "--network", network, "--cap-add", "NET_RAW",
             "localhost/ovr-bb:1", "/bin/busybox", "sleep", "600")
        out = self("exec", name, "/bin/busybox", "ip", "-4", "-o", "addr", "show", "eth0").stdout
        return out.split("inet ")[1].split("/")[0]

    def exec(self, name, *cmd, check=False):
        return self("exec", name, "/bin/busybox", *cmd, check=check)


def test_podman_containers_on_two_hosts(cl, plugin, tmp_path):
    """podman 4 runs ovr-cni from a conflist: containers on two hosts ping each other
    and talk TCP; `podman stop` (DEL with prevResult) leaves nothing."""
    pm = Podman(tmp_path, plugin, cl)
    try:
        a = pm.run("ovr-c1", "ovr-h1")
        b = pm.run("ovr-c2", "ovr-h2")
        assert a != b
        assert len(cl.etcd_keys("/ovr/v1/ports/")) == 2 and len(cl.etcd_keys("/ovr/ipam/v1/")) == 2
        until("c1 pings c2", lambda: pm.exec("ovr-c1", "ping", "-c", "1", "-W", "1", b)
              .returncode == 0, 10)
        assert pm.exec("ovr-c2", "ping", "-c", "2", "-W", "1", a).returncode == 0
        pm("exec", "-d", "ovr-c2", "/bin/busybox", "sh", "-c",
           "echo hello-over-ovr | /bin/busybox nc -l -p 7000")
        got = until("TCP across hosts", lambda: pm.exec(
            "ovr-c1", "sh", "-c", f"/bin/busybox nc -w 2 {b} 7000 </dev/null").stdout.strip(), 10)
        assert got == "hello-over-ovr"
        pm("stop", "-t", "0", "ovr-c1", "ovr-c2")
        assert cl.etcd_keys("/ovr/v1/ports/") == [] and cl.etcd_keys("/ovr/ipam/v1/") == []
        for i in (1, 2):
            assert not [l for l in host_links(cl, i) if l.startswith("ovr")], host_links(cl, i)
    finally:
        pm("rm", "-f", "-t", "0", "ovr-c1", "ovr-c2", check=False)
        shutil.rmtree(pm.runroot, ignore_errors=True)


def test_del_succeeds_with_ovrd_away_and_add_refuses_a_hosts_own_namespace(cl, plugin):
    ns = cl.lab.ns("away")
    netns = f"/var/run/netns/{ns}"
    st, r = cni(plugin, "ADD", conf(cl, 2), "ctr-away", netns)
    assert st == 0, r
    # ovrd does not answer: the container's interface still goes, DEL succeeds...
    away = conf(cl, 2, socket=str(cl.tmp / "none.sock"))
    assert cni(plugin, "DEL", away, "ctr-away", netns) == (0, None)
    assert [l["ifname"] for l in links(ns)] == ["lo"]
    assert not [l for l in host_links(cl, 2) if l.startswith("ovr")]
    # ... and what only ovrd can remove waits for the next DEL (or GC).
    assert len(cl.etcd_keys("/ovr/v1/ports/")) == 1 and len(cl.etcd_keys("/ovr/ipam/v1/")) == 1
    assert cni(plugin, "DEL", conf(cl, 2), "ctr-away", netns) == (0, None)
    assert cl.etcd_keys("/ovr/v1/ports/") == [] and cl.etcd_keys("/ovr/ipam/v1/") == []
    # ovrd's namespace, or the plugin's own, is not a container's.
    for own in (f"/var/run/netns/{cl.lab.prefix}-h2", "/proc/self/ns/net"):
        st, e = cni(plugin, "ADD", conf(cl, 2), "ctr-own", own)
        assert st != 0 and e["code"] == 4, e
    assert cl.etcd_keys("/ovr/ipam/v1/") == []


def test_parallel_adds_on_two_hosts_never_share_an_address(cl, plugin):
    """Ten ADDs at once, five through each host: ten addresses, no two alike; then ten
    DELs at once, and nothing is left."""
    from concurrent.futures import ThreadPoolExecutor
    jobs = [(f"ctr-p{k}", 1 + k % 2, cl.lab.ns(f"p{k}")) for k in range(10)]
    try:
        with ThreadPoolExecutor(10) as ex:
            results = list(ex.map(lambda j: cni(plugin, "ADD", conf(cl, j[1]), j[0],
                                                 f"/var/run/netns/{j[2]}"), jobs))
        assert all(st == 0 for st, _ in results), results
        addrs = [r["ips"][0]["address"] for _, r in results]
        assert len(set(addrs)) == 10, addrs
        assert len(cl.etcd_keys("/ovr/ipam/v1/red/")) == 10
    finally:
        with ThreadPoolExecutor(10) as ex:
            dels = list(ex.map(lambda j: cni(plugin, "DEL", conf(cl, j[1]), j[0],
                                             f"/var/run/netns/{j[2]}"), jobs))
    assert all(d == (0, None) for d in dels), dels
    assert cl.etcd_keys("/ovr/v1/ports/") == [] and cl.etcd_keys("/ovr/ipam/v1/") == []
    for i in (1, 2):
        assert not [l for l in host_links(cl, i) if l.startswith("ovr")]
