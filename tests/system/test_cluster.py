"""ovr as a cluster, end to end: a 3-member etcd, three hosts each running `ovrd --etcd`
with nothing but its underlay in its configuration, workloads whose ports are written as
intent with etcdctl. Everything a host knows of the others (tunnels, bridge entries, host
routes, flood lists) comes from the cluster; real traffic crosses the namespaces. Then
the faults: bad intent, the etcd leader killed during churn, every member down, an ovrd
restarted, a host killed.

One etcd and one set of hosts serve the module; tests leave them as they found them
(the host-killing test last)."""

import json
import signal
import subprocess
import time

import pytest

from system.etcd_hosts import EtcdHosts
from system.netns import sh, until

TTL = 3
RED = {"vni": 100, "subnets": ["10.1.0.0/24"], "gateways": ["10.1.0.1/24"]}
BLUE = {"vni": 200, "subnets": ["10.1.0.0/24"], "gateways": ["10.1.0.1/24"]}


class Cluster(EtcdHosts):
    def __init__(self, tmp):
        super().__init__(tmp, "c", "ovrcl", hosts=3, members=3,
                         networks={"red": RED, "blue": BLUE}, ttl=TTL)
        self.workloads = {}

    def up(self):
        super().up()
        for i in (1, 2, 3):
            self.workload(f"w{i}", i, "red", 10 + i)
        self.workload("b1", 1, "blue", 11)
        self.workload("b2", 2, "blue", 12)

    def start(self, i, *extra):
        super().start(i, "--fast-path-pin-dir", self.tmp / f"pins{i}", *extra)

    def workload(self, name, host, net, last, write=True):
        """A workload namespace on `host` and (with `write`) its port written as intent.
        Returns the port's value."""
        ns = self.lab.ns(name)
        mac = f"02:00:00:{ord(net[0]):02x}:00:{last:02x}"
        self.lab.veth(ns, "eth0", f"{self.lab.prefix}-h{host}", f"v-{name}", mac_a=mac)
        sh("ip", "addr", "add", f"10.1.0.{last}/24", "dev", "eth0", ns=ns)
        sh("ip", "route", "add", "default", "via", "10.1.0.1", ns=ns)
        sh("ethtool", "-K", "eth0", "tx", "off", ns=ns)
        self.workloads[name] = (ns, f"10.1.0.{last}", mac)
        port = {"network": net, "mac": mac, "ips": [f"10.1.0.{last}"], "interface": f"v-{name}"}
        if write:
            self.put(f"ports/h{host}/{name}", port)
        return port

    def put(self, key, value):
        text = value if isinstance(value, str) else json.dumps(value)
        self.etcd.ctl("put", f"/ovr/v1/{key}", text)

    def delete(self, key):
        self.etcd.ctl("del", f"/ovr/v1/{key}")

    def remove_port(self, host, name):
        """Deletes a workload's port and waits until every host has forgotten it."""
        self.delete(f"ports/h{host}/{name}")
        mac = self.workloads[name][2] if name in self.workloads else None
        until(f"{name} forgotten", lambda: all(
            b["mac"] != mac for i, h in self.hosts.items() if h.proc.poll() is None
            for b in self.api(i, "/api/v1/bridge")) and not any(
            i["name"] == f"v-{name}" for i in self.api(host, "/api/v1/interfaces")))

    def keys(self, prefix):
        return self.etcd_keys(f"/ovr/v1/{prefix}")

    def api(self, i, path):
        return self.hosts[i].get(path)

    def call(self, i, method, path, body=None):
        """A request to host i's API: (HTTP status, JSON answer)."""
        args = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "-X", method,
                "--unix-socket", str(self.hosts[i].socket), f"http://ovrd{path}"]
        if body is not None:
            args += ["-H", "content-type: application/json", "-d", json.dumps(body)]
        r = subprocess.run(args, capture_output=True, text=True, timeout=10)
        text, _, code = r.stdout.rpartition("\n")
        return int(code), json.loads(text) if text else None

    def ping(self, src, dst, count=1, wait=1, interval=None):
        ns = self.workloads[src][0]
        args = ["ping", "-c", str(count), "-W", str(wait)]
        if interval:
            args += ["-i", str(interval)]
        return sh(*args, self.workloads[dst][1], ns=ns, check=False, timeout=120)

    def reaches(self, src, dst, within=5.0):
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.ping(src, dst).returncode == 0:
                return time.monotonic() - (deadline - within)
        return None


@pytest.fixture(scope="module")
def cl(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.up()
        yield c
    finally:
        c.down()


def test_hosts_learn_each_other_from_intent_alone(cl):
    assert sorted(cl.keys("hosts/")) == [f"/ovr/v1/hosts/h{i}" for i in (1, 2, 3)]
    for w in ("w2", "w3"):
        assert cl.reaches("w1", w), f"w1 does not reach {w}"
    # Tenants stay apart although they use the same addresses: b1 reaches b2 (blue), and
    # h1's blue and red are two networks.
    assert cl.reaches("b1", "b2")
    # Only networks with a local port are installed: h3 has no blue.
    assert sorted(n["name"] for n in cl.api(3, "/api/v1/networks")) == ["red"]
    assert sorted(n["name"] for n in cl.api(1, "/api/v1/networks")) == ["blue", "red"]
    # h1's view of h2 for red: a VXLAN next hop with red's VNI, a bridge entry and a host
    # route for w2 to it, h2 in red's flood list.
    nh = {n["name"]: n for n in cl.api(1, "/api/v1/nexthops")}
    assert nh["h2:red"]["vni"] == 100 and nh["h2:red"]["tunnel"] == "to-h2"
    bridge = {(b["network"], b["mac"]): b["nexthop"] for b in cl.api(1, "/api/v1/bridge")}
    assert bridge[("red", cl.workloads["w2"][2])] == "h2:red"
    routes = {(r["network"], r["prefix"]): r["nexthop"] for r in cl.api(1, "/api/v1/routes")}
    assert routes[("red", "10.1.0.12/32")] == "h2:red"
    red = next(n for n in cl.api(1, "/api/v1/networks") if n["name"] == "red")
    assert sorted(red["flood"]) == ["h2:red", "h3:red"]
    status = cl.api(1, "/api/v1/cluster")
    assert status["connected"] and status["rejected"] == {}


def test_a_port_written_is_reached_and_a_port_deleted_is_not(cl):
    cl.workload("w4", 3, "red", 14)
    try:
        took = cl.reaches("w1", "w4", within=3)
        assert took is not None, "a new port on h3 not reached from h1 within 3 s"
        cl.remove_port(3, "w4")
        assert cl.ping("w1", "w4", count=2).returncode != 0
        assert "/ovr/v1/endpoints/h3/w4" not in cl.keys("endpoints/")
    finally:
        cl.remove_port(3, "w4")


def test_intent_written_through_any_hosts_api(cl):
    """h2's API writes a port of h3's into etcd; h3 installs it and h1 reaches it. The
    API checks what it writes as the agents would (422 naming the field, nothing
    written) and refuses to create twice (409); DELETE removes it everywhere."""
    port = cl.workload("wa", 3, "red", 19, write=False)
    try:
        st, v = cl.call(2, "POST", "/api/v1/cluster/ports", {"host": "h3", "name": "wa", **port})
        assert st == 201 and v["host"] == "h3" and v["revision"] > 0, v
        assert "/ovr/v1/ports/h3/wa" in cl.keys("ports/")
        assert cl.reaches("w1", "wa", within=3), "a port written through h2's API"
        st, v = cl.call(2, "POST", "/api/v1/cluster/ports", {"host": "h3", "name": "wa", **port})
        assert st == 409, v
        st, got = cl.call(1, "GET", "/api/v1/cluster/ports/h3/wa")
        assert st == 200 and got == {"host": "h3", "name": "wa", **port}, got
        # Without a host, a port is the answering host's.
        st, v = cl.call(1, "POST", "/api/v1/cluster/ports",
                        {"name": "wa", "network": "red", "mac": "02:00:00:72:00:77",
                         "interface": "v-none"})
        assert st == 201 and v["host"] == "h1", v
        assert cl.call(1, "DELETE", "/api/v1/cluster/ports/h1/wa")[0] == 200
        st, v = cl.call(1, "POST", "/api/v1/cluster/networks", {"name": "zero", "vni": 0})
        assert st == 422 and v["field"] == "vni", v
        st, v = cl.call(1, "PUT", "/api/v1/cluster/networks/green",
                        {"vni": 300, "gateways": ["10.9.0.1/24"], "subnets": ["10.1.0.0/24"]})
        assert st == 422 and v["field"].startswith("gateways"), v
        assert cl.keys("networks/") == ["/ovr/v1/networks/blue", "/ovr/v1/networks/red"]
        names = sorted(n["name"] for n in cl.call(3, "GET", "/api/v1/cluster/networks")[1])
        assert names == ["blue", "red"]
        # A network's flow quota, written through h3's API, reaches h1's tables.
        st, v = cl.call(3, "PUT", "/api/v1/cluster/networks/blue",
                        {**BLUE, "quotas": {"flows": 1000}})
        assert st == 200, v
        until("blue's quota on h1", lambda: [n.get("flow_quota") for n in cl.api(
            1, "/api/v1/networks") if n["name"] == "blue"] == [1000])
        assert cl.call(3, "PUT", "/api/v1/cluster/networks/blue", BLUE)[0] == 200
        until("no quota on h1", lambda: [n.get("flow_quota") for n in cl.api(
            1, "/api/v1/networks") if n["name"] == "blue"] == [None])
        # The host's own configuration API stays the cluster's.
        assert cl.call(1, "POST", "/api/v1/networks", {"name": "x"})[0] == 409
        st, v = cl.call(2, "DELETE", "/api/v1/cluster/ports/h3/wa")
        assert st == 200, v
        until("wa forgotten", lambda: not any(
            i["name"] == "v-wa" for i in cl.api(3, "/api/v1/interfaces")))
        assert cl.ping("w1", "wa", count=2).returncode != 0
        assert cl.call(2, "DELETE", "/api/v1/cluster/ports/h3/wa")[0] == 404
    finally:
        cl.delete("ports/h3/wa")
        cl.delete("ports/h1/wa")


def test_bad_intent_is_rejected_for_its_key_alone(cl):
    bad = {
        "ports/h1/junk": "{not json",
        # w2's MAC again, in red: the later port loses.
        "ports/h1/dup": {"network": "red", "mac": cl.workloads["w2"][2], "ips": ["10.1.0.50"],
                         "interface": "v-dup"},
        "ports/h2/lost": {"network": "green", "mac": "02:00:00:00:09:01", "interface": "v-x"},
        "networks/zero": {"vni": 0},
    }
    for k, v in bad.items():
        cl.put(k, v)
    cl.workload("w5", 1, "red", 15)
    try:
        assert cl.reaches("w5", "w2", within=3), "a good port next to bad ones is applied"
        rejected = until("h1 reports all four", lambda: (lambda r: r if len(r) >= 4 else None)(
            cl.api(1, "/api/v1/cluster")["rejected"]))
        assert "not a valid value" in rejected["/ovr/v1/ports/h1/junk"]
        assert "already a port's in network 'red'" in rejected["/ovr/v1/ports/h1/dup"]
        assert "network 'green' does not exist" in rejected["/ovr/v1/ports/h2/lost"]
        assert "vni: 0" in rejected["/ovr/v1/networks/zero"]
        metrics = subprocess.run(["curl", "-s", "--unix-socket", str(cl.hosts[1].socket),
                                  "http://ovrd/metrics"], capture_output=True, text=True).stdout
        assert "ovr_cluster_rejected_keys 4" in metrics
        assert "key rejected" in cl.hosts[1].text() and "ports/h1/dup" in cl.hosts[1].text()
        # The owner of the MAC keeps it: w2 is still reached.
        assert cl.reaches("w1", "w2")
    finally:
        for k in bad:
            cl.delete(k)
        cl.remove_port(1, "w5")
    until("rejections cleared", lambda: cl.api(1, "/api/v1/cluster")["rejected"] == {})


def test_a_killed_etcd_leader_loses_no_packet_and_writes_apply_again_soon(cl):
    ping = subprocess.Popen(["ip", "netns", "exec", cl.workloads["w1"][0], "ping", "-c", "150",
                             "-i", "0.02", "-W", "1", cl.workloads["w2"][1]],
                            stdout=subprocess.PIPE, text=True)
    leader = cl.etcd.leader()
    assert leader is not None
    try:
        time.sleep(0.5)
        cl.etcd.kill(leader)
        killed = time.monotonic()
        # Churn: a port written right after the kill (to the members alive, so that the
        # time measured is the election's, not etcdctl's failover), retried until etcd
        # takes it.
        alive = [u for i, u in enumerate(cl.etcd.urls) if i != leader]
        until("etcd takes a write", lambda: cl.etcd.ctl(
            "--command-timeout=300ms", "put", "/ovr/v1/ports/h3/w6", json.dumps({
                "network": "red", "mac": "02:00:00:72:00:10", "ips": ["10.1.0.16"],
                "interface": "v-w6"}), endpoints=alive, check=False).returncode == 0,
              timeout=10)
        written = time.monotonic()
        until("h3 applies it", lambda: any(
            i["name"] == "v-w6" for i in cl.api(3, "/api/v1/interfaces")), timeout=5)
        applied = time.monotonic()
        out, _ = ping.communicate(timeout=60)
        assert " 0% packet loss" in out, out
        assert written - killed <= 2.5, f"etcd took writes {written - killed:.2f} s after"
        assert applied - written <= 2.0, f"applied {applied - written:.2f} s after the write"
    finally:
        ping.kill()
        cl.etcd.start(leader)
        cl.remove_port(3, "w6")


def test_every_etcd_member_down_forwarding_goes_on_and_resyncs_on_return(cl):
    sessions = cl.api(1, "/api/v1/cluster")["sessions"]
    for i in range(3):
        cl.etcd.kill(i)
    try:
        until("h1 sees etcd gone", lambda: not cl.api(1, "/api/v1/cluster")["connected"],
              timeout=15)
        r = cl.ping("w1", "w2", count=20, interval=0.05)
        assert " 0% packet loss" in r.stdout, r.stdout
    finally:
        for i in range(3):
            cl.etcd._spawn(i, "existing")
        cl.etcd.wait_healthy()
    for i in (1, 2, 3):
        until(f"h{i} back", lambda i=i: cl.api(i, "/api/v1/cluster")["connected"], timeout=15)
    assert cl.api(1, "/api/v1/cluster")["sessions"] > sessions
    cl.workload("w7", 2, "red", 17)
    try:
        assert cl.reaches("w1", "w7", within=3)
    finally:
        cl.remove_port(2, "w7")


def test_a_restarted_ovrd_resumes_without_flushing_or_applying_twice(cl):
    before = {k: cl.api(1, f"/api/v1/{k}") for k in ("bridge", "routes", "tunnels", "nexthops")}
    cl.hosts[1].stop()
    cl.start(1)
    until("h1 listed", lambda: cl.api(1, "/api/v1/cluster")["connected"])
    status = cl.api(1, "/api/v1/cluster")
    # Started from its saved state, which already was what the cluster says: the first
    # derivation installs nothing.
    assert status["installs"] == 0, status
    for k, v in before.items():
        assert cl.api(1, f"/api/v1/{k}") == v, k
    assert cl.reaches("w1", "w3")
    # The restart was shorter than the lease: peers never withdrew it.
    assert "/ovr/v1/hosts/h1" in cl.keys("hosts/")


def test_a_killed_host_is_withdrawn_by_every_peer_within_the_lease(cl):
    cl.hosts[3].proc.send_signal(signal.SIGKILL)
    cl.hosts[3].proc.wait()
    killed = time.monotonic()
    for i in (1, 2):
        until(f"h{i} withdraws h3", lambda i=i: not any(
            t["name"] == "to-h3" for t in cl.api(i, "/api/v1/tunnels")), timeout=TTL + 2)
    took = time.monotonic() - killed
    assert took <= TTL + 1, f"withdrawn after {took:.1f} s (TTL {TTL} s)"
    assert "/ovr/v1/hosts/h3" not in cl.keys("hosts/")
    assert not [k for k in cl.keys("endpoints/") if k.startswith("/ovr/v1/endpoints/h3/")]
    assert cl.ping("w1", "w3").returncode != 0
