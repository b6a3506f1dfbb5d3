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
import asyncio
import json
import pathlib
import resource
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


async def one(open_conn, request, start_gate):
    await start_gate.wait()
    t0 = time.perf_counter()
    try:
        reader, writer = await open_conn()
        writer.write(request)
        await writer.drain()
        data = await reader.read()  # Connection: close: the answer ends at EOF
        writer.close()
    except OSError as e:
        return f"error: {e.__class__.__name__}", time.perf_counter() - t0, b""
    head, _, body = data.partition(b"\r\n\r\n")
    line = head.split(b"\r\n", 1)[0].split()
    status = line[1].decode() if len(line) > 1 else "no answer"
    headers = head.decode(errors="replace").lower()
    return status, time.perf_counter() - t0, (headers, body)


async def load(n, socket=None, url=None, token=None, path="/api/v1/counters"):
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    request = (f"GET {path} HTTP/1.1\r\nHost: ovrd\r\n{auth}Connection: close\r\n\r\n").encode()
    if socket:
        def open_conn():
            return asyncio.open_unix_connection(str(socket), limit=1 << 24)
    else:
        u = urllib.parse.urlsplit(url)

        def open_conn():
            return asyncio.open_connection(u.hostname, u.port, limit=1 << 24)
    gate = asyncio.Event()
    tasks = [asyncio.create_task(one(open_conn, request, gate)) for _ in range(n)]
    await asyncio.sleep(0)
    t0 = time.perf_counter()
    gate.set()
    results = await asyncio.gather(*tasks)
    return results, time.perf_counter() - t0


def run(n=1000, socket=None, url=None, token=None, path="/api/v1/counters"):
    """[(status, seconds, (headers, body))] for n concurrent requests, and the wall time."""
    raise_fd_limit(n)
    return asyncio.run(load(n, socket, url, token, path))


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
    ovrctl = pathlib.Path(__file__).resolve().parent.parent / "target" / "release" / "ovrctl"
    args = [str(ovrctl) if ovrctl.exists() else "ovrctl", "lab"]
    if prefix:
        args += ["--prefix", prefix]
    st = json.loads(subprocess.run(args + ["status", "--json"], check=True,
                                   capture_output=True, text=True).stdout)
    return next(h["socket"] for h in st["hosts"] if h["name"] == host)


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
    socket = lab_socket(a.lab_host, a.prefix) if a.lab_host else a.socket
    token = pathlib.Path(a.token_file).read_text().strip() if a.token_file else None
    ok = True
    for _ in range(a.rounds):
        results, wall = run(a.n, socket, a.url, token, a.path)
        s = summary(results, wall)
        print(json.dumps(s))
        ok &= s["statuses"].get("200", 0) == a.n
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
