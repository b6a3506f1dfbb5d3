"""An ovr host learning EVPN routes from a datacenter router, for the end-to-end test and
benchmark (tests/system/test_evpn_router.py, bench/evpn_e2e.py): the host's namespace
runs ovrd driving its own gobgpd (as tests/system/test_evpn_ovr.py does); the router's
namespace runs a gobgpd of its own, into which `crates/bgp/examples/evpn_inject.rs`
injects routes through GoBGP's gRPC API, and which advertises them to ovr's gobgpd over
BGP (iBGP, AS 65000).

    host (PREFIX-h)                        router (PREFIX-r)
    uplink 192.0.2.1 (ovrd's underlay) ─── under 192.0.2.10-13 (the VTEPs: answer ARP)
    mgmt 198.51.100.1 (ovr's gobgpd) ───── mgmt 198.51.100.2 (router gobgpd), BGP
    v-w1 ── PREFIX-w (a workload, 10.0.0.10)

The injected routes (evpn_inject.rs): per VTEP a type 3 for VNI 100, and type 2 route
`i` = MAC `i // 2` of VTEP `(i // 2) % 4`, alone (even i) or with its address (odd i);
`route(i)` says what ovr should make of it."""

import json
import os
import subprocess
import time

from system.frr import Gobgpd, free_port
from system.netns import Lab, sh
from system.ovrd import Ovrd

VTEPS = [f"192.0.2.{10 + n}" for n in range(4)]
VNI = 100
HOST_BGP, ROUTER_BGP = "198.51.100.1", "198.51.100.2"
WORKLOAD_MAC = "02:00:00:00:01:0a"

CONFIG = f"""
interfaces:
  - {{ name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }}
  - {{ name: v-w1, kind: workload, network: red, peer_mac: "{WORKLOAD_MAC}", peer_addresses: [10.0.0.10] }}
networks:
  - {{ name: red, vni: {VNI}, gateways: [10.0.0.1/8] }}
"""


def usable(i):
    return (i // 2) not in (0, 1, 10, 255)


def ids(n):
    """The type 2 routes `evpn_inject --routes n` sends, by index."""
    out, i = [], 0
    while len(out) < n:
        if usable(i):
            out.append(i)
        i += 1
    return out


def route(i):
    """What type 2 route `i` is: its MAC, address (or None), VTEP."""
    m = i // 2
    b, c, d = (m >> 16) & 0xFF, (m >> 8) & 0xFF, m & 0xFF
    return {"mac": f"02:01:00:{b:02x}:{c:02x}:{d:02x}",
            "ip": f"10.{b}.{c}.{d}" if i % 2 else None,
            "vtep": VTEPS[m % len(VTEPS)]}


class HostLab:
    """ovr's side of these labs: the host, its ovrd driving its own gobgpd peered with the
    router over `mgmt`, and its workload. A subclass makes the router's side (`_router`:
    its namespace `r` has the uplink's other end, named `ROUTER_UPLINK`, and `mgmt`).
    `ovrd`: the binary (release for the benchmark, None: the debug build). `close()`
    stops everything and removes it all."""

    ROUTER_UPLINK = "eth0"

    def __init__(self, prefix, tmp, ovrd=None):
        self.tmp = tmp
        self.lab = Lab("x")
        self.lab.prefix = prefix
        self.started = []
        try:
            self._up(ovrd)
        except BaseException:
            self.close()
            raise

    def _up(self, ovrd):
        lab, tmp = self.lab, self.tmp
        self.h, self.r, self.w = lab.ns("h"), lab.ns("r"), lab.ns("w")
        lab.veth(self.h, "uplink", self.r, self.ROUTER_UPLINK, mac_a="02:00:00:00:00:01")
        lab.veth(self.h, "mgmt", self.r, "mgmt")
        lab.veth(self.w, "eth0", self.h, "v-w1", mac_a=WORKLOAD_MAC)
        sh("ip", "addr", "add", f"{HOST_BGP}/24", "dev", "mgmt", ns=self.h)
        sh("ip", "addr", "add", f"{ROUTER_BGP}/24", "dev", "mgmt", ns=self.r)
        sh("sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1", ns=self.h)
        sh("ip", "addr", "add", "10.0.0.10/8", "dev", "eth0", ns=self.w)
        self._router()
        (tmp / "h.yaml").write_text(CONFIG)
        self.gobgpd = Gobgpd(self.h, tmp / "gobgpd.log", free_port())
        self.started.append(self.gobgpd)
        self.ovrd = Ovrd(self.h, tmp / "ovrd.log", "--config", tmp / "h.yaml",
                         "--bgp", self.gobgpd.api, "--bgp-peer", ROUTER_BGP,
                         "--bgp-address", HOST_BGP, "--reach", "evpn",
                         "--fast-path-pin-dir", tmp / "pins", exe=ovrd)
        self.started.append(self.ovrd)

    def _router(self):
        raise NotImplementedError

    def established(self):
        return any(x.get("address") == ROUTER_BGP and x.get("state") == "established"
                   for x in self.ovrd.get("/api/v1/bgp/neighbors"))

    def installed(self):
        return self.ovrd.get("/api/v1/bgp/installed")

    def pids(self):
        return {"ovrd": self.ovrd.proc.pid, "ovr_gobgpd": self.gobgpd.proc.pid}

    def close(self):
        for s in reversed(self.started):
            s.stop()
        self.started.clear()
        self.lab.close()


class RouterLab(HostLab):
    """The topology above. `inject`: the injector's binary."""

    ROUTER_UPLINK = "under"

    def __init__(self, prefix, tmp, ovrd, inject):
        self.inject_exe = str(inject)
        super().__init__(prefix, tmp, ovrd)

    def _router(self):
        for v in VTEPS:
            sh("ip", "addr", "add", f"{v}/24", "dev", "under", ns=self.r)
        self.router = Gobgpd(self.r, self.tmp / "router-gobgpd.log", free_port())
        self.started.append(self.router)

    def _up(self, ovrd):
        super()._up(ovrd)
        self.configure("--setup", "--router-id", ROUTER_BGP, "--listen", ROUTER_BGP)

    def configure(self, *args):
        """The router's BGP side, through the injector: `--setup ...`, `--peer ADDR`,
        `--delete-peer ADDR`."""
        sh(self.inject_exe, "--api", self.router.api, *args, ns=self.r)

    def peer(self):
        self.configure("--peer", HOST_BGP)

    def unpeer(self):
        self.configure("--delete-peer", HOST_BGP)

    def wait_established(self, timeout=60):
        deadline = time.monotonic() + timeout
        while not self.established():
            assert time.monotonic() < deadline, "the BGP session did not come up"
            time.sleep(0.2)

    def pids(self):
        return super().pids() | {"router_gobgpd": self.router.proc.pid}

    def session_down(self):
        n = self.ovrd.get("/api/v1/bgp/neighbors")
        return not any(x.get("state") == "established" for x in n)

    def inject(self, n, withdraw=False, chunk=1000, per_second=0, skip=0):
        """Starts the injector (in the router's namespace): its Popen, to `finish`.
        `per_second`: paced to that many paths a second (0: as fast as GoBGP takes them);
        `skip`: the routes after the first `skip` (another set than the first N)."""
        args = ["ip", "netns", "exec", self.r, self.inject_exe, "--api", self.router.api,
                "--routes", str(n), "--chunk", str(chunk), "--per-second", str(per_second),
                "--skip", str(skip)] + \
            (["--withdraw"] if withdraw else [])
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    @staticmethod
    def finish(proc):
        """Waits for the injector: its JSON line and its CPU seconds (wait4's rusage)."""
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out, err = proc.stdout.read(), proc.stderr.read()
        assert proc.returncode == 0, err
        return json.loads(out), ru.ru_utime + ru.ru_stime

