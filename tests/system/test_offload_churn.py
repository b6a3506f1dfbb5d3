"""Route churn with the fast path (`ovrctl lab --offload=tc|xdp`): a table change that
leaves an offloaded flow's treatment as it was must not cost it anything.

A routed UDP stream (many flows, numbered datagrams) crosses the two-host lab through a
/32 whose next hop h1's API flips between two equivalent ones (same tunnel, same VNI),
while unrelated routes come and go. Every datagram must arrive; h1's fast path keeps its
entries (re-checked, not invalidated and installed again); no drop reason counts
anything. Before, every change invalidated every entry: each flip sent every flow's next
packets through user space to be installed again.

Each lab has its own prefix (`ovrk<pid>x`) and directory and is taken down on failure."""

import json
import os
import subprocess
import time

import pytest

from conftest import ROOT
from system.overlay_lab import OverlayLab, sh

ROUTER_MAC = "00:00:5e:00:01:00"
W1_MAC = "02:01:00:01:01:01"
W1_IP, W2_IP = "10.1.0.11", "10.1.0.21"
FLOWS, RATE, SECONDS = 40, 400, 6


@pytest.fixture(scope="module", autouse=True)
def build():
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)


class Lab(OverlayLab):
    def __init__(self, tag, *up_args):
        # Static: the test changes routes through h1's API, which a cluster member refuses.
        super().__init__(f"ovrk{os.getpid() % 1000}{tag}", "--static", *up_args)

    def call(self, host, method, path, body=None):
        """One request to a host's API (JSON answer, or None)."""
        args = ["curl", "-sS", "-f", "--unix-socket", f"{self.dir}/{host}.sock", "-X", method,
                f"http://ovr{path}"]
        if body is not None:
            args += ["-H", "content-type: application/json", "-d", json.dumps(body)]
        out = sh(*args).stdout
        return json.loads(out) if out.strip() else None

    def fast_path(self, host):
        return self.call(host, "GET", "/api/v1/counters")["fast_path"]

    def drops(self, host):
        return self.call(host, "GET", "/api/v1/counters")["drops"]


def receiver(lab, seconds):
    """Counts the datagrams to port 9999 in h2-t1-w1 for `seconds`; prints the count."""
    code = ("import socket,time\n"
            "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',9999))\n"
            "s.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,1<<22)\n"
            f"s.settimeout(0.2); end=time.time()+{seconds}; seen=set()\n"
            "while time.time()<end:\n"
            "    try: seen.add(int(s.recv(2048)))\n"
            "    except socket.timeout: pass\n"
            "print(len(seen))\n")
    return subprocess.Popen(["ip", "netns", "exec", lab.ns("h2-t1-w1"), "python3", "-c", code],
                            stdout=subprocess.PIPE, text=True)


def sender(lab, count):
    """Sends `count` numbered datagrams from h1-t1-w1 to the gateway MAC (routed), over
    FLOWS source ports, at RATE per second."""
    code = ("import time\nfrom scapy.all import *\n"
            "s=conf.L2socket(iface='eth0')\n"
            f"fs=[Ether(src='{W1_MAC}',dst='{ROUTER_MAC}')/IP(src='{W1_IP}',dst='{W2_IP}')/"
            f"UDP(sport=5000+k,dport=9999) for k in range({FLOWS})]\n"
            "t=time.time()\n"
            f"for i in range({count}):\n"
            f"    s.send(fs[i%{FLOWS}]/Raw(str(i).encode()))\n"
            f"    t+=1/{RATE}; time.sleep(max(0,t-time.time()))\n")
    return subprocess.Popen(["ip", "netns", "exec", lab.ns("h1-t1-w1"), "python3", "-c", code])


@pytest.mark.parametrize("hook", ["tc", "xdp"])
def test_route_churn_between_equivalent_next_hops_keeps_offloaded_flows(hook):
    with Lab("c" if hook == "tc" else "x", f"--offload={hook}") as lab:
        nh = lab.call("h1", "GET", "/api/v1/nexthops/h2-t1")
        lab.call("h1", "POST", "/api/v1/nexthops", {**nh, "name": "h2-t1-alt"})
        route = f"{W2_IP}/32"
        lab.call("h1", "POST", "/api/v1/routes",
                 {"network": "t1", "prefix": route, "nexthop": "h2-t1"})
        count = RATE * SECONDS
        # What the lab's start left (the host kernels' own multicast on the underlay).
        drops_at_start = {h: lab.drops(h) for h in ("h1", "h2")}
        rx = receiver(lab, SECONDS + 4)
        time.sleep(0.5)
        tx = sender(lab, count)
        # Every flow offloaded before the churn starts (scapy can take seconds to start
        # sending on a loaded machine).
        deadline = time.monotonic() + 30
        while lab.fast_path("h1")["flows"] < FLOWS and tx.poll() is None:
            assert time.monotonic() < deadline, lab.fast_path("h1")
            time.sleep(0.1)
        before = lab.fast_path("h1")
        flips = 0
        while tx.poll() is None and flips < 40:
            lab.call("h1", "PUT", f"/api/v1/routes/t1/{route}",
                     {"network": "t1", "prefix": route,
                      "nexthop": ["h2-t1-alt", "h2-t1"][flips % 2]})
            other = f"10.77.{flips}.0/24"
            lab.call("h1", "POST", "/api/v1/routes",
                     {"network": "t1", "prefix": other, "nexthop": "h2-t1"})
            lab.call("h1", "DELETE", f"/api/v1/routes/t1/{other}")
            flips += 1
            time.sleep(0.05)
        tx.wait(timeout=60)
        received = int(rx.communicate(timeout=60)[0])
        after = lab.fast_path("h1")
        drops = {h: {k: v - drops_at_start[h].get(k, 0) for k, v in lab.drops(h).items()
                     if v != drops_at_start[h].get(k, 0)} for h in ("h1", "h2")}
    assert flips >= 20, flips
    # Nothing lost, nothing dropped.
    assert received == count, f"{count - received} of {count} datagrams lost"
    assert drops == {"h1": {}, "h2": {}}, drops
    # The churn started no generation and installed nothing again: each change had the
    # offloaded flows re-checked, and the flipped route's flows were kept.
    assert after["invalidations"] == before["invalidations"], (before, after)
    assert after["installed"] - before["installed"] < FLOWS, (before, after)
    assert after["rechecks"] - before["rechecks"] >= flips, (before, after)
    assert after["rechecked_kept"] - before["rechecked_kept"] >= flips * FLOWS, (before, after)
