"""A service chain whose only instance runs on a third host (`ovrctl lab up --hosts 3
--tenants 1 --service-chain --instance-hosts 3`, docs/chains.md "In the cluster"):
`h1-t1-w1` talks to the `ext` workload on h2, and the firewall instance is on h3.

The request goes h1 → h3 (into the instance, out of it) → h2; the reply must take the
same way back, h2 → h3 → h1, not straight from h2 to h1:

- a ping and a TCP connection work, and nftables in the instance counts the requests
  and the replies (a counting rule per direction);
- a drop rule in the instance for the replies alone stops the ping and the TCP
  connection (so the replies do cross it), and one for the requests alone stops the
  ping too;
- a new session traced on each host shows that host's hop (h1 into the instance, h3 out
  of it, h2 sending the reply back to h3);
- `lab down` leaves nothing behind (OverlayLab checks it).

One lab for the module (prefix `ovrc3<pid>`), always taken down."""

import os
import subprocess
import time

import pytest

from conftest import ROOT
from system.chain_lab import counted, delete_rules, ext_on
from system.overlay_lab import OverlayLab, sh

PORT = 7007
SERVER = f"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT}))
s.listen(8)
while True:
    c, _ = s.accept()
    data = c.recv(1024)
    c.sendall(b"echo " + data)
    c.close()
"""


@pytest.fixture(scope="module")
def lab(request):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    lab = OverlayLab(f"ovrc3{os.getpid() % 10000}", "--service-chain", "--instance-hosts", "3",
                     hosts=3)
    request.addfinalizer(lambda: lab.__exit__(None, None, None))
    lab = lab.__enter__()
    ns = instance(lab)["namespace"]
    # One counting rule per direction: requests from tenant 1, replies to it.
    for addr, what in (("saddr", "requests"), ("daddr", "replies")):
        sh("nft", "add", "rule", "inet", "fw", "forward", "ip", addr, "10.1.0.0/24",
           "counter", "comment", f'"{what}"', ns=ns)
    server = subprocess.Popen(["ip", "netns", "exec", lab.ns("h2-ext-w1"), "python3", "-c",
                               SERVER])
    request.addfinalizer(server.kill)
    return lab


def instance(lab):
    (s,) = lab.status()["services"]
    return s


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


def tcp(lab, address, timeout=2):
    """A TCP connection from h1-t1-w1 to the echo server: its answer, or None."""
    client = (f"import socket\n"
              f"c = socket.create_connection(('{address}', {PORT}), timeout={timeout})\n"
              f"c.sendall(b'hello')\n"
              f"print(c.recv(1024).decode())\n")
    r = sh("python3", "-c", client, ns=lab.ns("h1-t1-w1"), check=False, timeout=timeout + 10)
    return r.stdout.strip() if r.returncode == 0 else None


def with_rule(lab, match, action):
    """Runs `action` with a drop rule (`ip saddr|daddr 10.1.0.0/24`) first in the
    instance's forward chain; takes the rule out after."""
    ns = instance(lab)["namespace"]
    sh("nft", "insert", "rule", "inet", "fw", "forward", "ip", match, "10.1.0.0/24", "drop",
       "comment", '"drop"', ns=ns)
    try:
        return action()
    finally:
        delete_rules(ns, "drop")


def test_h1_and_h2_reach_the_only_instance_on_h3(lab):
    s = instance(lab)
    assert (s["name"], s["host"]) == ("fw-h3", "h3")
    for h in ("h1", "h2"):
        chains = lab.json(h, "chains")["chains"]
        (i,) = chains[0]["functions"][0]["instances"]
        assert (i["name"], i["healthy"]) == ("fw-h3", True), i
        assert i["left"]["via"] == "h3:svc", i


def test_ping_from_h1_to_h2_goes_through_the_instance_on_h3_both_ways(lab):
    dst = ext_on(lab, "h2")["address"]
    assert reached(lab, dst, 15), f"h1-t1-w1 does not reach {dst}"
    ns = instance(lab)["namespace"]
    before = [counted(ns, c) for c in ("requests", "replies")]
    r = ping(lab, dst, count=5)
    assert r.returncode == 0, r.stdout + r.stderr
    grew = [counted(ns, c) - b for c, b in zip(("requests", "replies"), before)]
    assert grew == [5, 5], f"requests and replies through the instance: {grew}"


def test_a_tcp_connection_from_h1_to_h2_goes_through_the_instance_both_ways(lab):
    dst = ext_on(lab, "h2")["address"]
    ns = instance(lab)["namespace"]
    before = [counted(ns, c) for c in ("requests", "replies")]
    end = time.monotonic() + 10
    answer = tcp(lab, dst)
    while answer is None and time.monotonic() < end:
        time.sleep(0.5)
        answer = tcp(lab, dst)
    assert answer == "echo hello"
    requests, replies = (counted(ns, c) - b for c, b in zip(("requests", "replies"), before))
    # SYN, ACK, data, FIN... one way; SYN-ACK, data, FIN... the other.
    assert requests >= 3 and replies >= 3, (requests, replies)


def test_dropping_the_replies_in_the_instance_stops_ping_and_tcp(lab):
    dst = ext_on(lab, "h2")["address"]

    def tried():
        return ping(lab, dst, count=2).returncode, tcp(lab, dst)

    code, answer = with_rule(lab, "daddr", tried)
    assert code != 0, "the ping's replies went around the instance"
    assert answer is None, "the TCP connection's replies went around the instance"
    assert reached(lab, dst, 5), "the ping does not come back once the rule is gone"
    assert tcp(lab, dst) == "echo hello"


def test_dropping_the_requests_in_the_instance_stops_the_ping(lab):
    dst = ext_on(lab, "h2")["address"]
    code = with_rule(lab, "saddr", lambda: ping(lab, dst, count=2).returncode)
    assert code != 0, "the ping's requests went around the instance"
    assert reached(lab, dst, 5)


def test_each_hosts_trace_shows_its_hop_of_the_session(lab):
    """A new ping session traced on every host: h1 steers it into the instance on h3,
    h3 takes it out of the instance's right port, and h2 sends the reply back to h3."""
    dst = ext_on(lab, "h2")["address"]
    for h in ("h1", "h2", "h3"):
        lab.api(h, "trace", "clear")
        lab.api(h, "trace", "add", "20")
    assert ping(lab, dst, count=1).returncode == 0
    shown = {h: lab.api(h, "trace", "show") for h in ("h1", "h2", "h3")}
    assert "instance fw-h3, left" in shown["h1"], shown["h1"]
    assert "from service port fwr (chain through-fw" in shown["h3"], shown["h3"]
    assert "back to the instance's host it came from" in shown["h2"], shown["h2"]
