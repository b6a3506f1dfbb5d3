"""ovrd's interfaces over their life: a virtual machine's TAP (absent when ovrd starts,
gone when the VM stops, back when it starts again) and a workload veth deleted and made
again. ovrd must wait for the TAP, let go of an interface that disappears and attach to it
again when it is back, with no restart; traffic then flows as before. Each topology is run
with both drivers.

Host A runs ovrd with `uplink` (underlay) and `vm1`; host B has no ovr: the kernel's
vxlan device (VNI 100) with 10.1.0.9, as in test_ovrd_kernel_vxlan.py.
"""

import json
import pathlib
import re
import subprocess
import time

import pytest

from system.netns import Lab, sh
from system.ovrd import Ovrd, binary
from system.test_ovrd_kernel_vxlan import A_MAC, B_MAC, B_VM_MAC, VM1_MAC, config

TAPVM = pathlib.Path(__file__).parent / "tapvm.py"


def kernel_vxlan_host(lab, a):
    b = lab.ns("b")
    lab.veth(a, "uplink", b, "eth0", A_MAC, B_MAC)
    sh("ip", "addr", "add", "192.0.2.2/24", "dev", "eth0", ns=b)
    sh("ip", "link", "add", "vxlan100", "address", B_VM_MAC, "type", "vxlan", "id", "100",
       "local", "192.0.2.2", "remote", "192.0.2.1", "dstport", "4789", "dev", "eth0", ns=b)
    sh("ip", "addr", "add", "10.1.0.9/24", "dev", "vxlan100", ns=b)
    sh("ip", "link", "set", "vxlan100", "up", ns=b)
    for dev in ("vxlan100", "eth0"):
        sh("ethtool", "-K", dev, "tx", "off", ns=b)
    return b


@pytest.fixture(params=["af-xdp", "af-packet"])
def driver(request):
    return request.param


def run_vm(a, log, attached_count, hold=0.0, pings=("10.1.0.1", "10.1.0.9")):
    """Starts the TAP VM in host A; it talks once ovrd has attached to its TAP."""
    args = ["ip", "netns", "exec", a, "python3", str(TAPVM), "vm1", "--mac", VM1_MAC,
            "--ip", "10.1.0.5", "--hold", str(hold), "--wait-file", str(log),
            "--wait-text", "attached interface=vm1", "--wait-count", str(attached_count)]
    for p in pings:
        args += ["--ping", p]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def vm_result(vm):
    out, err = vm.communicate(timeout=30)
    assert vm.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_a_vm_tap_is_waited_for_and_attached_again_after_the_vm_restarts(tmp_path, driver):
    lab = Lab("t")
    ovrd = None
    try:
        a = lab.ns("a")
        b = kernel_vxlan_host(lab, a)
        cfg = tmp_path / "a.yaml"
        cfg.write_text(config("tap"))
        ovrd = Ovrd(a, tmp_path / "ovrd.log", "--config", cfg, "--driver", driver)
        assert any("does not exist yet: waiting for it" in line and "interface=vm1" in line
                   for line in ovrd.text().splitlines()), ovrd.text()

        # The VM starts: ovrd attaches to its TAP; the VM reaches the gateway and, through
        # VXLAN, the kernel's host, which reaches it back.
        vm = run_vm(a, ovrd.log, 1, hold=3)
        ovrd.wait_for("attached interface=vm1")
        time.sleep(1)
        r = sh("ping", "-c", "2", "-i", "0.3", "-W", "2", "10.1.0.5", ns=b, check=False)
        res = vm_result(vm)
        assert res["pinged"] == {"10.1.0.1": True, "10.1.0.9": True}, res
        assert r.returncode == 0, r.stdout + r.stderr
        assert res["echo_requests_answered"] >= 2

        # The VM stops (its TAP goes away) and starts again: ovrd follows.
        ovrd.wait_for("interface disappeared")
        vm = run_vm(a, ovrd.log, 2)
        ovrd.wait_for("attached interface=vm1", count=2)
        res = vm_result(vm)
        assert res["pinged"] == {"10.1.0.1": True, "10.1.0.9": True}, res
        ovrd.stop()
        assert ovrd.proc.returncode == 0, ovrd.text()
        closed = [l for l in ovrd.text().splitlines() if "closed" in l and "vm1" in l]
        assert len(closed) == 1 and " rx=0 " not in closed[0], ovrd.text()
    finally:
        if ovrd:
            ovrd.stop()
        lab.close()


def test_a_workload_veth_deleted_and_made_again_is_attached_again(tmp_path, driver):
    lab = Lab("r")
    ovrd = None
    try:
        a, vm = lab.ns("a"), lab.ns("vm1")
        kernel_vxlan_host(lab, a)

        def workload():
            lab.veth(a, "vm1", vm, "eth0", None, VM1_MAC)
            sh("ip", "addr", "add", "10.1.0.5/24", "dev", "eth0", ns=vm)
            sh("ethtool", "-K", "eth0", "tx", "off", ns=vm)

        workload()
        cfg = tmp_path / "a.yaml"
        cfg.write_text(config("workload"))
        ovrd = Ovrd(a, tmp_path / "ovrd.log", "--config", cfg, "--driver", driver)
        ok = sh("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.1.0.9", ns=vm, check=False)
        assert ok.returncode == 0, ok.stdout
        sh("ip", "link", "del", "vm1", ns=a)
        ovrd.wait_for("interface disappeared")
        workload()
        ovrd.wait_for("attached interface=vm1", count=2)
        ok = sh("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.1.0.9", ns=vm, check=False)
        assert ok.returncode == 0, ok.stdout + ovrd.text()
        # Taken down and up again by an administrator: it keeps working.
        sh("ip", "link", "set", "vm1", "down", ns=a)
        sh("ip", "link", "set", "vm1", "up", ns=a)
        ok = sh("ping", "-c", "2", "-i", "0.2", "-W", "3", "10.1.0.9", ns=vm, check=False)
        assert ok.returncode == 0, ok.stdout + ovrd.text()
    finally:
        if ovrd:
            ovrd.stop()
        lab.close()


def test_an_interface_added_through_the_api_is_attached_and_let_go_when_deleted(tmp_path,
                                                                                driver):
    """A CNI plugin may configure a workload's interface before or after making its veth:
    ovrd attaches to it as soon as both are there, with no restart, and lets it go when
    the configuration drops it."""
    lab = Lab("n")
    ovrd = None
    try:
        a, vm = lab.ns("a"), lab.ns("vm1")
        kernel_vxlan_host(lab, a)
        cfg = tmp_path / "a.yaml"
        cfg.write_text("\n".join(l for l in config().splitlines() if "name: vm1" not in l))
        ovrd = Ovrd(a, tmp_path / "ovrd.log", "--config", cfg, "--driver", driver)
        ctl = [str(binary("ovr-cli", "ovrctl")), "--socket", str(ovrd.socket)]

        def add():
            sh(*ctl, "interfaces", "add", "name=vm1", "kind=workload", "network=red",
               f"peer_mac={VM1_MAC}", "peer_addresses=10.1.0.5")

        add()
        ovrd.wait_for("does not exist yet: waiting for it interface=vm1")
        lab.veth(a, "vm1", vm, "eth0", None, VM1_MAC)
        sh("ip", "addr", "add", "10.1.0.5/24", "dev", "eth0", ns=vm)
        sh("ethtool", "-K", "eth0", "tx", "off", ns=vm)
        ovrd.wait_for("attached interface=vm1")
        ok = sh("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.1.0.9", ns=vm, check=False)
        assert ok.returncode == 0, ok.stdout + ovrd.text()

        sh(*ctl, "interfaces", "del", "vm1")
        ovrd.wait_for("removed from the configuration: let go interface=vm1")
        # Let go means let go: no XDP program left on it, nothing forwarded.
        assert "xdp" not in sh("ip", "-d", "link", "show", "vm1", ns=a).stdout
        ok = sh("ping", "-c", "2", "-i", "0.2", "-W", "1", "10.1.0.9", ns=vm, check=False)
        assert ok.returncode != 0, ok.stdout

        # Configured again: the same interface, attached again.
        add()
        ovrd.wait_for("attached interface=vm1", count=2)
        ok = sh("ping", "-c", "2", "-i", "0.2", "-W", "2", "10.1.0.9", ns=vm, check=False)
        assert ok.returncode == 0, ok.stdout + ovrd.text()
    finally:
        if ovrd:
            ovrd.stop()
        lab.close()


def test_a_policed_workload_is_policed_in_the_kernel(tmp_path, driver):
    """Both drivers drop a policed workload's frames over its rate in the kernel, before
    ovrd reads them (AF_XDP in its XDP program, AF_PACKET in a socket filter); ovrd
    still counts them as received and as `policed`. Removed, the policer lets everything
    through again."""
    lab = Lab("q")
    ovrd = None
    try:
        a, vm = lab.ns("a"), lab.ns("vm1")
        kernel_vxlan_host(lab, a)
        lab.veth(a, "vm1", vm, "eth0", None, VM1_MAC)
        sh("ip", "addr", "add", "10.1.0.5/24", "dev", "eth0", ns=vm)
        sh("ethtool", "-K", "eth0", "tx", "off", ns=vm)
        cfg = tmp_path / "a.yaml"
        cfg.write_text(config("workload"))
        ovrd = Ovrd(a, tmp_path / "ovrd.log", "--config", cfg, "--driver", driver)
        ctl = [str(binary("ovr-cli", "ovrctl")), "--socket", str(ovrd.socket)]

        def api(*args):
            return json.loads(sh(*ctl, "--json", *args).stdout or "{}")

        def pings(n, interval):
            r = sh("ping", "-c", str(n), "-i", str(interval), "-W", "1", "-q", "10.1.0.9",
                   ns=vm, check=False)
            return int(re.search(r"(\d+) received", r.stdout).group(1))

        def counted():
            time.sleep(0.5)  # ovrd takes the kernel's counts every 200 ms
            c = api("counters")
            vm1 = next(i for i in c["interfaces"] if i["name"] == "vm1")
            return vm1["rx_packets"], api("dropstats").get("policed", 0)

        assert pings(2, 0.2) == 2, ovrd.text()  # and the neighbours are resolved
        iface = api("interfaces", "show", "vm1")
        police = {"packets_per_second": 20, "burst": 5}
        sh(*ctl, "interfaces", "set", json.dumps({**iface, "police": police}))
        ovrd.wait_for("policed in the kernel interface=vm1 packets_per_second=20 burst=5")
        rx, policed = counted()
        # 100 echo requests in about a second: the burst and about 20 more pass.
        answered = pings(100, 0.01)
        assert 5 <= answered <= 5 + 20 * 2, answered
        rx2, policed2 = counted()
        # Every request is received; each not answered was policed (give or take a
        # neighbour probe the workload may send meanwhile).
        assert rx2 - rx >= 100, (rx, rx2)
        assert abs((policed2 - policed) - (100 - answered)) <= 2, (policed, policed2, answered)

        sh(*ctl, "interfaces", "set", json.dumps(iface))
        ovrd.wait_for("no longer policed in the kernel interface=vm1")
        assert pings(50, 0.01) == 50
        assert counted()[1] == policed2
    finally:
        if ovrd:
            ovrd.stop()
        lab.close()
