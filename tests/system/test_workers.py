"""Several forwarding workers: each frame is forwarded by the worker that owns its flow,
whichever worker read it, so a flow's state lives in one place.

Host A runs ovrd with two workers: `uplink` (id 0) is read by worker 0, `vm1` (id 1) by
worker 1. Host B is the kernel's VXLAN (as in test_ovrd_kernel_vxlan.py). B sends UDP on
64 flows to the workload, which answers each: every flow's frames arrive on both
workers' interfaces, so about half of them are handed over each way.
"""

import json
import re
import subprocess
import time

from system.netns import Lab, sh
from system.ovrd import Ovrd, binary
from system.test_interfaces import kernel_vxlan_host
from system.test_ovrd_kernel_vxlan import VM1_MAC, config

FLOWS = 64

ECHO = ("import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(('10.1.0.5',7000));"
        "s.settimeout(5)\nn=0\ntry:\n while True:\n  d,a=s.recvfrom(100);n+=1;s.sendto(d,a)\n"
        "except socket.timeout: pass\nprint(n)")

SEND = ("import socket,sys\ngot=0\nsocks=[]\nfor i in range({n}):\n"
        " s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(('10.1.0.9',20000+i));"
        "s.settimeout(2);socks.append(s)\n"
        "for r in range(3):\n for s in socks: s.sendto(b'ping',('10.1.0.5',7000))\n"
        " for s in socks:\n  try: s.recv(100);got+=1\n  except socket.timeout: pass\nprint(got)")


def test_two_workers_hand_frames_to_the_owner_of_their_flow(tmp_path):
    lab = Lab("w")
    ovrd = None
    try:
        a, vm = lab.ns("a"), lab.ns("vm1")
        b = kernel_vxlan_host(lab, a)
        lab.veth(a, "vm1", vm, "eth0", None, VM1_MAC)
        sh("ip", "addr", "add", "10.1.0.5/24", "dev", "eth0", ns=vm)
        cfg = tmp_path / "a.yaml"
        cfg.write_text(config())
        ovrd = Ovrd(a, tmp_path / "ovrd.log", "--config", cfg, "--workers", 2)
        assert "workers=2" in ovrd.text()
        echo = subprocess.Popen(["ip", "netns", "exec", vm, "python3", "-c", ECHO],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        sent = sh("python3", "-c", SEND.format(n=FLOWS), ns=b)
        # Every datagram and every answer got through (3 rounds of 64).
        assert int(sent.stdout) == 3 * FLOWS, sent.stdout
        assert int(echo.communicate(timeout=15)[0]) == 3 * FLOWS

        # One flow pair per conversation, each listed once, its reverse in the same
        # worker (the ids the API shows name the worker).
        ctl = [str(binary("ovr-cli", "ovrctl")), "--socket", str(ovrd.socket), "--json"]
        dump = json.loads(sh(*ctl, "flows", "--port", "7000", "--limit", "1000").stdout)
        flows = {f["id"]: f for f in dump["flows"]}
        assert len(flows) == len(dump["flows"]) == dump["matched"] == 2 * FLOWS, dump
        for f in flows.values():
            r = flows[f["reverse"]]
            assert r["reverse"] == f["id"] and r["id"] % 2 == f["id"] % 2, (f, r)
            assert f["packets"] == 3, f
        counters = json.loads(sh(*ctl, "counters").stdout)
        vm1 = next(i for i in counters["interfaces"] if i["name"] == "vm1")
        assert vm1["rx_packets"] >= 3 * FLOWS and vm1["tx_packets"] >= 3 * FLOWS, vm1
        assert counters["flows"]["active"] >= 2 * FLOWS

        ovrd.stop()
        assert ovrd.proc.returncode == 0, ovrd.text()
        handed = {int(m[1]): (int(m[2]), int(m[3])) for m in re.finditer(
            r"frames handed over .* worker=(\d) handed=(\d+) dropped=(\d+)", ovrd.text())}
        # Each worker read frames of flows the other owns, and lost none handing them over.
        assert set(handed) == {0, 1}, ovrd.text()
        assert all(h > 0 and d == 0 for h, d in handed.values()), handed
    finally:
        if ovrd:
            ovrd.stop()
        lab.close()
