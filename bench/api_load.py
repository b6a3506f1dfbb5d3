#!/usr/bin/env python3
"""N concurrent API requests against one ovrd, each on its own connection, all sent at
once: how many got which status, and the latency (connect to last byte) percentiles.

    python3 bench/api_load.py --socket /run/ovr/ovrd.sock [-n 1000] [--path /api/v1/counters]
    python3 bench/api_load.py --url http://127.0.0.1:7878 --token-file TOKEN [-n 1000]
    python3 bench/api_load.py --lab-host h1 [--prefix ovra]   # a host of `ovrctl lab`

tests/system/test_api_load.py imports `run` for the functional check (all 200); this
script is the benchmark (bench/RESULTS.md, "API under concurrency").
"""

import argparse
import json
import pathlib
import resource
import selectors
import socket
import subprocess
import sys
import time
import urllib.parse


def raise_fd_limit(n):
    """One descriptor per connection: lift the soft limit towards the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n + 256))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def connect(addr):
    """A non-blocking socket connecting to `addr` (a Unix socket path or (host, port))."""
    fam = socket.AF_UNIX if isinstance(addr, str) else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(addr)
    except (BlockingIOError, InterruptedError):
        pass  # in progress (TCP), or a full backlog (Unix): writable once connected
    return s


def run(n=1000, socket_path=None, url=None, token=None, path="/api/v1/counters"):
    """n requests, each on its own connection, all sent at once. Answers
    [(status, seconds, (headers, body))] and the wall time.

    One epoll loop over raw non-blocking sockets: the client must cost less than the
    server, or it measures itself (asyncio's streams cost ~4x more per connection)."""
    raise_fd_limit(n)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    request = (f"GET {path} HTTP/1.1\r\nHost: ovrd\r\n{auth}Connection: close\r\n\r\n").encode()
    if socket_path:
        addr = str(socket_path)
    else:
        u = urllib.parse.urlsplit(url)
        addr = (u.hostname, u.port)
    sel = selectors.DefaultSelector()
    conns = {}
    t0 = time.perf_counter()
    for i in range(n):
        s = connect(addr)
        conns[s.fileno()] = [s, time.perf_counter(), bytearray(), False, None]
        sel.register(s, selectors.EVENT_WRITE, i)
    done = []
    while conns:
        for key, ev in sel.select(timeout=30) or [(None, None)]:
            if key is None:
                raise TimeoutError(f"{len(conns)} requests unanswered after 30 s")
            c = conns[key.fd]
            s = c[0]
            try:
                if not c[3]:
                    s.send(request)  # small: one send
                    c[3] = True
                    sel.modify(s, selectors.EVENT_READ, key.data)
                    continue
                chunk = s.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as e:
                c[4] = f"error: {e.__class__.__name__}"
                chunk = b""
            if chunk:
                c[2] += chunk
                continue
            sel.unregister(s)
            s.close()
            del conns[key.fd]
            elapsed = time.perf_counter() - c[1]
            head, _, body = bytes(c[2]).partition(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].split()
            status = c[4] or (line[1].decode() if len(line) > 1 else "no answer")
            done.append((status, elapsed, (head.decode(errors="replace").lower(), body)))
    return done, time.perf_counter() - t0


def summary(results, wall):
    statuses = {}
    for s, _, _ in results:
        statuses[s] = statuses.get(s, 0) + 1
    lat = sorted(r[1] * 1000 for r in results)

    def pct(p):
        return lat[min(len(lat) - 1, int(p / 100 * len(lat)))]
    return {
        "requests": len(results),
        "statuses": statuses,
        "p50_ms": round(pct(50), 1),
        "p99_ms": round(pct(99), 1),
        "max_ms": round(lat[-1], 1),
        "wall_ms": round(wall * 1000, 1),
    }


def lab_socket(host, prefix):
    """A lab host's API socket: from `ovrctl lab status --json` where it says, else where
    the lab puts it (DIR/HOST.sock)."""
    ovrctl = pathlib.Path(__file__).resolve().parent.parent / "target" / "release" / "ovrctl"
    args = [str(ovrctl) if ovrctl.exists() else "ovrctl", "lab"]
    if prefix:
        args += ["--prefix", prefix]
    r = subprocess.run(args + ["status", "--json"], capture_output=True, text=True)
    try:
        return next(h["socket"] for h in json.loads(r.stdout)["hosts"] if h["name"] == host)
    except (ValueError, KeyError, StopIteration):
        d = "/run/ovr-lab" if prefix in (None, "ovrlab") else f"/run/ovr-lab-{prefix}"
        return f"{d}/{host}.sock"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--socket")
    g.add_argument("--url", help="http://ADDR:PORT")
    g.add_argument("--lab-host", help="a host of `ovrctl lab` (its socket from lab status)")
    ap.add_argument("--prefix", help="the lab's --prefix")
    ap.add_argument("--token-file")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--path", default="/api/v1/counters")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    sock = lab_socket(a.lab_host, a.prefix) if a.lab_host else a.socket
    token = pathlib.Path(a.token_file).read_text().strip() if a.token_file else None
    ok = True
    for _ in range(a.rounds):
        results, wall = run(a.n, sock, a.url, token, a.path)
        s = summary(results, wall)
        print(json.dumps(s))
        ok &= s["statuses"].get("200", 0) == a.n
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
