"""The .deb for hosts (scripts/deb.sh, docs/deploy.md): what it holds, its control
fields and conffiles, its binaries run once unpacked, its systemd unit verifies.

The package is built once for the module (a release build: minutes from a clean clone)
and only unpacked: installing it (dpkg -i) would change this machine, and systemd is not
PID 1 in the test container, so the unit is checked with `systemd-analyze verify`, not
started.
"""

import os
import shutil
import subprocess

import pytest

from conftest import ROOT

FILES = [
    "usr/bin/ovrd",
    "usr/bin/ovrctl",
    # cargo-deb installs units under /usr/lib (Debian 12's /lib is a link to it).
    "usr/lib/systemd/system/ovrd.service",
    "etc/ovr/ovrd.env",
    "etc/ovr/host.yaml",
    "usr/share/doc/ovr/deploy.md",
]


@pytest.fixture(scope="module")
def deb():
    r = subprocess.run(["bash", "scripts/deb.sh"], cwd=ROOT, capture_output=True, text=True,
                       timeout=3600)
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
