"""ovrd on real interfaces, against the Linux kernel's own VXLAN device.

Host A is a namespace where ovrd owns two veths: `uplink` to the underlay and `vm1` to a
workload namespace. Host B is a namespace with no ovr at all: the kernel's vxlan device
(VNI 100) with an address in the tenant subnet. Traffic between the workload and B's
vxlan device must cross ovrd both ways: ARP (flooded into the tunnel, answered back
through it), ping, TCP; and the gateway must answer the workload.
"""

import hashlib
import os
import pathlib
import random
import re
import signal
import subprocess
import time

import pytest

from system.netns import Lab, sh
from system.ovrd import Ovrd, binary

A_MAC, B_MAC = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
VM1_MAC, B_VM_MAC = "02:00:00:00:01:05", "02:00:00:00:02:09"


def config(vm_kind="workload"):
    """Host A's configuration; `vm1` is a workload veth or a VM's TAP."""
    return f"""
interfaces:
  - {{ name: uplink, kind: underlay, mac: "{A_MAC}", addresses: [192.0.2.1/24] }}
  - {{ name: vm1, kind: {vm_kind}, network: red, peer_mac: "{VM1_MAC}", peer_addresses: [10.1.0.5] }}
networks:
  - {{ name: red, vni: 100, gateways: [10.1.0.1/24], flood: [b-red] }}
tunnels:
  - {{ name: to-b, underlay: uplink, remote: 192.0.2.2, remote_mac: "{B_MAC}" }}
nexthops:
  - {{ name: b-red, kind: tunnel, tunnel: to-b, encap: vxlan, vni: 100 }}
bridge:
  - {{ network: red, mac: "{B_VM_MAC}", nexthop: b-red }}
"""


# ovrd's drivers, and whether the workload leaves checksums and segmentation to its NIC
# (a container's default): auto takes AF_PACKET for both (offloads welcome; the underlay
# keeps large frames); forced AF_XDP needs complete frames from the workload. The
# last runs two workers, one per interface: every flow crosses from one to the other.
DRIVERS = {"auto": ("auto", True, 1), "af-packet": ("af-packet", True, 1),
           "af-xdp": ("af-xdp", False, 1), "auto-2-workers": ("auto", True, 2)}


@pytest.fixture(params=list(DRIVERS))
def topology(request, tmp_path):
    driver, offloads, workers = DRIVERS[request.param]
    lab = Lab("v")
    ovrd = None
    try:
        a, vm, b = lab.ns("a"), lab.ns("vm1"), lab.ns("b")
        lab.veth(a, "uplink", b, "eth0", A_MAC, B_MAC)
        lab.veth(a, "vm1", vm, "eth0", None, VM1_MAC)
        sh("ip", "addr", "add", "10.1.0.5/24", "dev", "eth0", ns=vm)
        sh("ip", "route", "add", "default", "via", "10.1.0.1", ns=vm)
        sh("ip", "addr", "add", "192.0.2.2/24", "dev", "eth0", ns=b)
        sh("ip", "link", "add", "vxlan100", "address", B_VM_MAC, "type", "vxlan", "id", "100",
           "local", "192.0.2.2", "remote", "192.0.2.1", "dstport", "4789", "dev", "eth0", ns=b)
        sh("ip", "addr", "add", "10.1.0.9/24", "dev", "vxlan100", ns=b)
        sh("ip", "link", "set", "vxlan100", "up", ns=b)
        # With tx offloads on, B's kernel hands the veth 64 KB UDP-tunnel GSO frames, which
        # neither a packet socket's virtio-net header nor XDP can describe (README, "Known
        # limitations"): B sends complete frames.
        devs = [(b, "vxlan100"), (b, "eth0")] + ([] if offloads else [(vm, "eth0")])
        for ns, dev in devs:
            sh("ethtool", "-K", dev, "tx", "off", ns=ns)
        cfg = tmp_path / "a.yaml"
        cfg.write_text(config())
        cpus = ",".join(str(i % os.cpu_count()) for i in range(workers))
        ovrd = Ovrd(a, tmp_path / "ovrd.log", "--config", cfg, "--driver", driver,
                    "--workers", workers, "--cpu", cpus)
        yield {"a": a, "vm": vm, "b": b, "proc": ovrd.proc, "log": ovrd.log,
               "driver": driver.replace("-", "_"), "offloads": offloads, "workers": workers}
    finally:
        if ovrd is not None:
            ovrd.stop()
        lab.close()


def ping(ns, dst, count=3):
    r = sh("ping", "-c", str(count), "-i", "0.2", "-W", "2", dst, ns=ns, check=False)
    return r.returncode == 0, r.stdout + r.stderr


def test_workload_and_kernel_vxlan_reach_each_other_through_ovrd(topology):
    t = topology
    ok, out = ping(t["vm"], "10.1.0.9")
    assert ok, out
    ok, out = ping(t["b"], "10.1.0.5")
    assert ok, out
    # The virtual gateway answers the workload (ARP and ping), from ovr itself.
    ok, out = ping(t["vm"], "10.1.0.1")
    assert ok, out
    neigh = sh("ip", "neigh", "show", "10.1.0.1", ns=t["vm"]).stdout
    assert "00:00:5e:00:01:00" in neigh, neigh


def test_tcp_crosses_in_both_directions(topology):
    """200 KB up, 4 MB of random bytes down (compared by hash): toward the workload ovr
    joins runs of segments into large frames when its driver allows (AF_PACKET)."""
    t = topology
    server = subprocess.Popen(
        ["ip", "netns", "exec", t["b"], "python3", "-c",
         "import socket,random;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
         "s.bind(('10.1.0.9',5001));s.listen(1);c,_=s.accept();d=b''\n"
         "while len(d)<200000:\n  x=c.recv(65536)\n  if not x: break\n  d+=x\n"
         "c.sendall(b'got %d\\n' % len(d));c.sendall(random.Random(7).randbytes(4<<20));c.close()"])
    try:
        time.sleep(0.5)
        client = sh("python3", "-c",
                    "import socket,hashlib;s=socket.create_connection(('10.1.0.9',5001),timeout=10);"
                    "s.sendall(b'x'*200000);f=s.makefile('rb');print(f.readline().decode().strip());"
                    "print(hashlib.sha256(f.read()).hexdigest())", ns=t["vm"], check=False)
        assert client.returncode == 0, client.stderr
        got, digest = client.stdout.split()[:3], client.stdout.split()[-1]
        assert " ".join(got[:2]) == "got 200000", client.stdout
        assert digest == hashlib.sha256(random.Random(7).randbytes(4 << 20)).hexdigest()
    finally:
        server.wait(timeout=10)
    if t["offloads"]:
        # The workload's stack handed ovr frames larger than the MTU (segmentation left
        # to the "NIC"), and B's kernel accepted every segment ovr cut from them.
        t["proc"].send_signal(signal.SIGTERM)
        assert t["proc"].wait(timeout=10) == 0
        log = t["log"].read_text()
        cut = re.search(r"offload: (\d+) large frames cut into (\d+) segments", log)
        assert cut and 0 < int(cut[1]) < int(cut[2]), log
    if t["driver"] != "af_xdp":
        # The other way, AF_PACKET handed the workload runs of segments as large frames
        # (from whichever worker owns the flow: the one receiving from vm1 or another).
        lines = [line for line in t["log"].read_text().splitlines()
                 if ("closed" in line or "sender let go" in line) and "interface=vm1 " in line]
        joined = sum(int(re.search(r"tx_joined=(\d+)", line)[1]) for line in lines)
        assert joined > 0, lines


def xdp_attached(ns, dev):
    return "prog/xdp" in sh("ip", "-d", "link", "show", dev, ns=ns).stdout


def worker_cpus(pid):
    """Each forwarding worker thread of process `pid` and the CPUs it may run on."""
    out = {}
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        name = (task / "comm").read_text().strip()
        if name.startswith("ovr-worker-"):
            status = (task / "status").read_text()
            out[name] = next(l.split("\t", 1)[1] for l in status.splitlines()
                             if l.startswith("Cpus_allowed_list:"))
    return out


def test_sigterm_detaches_and_reports_counters(topology):
    t = topology
    ping(t["vm"], "10.1.0.9", count=1)
    log = t["log"].read_text()
    expected = {"auto": {"vm1": "af_packet", "uplink": "af_packet"}}.get(
        t["driver"], {"vm1": t["driver"], "uplink": t["driver"]})
    for dev, driver in expected.items():
        assert f"attached interface={dev} id=" in log
        assert any(f"interface={dev} " in line and f"driver={driver}" in line
                   for line in log.splitlines() if "attached" in line), log
        # With AF_XDP, ovrd's XDP program sits on the interface while it runs.
        assert xdp_attached(t["a"], dev) == (driver == "af_xdp")
    # Each worker thread runs on its CPU only (`ip netns exec` becomes ovrd: same PID).
    n = t["workers"]
    assert worker_cpus(t["proc"].pid) == {f"ovr-worker-{i}": str(i % os.cpu_count())
                                          for i in range(n)}
    t["proc"].send_signal(signal.SIGTERM)
    assert t["proc"].wait(timeout=10) == 0
    log = t["log"].read_text()
    assert "stopped" in log and log.count("closed") == 2, log
    assert "vm1" in log and "uplink" in log
    # Nothing of ovr's stays in the host namespace: sockets closed, programs detached.
    for dev in ("vm1", "uplink"):
        assert not xdp_attached(t["a"], dev)


def test_a_bad_configuration_is_refused_with_the_field_named(tmp_path):
    ovrd = binary("ovrd")
    bad = tmp_path / "bad.yaml"
    bad.write_text("interfaces:\n  - { name: uplink, kind: underlay, mac: '02:00:00:00:00:0a', mtu: 40 }\n")
    own = ["--api-socket", str(tmp_path / "ovrd.sock"), "--state", str(tmp_path / "state.json")]
    r = subprocess.run([str(ovrd), "--config", str(bad), *own], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "interfaces[0]" in r.stderr and "MTU 40" in r.stderr, r.stderr
    missing = tmp_path / "missing.yaml"
    missing.write_text("interfaces:\n  - { name: ovrnosuch0, kind: underlay, mac: '02:00:00:00:00:0a' }\n")
    r = subprocess.run([str(ovrd), "--config", str(missing), *own], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "interface 'ovrnosuch0' does not exist" in r.stderr, r.stderr
    empty = tmp_path / "empty.yaml"
    empty.write_text("interfaces: []\n")
    r = subprocess.run([str(ovrd), "--config", str(empty), "--cpu", "4096", *own],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--cpu 4096: no such CPU" in r.stderr, r.stderr
