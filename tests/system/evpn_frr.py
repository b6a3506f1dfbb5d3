"""An ovr host learning EVPN routes from FRR, for the end-to-end test and benchmark
(tests/system/test_evpn_frr_source.py, bench/evpn_e2e.py --source frr): the router's
namespace runs FRR (zebra + bgpd, `advertise-all-vni`) over the kernel's bridge + vxlan
device for VNI 100, as the lab's `--kernel-host` does. Routes are made by adding static
MACs to the bridge on a port of their own (`bridge -batch`: 100,000 in a few seconds);
zebra announces them to bgpd as local MACs and bgpd advertises them as type 2 routes
(MAC only, next hop the router's VTEP) to ovr's gobgpd over iBGP; deleting them
withdraws them. A real workload behind the same bridge carries traffic meanwhile.

    host (PREFIX-h)                        router (PREFIX-r)
    uplink 192.0.2.1 (ovrd's underlay) ─── eth0 192.0.2.9 (the VTEP, vxlan100's local)
    mgmt 198.51.100.1 (ovr's gobgpd) ───── mgmt 198.51.100.2 (FRR bgpd), BGP AS 65000
    v-w1 ── PREFIX-w (10.0.0.10)           br100: vxlan100, macs (the MACs' port),
                                                  v-kw ── PREFIX-k (10.0.0.50)"""

import json
import os
import signal
import subprocess
import time

from system.evpn_router import HOST_BGP, ROUTER_BGP, VNI, HostLab
from system.frr import Frr
from system.netns import sh

VTEP = "192.0.2.9"
KW_MAC, KW_IP = "02:00:00:6b:00:32", "10.0.0.50"

BGPD_CONF = f"""frr defaults datacenter
hostname router
router bgp 65000
 bgp router-id {ROUTER_BGP}
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor {HOST_BGP} remote-as 65000
 neighbor {HOST_BGP} timers 3 9
 address-family l2vpn evpn
  neighbor {HOST_BGP} activate
  advertise-all-vni
 exit-address-family
"""


def mac(i):
    """The `i`th MAC the router's bridge is given (none is a workload's)."""
    return "02:02:" + ":".join(f"{(i >> s) & 0xFF:02x}" for s in (24, 16, 8, 0))


class FrrLab(HostLab):
    """The topology above."""

    def _router(self):
        r = self.r
        self.k = self.lab.ns("k")
        self.lab.veth(self.k, "eth0", r, "v-kw", mac_a=KW_MAC)
        sh("ip", "addr", "add", f"{VTEP}/24", "dev", "eth0", ns=r)
        sh("ip", "addr", "add", f"{KW_IP}/8", "dev", "eth0", ns=self.k)
        sh("ip", "link", "add", "br100", "type", "bridge", ns=r)
        sh("ip", "link", "add", "vxlan100", "type", "vxlan", "id", str(VNI), "local", VTEP,
           "dstport", "4789", "nolearning", ns=r)
        sh("ip", "link", "set", "vxlan100", "master", "br100", ns=r)
        sh("bridge", "link", "set", "dev", "vxlan100", "neigh_suppress", "on", "learning",
           "off", ns=r)
        # The MACs' port: a veth whose other end stays in the router, down to nothing.
        sh("ip", "link", "add", "macs", "type", "veth", "peer", "name", "macs-peer", ns=r)
        for dev in ("macs", "v-kw"):
            sh("ip", "link", "set", dev, "master", "br100", ns=r)
        for dev in ("br100", "vxlan100", "macs", "macs-peer"):
            sh("ip", "link", "set", dev, "up", ns=r)
        self.frr = Frr(r, self.tmp / "frr", BGPD_CONF)
        self.started.append(self.frr)

    def received(self):
        """Routes ovr's gobgpd holds from the router; None if it does not answer within
        10 s (a gobgpd busy with a large update answers its API late)."""
        try:
            n = self.ovrd.get("/api/v1/bgp/neighbors")
        except subprocess.TimeoutExpired:
            return None
        return sum(x["received"] for x in n if x["state"] == "established")

    def table_paths(self):
        """Paths in ovr's gobgpd's EVPN table (its Loc-RIB: what its watch stream tells
        ovrd), as GoBGP's own command line reports them."""
        out = self.gobgpd.cli("global", "rib", "summary", "-a", "evpn")
        return json.loads(out or "{}").get("num_path", 0)

    def wait_ready(self, timeout=60):
        """Until the session is up, the router's VTEP resolved and its workload's MAC (made
        known by a ping from it) installed: what traffic needs."""
        deadline = time.monotonic() + timeout
        while True:
            sh("ping", "-c", "1", "-W", "0.3", "10.0.0.10", ns=self.k, check=False)
            c = self.ovrd.get("/api/v1/config")
            learnt = self.ovrd.get("/api/v1/bgp/learnt")
            if any(b["mac"] == KW_MAC and b["installed"] for b in learnt["bridge"]) and any(
                    t["remote"] == VTEP and t.get("remote_mac") for t in c.get("tunnels", [])):
                return
            assert time.monotonic() < deadline, f"not ready: {self.installed()}"
            time.sleep(0.3)

    def pids(self):
        zebra, bgpd = (p.pid for p in self.frr.procs)
        return super().pids() | {"zebra": zebra, "bgpd": bgpd}

    def macs(self, first, n, add):
        """Adds (or deletes) MACs `first`.. `first + n - 1` on the router's bridge in one
        `bridge -batch` process: its Popen, to `finish`."""
        f = self.tmp / ("add.batch" if add else "del.batch")
        verb = "add" if add else "del"
        with open(f, "w") as out:
            for i in range(first, first + n):
                out.write(f"fdb {verb} {mac(i)} dev macs master" + (" static\n" if add else "\n"))
        return subprocess.Popen(["ip", "netns", "exec", self.r, "bridge", "-batch", str(f)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @staticmethod
    def finish(proc, wait=True):
        """Waits for a `macs` batch: its CPU seconds (wait4's rusage); without `wait`, None
        if it is still running."""
        pid, status, ru = os.wait4(proc.pid, 0 if wait else os.WNOHANG)
        if pid == 0:
            return None
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.returncode == 0, proc.stderr.read()
        return ru.ru_utime + ru.ru_stime

    def ping(self, interval=0.01):
        """A ping from ovr's workload to the router's, every `interval` s, until `lost`."""
        return subprocess.Popen(["ip", "netns", "exec", self.w, "ping", "-q", "-i",
                                 str(interval), "-W", "1", KW_IP], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    @staticmethod
    def delivered(proc):
        """Stops a `ping`: (sent, received)."""
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=10)
        for line in out.splitlines():
            if "transmitted" in line:
                f = line.split()
                return int(f[0]), int(f[3])
        raise AssertionError(out)
