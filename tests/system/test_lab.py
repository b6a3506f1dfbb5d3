"""`ovrctl lab` end to end: two hosts, each with its own ovrd, two tenants with the same
addresses, in each of the three encapsulations. Traffic really crosses the namespaces;
the underlay is captured and dissected by tshark. The lab is a cluster (etcd, each host's
configuration derived from the intent) unless the case says `static` (each host's whole
configuration written by hand; the kernel host is only in static labs)."""

import json
import os
import pathlib
import re
import subprocess
import time

import pytest

from conftest import ROOT
from system.capture import Capture
from system.procfs import cpu_seconds

OVRCTL = ROOT / "target" / "debug" / "ovrctl"


def ovrctl(*args, check=True, timeout=60):
    return subprocess.run([str(OVRCTL), *args], check=check, timeout=timeout,
                          capture_output=True, text=True)


def namespaces():
    """The lab's namespaces (other test runs and benchmarks on this machine make and remove
    their own, under other prefixes, at any time)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines()
            if line.strip() and line.startswith("ovrlab-")}


@pytest.fixture
def lab(request):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    before = namespaces()
    encap, *variant = request.param.split("+")
    extra = {"kernel": ["--static", "--kernel-host"], "static": ["--static"]}.get(
        "".join(variant), [])
    r = ovrctl("lab", "up", "--hosts", "2", "--tenants", "2", "--encap", encap, *extra, check=False)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        yield encap
    finally:
        down = ovrctl("lab", "down", check=False)
        # Exactly what the lab made is gone, nothing else was touched.
        assert namespaces() == before, (down.stdout, down.stderr)


def run_in(workload, *cmd, check=False, timeout=30):
    return ovrctl("lab", "exec", workload, "--", *cmd, check=check, timeout=timeout)


WHOAMI = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 7000)); s.listen(4)
for _ in range(2):
    c, _ = s.accept(); c.sendall(sys.argv[1].encode()); c.close()
"""

ASK = "import socket; print(socket.create_connection(('10.1.0.21', 7000), timeout=5).recv(64).decode())"

# Ethernet inside MPLS without a control word: tell tshark (RFC 4448 section 4.6). The
# tenants' labels: by hand in a static lab (1001, 1002); in a cluster each host gives its
# networks the first free pairs from 100000 (Ethernet, IP), t1 then t2.
MPLS_ETHERNET = [a for label in (1001, 1002, 100000, 100002)
                 for a in ("-d", f"mpls.label=={label},pwethnocw")]
TSHARK_HINTS = {"vxlan": [], "mpls-udp": MPLS_ETHERNET, "mpls-gre": MPLS_ETHERNET}
OUTER = {"vxlan": "vxlan", "mpls-udp": "mpls", "mpls-gre": "gre"}


@pytest.mark.parametrize("lab", ["vxlan", "mpls-udp", "mpls-gre", "vxlan+static", "mpls-gre+static"],
                         indirect=True)
def test_tenants_reach_their_own_workloads_across_hosts(lab, tmp_path):
    encap = lab
    sniff = Capture("ovrlab-underlay", "br0", tmp_path / "underlay.pcap")
    servers = [subprocess.Popen(["ip", "netns", "exec", f"ovrlab-{w}", "timeout", "20",
                                 "python3", "-c", WHOAMI, w])
               for w in ("h2-t1-w1", "h2-t2-w1")]
    try:
        for w in ("h1-t1-w1", "h1-t2-w1"):
            r = run_in(w, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.1.0.21")
            assert r.returncode == 0, r.stdout + r.stderr
        # The same address is a different workload in each tenant.
        assert run_in("h1-t1-w1", "python3", "-c", ASK).stdout.strip() == "h2-t1-w1"
        assert run_in("h1-t2-w1", "python3", "-c", ASK).stdout.strip() == "h2-t2-w1"
        # The gateway is ovr on every host.
        assert run_in("h2-t2-w1", "ping", "-c", "1", "-W", "2", "10.1.0.1").returncode == 0
    finally:
        for s in servers:
            s.kill()
        cap = sniff.stop()
    text = subprocess.run(["tshark", "-r", str(cap), "-V", *TSHARK_HINTS[encap]],
                          capture_output=True, text=True).stdout
    assert "Malformed" not in text
    proto = subprocess.run(["tshark", "-r", str(cap), "-Y", OUTER[encap], *TSHARK_HINTS[encap]],
                           capture_output=True, text=True).stdout
    assert len(proto.splitlines()) >= 8, f"too few {encap} packets on the underlay:\n{proto}"


@pytest.mark.parametrize("lab", ["vxlan"], indirect=True)
def test_a_workload_never_sees_another_tenants_traffic(lab, tmp_path):
    # Capture on tenant 2's workload on host 2 while tenant 1 talks to the same address.
    sniff = Capture("ovrlab-h2-t2-w1", "eth0", tmp_path / "t2.pcap")
    try:
        r = run_in("h1-t1-w1", "ping", "-c", "5", "-i", "0.2", "-p", "c0ffee", "10.1.0.21")
        assert r.returncode == 0, r.stdout
    finally:
        cap = sniff.stop()
    seen = subprocess.run(["tshark", "-r", str(cap), "-Y", "icmp"], capture_output=True, text=True).stdout
    assert seen.strip() == "", f"tenant 2 saw tenant 1's pings:\n{seen}"


@pytest.mark.parametrize("lab", ["vxlan+kernel"], indirect=True)
def test_ovr_hosts_and_a_kernel_vxlan_host_talk_both_ways(lab):
    # h3 runs no ovr: the kernel's bridge and vxlan device, tenant 1 only.
    for src, dst in (("h1-t1-w1", "10.1.0.31"), ("h3-t1-w1", "10.1.0.11"), ("h3-t1-w1", "10.1.0.21")):
        r = run_in(src, "ping", "-c", "2", "-i", "0.2", "-W", "2", dst)
        assert r.returncode == 0, f"{src} -> {dst}: {r.stdout}{r.stderr}"
    server = subprocess.Popen(["ip", "netns", "exec", "ovrlab-h3-t1-w1", "timeout", "20", "python3", "-c",
                               "import socket;s=socket.socket();s.bind(('0.0.0.0',7001));s.listen(1);"
                               "c,_=s.accept();n=0\n"
                               "while True:\n  d=c.recv(65536)\n  if not d: break\n  n+=len(d)\n"
                               "c.sendall(str(n).encode());c.close()"])
    try:
        time.sleep(0.5)
        r = run_in("h1-t1-w1", "python3", "-c",
                   "import socket;s=socket.create_connection(('10.1.0.31',7001),timeout=10);"
                   "s.sendall(b'y'*300000);s.shutdown(socket.SHUT_WR);print(s.recv(64).decode())")
        assert r.stdout.strip() == "300000", r.stdout + r.stderr
    finally:
        server.kill()
    # Tenant 2 has no way to the kernel host's tenant-1 workload.
    assert run_in("h1-t2-w1", "ping", "-c", "1", "-W", "1", "10.1.0.31").returncode != 0


def lab_ovrd_pids():
    state = json.loads(pathlib.Path("/run/ovr-lab/state.json").read_text())
    return [h["ovrd_pid"] for h in state["hosts"]]


def worker_threads(pid):
    """The /proc task directories of process `pid`'s forwarding threads, by name."""
    tasks = pathlib.Path(f"/proc/{pid}/task").iterdir()
    return {(t / "comm").read_text().strip(): t for t in tasks
            if (t / "comm").read_text().startswith("ovr-worker")}


def allowed_cpus(task):
    return next(line.split(":", 1)[1].strip() for line in (task / "status").read_text().splitlines()
                if line.startswith("Cpus_allowed_list"))


@pytest.mark.parametrize("lab", ["vxlan"], indirect=True)
def test_each_hosts_worker_is_pinned_to_its_own_cpu(lab):
    # An unpinned worker moving between CPUs can reorder a flow's frames on a veth
    # (docs/io.md, "Workers"): the lab pins each host's worker, the hosts in turn.
    available = sorted(os.sched_getaffinity(0))
    pinned = [{name: allowed_cpus(t) for name, t in worker_threads(pid).items()}
              for pid in lab_ovrd_pids()]
    assert pinned == [{"ovr-worker-0": str(available[i % len(available)])} for i in range(2)]


@pytest.mark.parametrize("lab", ["vxlan"], indirect=True)
def test_an_idle_ovrd_sleeps_after_traffic(lab):
    # Workers keep looking for frames a short while after traffic (--spin-us), then sleep
    # in poll(2): an idle ovrd must not keep a core busy.
    r = run_in("h1-t1-w1", "ping", "-c", "20", "-i", "0.01", "-W", "2", "10.1.0.21")
    assert r.returncode == 0, r.stdout + r.stderr
    time.sleep(0.5)
    workers = [t for pid in lab_ovrd_pids() for t in worker_threads(pid).values()]
    before = [cpu_seconds(t) for t in workers]
    time.sleep(3)
    used = [cpu_seconds(t) - b for t, b in zip(workers, before)]
    # A sleeping worker wakes every 100 ms to look at its stop flag: well under 5% of 3 s.
    assert len(used) == 2 and all(u < 0.15 for u in used), used


@pytest.mark.parametrize("lab", ["vxlan"], indirect=True)
def test_a_worker_sleeps_between_the_frames_of_slow_traffic(lab):
    # Pings every 200 µs: each worker sees a frame (request or reply) every 100 µs, 10 kpps,
    # below --spin-from-pps. Looking for --spin-us (500 µs) after each frame, a worker
    # would never sleep (a whole CPU at a moderate rate); adaptive, it sleeps in poll(2)
    # between frames. Each sleep is a voluntary context switch of the worker's thread
    # (its yields while looking are not), which CPU time on a loaded machine is not.
    workers = [t for pid in lab_ovrd_pids() for t in worker_threads(pid).values()]
    before = [sleeps(t) for t in workers]
    r = run_in("h1-t1-w1", "ping", "-q", "-c", "10000", "-i", "0.0002", "-W", "2", "10.1.0.21")
    slept = [sleeps(t) - b for t, b in zip(workers, before)]
    assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout + r.stderr
    # 20,000 frames per worker; looking after each instead, a few hundred at most.
    assert len(slept) == 2 and all(s > 2000 for s in slept), slept


def sleeps(thread):
    """Times a thread has slept (blocked) so far."""
    status = (thread / "status").read_text()
    return int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))


def test_lab_status_json_names_what_scripts_need():
    """`lab status --json` on a real lab (prefix ovrl, beside any other): every host's
    namespace, underlay address, API socket and ovrd pid, every workload's host, tenant,
    namespace, address and MAC, each checked against the system; a script can reach a
    host's ovrd and a workload with nothing else."""
    import stat
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    lab = ["lab", "--prefix", "ovrl"]
    up = ovrctl("--json", *lab, "up", "--hosts", "2", "--tenants", "1", check=False, timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        v = json.loads(ovrctl(*lab, "status", "--json").stdout)
        assert json.loads(up.stdout)["hosts"] == v["hosts"]
        assert v["up"] is True and v["prefix"] == "ovrl"
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert [h["name"] for h in v["hosts"]] == ["h1", "h2"]
        # The cluster's etcd, from this namespace: every host has joined.
        assert v["etcd"] and all(u.startswith("http://169.254.") for u in v["etcd"]), v["etcd"]
        hosts = subprocess.run(["etcdctl", "--endpoints", ",".join(v["etcd"]), "get", "--prefix",
                                "--keys-only", "/ovr/v1/hosts/"], capture_output=True, text=True)
        assert hosts.stdout.split() == ["/ovr/v1/hosts/h1", "/ovr/v1/hosts/h2"], hosts
        for h in v["hosts"]:
            assert {"name", "namespace", "underlay", "socket", "ovrd_pid", "kernel"} <= set(h), h
            assert h["namespace"].startswith("ovrl-") and h["namespace"] in netns
            # The uplink is ovrd's (no kernel address): its ovrd says it, over the socket.
            uplink = json.loads(ovrctl("--socket", h["socket"], "--json", "interfaces", "show", "uplink").stdout)
            assert uplink["addresses"] == [f"{h['underlay']}/24"], (h, uplink)
            assert stat.S_ISSOCK(os.stat(h["socket"]).st_mode)
            cmdline = pathlib.Path(f"/proc/{h['ovrd_pid']}/cmdline").read_bytes().split(b"\0")
            assert h["socket"].encode() in cmdline and h["running"] is True
            counters = json.loads(ovrctl("--socket", h["socket"], "--json", "counters").stdout)
            assert "interfaces" in counters
            # A failure from a live ovrd under --json: JSON, status 5 (not found).
            r = ovrctl("--socket", h["socket"], "--json", "routes", "show", "t1", "10.9.0.0/24", check=False)
            assert r.returncode == 5 and json.loads(r.stderr)["code"] == 5, r.stderr
        assert len(v["workloads"]) == 2
        for w in v["workloads"]:
            assert {"name", "host", "tenant", "namespace", "address", "mac"} <= set(w), w
            assert w["host"] in ("h1", "h2") and w["tenant"] == 1 and w["namespace"] in netns
            link = subprocess.run(["ip", "-n", w["namespace"], "-o", "addr", "show", "eth0"],
                                  capture_output=True, text=True).stdout
            assert f" {w['address']}/" in link, (w, link)
            mac = subprocess.run(["ip", "-n", w["namespace"], "link", "show", "eth0"],
                                 capture_output=True, text=True).stdout
            assert w["mac"] in mac, (w, mac)
        a, b = v["workloads"]
        assert a["host"] != b["host"]
        ping = subprocess.run(["ip", "netns", "exec", a["namespace"], "ping", "-c", "3", "-W", "1", "-i", "0.2",
                               b["address"]], capture_output=True, text=True)
        assert ping.returncode == 0, ping.stdout
    finally:
        down = ovrctl("--json", *lab, "down", check=False)
        assert down.returncode == 0, down.stderr
        assert json.loads(down.stdout)["namespaces_removed"] >= 5
    assert json.loads(ovrctl(*lab, "status", "--json").stdout)["up"] is False
