"""The .deb for hosts (scripts/deb.sh, docs/deploy.md): what it holds, its control
fields and conffiles, its binaries run once unpacked, its systemd unit verifies, and the
unit's command with the shipped settings joins an etcd and survives a restart.

The package is built once for the module, from the debug build the other tests make
(`OVR_DEB_PROFILE=dev`: what is checked is the packaging, and a release build from a clean
clone takes about ten minutes; `scripts/deb.sh` packs the release build by default), and
only unpacked: installing it (dpkg -i) would change this machine, and systemd is not
PID 1 in the test container, so the unit is checked with `systemd-analyze verify`, not
started.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import ROOT

FILES = [
    "usr/bin/ovrd",
    "usr/bin/ovrctl",
    "usr/lib/cni/ovr-cni",
    # cargo-deb installs units under /usr/lib (Debian 12's /lib is a link to it).
    "usr/lib/systemd/system/ovrd.service",
    "etc/ovr/ovrd.env",
    "etc/ovr/host.yaml",
    "usr/share/doc/ovr/deploy.md",
    "usr/share/doc/ovr/cni.md",
]


@pytest.fixture(scope="module")
def deb():
    r = subprocess.run(["bash", "scripts/deb.sh"], cwd=ROOT, capture_output=True, text=True,
                       timeout=3600, env={**os.environ, "OVR_DEB_PROFILE": "dev"})
    assert r.returncode == 0, r.stderr[-4000:]
    path = r.stdout.strip().splitlines()[-1]
    assert path.endswith(".deb"), r.stdout
    return path


@pytest.fixture(scope="module")
def unpacked(deb, tmp_path_factory):
    root = tmp_path_factory.mktemp("deb")
    subprocess.run(["dpkg-deb", "-x", deb, str(root)], check=True)
    return root


def run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, **kw)


def test_holds_the_binaries_the_unit_the_settings_and_the_guide(deb):
    listed = run("dpkg-deb", "-c", deb).stdout
    paths = {line.split()[-1].removeprefix("./") for line in listed.splitlines()}
    for f in FILES:
        assert f in paths, (f, listed)


def test_control_fields(deb, unpacked):
    fields = {f: run("dpkg-deb", "-f", deb, f).stdout.strip()
              for f in ["Package", "Architecture", "Depends", "Version"]}
    assert fields["Package"] == "ovr"
    assert fields["Architecture"] == "amd64"
    # $auto: the shared libraries the binaries link (libc at least).
    assert "libc6" in fields["Depends"], fields
    version = run(unpacked / "usr" / "bin" / "ovrd", "--version").stdout.split()[-1]
    assert fields["Version"].startswith(version), (fields, version)


def test_settings_are_conffiles_and_the_service_is_neither_enabled_nor_started(deb, tmp_path):
    subprocess.run(["dpkg-deb", "-e", deb, str(tmp_path)], check=True)
    conffiles = (tmp_path / "conffiles").read_text().split()
    assert "/etc/ovr/ovrd.env" in conffiles and "/etc/ovr/host.yaml" in conffiles, conffiles
    # The operator writes /etc/ovr first: installing must not enable ovrd (only keep it
    # enabled across an upgrade if it was) nor start it, and an upgrade must not restart
    # it (the operator does, host by host: docs/deploy.md); removing it stops it.
    postinst = (tmp_path / "postinst").read_text()
    assert "was-enabled ovrd.service" in postinst, postinst
    assert "deb-systemd-invoke" not in postinst, postinst
    prerm = (tmp_path / "prerm").read_text()
    assert '[ "$1" = remove ]' in prerm and "stop ovrd.service" in prerm, prerm


def test_unpacked_binaries_run(unpacked):
    for b in ["ovrd", "ovrctl"]:
        r = run(unpacked / "usr" / "bin" / b, "--version")
        assert r.returncode == 0 and r.stdout.startswith(b + " "), (b, r.stdout, r.stderr)
    # A CNI plugin answers VERSION as the spec says: the configuration on stdin.
    r = subprocess.run([str(unpacked / "usr/lib/cni/ovr-cni")], input='{"cniVersion":"1.0.0"}',
                       env={"CNI_COMMAND": "VERSION"}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "1.1.0" in json.loads(r.stdout)["supportedVersions"], r


def test_example_host_yaml_is_a_valid_configuration(unpacked, tmp_path):
    """ovrd reads the example and then stops at its first interface (eth1 is not in the
    test's namespace, or is not ours to take): the file itself is not what it refuses."""
    ns = f"ovrpkg{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        r = run("ip", "netns", "exec", ns, unpacked / "usr" / "bin" / "ovrd",
                "--config", unpacked / "etc" / "ovr" / "host.yaml",
                "--state", tmp_path / "state.json", "--api-socket", tmp_path / "ovrd.sock")
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
    assert r.returncode == 2, r.stderr
    assert "eth1" in r.stderr and "host.yaml:" not in r.stderr, r.stderr


def test_the_unit_verifies_against_the_unpacked_tree(unpacked, tmp_path):
    """`systemd-analyze verify --root` checks the unit's keys and that ExecStart's binary
    is there, inside the unpacked package; the root also needs the units the service
    depends on (multi-user.target, sysinit.target, ...), taken from this machine."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    root = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", root / "usr" / "lib" / "systemd" / "system",
                    symlinks=True)
    shutil.copytree(unpacked, root, symlinks=True, dirs_exist_ok=True)
    r = run("systemd-analyze", "verify", f"--root={root}", "ovrd.service")
    # verify exits 0 on keys it ignores: any message is a failure here.
    assert r.returncode == 0 and r.stderr.strip() == "" and r.stdout.strip() == "", r.stderr


def exec_start(unpacked, env):
    """The unit's ExecStart as systemd expands it: ${X} as one word, $X split into words
    (OVRD_ARGS from the env file, read as the shell reads a plain assignment)."""
    unit = (unpacked / "usr/lib/systemd/system/ovrd.service").read_text()
    line = next(l for l in unit.splitlines() if l.startswith("ExecStart="))
    args = subprocess.run(["sh", "-c", '. "$1"; printf %s "$OVRD_ARGS"', "sh", str(env)],
                          capture_output=True, text=True, check=True).stdout.split()
    words = []
    for w in line.removeprefix("ExecStart=").split():
        if w == "$OVRD_ARGS":
            words += args
        else:
            words.append(w.replace("${STATE_DIRECTORY}", str(env.parent / "state"))
                         .replace("${RUNTIME_DIRECTORY}", str(env.parent / "run")))
    (env.parent / "state").mkdir()
    (env.parent / "run").mkdir()
    words[0] = str(unpacked / words[0].lstrip("/"))
    return words


def test_the_units_command_joins_a_cluster_and_resumes_after_a_restart(unpacked, tmp_path):
    """The unit's command with the shipped ovrd.env (its etcd URLs and config path
    pointed here) and the shipped host.yaml, in a namespace with an eth1 of the example's
    MAC and a one-member etcd: ovrd publishes this host under the machine's host name,
    with host.yaml's address as its VTEP. Stopped and started again (an upgrade's
    restart), it resumes from its state file; its host key is there while it is stopped
    (the lease outlives it) and after."""
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed")
    etc = unpacked / "etc" / "ovr"
    env = tmp_path / "ovrd.env"
    text = (etc / "ovrd.env").read_text()
    urls = "http://10.0.0.1:2379,http://10.0.0.2:2379,http://10.0.0.3:2379"
    assert urls in text and "--config /etc/ovr/host.yaml" in text
    env.write_text(text.replace(urls, "http://127.0.0.1:2379")
                   .replace("/etc/ovr/host.yaml", str(etc / "host.yaml")))
    cmd = exec_start(unpacked, env)
    ns = f"ovrpkg{os.getpid()}"
    key = f"/ovr/v1/hosts/{socket.gethostname()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    procs = []

    def start(what, log):
        p = subprocess.Popen(["ip", "netns", "exec", ns, *map(str, what)],
                             stdout=open(log, "w"), stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    def hosts():
        return run("ip", "netns", "exec", ns, "etcdctl", "--endpoints", "http://127.0.0.1:2379",
                   "get", "--prefix", "/ovr/v1/hosts/").stdout.splitlines()

    def wait_for(check, what, log):
        for _ in range(100):
            if check():
                return
            time.sleep(0.1)
        pytest.fail(f"{what}: {log.read_text()[-3000:]}")

    try:
        for c in [["link", "set", "lo", "up"],
                  ["link", "add", "eth1", "address", "02:00:00:00:00:01", "mtu", "9000",
                   "type", "veth", "peer", "name", "peer1", "mtu", "9000"],
                  ["link", "set", "eth1", "up"], ["link", "set", "peer1", "up"]]:
            subprocess.run(["ip", "-n", ns, *c], check=True)
        start(["etcd", "--data-dir", tmp_path / "etcd",
               "--listen-client-urls", "http://127.0.0.1:2379",
               "--advertise-client-urls", "http://127.0.0.1:2379",
               "--listen-peer-urls", "http://127.0.0.1:2380"], tmp_path / "etcd.log")
        log = tmp_path / "ovrd.log"
        ovrd = start(cmd, log)
        wait_for(lambda: key in hosts(), "ovrd did not publish its host", log)
        record = json.loads(hosts()[hosts().index(key) + 1])
        assert record["vtep"] == "10.0.0.11" and record["mac"] == "02:00:00:00:00:01", record
        ovrd.send_signal(signal.SIGTERM)
        assert ovrd.wait(timeout=30) == 0, log.read_text()[-3000:]
        assert key in hosts()  # its lease outlives the stop
        log = tmp_path / "ovrd2.log"
        start(cmd, log)
        wait_for(lambda: "cluster: lease granted" in log.read_text(), "ovrd did not rejoin", log)
        assert "starting from the saved state" in log.read_text(), log.read_text()
        assert key in hosts()
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)
        subprocess.run(["ip", "netns", "del", ns], check=True)
