"""Network namespaces and veth pairs for system tests, created under a per-run prefix and
removed by exactly those names (never by pattern), even when a test fails."""

import os
import signal
import subprocess
import time


def sh(*args, ns=None, check=True, timeout=30, **kw):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True, **kw)


def stop(proc, sig=signal.SIGTERM, timeout=10):
    """Stops a process this run started: `sig`, then SIGKILL if it outlives `timeout`."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def until(what, f, timeout=5.0, every=0.05):
    """`f()`'s first true value, asked every `every` s; fails the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        v = f()
        if v:
            return v
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(every)


class Lab:
    """Namespaces this run made, torn down in reverse order."""

    def __init__(self, tag):
        # Short, unique per process: interface and namespace names stay valid.
        self.prefix = f"ovrt{os.getpid() % 10000}{tag}"
        self.namespaces = []

    def ns(self, name):
        full = f"{self.prefix}-{name}"
        sh("ip", "netns", "add", full)
        self.namespaces.append(full)
        sh("ip", "link", "set", "lo", "up", ns=full)
        # No IPv6 autoconfiguration noise on the links under test.
        sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", ns=full)
        sh("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", ns=full)
        return full

    def veth(self, ns_a, name_a, ns_b, name_b, mac_a=None, mac_b=None):
        """A veth pair with one queue each way (see PLATFORM.md), ends moved and up."""
        tmp_a, tmp_b = f"{self.prefix}a", f"{self.prefix}b"
        sh("ip", "link", "add", tmp_a, "numrxqueues", "1", "numtxqueues", "1", "type", "veth",
           "peer", "name", tmp_b, "numrxqueues", "1", "numtxqueues", "1")
        for tmp, ns, name, mac in ((tmp_a, ns_a, name_a, mac_a), (tmp_b, ns_b, name_b, mac_b)):
            sh("ip", "link", "set", tmp, "netns", ns)
            sh("ip", "link", "set", tmp, "name", name, ns=ns)
            if mac:
                sh("ip", "link", "set", name, "address", mac, ns=ns)
            sh("ip", "link", "set", name, "up", ns=ns)

    def close(self):
        for ns in reversed(self.namespaces):
            sh("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
