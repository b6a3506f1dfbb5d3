"""The API under load and against idle or hostile clients, on a real ovrd: a thousand
concurrent reads all answered; idle connections closed; new requests answered while
hundreds of idle connections are open; the TCP listener's token rules.

The load itself is bench/api_load.py (the benchmark); here only what must hold is
asserted, never a time.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from system.test_agent import started_host

sys.path.insert(0, str(ROOT / "bench"))
import api_load  # noqa: E402


@pytest.fixture
def host(tmp_path):
    with started_host(tmp_path, "ld") as h:
        yield h


def test_a_thousand_concurrent_counter_reads_are_all_answered(host):
    results, _ = api_load.run(1000, socket_path=host.socket)
    s = api_load.summary(results, 0)
    assert s["statuses"] == {"200": 1000}, s
    # Every answer is the whole document, the interfaces named.
    for _, _, (_, body) in results[:10]:
        assert b'"name":"vm1"' in body, body[:200]
    # The worker still answers everything else afterwards.
    assert host.json("flows")["active"] >= 0


def test_idle_connections_are_closed_and_new_requests_still_answered(host):
    """200 connections that never send a byte: a new request is answered meanwhile,
    and ovrd closes all 200 within 60 s (its idle timeout is 30 s)."""
    idle = []
    for _ in range(200):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(host.socket))
        idle.append(s)
    # Half-sent heads too: cut off by the header timeout (10 s).
    for s in idle[:20]:
        s.sendall(b"GET /api/v1/ids HTTP/1.1\r\nHost: ovrd\r\n")
    t0 = time.monotonic()
    assert host.json("ids")["interfaces"], "no answer with 200 idle connections open"
    assert time.monotonic() - t0 < 5
    closed = set()
    deadline = time.monotonic() + 60
    while len(closed) < len(idle) and time.monotonic() < deadline:
        for i, s in enumerate(idle):
            if i in closed:
                continue
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    closed.add(i)
            except BlockingIOError:
                pass
            except OSError:
                closed.add(i)
        time.sleep(0.5)
    elapsed = time.monotonic() - t0
    for s in idle:
        s.close()
    assert len(closed) == len(idle), f"{len(idle) - len(closed)} still open after {elapsed:.0f} s"
    # The half-sent ones went first.
    assert host.json("ids")["interfaces"]


def start_tcp(host, token_file, port):
    """ovrd with the TCP listener; returns (process, log) once it is forwarding or has
    exited."""
    log = host.tmp / f"ovrd-tcp-{time.monotonic_ns()}.log"
    out = open(log, "w")
    p = subprocess.Popen(
        ["ip", "netns", "exec", host.ns, str(host.ovrd), "--config", str(host.config),
         "--api-socket", str(host.tmp / "tcp.sock"), "--state", str(host.tmp / "tcp.json"),
         "--api-listen", f"127.0.0.1:{port}", "--api-token-file", str(token_file)],
        stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 10
    while "forwarding" not in log.read_text() and p.poll() is None:
        if time.time() > deadline:
            p.kill()
            p.wait()
            raise AssertionError(f"ovrd did not start: {log.read_text()}")
        time.sleep(0.05)
    return p, log


def refused_start(host, token_file):
    """Starts ovrd with the TCP listener, expecting a refusal; answers its log."""
    p, log = start_tcp(host, token_file, 7870)
    try:
        assert p.wait(timeout=10) != 0, log.read_text()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return log.read_text()


def in_ns(host, *cmd, timeout=30):
    return subprocess.run(["ip", "netns", "exec", host.ns, *map(str, cmd)],
                          capture_output=True, text=True, timeout=timeout)


def test_tcp_listener_token_rules_bearer_case_and_ovrctl_url(host):
    host.stop()  # the socket's ovrd is not needed; the TCP one runs in its namespace
    token = "x" * 40
    tf = host.tmp / "token"
    # Readable by others: refused at start, saying why.
    tf.write_text(token)
    os.chmod(tf, 0o644)
    assert "group or others" in refused_start(host, tf)
    # Too short.
    tf.write_text("short-token\n")
    os.chmod(tf, 0o600)
    assert "at least 32" in refused_start(host, tf)

    tf.write_text(token + "\n")
    p, log = start_tcp(host, tf, 7870)
    try:
        assert p.poll() is None, log.read_text()
        # Any case of the scheme's name (RFC 9110).
        for scheme, want in (("bearer", "200"), ("BEARER", "200"), ("Bearer", "200"),
                             ("Basic", "401")):
            r = in_ns(host, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                      "-H", f"Authorization: {scheme} {token}",
                      "http://127.0.0.1:7870/api/v1/ids")
            assert r.stdout == want, (scheme, r.stdout, r.stderr)
        # ovrctl --url, with and without the token.
        r = in_ns(host, host.ovrctl, "--url", "http://127.0.0.1:7870", "--token-file", tf,
                  "--json", "networks")
        assert r.returncode == 0, r.stderr
        assert [n["name"] for n in json.loads(r.stdout)] == ["red"]
        r = in_ns(host, host.ovrctl, "--url", "http://127.0.0.1:7870", "networks")
        assert r.returncode == 4 and "unauthorized" in r.stderr, (r.returncode, r.stderr)
        r = in_ns(host, host.ovrctl, "--url", "https://127.0.0.1:7870", "networks")
        assert r.returncode == 2, (r.returncode, r.stderr)
        # The TCP listener closes idle connections too (and answers meanwhile).
        r = in_ns(host, sys.executable, "-c", IDLE_TCP, token, timeout=90)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)


# Run inside the namespace: 50 idle TCP connections, a request answered meanwhile, all
# 50 closed by ovrd within 60 s.
IDLE_TCP = r"""
import socket, sys, time
token = sys.argv[1]
idle = [socket.create_connection(("127.0.0.1", 7870)) for _ in range(50)]
s = socket.create_connection(("127.0.0.1", 7870))
s.sendall(f"GET /api/v1/ids HTTP/1.1\r\nHost: x\r\nAuthorization: bearer {token}\r\nConnection: close\r\n\r\n".encode())
assert s.makefile("rb").readline().split()[1] == b"200"
for c in idle:
    c.settimeout(60)
t = time.monotonic()
for c in idle:
    assert c.recv(1) == b"", "data on an idle connection"
print(f"closed after {time.monotonic() - t:.0f} s")
"""
