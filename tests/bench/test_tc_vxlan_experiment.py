"""The TC VXLAN experiment (bench/experiments/tc_vxlan.sh, measured in bench/RESULTS.md)
still does what RESULTS says it does: TCP crosses between two hosts' workloads through
the TC programs alone, every underlay frame is VXLAN of the tunnel's VNI as tshark reads
it, the large (GSO) packets cross whole, and it leaves no namespace behind."""

import re
import subprocess

from conftest import ROOT


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("ovrtc-")]


def test_tc_vxlan_experiment_carries_tcp_as_large_vxlan_frames():
    assert not namespaces()
    r = subprocess.run(["bash", str(ROOT / "bench/experiments/tc_vxlan.sh"), "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not namespaces(), "the experiment left namespaces behind"
    assert "3 packets transmitted, 3 received" in r.stdout
    tcp = re.search(r"TCP w1 -> w2 over TC VXLAN: ([\d.]+) Gbit/s", r.stdout)
    assert tcp and float(tcp.group(1)) > 0.5, r.stdout
    under = re.search(r"underlay: (\d+) frames, (\d+) VXLAN with VNI 100, (\d+) larger", r.stdout)
    assert under, r.stdout
    frames, vxlan, large = map(int, under.groups())
    assert frames == 400 and vxlan == frames, r.stdout
    # TCP data as GSO packets of many segments each: ACKs are the small frames.
    assert large >= frames // 4, r.stdout
