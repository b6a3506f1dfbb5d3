"""Configuration files as ovrctl replay and ovrd read them: a route listed twice, an
empty file, a file over the 64 MiB limit, an unclosed '{' and a wrong value are refused
with the file, the line and the field named; ovrd refusing a configuration, or failing
to start with one, leaves no state file behind.

Nothing here needs a namespace: replay is offline, and ovrd stops before it opens an
interface (or fails to open one that does not exist).
"""

import json
import re
import subprocess

import pytest

from conftest import ROOT

EXAMPLE = (ROOT / "crates" / "config" / "examples" / "two-networks.yaml").read_text()
ROUTE = "  - { network: red, prefix: 10.2.0.0/24, nexthop: b-red }\n"
LIMIT = 64 << 20


@pytest.fixture(scope="module")
def bins():
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], check=True, cwd=ROOT)
    return ROOT / "target" / "debug" / "ovrctl", ROOT / "target" / "debug" / "ovrd"


def line_of(text, what, n=0):
    return [i + 1 for i, l in enumerate(text.splitlines()) if what in l][n]


def cases(tmp):
    """(file, its text or None for a sparse file over the limit, the error expected)."""
    dup = EXAMPLE.replace("\n\nbridge:", "\n" + ROUTE + "\nbridge:")
    unclosed = EXAMPLE.replace("encap: vxlan, vni: 100 }", "encap: vxlan, vni: 100")
    bad = EXAMPLE.replace("10.3.0.0/24", "10.3.0.1/24")
    return [
        ("dup.yaml", dup,
         f"dup.yaml:{line_of(dup, '10.2.0.0/24', 1)}: routes[2]: duplicate of routes[0] "
         "(network red, prefix 10.2.0.0/24)"),
        ("empty.yaml", "", "empty.yaml: the file is empty"),
        ("comments.yaml", "# nothing yet\n", "comments.yaml: (document): no configuration"),
        ("big.yaml", None, f"big.yaml: {LIMIT + 1} bytes, over the {LIMIT} bytes (64 MiB)"),
        ("unclosed.yaml", unclosed,
         f"unclosed.yaml:{line_of(unclosed, 'encap: vxlan, vni: 100')}: (document): the '{{' at line "
         f"{line_of(unclosed, 'encap: vxlan, vni: 100')} column 5 is not closed"),
        ("bad.yaml", bad, f"bad.yaml:{line_of(bad, '10.3.0.1/24')}: routes[1].prefix: "),
    ]


def write(tmp, name, text):
    path = tmp / name
    if text is None:
        with open(path, "wb") as f:
            f.truncate(LIMIT + 1)
    else:
        path.write_text(text)
    return path


def test_replay_refuses_bad_files_naming_file_line_and_field(bins, tmp_path):
    ovrctl, _ = bins
    for name, text, expected in cases(tmp_path):
        path = write(tmp_path, name, text)
        r = subprocess.run([str(ovrctl), "replay", "--config", str(path), "--pcap",
                            f"vm1={tmp_path / 'none.pcap'}", "--out", str(tmp_path / "out")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (name, r.stdout, r.stderr)
        assert f"ovrctl: {tmp_path / expected}" in r.stderr, (name, r.stderr)
    # The example itself still loads (and then wants its pcap).
    r = subprocess.run([str(ovrctl), "replay", "--config", str(write(tmp_path, "ok.yaml", EXAMPLE)),
                        "--pcap", f"vm1={tmp_path / 'none.pcap'}", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert "none.pcap" in r.stderr, r.stderr


def ovrd(bin, tmp, config):
    return subprocess.run(
        [str(bin), "--config", str(config), "--state", str(tmp / "state.json"),
         "--api-socket", str(tmp / "ovrd.sock")],
        capture_output=True, text=True, timeout=60)


def test_ovrd_refuses_bad_files_and_writes_no_state(bins, tmp_path):
    _, bin = bins
    for name, text, expected in cases(tmp_path):
        r = ovrd(bin, tmp_path, write(tmp_path, name, text))
        assert r.returncode == 2, (name, r.stderr)
        assert str(tmp_path / expected) in r.stderr, (name, r.stderr)
        assert not (tmp_path / "state.json").exists(), name


def test_a_start_that_fails_leaves_the_state_as_it_was(bins, tmp_path):
    """A valid configuration whose interfaces cannot be opened: ovrd stops, and the state
    file is not written (it was, a 107 MB one for a 50 MB configuration); with a state
    file there, it is left alone and no STATE.prev is made."""
    _, bin = bins
    config = tmp_path / "host.yaml"
    config.write_text("networks: [{ name: red }]\n"
                      "interfaces: [{ name: ovrc-none0, network: red }]\n")
    r = ovrd(bin, tmp_path, config)
    assert r.returncode == 2, r.stderr
    assert "ovrc-none0" in r.stderr, r.stderr
    assert not (tmp_path / "state.json").exists()
    saved = {"version": 1, "base": None, "config": {"networks": [{"name": "blue"}]},
             "ids": {"interfaces": {}, "networks": {"blue": 1}, "nexthops": {}}}
    (tmp_path / "state.json").write_text(json.dumps(saved) + "\n")
    before = (tmp_path / "state.json").read_text()
    r = ovrd(bin, tmp_path, config)
    assert r.returncode == 2, r.stderr
    assert (tmp_path / "state.json").read_text() == before
    assert not (tmp_path / "state.json.prev").exists()
    # A state file that names a key twice (saved by an ovrd that accepted it) is refused
    # naming the state file.
    saved["config"]["networks"].append({"name": "blue"})
    (tmp_path / "state.json").write_text(json.dumps(saved) + "\n")
    r = subprocess.run([str(bin), "--state", str(tmp_path / "state.json"),
                        "--api-socket", str(tmp_path / "ovrd.sock")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert re.search(r"state\.json: networks\[1\]\.name: duplicate of networks\[0\]", r.stderr), r.stderr


def test_batch_files_are_read_the_same_way(bins, tmp_path):
    """ovrctl batch reads its file through the same loader, before it calls ovrd."""
    ovrctl, _ = bins
    for name, text, expected in [
        ("empty.json", " \n", "empty.json: the file is empty"),
        ("big.json", None, f"big.json: {LIMIT + 1} bytes, over the {LIMIT} bytes (64 MiB)"),
    ]:
        path = write(tmp_path, name, text)
        r = subprocess.run([str(ovrctl), "--socket", str(tmp_path / "none.sock"), "batch", str(path)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (name, r.stderr)
        assert f"ovrctl: {tmp_path / expected}" in r.stderr, (name, r.stderr)
