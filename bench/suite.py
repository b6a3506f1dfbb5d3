#!/usr/bin/env python3
"""The benchmark suite: ovr, the Linux kernel (bridge + vxlan), Open vSwitch userspace
(datapath_type=netdev, VXLAN ports) and a direct veth pair (no forwarder: the generator's
own ceiling), each built as the same two-host topology in network namespaces, measured
in one run, interleaved (every measurement point visits every system before the next
point, in a rotating order), for several rounds.

    workload ns --veth-- host 1 ns --veth-- underlay ns (bridge) --veth-- host 2 ns --veth-- workload ns
    (generator)          forwarder                                        forwarder        (sink)

Measurements (per system): the maximum receive rate regardless of loss and an RFC 2544
style throughput search (highest offered rate with loss < 0.1%) at 64..1518-byte frames
and IMIX; 64-byte frames at 1K..256K flows; one-way latency p50/p99/p99.9 at fixed
offered rates; CPU time per million packets at a fixed rate; TCP with iperf3.

Everything it makes is named with --prefix and recorded in /run/PREFIX/state.json as it
is made; it removes exactly that on exit, on failure and on Ctrl-C (and `--cleanup`
removes what a killed run left). It only kills processes it started, by PID.

Run it through bench/suite.sh, which installs what it needs and builds ovr.
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import resource
import select
import shutil
import signal
import subprocess
import sys
import time

from report import LABELS, LOSS_OK, SYSTEMS, summarize

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from system.procfs import cpu_seconds, start_time  # noqa: E402
# How each ovr variant's lab is brought up: ovrd's driver, and whether the workloads
# keep their checksum/segmentation offloads (AF_XDP needs complete frames).
OVR_LAB_ARGS = {
    "ovr": ["--ovrd-arg=--driver=af-xdp", "--no-workload-offloads"],
    "ovr-afp": ["--ovrd-arg=--driver=af-packet"],
    "ovr-auto": [],
    # ovrd's default drivers plus the fast path for established flows, at XDP or TC.
    "ovr-xdp": ["--offload"],
    "ovr-tc": ["--offload=tc"],
}
SIZES = {"64": 60, "128": 124, "256": 252, "512": 508, "1024": 1020, "1518": 1514, "imix": "imix"}
PORT = 9000


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Cleanup(Exception):
    pass


# ---------------------------------------------------------------------------------------
# What this run made: namespaces, processes, the ovr lab. Written down before use.


class Made:
    def __init__(self, prefix):
        self.prefix = prefix
        self.dir = pathlib.Path("/run") / prefix
        self.path = self.dir / "state.json"
        self.namespaces = []
        self.pids = []  # [pid, start time (clock ticks since boot), what]
        self.labs = []  # ovrctl lab prefixes

    def save(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"namespaces": self.namespaces, "pids": self.pids,
                                   "labs": self.labs}))
        tmp.replace(self.path)

    @classmethod
    def load(cls, prefix):
        m = cls(prefix)
        if m.path.exists():
            s = json.loads(m.path.read_text())
            m.namespaces, m.pids, m.labs = s["namespaces"], s["pids"], s.get("labs", [])
        return m

    def ns(self, name):
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        self.save()
        sh("ip", "link", "set", "lo", "up", ns=name)
        sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", ns=name)
        sh("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", ns=name)
        return name

    def veth(self, a, b, mtu=None):
        """a, b: (namespace, name); one queue each way; both ends up."""
        ta, tb = f"{self.prefix}ta", f"{self.prefix}tb"
        sh("ip", "link", "add", ta, "numrxqueues", "1", "numtxqueues", "1", "type", "veth",
           "peer", "name", tb, "numrxqueues", "1", "numtxqueues", "1")
        for tmp, (ns, name) in ((ta, a), (tb, b)):
            sh("ip", "link", "set", tmp, "netns", ns)
            sh("ip", "link", "set", tmp, "name", name, ns=ns)
            if mtu:
                sh("ip", "link", "set", name, "mtu", str(mtu), ns=ns)
            sh("ip", "link", "set", name, "up", ns=ns)

    def spawn(self, args, what, **kw):
        p = subprocess.Popen(args, **kw)
        self.pids.append([p.pid, start_time(p.pid), what])
        self.save()
        return p

    def forget(self, pid):
        self.pids = [e for e in self.pids if e[0] != pid]
        self.save()

    def teardown(self, ovrctl):
        for pid, started, what in reversed(self.pids):
            stop_pid(pid, started, what)
        self.pids = []
        for lab in reversed(self.labs):
            subprocess.run([ovrctl, "lab", "--prefix", lab, "down"], capture_output=True,
                           timeout=60)
        self.labs = []
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces = []
        # A veth pair left half-made in this namespace by a failed `veth` (our names only).
        for tmp in (f"{self.prefix}ta", f"{self.prefix}tb"):
            if pathlib.Path(f"/sys/class/net/{tmp}").exists():
                subprocess.run(["ip", "link", "del", tmp], capture_output=True)
        if self.path.exists():
            self.path.unlink()
        shutil.rmtree(self.dir, ignore_errors=True)


def stop_pid(pid, started, what):
    """SIGTERM (then SIGKILL) the process we started, if that PID is still it."""
    if started is None or start_time(pid) != started:
        return
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        t = time.time()
        while time.time() - t < wait:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                if start_time(pid) != started:
                    return
            time.sleep(0.05)
    log(f"suite: {what} (pid {pid}) did not stop")


def sh(*args, ns=None, check=True, timeout=60, env=None):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def mac_of(ns, dev):
    return sh("cat", f"/sys/class/net/{dev}/address", ns=ns).strip()


# ---------------------------------------------------------------------------------------
# The systems under test. Each ends with: src/dst workload namespaces (eth0 in each,
# 10.1.0.11 -> 10.1.0.21), the MAC the generator must address, and its forwarder's PIDs.


class System:
    name = "?"
    src_ip, dst_ip = "10.1.0.11", "10.1.0.21"

    def __init__(self, made, prefix):
        self.made, self.p = made, prefix
        self.src = self.dst = None

    def finish(self):
        """Quiet, cheap sink: the workload drops the generator's datagrams at ingress
        (after the raw-socket tap that counts them), so no stack work or ICMP follows."""
        nft = (f'table netdev {self.made.prefix}sink {{\n chain in {{\n type filter hook '
               f'ingress device "eth0" priority 0;\n udp dport {PORT} drop\n }}\n}}\n')
        if shutil.which("nft"):
            subprocess.run(["ip", "netns", "exec", self.dst, "nft", "-f", "-"], input=nft,
                           text=True, check=True, capture_output=True)
        else:
            log("suite: no nft: the sink's stack receives every datagram (costs CPU)")
        self.src_mac = mac_of(self.src, "eth0")
        self.dst_mac = mac_of(self.dst, "eth0")
        # Fill the neighbour tables so TCP and ping start at once.
        sh("ping", "-c", "3", "-i", "0.2", "-W", "2", self.dst_ip, ns=self.src, check=False)

    def forwarder_pids(self):
        return []


class Direct(System):
    name = "direct"

    def up(self):
        a, b = self.made.ns(f"{self.p}-a"), self.made.ns(f"{self.p}-b")
        self.made.veth((a, "eth0"), (b, "eth0"))
        sh("ip", "addr", "add", f"{self.src_ip}/24", "dev", "eth0", ns=a)
        sh("ip", "addr", "add", f"{self.dst_ip}/24", "dev", "eth0", ns=b)
        self.src, self.dst = a, b
        self.finish()


def two_hosts(made, p, mtu=9000):
    """Underlay bridge namespace, two host namespaces with an 'uplink' on it, and a
    workload namespace per host behind the host's 'w1'. Returns (ul, [h1, h2], [w1, w2])."""
    ul = made.ns(f"{p}-ul")
    sh("ip", "link", "add", "br0", "type", "bridge", ns=ul)
    sh("ip", "link", "set", "br0", "up", ns=ul)
    hosts, wls = [], []
    for h in (1, 2):
        hn = made.ns(f"{p}-h{h}")
        made.veth((hn, "uplink"), (ul, f"h{h}"), mtu=mtu)
        sh("ip", "link", "set", f"h{h}", "master", "br0", ns=ul)
        wn = made.ns(f"{p}-h{h}w")
        made.veth((hn, "w1"), (wn, "eth0"))
        sh("ip", "addr", "add", f"10.1.0.{h}1/24", "dev", "eth0", ns=wn)
        hosts.append(hn)
        wls.append(wn)
    return ul, hosts, wls


class Kernel(System):
    """The kernel's bridge + vxlan device per host (offloads on, as a kernel user has
    them), flooding to the other VTEP."""
    name = "kernel"

    def up(self):
        ul, hosts, wls = two_hosts(self.made, self.p)
        for h, hn in zip((1, 2), hosts):
            sh("ip", "addr", "add", f"192.0.2.{h}/24", "dev", "uplink", ns=hn)
            sh("ip", "link", "add", "vxlan101", "type", "vxlan", "id", "101", "dstport", "4789",
               "local", f"192.0.2.{h}", "dev", "uplink", ns=hn)
            sh("bridge", "fdb", "append", "00:00:00:00:00:00", "dev", "vxlan101", "dst",
               f"192.0.2.{3 - h}", ns=hn)
            sh("ip", "link", "add", "brt1", "type", "bridge", ns=hn)
            for port in ("vxlan101", "w1"):
                sh("ip", "link", "set", port, "master", "brt1", ns=hn)
                sh("ip", "link", "set", port, "up", ns=hn)
            sh("ip", "link", "set", "brt1", "up", ns=hn)
        self.src, self.dst = wls
        self.finish()


class Ovs(System):
    """Open vSwitch's userspace datapath per host: one ovsdb-server + ovs-vswitchd each
    with its own rundir; br-int (workload port + VXLAN port, NORMAL switching) and
    br-phy (the uplink; its internal port holds the VTEP address), as OVS documents
    userspace tunnelling."""
    name = "ovs"

    def up(self):
        ul, hosts, wls = two_hosts(self.made, self.p)
        self.pids = []
        macs = {h: f"02:0b:00:00:00:0{h}" for h in (1, 2)}
        for h, hn in zip((1, 2), hosts):
            run = self.made.dir / f"ovs-h{h}"
            run.mkdir(parents=True, exist_ok=True)
            env = dict(os.environ, OVS_RUNDIR=str(run), OVS_LOGDIR=str(run),
                       OVS_DBDIR=str(run), OVS_SYSCONFDIR=str(run))
            db, sock = run / "conf.db", run / "db.sock"
            sh("ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema")
            out = open(run / "ovsdb-server.log", "w")
            self.made.spawn(["ip", "netns", "exec", hn, "ovsdb-server", str(db),
                             f"--remote=punix:{sock}", f"--unixctl={run}/ovsdb-server.ctl",
                             "--no-chdir"], f"ovsdb-server h{h}", env=env, stdout=out,
                            stderr=subprocess.STDOUT)
            wait_path(sock)
            vsctl = ["ovs-vsctl", f"--db=unix:{sock}", "--timeout=20"]
            sh(*vsctl, "--no-wait", "init", env=env)
            out = open(run / "ovs-vswitchd.log", "w")
            p = self.made.spawn(["ip", "netns", "exec", hn, "ovs-vswitchd", f"unix:{sock}",
                                 f"--unixctl={run}/vswitchd.ctl", "--no-chdir"],
                                f"ovs-vswitchd h{h}", env=env, stdout=out,
                                stderr=subprocess.STDOUT)
            self.pids.append(p.pid)
            wait_path(run / "vswitchd.ctl")
            other = 3 - h
            sh(*vsctl, "add-br", "br-phy", "--", "set", "bridge", "br-phy",
               "datapath_type=netdev", f"other-config:hwaddr={macs[h]}", "--",
               "add-port", "br-phy", "uplink", "--",
               "set", "interface", "br-phy", "mtu_request=9000", env=env)
            sh(*vsctl, "add-br", "br-int", "--", "set", "bridge", "br-int",
               "datapath_type=netdev", "--", "add-port", "br-int", "w1", "--",
               "add-port", "br-int", "vx", "--", "set", "interface", "vx", "type=vxlan",
               f"options:remote_ip=192.0.2.{other}", "options:key=101", env=env)
            sh("ip", "link", "set", "br-phy", "up", ns=hn)
            sh("ip", "addr", "add", f"192.0.2.{h}/24", "dev", "br-phy", ns=hn)
            appctl = ["ovs-appctl", "-t", f"{run}/vswitchd.ctl"]
            sh(*appctl, "ovs/route/add", f"192.0.2.{other}/24", "br-phy", env=env, check=False)
            sh(*appctl, "tnl/arp/set", "br-phy", f"192.0.2.{other}", macs[other], env=env)
        for wn in wls:
            # OVS userspace moves no TCP without complete checksums (PLATFORM.md).
            sh("ethtool", "-K", "eth0", "tx", "off", ns=wn)
        self.src, self.dst = wls
        self.finish()

    def forwarder_pids(self):
        return self.pids


class Ovr(System):
    """ovrctl lab --prefix P up --hosts 2 --tenants 1: one ovrd per host namespace, with
    the AF_XDP driver on every interface and workloads without offloads (ovr), AF_PACKET
    everywhere (ovr-afp), or ovrd's default (ovr-auto: today the same as ovr-afp, which
    stays to pin the driver should the default change; workloads keep their offloads)."""

    def __init__(self, made, prefix, ovrctl, name, extra=(), tenants=1, workloads=1):
        super().__init__(made, prefix)
        self.ovrctl, self.name, self.extra = ovrctl, name, list(extra)
        self.tenants, self.workloads = tenants, workloads

    def up(self):
        self.made.labs.append(self.p)
        self.made.save()
        # A static lab (no etcd): the configurations every result here was measured with,
        # and ones the API may change (churn, soak), which a cluster member refuses.
        r = subprocess.run([self.ovrctl, "lab", "--prefix", self.p, "up", "--static", "--hosts", "2",
                            "--tenants", str(self.tenants), "--workloads", str(self.workloads),
                            *OVR_LAB_ARGS[self.name]]
                           + [f"--ovrd-arg={x}" for x in self.extra],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"ovrctl lab up: {r.stderr.strip()}")
        self.read_state()
        self.finish()

    def read_state(self):
        """The lab's hosts (with their API socket) and workloads, by name."""
        state = json.loads(pathlib.Path(f"/run/ovr-lab-{self.p}/state.json").read_text())
        self.pids = [h["ovrd_pid"] for h in state["hosts"] if h.get("ovrd_pid")]
        self.hosts = {h["name"]: {**h, "socket": str(pathlib.Path(h["config"]).with_suffix(".sock"))}
                      for h in state["hosts"]}
        self.wl = wl = {w["name"]: w for w in state["workloads"]}
        self.src, self.dst = wl["h1-t1-w1"]["namespace"], wl["h2-t1-w1"]["namespace"]

    def forwarder_pids(self):
        return self.pids


def wait_path(p, limit=10):
    t = time.time()
    while not pathlib.Path(p).exists():
        if time.time() - t > limit:
            raise RuntimeError(f"{p} did not appear")
        time.sleep(0.05)


# ---------------------------------------------------------------------------------------
# CPU accounting


def cpu_snapshot(system):
    stat = pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "irq": int(stat[5]), "softirq": int(stat[6]),
        "busy": sum(int(x) for x in stat[:8]) - int(stat[3]) - int(stat[4]),
        "tools": ru.ru_utime + ru.ru_stime,
        "fwd": sum(cpu_seconds(p) or 0 for p in system.forwarder_pids()),
    }


def cpu_delta(a, b):
    hz = os.sysconf("SC_CLK_TCK")
    d = {
        "softirq_s": (b["softirq"] + b["irq"] - a["softirq"] - a["irq"]) / hz,
        "fwd_proc_s": b["fwd"] - a["fwd"],
        "tools_s": b["tools"] - a["tools"],  # the generator's and the sink's own time
        "machine_busy_s": (b["busy"] - a["busy"]) / hz,
    }
    d["total_s"] = d["softirq_s"] + d["fwd_proc_s"] + d["tools_s"]
    return d


# ---------------------------------------------------------------------------------------
# One trial: a sink on the far workload, the generator on the near one.


class Bench:
    def __init__(self, args, made, systems):
        self.a, self.made, self.systems = args, made, systems
        self.out = open(pathlib.Path(args.out) / "trials.jsonl", "a")

    def record(self, kind, system, **kw):
        rec = {"kind": kind, "system": system.name, "round": self.round, "t": time.time(), **kw}
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()
        return rec

    def trial(self, s, size, flows, rate, seconds, count=0, kind="trial"):
        ovrctl = self.a.ovrctl
        sink = self.made.spawn(
            ["ip", "netns", "exec", s.dst, ovrctl, "bench", "sink", "--iface", "eth0",
             "--driver", self.a.tool_driver,
             "--port", str(PORT), "--seconds", str(seconds + 4), "--idle", "0.3"],
            "sink", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        r, _, _ = select.select([sink.stderr], [], [], 10)
        if not r:
            raise RuntimeError("sink did not start")
        sink.stderr.readline()
        c0 = cpu_snapshot(s)
        gen = self.made.spawn(
            ["ip", "netns", "exec", s.src, ovrctl, "bench", "gen", "--iface", "eth0",
             "--src-mac", s.src_mac, "--dst-mac", s.dst_mac, "--src", s.src_ip,
             "--dst", s.dst_ip, "--port", str(PORT), "--flows", str(flows), "--size", str(size),
             "--seconds", str(seconds), "--rate", str(int(rate)), "--count", str(count),
             "--driver", self.a.tool_driver],
            "generator", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        gen_out, gen_err = gen.communicate(timeout=seconds + 30)
        self.made.forget(gen.pid)
        if gen.returncode != 0:
            stop_pid(sink.pid, start_time(sink.pid), "sink")
            raise RuntimeError(f"generator failed: {gen_err.strip()}")
        out, err = sink.communicate(timeout=seconds + 10)
        c1 = cpu_snapshot(s)
        self.made.forget(sink.pid)
        g, k = json.loads(gen_out), json.loads(out)
        loss = 1 - k["received"] / g["offered"] if g["offered"] else 1.0
        rec = self.record(kind, s, size=str(size), flows=flows, target_pps=rate, seconds=seconds,
                          offered=g["offered"], refused=g["refused"], received=k["received"],
                          offered_pps=g["offered_pps"], rx_pps=k["received"] / g["seconds"],
                          loss=max(loss, 0.0), lat_ns=k["lat_ns"], lat_hist=k["lat_hist"],
                          cpu=cpu_delta(c0, c1))
        log(f"  [{s.name:6}] {kind:8} size={size} flows={flows} target={rate / 1e3:.0f}k "
            f"offered={g['offered_pps'] / 1e6:.3f} rx={rec['rx_pps'] / 1e6:.3f} Mpps "
            f"loss={rec['loss'] * 100:.2f}% p99={k['lat_ns']['p99'] / 1e3:.0f}us")
        return rec

    def warm(self, s, flows):
        """Every flow once, slowly, so that the trials find them set up (RFC 2544's
        learning frames)."""
        if flows > 1000:
            self.trial(s, 60, flows, min(100_000, flows), flows / 100_000 + 1, count=flows,
                       kind="warmup")

    def point(self, s, size_name, flows):
        """Maximum receive rate (unpaced) and the throughput search at one point."""
        size = SIZES[size_name]
        self.warm(s, flows)
        T = self.a.trial_seconds
        mrr = self.trial(s, size, flows, 0, T, kind="mrr")
        self.record("point_mrr", s, size=size_name, flows=flows, rx_pps=mrr["rx_pps"],
                    offered_pps=mrr["offered_pps"], loss=mrr["loss"])
        # Start just below the maximum receive rate; climb by 30% while trials pass (an
        # overloaded forwarder can deliver less than it sustains), then bisect.
        top = mrr["offered_pps"]
        lo, hi = 0.0, None
        rate = min(top, mrr["rx_pps"] * 0.98)
        best = 0.0
        for _ in range(self.a.search_steps):
            if rate < 1000:
                break
            r = self.trial(s, size, flows, rate, T, kind="search")
            if r["loss"] < LOSS_OK:
                lo, best = rate, max(best, r["rx_pps"])
                if rate >= top:
                    break
                rate = min(rate * 1.3, top) if hi is None else (lo + hi) / 2
            else:
                hi = rate
                rate = (lo + hi) / 2 if lo > 0 else rate * 0.6
        self.record("point_tput", s, size=size_name, flows=flows, tput_pps=best)

    def latency(self, s, rate):
        r = self.trial(s, 60, 1000, rate, self.a.latency_seconds, kind="latency")
        self.record("point_latency", s, rate=rate, lat_ns=r["lat_ns"], lat_hist=r["lat_hist"],
                    loss=r["loss"], cpu=r["cpu"], received=r["received"],
                    offered=r["offered"])

    def tcp(self, s):
        srv = self.made.spawn(["ip", "netns", "exec", s.dst, "iperf3", "-s", "-1"], "iperf3 -s",
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.4)
        c = subprocess.run(["ip", "netns", "exec", s.src, "iperf3", "-c", s.dst_ip, "-t",
                            str(self.a.tcp_seconds), "-J"], capture_output=True, text=True,
                           timeout=self.a.tcp_seconds + 30)
        gbit, retransmits = 0.0, None
        try:
            end = json.loads(c.stdout)["end"]
            gbit = end["sum_received"]["bits_per_second"] / 1e9
            # Segments the sender sent again: loss, or reordering it took for loss.
            retransmits = end["sum_sent"].get("retransmits")
        except (ValueError, KeyError):
            pass
        stop_pid(srv.pid, start_time(srv.pid), "iperf3 -s")
        self.made.forget(srv.pid)
        log(f"  [{s.name:6}] tcp {gbit:.2f} Gbit/s, {retransmits} retransmitted")
        self.record("point_tcp", s, gbit=gbit, retransmits=retransmits)


# ---------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------


def versions(ovrctl):
    def out(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return "?"
    cpu = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "ovr": out("git", "-C", str(ROOT), "describe", "--always", "--dirty"),
        "ovrctl": out(ovrctl, "--version"),
        "kernel": platform.release(),
        "ovs": out("ovs-vswitchd", "--version"),
        "iperf3": out("iperf3", "--version"),
        "cpu": f"{os.cpu_count()} x {cpu}",
    }



def claim(tool, a):
    """What every bench program checks before it makes anything: root, a usable
    `--prefix` and nothing left by an earlier run with it. With `--cleanup` it removes
    what such a run left instead and returns None."""
    if os.geteuid() != 0:
        sys.exit(f"{tool}: run as root (network namespaces)")
    if len(a.prefix) > 8 or not a.prefix.replace("-", "").isalnum():
        sys.exit(f"{tool}: --prefix: at most 8 characters of a-z, 0-9 and '-'")
    made = Made.load(a.prefix)
    if a.cleanup:
        made.teardown(a.ovrctl)
        log(f"{tool}: removed what prefix '{a.prefix}' had left")
        return None
    if made.namespaces or made.pids or made.labs:
        sys.exit(f"{tool}: {made.path} lists what an earlier run left: "
                 f"`python3 bench/{tool}.py --prefix {a.prefix} --cleanup` first")
    return made

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smoke run: one round, few points")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help=f"comma-separated, of {', '.join(SYSTEMS)} (ovr: AF_XDP, "
                         "ovr-afp: AF_PACKET, ovr-auto: ovrd's default, ovr-xdp / ovr-tc: "
                         "default + the fast path at XDP / TC)")
    ap.add_argument("--ovrd-arg", action="append", default=[],
                    help="an argument for every ovrd, e.g. --ovrd-arg=--spin-us=0 (repeat)")
    ap.add_argument("--tool-driver", default="af-xdp", choices=("af-xdp", "af-packet"),
                    help="how the generator and the sink reach their interfaces")
    ap.add_argument("--sizes", help="frame sizes with FCS, comma-separated (and imix)")
    ap.add_argument("--flows", help="flow counts for the 64 B sweep, comma-separated")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--trial-seconds", type=float)
    ap.add_argument("--search-steps", type=int)
    ap.add_argument("--latency-rates", help="offered pps for latency and CPU, comma-separated")
    ap.add_argument("--latency-seconds", type=float)
    ap.add_argument("--tcp-seconds", type=int)
    ap.add_argument("--skip", default="", help="any of: sizes,flows,latency,tcp")
    ap.add_argument("--prefix", default="ovrbs", help="prefix of every namespace made")
    ap.add_argument("--out", help="directory for trials.jsonl, rounds.json, summary.json, table.md, plots")
    ap.add_argument("--plots", help="where the PNGs go (default OUT/plots)")
    ap.add_argument("--ovrctl", default=str(ROOT / "target/release/ovrctl"))
    ap.add_argument("--cleanup", action="store_true",
                    help="remove what a killed run with this --prefix left, and exit")
    a = ap.parse_args()
    quick = a.quick
    defaults = dict(
        sizes="64,1518,imix" if quick else "64,128,256,512,1024,1518,imix",
        flows="1,1000,256000" if quick else "1,1000,8000,64000,256000",
        rounds=1 if quick else 3, trial_seconds=1.0 if quick else 1.5,
        search_steps=3 if quick else 5,
        latency_rates="20000" if quick else "1000,20000,100000",
        latency_seconds=2.0 if quick else 4.0, tcp_seconds=2 if quick else 3)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    made = claim("suite", a)
    if made is None:
        return
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = pathlib.Path(a.out or ROOT / "bench" / "out" / stamp)
    a.out = str(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "trials.jsonl").write_text("")
    names = [s for s in a.systems.split(",") if s]
    for n in names:
        if n not in SYSTEMS:
            sys.exit(f"suite: unknown system '{n}' (known: {', '.join(SYSTEMS)})")
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join(["bench/suite.sh"] + sys.argv[1:]),
            "mode": "quick" if quick else "full", "rounds": a.rounds,
            "tool_driver": a.tool_driver, "ovrd_args": a.ovrd_arg,
            "trial_seconds": a.trial_seconds, "search_steps": a.search_steps,
            "versions": versions(a.ovrctl), "load": os.getloadavg()}

    def on_signal(sig, _frame):
        raise Cleanup(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    t0 = time.time()
    made.save()
    try:
        systems = []
        for n in names:
            cls = {"direct": Direct, "kernel": Kernel, "ovs": Ovs}.get(n)
            if n.startswith("ovr"):
                tag = {"ovr": "r", "ovr-afp": "p", "ovr-auto": "a", "ovr-xdp": "x", "ovr-tc": "c"}[n]
                s = Ovr(made, f"{a.prefix}-{tag}", a.ovrctl, n, a.ovrd_arg)
            else:
                s = cls(made, f"{a.prefix}-{n[0]}")
            log(f"suite: building {LABELS[n]}")
            s.up()
            systems.append(s)
        b = Bench(a, made, systems)
        skip = set(a.skip.split(","))
        sizes = [x.strip() for x in a.sizes.split(",")]
        flows = [int(x) for x in a.flows.split(",")]
        points = []
        if "sizes" not in skip:
            points += [(sz, 1000) for sz in sizes]
        if "flows" not in skip:
            points += [("64", f) for f in flows if ("64", f) not in points]
        for rnd in range(a.rounds):
            b.round = rnd + 1
            log(f"suite: round {rnd + 1} of {a.rounds} ({time.time() - t0:.0f} s so far)")
            for i, (sz, fl) in enumerate(points):
                k = (i + rnd) % len(systems)
                for s in systems[k:] + systems[:k]:
                    b.point(s, sz, fl)
            if "latency" not in skip:
                for rate in [float(x) for x in a.latency_rates.split(",")]:
                    for s in systems:
                        b.latency(s, rate)
            if "tcp" not in skip:
                for s in systems:
                    b.tcp(s)
        meta["seconds"] = round(time.time() - t0)
    except (KeyboardInterrupt, Cleanup) as e:
        log(f"suite: interrupted ({e or 'Ctrl-C'}): tearing down")
        made.teardown(a.ovrctl)
        sys.exit(130)
    finally:
        made.teardown(a.ovrctl)
    summary = summarize(out_dir, meta)
    print((out_dir / "table.md").read_text())
    if shutil.which("python3"):
        plots = pathlib.Path(a.plots or out_dir / "plots")
        r = subprocess.run([sys.executable, str(ROOT / "bench" / "plot.py"), str(out_dir / "rounds.json"),
                            str(plots)], capture_output=True, text=True)
        if r.returncode != 0:
            log(f"suite: plots failed: {r.stderr.strip()}")
        else:
            log(f"suite: plots in {plots}")
    log(f"suite: done in {meta['seconds']} s; results in {out_dir}")
    return summary


if __name__ == "__main__":
    main()
