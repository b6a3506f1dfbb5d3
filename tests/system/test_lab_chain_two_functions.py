"""A chain of two functions whose instances are on different hosts (`ovrctl lab up --hosts 2
--tenants 1 --service-chain --functions 2`, docs/chains.md "In the cluster"): `fw` and
`fw2` each have an instance on h1 and one on h2; `h1-t1-w1` talks to the `ext` workloads
on h2 and h1.

Each session's request crosses one instance of `fw`, then one of `fw2`, picked by hash on
the host it passes; its replies must cross the same two instances (the flows pin them),
whatever their own hashes say:

- `lab status --json` lists the four instances under `services`;
- pings (each a session of its own) and TCP transfers work, and, per session, nftables
  counts the requests and the replies in one instance of each function, the same one
  both ways, and nothing in the other instances;
- `lab down` leaves nothing behind (OverlayLab checks it).

One lab for the module (prefix `ovrcx<pid>`), always taken down."""

import os
import subprocess
import time

import pytest

from conftest import ROOT
from system.chain_lab import counted, ext_on
from system.overlay_lab import OverlayLab, sh

PORT = 7009
# Reads a transfer to its end, answers with as many bytes.
SERVER = f"""
import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT}))
s.listen(8)
def serve(c):
    n = 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        n += len(b)
    c.sendall(b"x" * n)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""
DIRECTIONS = ("requests", "replies")


@pytest.fixture(scope="module")
def lab(request):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    lab = OverlayLab(f"ovrcx{os.getpid() % 10000}", "--service-chain", "--functions", "2",
                     hosts=2)
    request.addfinalizer(lambda: lab.__exit__(None, None, None))
    lab = lab.__enter__()
    # One counting rule per direction in every instance: requests from tenant 1, replies
    # to it.
    for s in lab.status()["services"]:
        for addr, what in (("saddr", "requests"), ("daddr", "replies")):
            sh("nft", "add", "rule", "inet", "fw", "forward", "ip", addr, "10.1.0.0/24",
               "counter", "comment", f'"{what}"', ns=s["namespace"])
    for h in ("h1", "h2"):
        server = subprocess.Popen(["ip", "netns", "exec", lab.ns(f"{h}-ext-w1"), "python3",
                                   "-c", SERVER])
        request.addfinalizer(server.kill)
    return lab


def counts(lab):
    """Per instance name: (requests, replies) its nftables counted so far."""
    return {s["name"]: tuple(counted(s["namespace"], c) for c in DIRECTIONS)
            for s in lab.status()["services"]}


def crossed(lab, session):
    """Runs `session`; returns per instance the (requests, replies) it counted during it."""
    before = counts(lab)
    session()
    after = counts(lab)
    return {n: tuple(a - b for a, b in zip(after[n], before[n])) for n in after}


def assert_one_instance_per_function_both_ways(grew, what):
    """In each function, one instance saw the session's requests and its replies, and
    the other nothing."""
    for f in ("fw", "fw2"):
        mine = {n: c for n, c in grew.items() if n.rsplit("-", 1)[0] == f}
        passed = [n for n, (req, rep) in mine.items() if req or rep]
        assert len(passed) == 1, f"{what}: function {f}'s instances counted {mine}"
        req, rep = mine[passed[0]]
        assert req > 0 and rep > 0, f"{what}: {passed[0]} saw one direction only: {mine}"


def ping(lab, address, count=1, wait="1"):
    return sh("ping", "-c", count, "-i", "0.2", "-W", wait, address,
              ns=lab.ns("h1-t1-w1"), check=False)


def reached(lab, address, within_s):
    end = time.monotonic() + within_s
    while True:
        if ping(lab, address, wait="0.3").returncode == 0:
            return True
        if time.monotonic() > end:
            return False


def transfer(lab, address, size, timeout=20):
    """A TCP connection from h1-t1-w1 sending `size` bytes to the server, which answers
    with as many: the bytes that came back, or None."""
    client = (f"import socket\n"
              f"c = socket.create_connection(('{address}', {PORT}), timeout={timeout})\n"
              f"c.sendall(b'y' * {size})\n"
              f"c.shutdown(socket.SHUT_WR)\n"
              f"n = 0\n"
              f"while True:\n"
              f"    b = c.recv(65536)\n"
              f"    if not b:\n"
              f"        break\n"
              f"    n += len(b)\n"
              f"print(n)\n")
    r = sh("python3", "-c", client, ns=lab.ns("h1-t1-w1"), check=False, timeout=timeout + 10)
    return int(r.stdout.strip()) if r.returncode == 0 else None


def test_status_lists_two_functions_with_an_instance_on_each_host(lab):
    got = sorted((s["function"], s["name"], s["host"]) for s in lab.status()["services"])
    assert got == [("fw", "fw-h1", "h1"), ("fw", "fw-h2", "h2"),
                   ("fw2", "fw2-h1", "h1"), ("fw2", "fw2-h2", "h2")], got
    chains = lab.json("h1", "chains")["chains"]
    assert [f["name"] for f in chains[0]["functions"]] == ["fw", "fw2"], chains


@pytest.mark.parametrize("dst_host", ["h2", "h1"])
def test_each_ping_session_crosses_the_same_instances_both_ways(lab, dst_host):
    dst = ext_on(lab, dst_host)["address"]
    assert reached(lab, dst, 20), f"h1-t1-w1 does not reach {dst}"
    used = set()
    # Every ping is a session of its own (its ICMP id), hashed anew.
    for i in range(12):
        grew = crossed(lab, lambda: ping(lab, dst, count=3))
        assert_one_instance_per_function_both_ways(grew, f"ping {i} to {dst_host}")
        for n, (req, rep) in grew.items():
            if req:
                assert (req, rep) == (3, 3), f"ping {i}: {n} counted {req, rep}"
                used.add(n)
    # The sessions spread over more than one instance.
    assert len(used) > 2, used


def test_tcp_transfers_cross_the_same_instances_both_ways(lab):
    dst = ext_on(lab, "h2")["address"]
    assert reached(lab, dst, 20)
    used = set()
    for i in range(8):
        got = {}
        grew = crossed(lab, lambda: got.setdefault("n", transfer(lab, dst, 1 << 20)))
        assert got["n"] == 1 << 20, f"transfer {i}: {got['n']} bytes came back"
        assert_one_instance_per_function_both_ways(grew, f"transfer {i}")
        used.update(n for n, c in grew.items() if c[0])
    assert len(used) > 2, used

