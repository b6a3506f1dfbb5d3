"""A session that moves from one firewall instance to another on a different host
(`ovrctl lab up --hosts 3 --tenants 1 --service-chain --instance-hosts 1,3`,
docs/chains.md "In the cluster"): `h1-t1-w1` talks to the `ext` workload on h2 through
one of the instances on h1 and h3; the namespace of the one the session uses is removed
(each test twice: a session through h1's, one through h3's), and the session's requests
reach h2 from the other instance's host from then on.

h2 must send the session's replies after them, through the surviving instance: not to
the removed instance's host (where they are lost), nor straight to h1 (around the
firewall). Counting rules per direction in each instance, and h2's flows, show it:

- a continuing ping (one ICMP id) is answered to the end, and every reply it gets after
  the move crossed the surviving instance, and h2's reverse flow goes to its host;
- a continuing TCP connection (one line every 50 ms, echoed) goes on after the move, its
  replies through the surviving instance;
- with the TC fast path (`--offload tc`) too: its entry of the session takes only the
  sending host's packets, so the moved requests come up to ovrd, which follows them;
- `lab down` leaves nothing behind (OverlayLab checks it).

One lab per test (prefix `ovrc4<pid>`), always taken down: each test removes an
instance."""

import os
import subprocess
import time

import pytest

from conftest import ROOT
from system.chain_lab import counted, ext_on
from system.overlay_lab import OverlayLab, sh

PORT = 7008
# Echoes each line it gets, on one connection at a time. A connection reset (a client
# the test killed, its session through the other instance) ends only that connection.
SERVER = f"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT}))
s.listen(8)
while True:
    c, _ = s.accept()
    f = c.makefile("rwb", buffering=0)
    try:
        for line in f:
            f.write(b"echo " + line)
    except OSError:
        pass
    c.close()
"""
# Sends a numbered line every 50 ms for `run_s` seconds and prints, per echo, the time
# it came back (the epoch's seconds) and its number.
CLIENT = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], {port}), timeout=10)
f = c.makefile("rwb", buffering=0)
end = time.time() + float(sys.argv[2])
n = 0
while time.time() < end:
    f.write(b"%d\\n" % n)
    line = f.readline()
    print("%.3f %s" % (time.time(), line.decode().split()[1]), flush=True)
    n += 1
    time.sleep(0.05)
"""


@pytest.fixture(scope="module")
def built():
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)


@pytest.fixture
def lab(request, built):
    offload = getattr(request, "param", None)
    lab = OverlayLab(f"ovrc4{os.getpid() % 10000}", "--service-chain", "--instance-hosts",
                     "1,3", *([f"--offload={offload}"] if offload else []), hosts=3)
    request.addfinalizer(lambda: lab.__exit__(None, None, None))
    lab = lab.__enter__()
    # One counting rule per direction in every instance.
    for s in lab.status()["services"]:
        for addr, what in (("saddr", "requests"), ("daddr", "replies")):
            sh("nft", "add", "rule", "inet", "fw", "forward", "ip", addr, "10.1.0.0/24",
               "counter", "comment", f'"{what}"', ns=s["namespace"])
    return lab


def reached(lab, address, within_s):
    end = time.monotonic() + within_s
    while sh("ping", "-c", "1", "-W", "0.3", address, ns=lab.ns("h1-t1-w1"),
             check=False).returncode != 0:
        if time.monotonic() > end:
            return False
    return True


def way_back(lab, dst, protocol, src_port=None):
    """The next hop of h2's reverse flow of the session (from `dst` to tenant 1's
    10.1.0.0/24; of those, the one with the most packets, as the probing pings before
    were sessions of their own): `HOST:NETWORK`, the routed VXLAN next hop there."""
    flows = lab.json("h2", "flows")["flows"]
    rev = [f for f in flows if f["src"] == dst and f["dst"].startswith("10.1.0.")
           and f["protocol"] == protocol and src_port in (None, f["src_port"])]
    assert rev, flows
    return max(rev, key=lambda f: f["packets"])["nexthop_name"]


def through(lab, host, start):
    """Starts sessions (`start()` returns the process) until one crosses the instance on
    `host` (each is hashed to an instance by its ports or ICMP id), and removes that
    instance's namespace a second into it. Returns (the session, the removed instance,
    the surviving one, the survivor's reply count then, the time of removal)."""
    services = lab.status()["services"]
    assert sorted(s["host"] for s in services) == ["h1", "h3"], services
    for _ in range(12):
        p = start()
        time.sleep(1)
        before = {s["name"]: counted(s["namespace"], "requests") for s in services}
        time.sleep(0.5)
        used = [s for s in services
                if counted(s["namespace"], "requests") > before[s["name"]]]
        assert len(used) == 1, (before, services)
        (used,) = used
        if used["host"] == host:
            other = next(s for s in services if s is not used)
            replies = counted(other["namespace"], "replies")
            sh("ip", "netns", "del", used["namespace"])
            return p, used, other, replies, time.time()
        p.kill()
        p.wait()
    raise AssertionError(f"no session through the instance on {host}")


# (the removed instance's host, the fast path): the instance on h1 is on the source's
# host (h2 routes the replies there until the move); the one on h3 on a third host (h2
# sends them back to h3 until the move), also with the TC fast path carrying the session.
CASES = [("h1", None), ("h3", None), ("h3", "tc")]


def output(p, timeout):
    """What process `p` printed, once it ended (killed if it outlives `timeout`)."""
    try:
        return p.communicate(timeout=timeout)[0]
    finally:
        if p.poll() is None:
            p.kill()


@pytest.mark.parametrize("removed,lab", CASES, indirect=["lab"])
def test_a_moved_ping_session_is_answered_through_the_surviving_instance(lab, removed):
    dst = ext_on(lab, "h2")["address"]
    assert reached(lab, dst, 15), f"h1-t1-w1 does not reach {dst}"
    interval, run_s = 0.05, 8

    def start():
        return subprocess.Popen(
            ["ip", "netns", "exec", lab.ns("h1-t1-w1"), "ping", "-D", "-n", "-i",
             str(interval), "-w", str(run_s), dst],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    p, used, other, replies, removed_at = through(lab, removed, start)
    out = output(p, run_s + 5)
    got = [(float(line[1:line.index("]")]), int(w.split("=")[1]))
           for line in out.splitlines() if line.startswith("[")
           for w in line.split() if w.startswith("icmp_seq=")]
    seqs = sorted(s for _, s in got)
    gaps = [b - a - 1 for a, b in zip(seqs, seqs[1:])]
    lost_s = max(gaps, default=0) * interval
    # From 0.2 s after the removal on: a reply that crossed the removed instance just
    # before its namespace went may still arrive after `removed_at`.
    after = sum(1 for t, _ in got if t > removed_at + 0.2)
    crossed = counted(other["namespace"], "replies") - replies
    print(f"{used['name']} removed, the session moved to {other['name']}: longest loss "
          f"{lost_s:.2f} s; {after} replies after the move, {crossed} through "
          f"{other['name']}")
    assert lost_s <= 2.0, f"replies lost for {lost_s:.2f} s: {out}"
    # Answered to the end (ping numbers its requests from 1, one per interval).
    assert seqs and seqs[-1] >= (run_s - 1) / interval * 0.8, out
    assert after >= (run_s - 4) / interval * 0.8, out
    # Each reply the workload got after the move crossed the survivor, and h2 sends them
    # to the survivor's host (not around it, not to the removed one's).
    assert crossed >= after, (crossed, after)
    assert way_back(lab, dst, 1).startswith(f"{other['host']}:")


@pytest.mark.parametrize("removed,lab", CASES, indirect=["lab"])
def test_a_moved_tcp_connection_goes_on_through_the_surviving_instance(lab, removed):
    dst = ext_on(lab, "h2")["address"]
    server = subprocess.Popen(["ip", "netns", "exec", lab.ns("h2-ext-w1"), "python3", "-c",
                               SERVER])
    try:
        assert reached(lab, dst, 15), f"h1-t1-w1 does not reach {dst}"
        time.sleep(0.5)
        run_s = 8

        def start():
            return subprocess.Popen(
                ["ip", "netns", "exec", lab.ns("h1-t1-w1"), "python3", "-c",
                 CLIENT.format(port=PORT), dst, str(run_s)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        p, used, other, replies, removed_at = through(lab, removed, start)
        out = output(p, run_s + 20)
    finally:
        server.kill()
    echoes = [(float(t), int(n)) for t, n in
              (line.split() for line in out.splitlines() if line[:1].isdigit())]
    after = [n for t, n in echoes if t > removed_at + 2.5]
    crossed = counted(other["namespace"], "replies") - replies
    print(f"{used['name']} removed, the connection moved to {other['name']}: "
          f"{len(after)} echoes from 2.5 s after the move on, {crossed} replies through "
          f"{other['name']}")
    assert p.returncode == 0, out
    # The connection went on: echoes kept coming, in order, through the survivor.
    assert [n for _, n in echoes] == list(range(len(echoes))), out
    assert len(after) >= 20, out
    assert crossed >= len(after), (crossed, len(after))
    assert way_back(lab, dst, 6, PORT).startswith(f"{other['host']}:")
