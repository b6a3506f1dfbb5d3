"""DPDK's dpdk-testpmd as a memif peer for system tests (see ../shared/PLATFORM.md).

Each testpmd has its own file prefix, runs in the test's directory on the sockets it is
given, and is stopped by its own PID. Its stdin is a pipe kept open (it exits at end of
file); SIGINT makes it print its final counters and exit. Its ports' counters are also
printed every second (`--stats-period 1`) and read while it runs; they restart from zero
when a port's link comes up again."""

import pathlib
import re
import shutil
import signal
import subprocess
import time

from system.netns import stop


def wait_until(cond, what, check=lambda: None, timeout=15):
    deadline = time.time() + timeout
    while not cond():
        check()
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Testpmd:
    __test__ = False

    seq = 0

    def __init__(self, tmp, ports, mode, *extra, lcores="0@0,1@1", tag="ovrtest", replay=None):
        """`ports`: (role, socket, mac) of each memif port, net_memif0 first; testpmd's
        port numbers follow that order. `lcores`: its two lcores (the first only
        manages), e.g. "0@1,1@1" for both on CPU 1. `replay`: a pcap file whose frames a
        last port (net_pcap) receives over and over; what it is sent is discarded."""
        Testpmd.seq += 1
        roles = "-".join(dict.fromkeys(role for role, _, _ in ports))
        self.name = f"{mode}-{roles}-{Testpmd.seq}"
        self.prefix = f"{tag}-{int(time.time() * 1000) % 10**9}-{Testpmd.seq}"
        # DPDK's runtime files of this prefix (megabytes, in a tmpfs): removed once it ends.
        self.runtime = pathlib.Path("/var/run/dpdk") / self.prefix
        self.out = tmp / f"testpmd-{self.name}.log"
        vdevs = [f"--vdev=net_memif{i},role={role},socket={sock},socket-abstract=no,id=0,mac={mac}"
                 for i, (role, sock, mac) in enumerate(ports)]
        if replay:
            vdevs.append(f"--vdev=net_pcap0,rx_pcap={replay},infinite_rx=1")
        self.proc = subprocess.Popen(
            # Line-buffered: its output goes to a file, read while it runs.
            ["stdbuf", "-oL", "dpdk-testpmd", f"--lcores={lcores}", "--no-huge", "-m", "512",
             "--no-pci", f"--file-prefix={self.prefix}", *vdevs, "--",
             "--total-num-mbufs=16384", f"--forward-mode={mode}", "--auto-start",
             "--stats-period", "1", *extra],
            stdin=subprocess.PIPE, stdout=open(self.out, "w"), stderr=subprocess.STDOUT,
            cwd=tmp)
        try:
            wait_until(
                lambda: "packet forwarding - ports=" in self.text() or self.proc.poll() is not None,
                f"testpmd {self.name} started")
            assert self.proc.poll() is None, self.text()
        except BaseException:
            # Not yet in the test's list of processes: stopped here.
            self.kill()
            raise

    def text(self):
        return self.out.read_text(errors="replace")

    def stop(self):
        """Stops it (SIGINT) and returns its final counters over all ports."""
        stop(self.proc, signal.SIGINT, timeout=15)
        shutil.rmtree(self.runtime, ignore_errors=True)
        t = self.text()
        stats = {}
        for k in ("RX-packets", "TX-packets"):
            found = re.findall(rf"{k}:\s+(\d+)", t)
            stats[k] = int(found[-1]) if found else 0
        # The port's own counters, printed every second (--stats-period 1): packets and
        # bytes of the same moment.
        port = re.findall(r"RX-packets:\s+(\d+)\s+RX-missed:\s+\d+\s+RX-bytes:\s+(\d+)", t)
        stats["port_rx"] = [(int(p), int(b)) for p, b in port]
        return stats

    def ports(self):
        """Each port's counters as last printed (every second while it runs):
        {port: (rx packets, tx packets)}."""
        blocks = re.findall(
            r"NIC statistics for port (\d+)\s+#+\s+RX-packets:\s+(\d+).*?TX-packets:\s+(\d+)",
            self.text(), re.S)
        return {int(p): (int(rx), int(tx)) for p, rx, tx in blocks}

    def wait_ports(self, cond, what, timeout=5):
        """Waits until `cond(self.ports())` holds; returns those counters."""
        wait_until(lambda: cond(self.ports()), f"testpmd {self.name}: {what} "
                   f"(last {self.ports()})", self.check, timeout)
        return self.ports()

    def check(self):
        assert self.proc.poll() is None, self.text()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.runtime, ignore_errors=True)
