"""The two-host overlay lab (`ovrctl lab`) as system tests use it: a prefix and a
directory of its own, taken down at the end with nothing left behind (namespaces, the
bpffs it mounted for the hosts' pinned fast paths, its directory, the root namespace's
links to its etcd). A cluster (etcd, intent) unless `--static` is among the arguments."""

import json
import os
import subprocess

import pytest

from conftest import ROOT

OVRCTL = ROOT / "target" / "debug" / "ovrctl"


def sh(*args, ns=None, check=True, timeout=60, **kw):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True, **kw)


class OverlayLab:
    """`with OverlayLab(prefix, *up_args) as lab`: `ovrctl lab up --hosts 2 --tenants 1`
    (`hosts=3`: three hosts)."""

    def __init__(self, prefix, *up_args, hosts=2):
        self.prefix = prefix
        self.dir = f"/run/{self.prefix}-lab"
        self.up_args = up_args
        self.hosts = hosts

    def ctl(self, *args, check=True):
        return sh(OVRCTL, "lab", "--prefix", self.prefix, "--dir", self.dir, *args,
                  check=check, timeout=120)

    def __enter__(self):
        r = self.ctl("up", "--hosts", str(self.hosts), "--tenants", "1", *self.up_args,
                     check=False)
        if r.returncode != 0:
            self.ctl("down", check=False)
            pytest.fail(r.stdout + r.stderr)
        return self

    def __exit__(self, *exc):
        down = self.ctl("down", check=False)
        left = [n for n in sh("ip", "netns", "list").stdout.split()
                if n.startswith(self.prefix + "-")]
        assert not left, (left, down.stdout, down.stderr)
        links = sh("ip", "-o", "link", "show").stdout
        assert f" {self.prefix}-e" not in links, links
        # Nothing pinned is left: the lab's bpffs is unmounted and its directory gone.
        with open("/proc/mounts") as f:
            assert self.dir not in f.read()
        assert not os.path.exists(self.dir)

    def ns(self, name):
        return f"{self.prefix}-{name}"

    def api(self, host, *args):
        return sh(OVRCTL, "--socket", f"{self.dir}/{host}.sock", *args).stdout

    def json(self, host, *args):
        return json.loads(self.api(host, "--json", *args))

    def log(self, host):
        with open(f"{self.dir}/{host}.log") as f:
            return f.read()

    def status(self):
        return json.loads(self.ctl("status", "--json").stdout)

    def etcdctl(self, *args):
        """etcdctl against the lab's etcd, from the root namespace."""
        urls = ",".join(self.status()["etcd"])
        return sh("etcdctl", "--endpoints", urls, *args).stdout

    def state(self):
        with open(f"{self.dir}/state.json") as f:
            return json.load(f)

    def pid(self, host):
        return next(h["ovrd_pid"] for h in self.state()["hosts"] if h["name"] == host)

    def pins(self, host):
        d = f"{self.dir}/bpf/{host}"
        return sorted(os.listdir(d)) if os.path.isdir(d) else []
