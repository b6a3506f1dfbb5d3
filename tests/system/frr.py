"""FRR (zebra + bgpd) for system tests: run in a network namespace as user frr, every
path (config, pid files, zserv and vty sockets, log) in the test's own directory, and
stopped by SIGTERM to their own PIDs."""

import os
import pathlib
import shutil
import subprocess
import tempfile
import time

from system.netns import stop

FRR = "/usr/lib/frr"


class Frr:
    """`log_dir`: where the daemons' logs are copied when they stop (the run directory
    itself must be reachable by user frr, so it is a directory of its own under /tmp)."""

    def __init__(self, ns, log_dir, bgpd_conf):
        self.ns, self.log_dir = ns, log_dir
        self.dir = dir = pathlib.Path(tempfile.mkdtemp(prefix="ovr-frr-"))
        os.chmod(dir, 0o755)
        shutil.chown(dir, "frr", "frr")
        self.zserv = dir / "zserv.api"
        (dir / "zebra.conf").write_text("hostname zebra\n")
        (dir / "bgpd.conf").write_text(bgpd_conf)
        for f in ("zebra.conf", "bgpd.conf"):
            shutil.chown(dir / f, "frr", "frr")
        self.procs = []
        # A netlink buffer for a kernel's burst of notices (a benchmark deletes 100,000
        # fdb entries at once; with the default buffer zebra missed some of them).
        self._start("zebra", ["--nl-bufsize", str(64 << 20)])
        deadline = time.time() + 10
        while not self.zserv.exists():
            assert time.time() < deadline, (dir / "zebra.log").read_text()
            time.sleep(0.05)
        self._start("bgpd", ["-p", "0"])

    def _start(self, daemon, extra):
        d = self.dir
        cmd = ["ip", "netns", "exec", self.ns, f"{FRR}/{daemon}", "-f", str(d / f"{daemon}.conf"),
               "-i", str(d / f"{daemon}.pid"), "-z", str(self.zserv), "--vty_socket", str(d),
               "-P", "0", "--log", f"file:{d / f'{daemon}.log'}", *extra]
        self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                           stderr=open(d / f"{daemon}.err", "w")))

    def vtysh(self, *commands):
        args = ["vtysh", "--vty_socket", str(self.dir)]
        for c in commands:
            args += ["-c", c]
        return subprocess.run(["ip", "netns", "exec", self.ns, *args], capture_output=True,
                              text=True, timeout=20).stdout

    def stop(self):
        for p in reversed(self.procs):
            stop(p)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for log in self.dir.glob("*.log"):
            shutil.copy(log, self.log_dir / log.name)
        shutil.rmtree(self.dir, ignore_errors=True)


class Gobgpd:
    """A gobgpd in a namespace, its API on that namespace's loopback at a port of its own;
    configured by whoever drives its API (ovrd)."""

    def __init__(self, ns, log, api_port):
        self.api = f"http://127.0.0.1:{api_port}"
        self.port = api_port
        self.ns = ns
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, "gobgpd", "--api-hosts", f"127.0.0.1:{api_port}",
             "--pprof-disable", "-p"], stdout=open(log, "w"), stderr=subprocess.STDOUT)

    def cli(self, *args):
        """gobgp, GoBGP's own command line, against this gobgpd (JSON output)."""
        r = subprocess.run(["ip", "netns", "exec", self.ns, "gobgp", "-p", str(self.port),
                            "-u", "127.0.0.1", "-j", *args], capture_output=True, text=True,
                           timeout=20)
        return r.stdout

    def stop(self):
        stop(self.proc)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


