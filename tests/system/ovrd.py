"""ovrd for system tests: built, started in a namespace with its own API socket and state
file beside its log (so that tests running at once never share them), waited for, and
stopped by SIGTERM to its own PID."""

import http.client
import json
import socket
import subprocess
import time

from conftest import ROOT
from system.netns import stop


def binary(package, name=None):
    """Builds `package` and returns the path of its binary `name` (default: the same)."""
    subprocess.run(["cargo", "build", "-q", "-p", package], cwd=ROOT, check=True)
    return ROOT / "target" / "debug" / (name or package)


class UnixHTTP(http.client.HTTPConnection):
    """HTTP to ovrd's API socket, from this process (no client process started)."""

    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.unix_path = str(path)

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.unix_path)


class Ovrd:
    """`exe`: the ovrd binary to run (default: the debug build, built first)."""

    def __init__(self, ns, log, *args, exe=None):
        self.log = log
        self.socket = log.with_suffix(".sock")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, str(exe or binary("ovrd")), "--api-socket", str(self.socket),
             "--state", str(log.with_suffix(".state.json")), *map(str, args)],
            stdout=open(log, "w"), stderr=subprocess.STDOUT)
        self.wait_for("forwarding")

    def get(self, path):
        """GET `path` from its API socket: the JSON answer."""
        r = subprocess.run(["curl", "-s", "--unix-socket", str(self.socket), f"http://ovrd{path}"],
                           capture_output=True, text=True, timeout=10)
        return json.loads(r.stdout)

    def api_get(self, path):
        """GET `path` over a connection of this process: quicker than `get` where the
        time it takes matters."""
        c = UnixHTTP(self.socket)
        try:
            c.request("GET", path)
            r = c.getresponse()
            data = r.read()
            assert r.status < 300, (r.status, data)
            return json.loads(data)
        finally:
            c.close()

    def text(self):
        return self.log.read_text()

    def wait_for(self, what, count=1, timeout=10):
        deadline = time.time() + timeout
        while self.text().count(what) < count:
            assert self.proc.poll() is None, self.text()
            assert time.time() < deadline, f"no {what!r} x{count} in:\n{self.text()}"
            time.sleep(0.05)

    def stop(self):
        stop(self.proc)
