"""What the tests and benchmarks read of a process (or one of its threads) from /proc:
its state, CPU time, start time and resident memory. Each takes a PID, or a thread's
directory (/proc/PID/task/TID), and returns None once the process is gone."""

import os
import pathlib


def _stat(pid):
    """The fields of its stat file after the command name, which is in parentheses and
    may hold spaces: [0] is the state, [11] and [12] utime and stime, [19] the start."""
    d = pid if isinstance(pid, pathlib.Path) else pathlib.Path(f"/proc/{pid}")
    try:
        return (d / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def state(pid):
    """One letter: R, S, D, Z (exited, not yet reaped), ..."""
    f = _stat(pid)
    return f and f[0]


def cpu_seconds(pid):
    """User + system CPU seconds used so far."""
    f = _stat(pid)
    return f and (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def start_time(pid):
    """When it started, in clock ticks after boot: with the PID, it names one process
    (a PID alone may have been reused)."""
    f = _stat(pid)
    return f and int(f[19])


def rss_kib(pid):
    """Its resident memory (VmRSS), KiB."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None
