"""The wire crate's byte fixtures are scapy's output, and well-formed to tshark.

Each generator script in crates/wire/fixtures/ is re-run in a scratch directory; what it
writes must equal the checked-in bytes (so the Rust tests really test against scapy, not
against hand-edited bytes). Every fixture that is a whole Ethernet frame is then dissected
by tshark, which must report no malformed packet.
"""

import pathlib
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

FIXTURES = ROOT / "crates" / "wire" / "fixtures"
GENERATORS = sorted(FIXTURES.glob("gen_*.py"))


def bins(d: pathlib.Path):
    return {p.relative_to(d): p.read_bytes() for p in d.rglob("*.bin")}


@pytest.mark.parametrize("script", GENERATORS, ids=lambda p: p.name)
def test_fixtures_are_what_scapy_makes(script, tmp_path):
    shutil.copy(script, tmp_path / script.name)
    subprocess.run([sys.executable, str(tmp_path / script.name)], check=True, cwd=tmp_path)
    made = bins(tmp_path)
    assert made, f"{script.name} wrote no .bin files"
    checked_in = bins(FIXTURES)
    for rel, data in made.items():
        assert rel in checked_in, f"{rel} is made by {script.name} but not checked in"
        assert checked_in[rel] == data, f"{rel} differs from what {script.name} makes now"


def ethernet_fixtures():
    out = []
    for p in sorted(FIXTURES.rglob("*.bin")):
        data = p.read_bytes()
        # A whole frame starts with an Ethernet header whose type is one we know.
        if len(data) >= 14 and data[12:14] in (b"\x08\x00", b"\x86\xdd", b"\x08\x06", b"\x81\x00", b"\x88\xa8"):
            out.append(p)
    return out


def test_generators_exist():
    assert len(GENERATORS) >= 1
    assert len(ethernet_fixtures()) >= 10


def test_tshark_dissects_every_frame_cleanly(tmp_path):
    from scapy.all import Ether, wrpcap

    frames = ethernet_fixtures()
    pcap = tmp_path / "fixtures.pcap"
    wrpcap(str(pcap), [Ether(p.read_bytes()) for p in frames])
    out = subprocess.run(
        ["tshark", "-n", "-r", str(pcap), "-V", "-d", "udp.port==6635,mpls"],
        check=True, capture_output=True, text=True,
    ).stdout
    packets = out.split("\nFrame ")
    assert len(packets) == len(frames)
    for frame, text in zip(frames, packets):
        assert "Malformed Packet" not in text, f"tshark: {frame.name} is malformed:\n{text}"
